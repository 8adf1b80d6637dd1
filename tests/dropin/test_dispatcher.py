"""``cuda.jit`` under the layer (``numba_cube/dropin/dispatcher.py``): kernels stay numba-cuda
dispatchers, launches go to numba_cube (asynchronous on device arrays, numba-style with host
arrays), eager signatures govern argument conversion as numba's do, and what needs numba-cuda's
GPU compile is a typed refusal. References: NumPy, and numba's documented conversions."""

from __future__ import annotations

import numpy as np
import pytest

import numba_cube as cube


@pytest.fixture(scope="module")
def kernels(layer):
    cuda = layer

    @cuda.jit
    def axpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    @cuda.jit
    def fails_when(flag, out):
        i = cuda.grid(1)
        if flag:
            raise ValueError("asked to fail")
        if i < out.size:
            out[i] = 1.0

    @cuda.jit(device=True)
    def twice(v):
        return 2 * v

    @cuda.jit
    def apply_twice(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = twice(a[i])

    return axpy, fails_when, apply_twice


def test_a_kernel_is_still_a_numba_cuda_dispatcher(layer, kernels):
    """``isinstance(k, CUDADispatcher)`` holds, ``py_func`` is the function, and calling it
    unconfigured is numba's ValueError; a device function is numba-cuda's own dispatcher."""
    from numba.cuda.dispatcher import CUDADispatcher

    axpy, _, _ = kernels
    assert isinstance(axpy, CUDADispatcher) and axpy.py_func.__name__ == "axpy"
    with pytest.raises(ValueError):
        axpy(1.0, None, None, None)


def test_launches_on_device_arrays_compute_what_numpy_does(layer, kernels):
    """Device-array launches, repeated (the warm path) and on a user stream, give NumPy's
    numbers; a launch with host arrays copies the written one back."""
    axpy, _, _ = kernels
    x, y = np.arange(1000.0), np.ones(1000)
    dx, dy, dout = layer.to_device(x), layer.to_device(y), layer.device_array(1000)
    for a in (2.0, 3.0, 4.0):
        axpy[4, 256](a, dx, dy, dout)
    assert np.array_equal(dout.copy_to_host(), 4.0 * x + y)
    s = layer.stream()
    with s.auto_synchronize():
        axpy[(4,), (256,), s](0.5, dx, dy, dout)
    assert np.array_equal(dout.copy_to_host(), 0.5 * x + y)
    host = np.zeros(1000)
    axpy[4, 256](1.0, x, y, host)
    assert np.array_equal(host, x + y)


def test_a_failure_is_raised_where_numba_would_see_it(layer, kernels):
    """An asynchronous launch that fails returns; the next copy to the host of the buffer it
    should have written raises its LaunchFailure (root: the kernel's exception), and so does
    ``cuda.synchronize()`` after it. A launch that does not compile raises at the call."""
    _, fails_when, _ = kernels
    out = layer.device_array(64)
    fails_when[1, 64](0, out)                  # the first launch (it waits for itself)
    fails_when[1, 64](1, out)                  # asynchronous: returns
    with pytest.raises(cube.LaunchFailure) as info:
        out.copy_to_host()
    assert isinstance(info.value.root, ValueError)
    fails_when[1, 64](1, out)
    with pytest.raises(cube.LaunchFailure):
        layer.synchronize()
    fails_when[1, 64](0, out)                  # relaunching repairs the buffer
    assert (out.copy_to_host() == 1.0).all()

    @layer.jit
    def does_not_type(a):
        a[0] = "text"

    with pytest.raises(cube.CompileError):
        does_not_type[1, 1](layer.device_array(1))


def test_eager_signatures_convert_arguments_as_numba_does(layer):
    """``cuda.jit("void(float32[:], int32)")`` compiles nothing at decoration; a launch converts
    a Python float to float32 (rounded first) and an int to int32 (wrapping, as numba's ctypes
    packing does); an argument no declared signature takes is numba's TypeError."""

    @layer.jit("void(float64[:], float32, int32)")
    def store(out, x, n):
        out[0] = x
        out[1] = n

    out = layer.device_array(2)
    store[1, 1](out, 0.1, 0xFFFFFFFF)
    assert out.copy_to_host().tolist() == [float(np.float32(0.1)), -1.0]
    with pytest.raises(TypeError, match="No matching definition"):
        store[1, 1](layer.device_array(2, np.int32), 0.1, 1)


def test_repeated_launches_of_a_declared_kernel_are_warm_and_convert_each_time(layer):
    """A kernel declared with signatures takes the warm path once a launch on the layer's fast
    form armed it (stumpy's row loop: one launch per row), and every warm launch still converts its own scalars as
    numba does: a float rounded to float32, an int to int32, a bool to the declared int64. An
    int the declared type does not hold (numba wraps ``0xFFFFFFFF`` to -1) takes the general
    path, which wraps it. Reference: NumPy's conversions of the same values."""
    from numba_cube.dropin import state

    @layer.jit("void(float64[:], float32, int32, int64)")
    def store(out, x, n, b):
        out[0] = x
        out[1] = n
        out[2] = b

    def expected(x, n, b):
        return [float(np.float32(x)), float(np.asarray(n).astype(np.int32)), float(int(b))]

    out = layer.device_array(3)
    stats = state.layer_client().server.stats
    for x in (0.5, 0.75):       # the first compiles (Dispatcher.launch); the second arms
        store[1, 1](out, x, 1, True)
        assert out.copy_to_host().tolist() == expected(x, 1, True)
    warm_before = stats["warm"]
    in_range = [(0.1, 7, True), (1e-3, -(1 << 31), False), (2.5, (1 << 31) - 1, True)]
    for x, n, b in in_range:
        store[1, 1](out, x, n, b)
        assert out.copy_to_host().tolist() == expected(x, n, b)
    assert stats["warm"] - warm_before == len(in_range)
    for x, n, b in [(3.0, 0xFFFFFFFF, False), (0.3, -(1 << 40) + 3, True), (1.5, 1 << 62, True)]:
        store[1, 1](out, x, n, b)                      # wrapped on the general path
        assert out.copy_to_host().tolist() == expected(x, n, b)


def test_forall_specialize_and_device_functions(layer, kernels):
    """``forall(n)`` covers n units; ``specialize`` declares the arguments' types (a second
    specialize is numba's RuntimeError); device functions made by cuda.jit(device=True) run."""
    _, _, apply_twice = kernels
    d = layer.to_device(np.arange(1000.0))
    apply_twice.forall(1000)(d)
    assert np.array_equal(d.copy_to_host(), 2 * np.arange(1000.0))
    special = apply_twice.specialize(d)
    assert special.specialized and str(special.nopython_signatures[0].args[0]) \
        == "array(float64, 1d, C)"
    special[4, 256](d)
    assert np.array_equal(d.copy_to_host(), 4 * np.arange(1000.0))
    with pytest.raises(RuntimeError):
        special.specialize(d)


def test_a_device_function_with_signatures_is_refused_not_misconverted(layer):
    """A device function declared with signatures would convert its arguments on a GPU, which the
    CPU translator does not: the launch is a CompileError naming it, never other numbers."""

    @layer.jit("float32(float32)", device=True)
    def half(v):
        return v / 2

    @layer.jit
    def use(a):
        a[0] = half(a[0])

    with pytest.raises(cube.CompileError, match="signatures"):
        use[1, 1](layer.to_device(np.ones(1)))


def test_gpu_inspection_is_a_typed_refusal(layer, kernels):
    """``inspect_types``, ``inspect_asm`` and ``compile`` need numba-cuda's GPU compile:
    UnsupportedAPIError (a NotImplementedError) naming them."""
    axpy, _, _ = kernels
    for call in (axpy.inspect_types, axpy.inspect_asm, lambda: axpy.compile("void()")):
        with pytest.raises(cube.UnsupportedAPIError) as info:
            call()
        assert isinstance(info.value, NotImplementedError)


def test_dynamic_shared_memory_hints_and_tuples(layer):
    """``kernel[grid, block, stream, sharedmem]`` sizes ``cuda.shared.array(0, ...)``;
    ``cuda.In``/``cuda.Out`` around host arrays keep numba's copy rules; tuples of device arrays
    and scalars are arguments. Reference: NumPy."""
    cuda = layer

    @cuda.jit
    def reverse(a, out):
        buf = cuda.shared.array(0, dtype=np.float64)
        t = cuda.threadIdx.x
        buf[t] = a[t]
        cuda.syncthreads()
        out[t] = buf[cuda.blockDim.x - 1 - t]

    a = np.arange(32.0)
    out = cuda.device_array(32)
    reverse[1, 32, 0, 32 * 8](cuda.to_device(a), out)
    assert np.array_equal(out.copy_to_host(), a[::-1])
    host = np.zeros(32)
    reverse[1, 32, cuda.stream(), 32 * 8](cuda.In(a), cuda.Out(host))
    assert np.array_equal(host, a[::-1])

    @cuda.jit
    def pick(pair, out):
        out[0] = pair[0][1] + pair[1]

    d = cuda.device_array(1)
    for extra in (5.0, 6.0):
        pick[1, 1]((cuda.to_device(np.arange(3.0)), extra), d)
    assert d[0] == 7.0


def test_asynchronous_launches_keep_no_buffer_alive(layer, kernels):
    """A launch notes its buffers for the next synchronize weakly: a device array the program
    drops after launching into it is garbage at once, as numba frees it."""
    import gc
    import weakref

    axpy, _, _ = kernels
    x = layer.to_device(np.ones(16))
    out = layer.device_array(16)
    axpy[1, 16](1.0, x, x, out)
    axpy[1, 16](1.0, x, x, out)
    gone = weakref.ref(out.handle)
    del out
    gc.collect()
    assert gone() is None
    layer.synchronize()
