"""The ``cudasim`` plugin backend: discovered through its entry point, runs numba.cuda kernels on
numba-cuda's simulator, and turns the simulator's bounds errors into failures on buffers."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
import numba_cube_cudasim

pytestmark = pytest.mark.skipif(numba_cube_cudasim.available() is not None,
                                reason=str(numba_cube_cudasim.available()))


@cube.kernel
def scale(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


@cuda.jit(device=True)
def _square(v):
    return v * v


@cube.kernel
def squares(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _square(x[i])


@cube.kernel
def block_reverse(x, out):
    tile = cuda.shared.array(32, dtype=np.float64)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    tile[t] = x[i]
    cuda.syncthreads()
    out[i] = tile[cuda.blockDim.x - 1 - t]


@cube.kernel
def unguarded_copy(x, out):
    i = cuda.grid(1)
    out[i] = x[i]          # no `if i < out.size`: threads past the end index out of bounds


def test_scale_matches_numpy(sim):
    """A plain numba.cuda kernel runs on the simulator and computes what NumPy computes."""
    x = np.linspace(0.0, 1.0, 100)
    hx, out = sim.create(x), sim.empty(100, np.float64)
    sim.launch(scale, 4, 32, 3.0, hx, out)          # 128 threads for 100 elements: guarded
    np.testing.assert_allclose(sim.read(out), 3.0 * x)


def test_device_function_and_shared_memory(sim):
    """``cuda.jit(device=True)`` functions and ``cuda.shared.array`` with ``syncthreads`` work."""
    x = np.arange(64, dtype=np.float64)
    out, rev = sim.empty(64, np.float64), sim.empty(64, np.float64)
    hx = sim.create(x)
    sim.launch(squares, 2, 32, hx, out)
    sim.launch(block_reverse, 2, 32, hx, rev)
    np.testing.assert_allclose(sim.read(out), x * x)
    np.testing.assert_allclose(sim.read(rev), np.concatenate([x[:32][::-1], x[32:][::-1]]))


@cube.kernel
def spin(out, iters):
    i = cuda.grid(1)
    acc = 0.0
    for k in range(iters):
        acc += _square(1.0)
    if i < out.size:
        out[i] = acc


def test_user_module_globals_untouched(sim):
    """The simulator swaps ``cuda`` only in a private copy of the kernel's globals: *while* a
    simulated kernel runs, this module's ``cuda`` and ``_square`` stay the real ones (the CPU
    backend compiling another kernel of the same module meanwhile must not see the fake module)."""
    import threading

    before = dict(globals())
    out = sim.empty(1, np.float64)
    sim.launch(spin, 1, 1, out, 100_000)
    reader = threading.Thread(target=sim.read, args=(out,))
    reader.start()
    seen = set()
    while reader.is_alive():
        seen.add((globals()["cuda"] is before["cuda"], globals()["_square"] is before["_square"]))
    reader.join()
    assert seen <= {(True, True)}
    assert sim.read(out)[0] == 100_000.0


def test_out_of_bounds_becomes_launch_failure_on_write_set(sim):
    """An out-of-bounds index raises IndexError inside the simulator; the launch's written buffer
    carries it as a LaunchFailure (root IndexError, this kernel's id), a launch reading that
    buffer is skipped and inherits it, and an input buffer is unaffected."""
    x = np.arange(10.0)
    hx, out, again = sim.create(x), sim.empty(10, np.float64), sim.empty(10, np.float64)
    sim.launch(unguarded_copy, 1, 32, hx, out)      # 32 threads, 10 elements
    sim.launch(scale, 1, 32, 2.0, out, again)       # reads the failed buffer
    with pytest.raises(cube.LaunchFailure) as info:
        sim.read(out)
    assert isinstance(info.value.root, IndexError)
    assert "out of bounds" in str(info.value.root)
    assert info.value.kernel_id == unguarded_copy.id
    with pytest.raises(cube.LaunchFailure) as inherited:
        sim.read(again)
    assert inherited.value.root is info.value.root
    np.testing.assert_array_equal(sim.read(hx), x)
    sim.sync()                                      # a launch failure is not a device fault


def test_relaunch_repairs(sim):
    """Relaunching a correct kernel into the failed buffer repairs it (failures are buffer
    state, and the simulator backend uses the runtime's ledger like every host backend)."""
    hx, out = sim.create(np.arange(10.0)), sim.empty(10, np.float64)
    sim.launch(unguarded_copy, 1, 16, hx, out)
    assert sim.sync_buffers(out)[0] is not None
    sim.launch(scale, 1, 16, 1.0, hx, out)
    np.testing.assert_array_equal(sim.read(out), np.arange(10.0))


def test_discovered_and_listed():
    """``cudasim`` is a registered backend, its source is this plugin, priority below cpu so it
    is never the default, and its device is listed."""
    from numba_cube.runtime.registry import backend_infos

    info = backend_infos()["cudasim"]
    assert info.unavailable_reason() is None
    assert info.priority < backend_infos()["cpu"].priority
    assert "cudasim:0" in info.device_names()


def test_unavailable_without_numba_cuda(monkeypatch):
    """Without numba-cuda, ``available()`` says so and how to install it, without importing."""
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == "numba_cuda" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    reason = numba_cube_cudasim.available()
    assert reason is not None and "numba-cuda" in reason and "pip install" in reason
