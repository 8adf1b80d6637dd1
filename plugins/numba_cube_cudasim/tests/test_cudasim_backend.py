"""The ``cudasim`` backend's mechanism (``numba_cube_cudasim/backend.py``): simulator device
arrays (``FakeCUDAArray``, what ``numba.cuda.to_device`` returns under the simulator) are bound
in place and released like any borrowed memory, and a grid-synchronizing kernel on several cubes
is refused instead of computing wrong values."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
import numba_cube_cudasim
from numba_cube.runtime.memory.borrowed import MAX_ENTRIES

pytestmark = pytest.mark.skipif(numba_cube_cudasim.available() is not None,
                                reason=str(numba_cube_cudasim.available()))


def fake_array(a: np.ndarray):
    """A simulator device array over ``a`` itself (no copy), as numba's simulator makes them."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    return FakeCUDAArray(a)


@cube.kernel
def axpy(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + out[i]


@cube.kernel
def scale(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


@cube.kernel
def fill(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


@cube.kernel
def sync_grid(out):
    i = cuda.grid(1)
    cuda.cg.this_grid().sync()
    if i < out.size:
        out[i] = 1.0


def test_device_array_is_bound_without_a_copy(sim):
    """A kernel writing a FakeCUDAArray writes the NumPy array it wraps, a strided view of it
    included: the caller's array holds what NumPy computes, with no copy back."""
    x = np.arange(40.0)
    out = np.ones(40)
    sim.launch(axpy, 2, 32, 2.0, sim.create(x), fake_array(out))
    sim.sync()
    np.testing.assert_array_equal(out, 2.0 * x + 1.0)
    every_other = np.zeros(40)
    sim.launch(fill, 1, 32, fake_array(every_other[::2]), 5.0)
    sim.sync()
    expected = np.zeros(40)
    expected[::2] = 5.0
    np.testing.assert_array_equal(every_other, expected)


def test_device_array_views_are_ordered_as_one_buffer(sim):
    """Two views of one simulator array are one buffer: a launch reading what another wrote
    through a different view sees its values (the reference: NumPy on the same steps)."""
    data = np.zeros(64)
    sim.launch(fill, 2, 32, fake_array(data), 3.0)
    out = sim.empty(32)
    sim.launch(scale, 1, 32, 2.0, fake_array(data[32:]), out)
    reference = np.full(64, 3.0)
    np.testing.assert_array_equal(sim.read(out), 2.0 * reference[32:])


def test_device_array_memory_is_released_on_free(sim):
    """Once its adoption is evicted (past MAX_ENTRIES idle arrays) and its handles are gone, the
    server no longer holds a simulator array's bytes (the NumPy array can be garbage), and none of
    it went to the server's pool."""
    server = sim.server
    first = np.zeros(4)
    sim.launch(fill, 1, 4, fake_array(first), 1.0)
    sim.sync()
    assert first[0] == 1.0
    gone = weakref.ref(first)
    del first
    held = server.pool.held_bytes
    for _ in range(MAX_ENTRIES + 40):
        sim.launch(fill, 1, 1, fake_array(np.zeros(1)), 2.0)
    sim.sync()
    gc.collect()
    sim.sync()                       # drains the frees the collection queued
    assert gone() is None
    assert server.pool.held_bytes == held


def test_grid_sync_on_several_cubes_is_refused(sim):
    """The simulator's grid group syncs one cube only: a grid-synchronizing kernel on several
    cubes fails its write set with the driver's error for a cooperative grid too large, on one
    cube it runs."""
    out = sim.empty(64)
    sim.launch(sync_grid, 2, 32, out)
    with pytest.raises(cube.LaunchFailure, match="COOPERATIVE_LAUNCH_TOO_LARGE"):
        sim.read(out)
    sim.launch(sync_grid, 1, 64, out)
    np.testing.assert_array_equal(sim.read(out), np.ones(64))


def test_the_plugin_supplies_mechanism_only(sim):
    """The server is numba_cube's DeviceServer itself, not a subclass (the policy is the runtime's
    alone), and the plugin's modules import no private name of numba_cube."""
    import ast
    from pathlib import Path

    from numba_cube.runtime.server import DeviceServer

    assert type(sim.server) is DeviceServer
    for path in Path(numba_cube_cudasim.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("numba_cube"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name} imports {private} from {node.module}"
