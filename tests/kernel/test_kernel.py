"""Contracts of ``cube.kernel`` (numba_cube.kernel.kernel and .options): what it refuses, and the
options it reads from a wrapped ``cuda.jit`` dispatcher or takes directly."""

from __future__ import annotations

import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.backends.cuda.driver import probe
from numba_cube.errors import CompileError, OptionError

#: these pin what is read from numba-cuda's real dispatcher (the simulator's cuda.jit takes
#: fastmath and debug only; its FakeCUDAKernel is tested on its own below)
real_dispatcher = pytest.mark.skipif(probe.simulating(), reason="needs numba-cuda's real cuda.jit")


def _fill(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0


def test_generator_function_is_refused():
    """A generator function (it would run nothing: calling it only makes a generator) is refused
    at cube.kernel with a CompileError naming the construct and its line."""
    def gen_kernel(out):
        i = cuda.grid(1)
        out[i] = 1.0
        yield

    with pytest.raises(CompileError, match="generator function") as info:
        cube.kernel(gen_kernel)
    assert info.value.construct == "generator function"
    assert info.value.lineno == gen_kernel.__code__.co_firstlineno
    with pytest.raises(CompileError, match="generator function"):
        cube.kernel(cuda.jit(gen_kernel))


def test_async_function_is_refused():
    """An ``async def`` kernel is refused the same way (a coroutine also runs nothing)."""
    async def coro_kernel(out):
        out[0] = 1.0

    with pytest.raises(CompileError, match="coroutine function"):
        cube.kernel(coro_kernel)


@real_dispatcher
def test_wrapped_dispatcher_options_are_read():
    """kernel.options holds a wrapped cuda.jit dispatcher's options that differ from cuda.jit's
    defaults, read-only; a bare cuda.jit dispatcher has none."""
    k = cube.kernel(cuda.jit(fastmath=True, max_registers=32, lineinfo=True)(_fill))
    assert dict(k.options) == {"fastmath": True, "lineinfo": True, "max_registers": 32}
    with pytest.raises(TypeError):
        k.options["fastmath"] = False                  # a read-only mapping
    assert dict(cube.kernel(cuda.jit(_fill)).options) == {}
    assert dict(cube.kernel(_fill).options) == {}


@real_dispatcher
def test_debug_and_opt_options_are_read():
    """debug=True and opt=False (what numba-cuda wants together) are read back."""
    k = cube.kernel(cuda.jit(debug=True, opt=False)(_fill))
    assert k.options["debug"] is True and k.options["opt"] is False


def test_simulator_kernel_options_are_read():
    """The simulator's FakeCUDAKernel keeps fastmath, debug, device and extensions: fastmath and
    debug are read as options, device=True is refused like the real one, and extensions are the
    kernel's launch-time converters, not options."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    k = cube.kernel(FakeCUDAKernel(_fill, device=False, fastmath=True, debug=True))
    assert dict(k.options) == {"debug": True, "fastmath": True}
    assert k.id == cube.kernel(_fill, fastmath=True, debug=True).id
    assert dict(cube.kernel(FakeCUDAKernel(_fill, device=False)).options) == {}
    with pytest.raises(CompileError, match="device function"):
        cube.kernel(FakeCUDAKernel(_fill, device=True))
    marker = object()
    k = cube.kernel(FakeCUDAKernel(_fill, device=False, extensions=[marker]))
    assert k.extensions == [marker] and dict(k.options) == {}


@real_dispatcher
def test_direct_options_win_over_the_dispatchers():
    """cube.kernel(dispatcher, **options): the options given win over the dispatcher's."""
    k = cube.kernel(cuda.jit(fastmath=True)(_fill), fastmath=False, launch_bounds=128)
    assert dict(k.options) == {"fastmath": False, "launch_bounds": 128}
    assert dict(cube.kernel(fastmath={"nsz", "arcp"})(_fill).options) == {
        "fastmath": frozenset({"nsz", "arcp"})}


@real_dispatcher
def test_unknown_option_is_refused_by_name():
    """An option cuda.jit does not know is an OptionError (a TypeError) naming it, whether given
    directly or carried by a dispatcher (numba-cuda would only fail at its first compile)."""
    with pytest.raises(OptionError, match="fastmth") as info:
        cube.kernel(_fill, fastmth=True)
    assert isinstance(info.value, TypeError)
    with pytest.raises(OptionError, match="unrolling"):
        cube.kernel(cuda.jit(unrolling=4)(_fill))


@real_dispatcher
def test_device_function_is_refused_and_extensions_are_the_dispatchers_own_list():
    """A device function is not a kernel (a CompileError naming it); a dispatcher's extensions
    are kept as its live list (numba-cuda reads it at each launch, and code appends to it after
    cuda.jit), and change neither the options nor the kernel id."""
    with pytest.raises(CompileError, match="device function"):
        cube.kernel(cuda.jit(device=True)(_fill))

    class Extension:
        def prepare_args(self, ty, val, **kwargs):
            return ty, val

    d = cuda.jit(extensions=[Extension()])(_fill)
    k = cube.kernel(d)
    assert k.extensions is d.extensions and dict(k.options) == {}
    assert k.id == cube.kernel(cuda.jit(_fill)).id


def test_a_kernel_cannot_be_rewrapped_with_other_options():
    """cube.kernel(k) of a kernel is k itself; asking it for other options or reads/writes is a
    TypeError instead of silently ignoring them."""
    k = cube.kernel(_fill)
    assert cube.kernel(k) is k
    with pytest.raises(TypeError, match="already a kernel"):
        cube.kernel(k, writes=("out",))
    with pytest.raises(TypeError, match="already a kernel"):
        cube.kernel(k, fastmath=True)


def test_repr_does_not_fix_the_id():
    """repr() of a kernel that was never used says so, and does not compute the id."""
    k = cube.kernel(_fill)
    assert "id not fixed yet" in repr(k)
    assert k.id in repr(k)
