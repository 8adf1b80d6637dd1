"""Dynamic shared memory on the CUDA backend: the launch's size reaches the kernel.

``client.launch(..., shared_bytes=n)`` and numba's ``kernel[count, dim, stream, n]`` size the
bytes every ``cuda.shared.array(0, dtype)`` of the kernel views. On the GPU path the size is
cuLaunchKernel's ``sharedMemBytes`` (the fake driver records it and hands it to the simulated
kernel; above 48 KiB it refuses the launch unless ``cuFuncSetAttribute`` raised the function's
limit, as a driver does); under the simulator it is the simulator's own dynamic shared memory.
The expected values come from NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32, float64, int32

import numba_cube as cube
from numba_cube import LaunchArgumentError, LaunchFailure

from _cuda_setup import only

TPB = 32


@cube.kernel
def stage_through_dynamic(x, out):
    """out[i] = 2 * x[i], each cube through its dynamic shared memory (TPB float32)."""
    buf = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        buf[t] = x[i]
    cuda.syncthreads()
    if i < out.size:
        out[i] = 2 * buf[t]


@cube.kernel
def views_and_sizes(bits, as_float, sizes):
    """Two declarations alias one buffer: int32 bits written, read back as float32; and each
    view's element count (nbytes // itemsize)."""
    ints = cuda.shared.array(0, int32)
    floats = cuda.shared.array(0, float32)
    wide = cuda.shared.array(0, float64)
    t = cuda.threadIdx.x
    if t < ints.size and t < bits.size:
        ints[t] = bits[t]
    cuda.syncthreads()
    if t < floats.size and t < as_float.size:
        as_float[t] = floats[t]
    if t == 0:
        sizes[0] = ints.size
        sizes[1] = wide.size


def test_size_reaches_the_kernel_from_both_launch_forms(client):
    """``client.launch(..., shared_bytes=n)`` and ``kernel[count, dim, 0, n]`` give the kernel
    ``n`` bytes of dynamic shared memory per cube: the staged copy matches NumPy."""
    x = np.arange(100, dtype=np.float32)
    hx, out = client.create(x), client.empty(100, np.float32)
    client.launch(stage_through_dynamic, 4, TPB, hx, out, shared_bytes=TPB * 4)
    np.testing.assert_array_equal(client.read(out), 2 * x)
    host = np.zeros(100, np.float32)
    with client:
        stage_through_dynamic[4, TPB, 0, TPB * 4](x, host)
    np.testing.assert_array_equal(host, 2 * x)


def test_declarations_alias_and_count_whole_items(client):
    """Every ``cuda.shared.array(0, dtype)`` views the same bytes with its own dtype, with
    ``nbytes // itemsize`` elements (a size that is not a multiple of the itemsize rounds down,
    as in numba-cuda); 0 bytes give empty views."""
    bits = np.arange(1, 9, dtype=np.float32).view(np.int32)
    hb, hf, hs = client.create(bits), client.empty(8, np.float32), client.empty(2, np.int64)
    client.launch(views_and_sizes, 1, TPB, hb, hf, hs, shared_bytes=8 * 4 + 3)
    np.testing.assert_array_equal(client.read(hf), bits.view(np.float32))
    assert client.read(hs).tolist() == [(8 * 4 + 3) // 4, (8 * 4 + 3) // 8]
    client.launch(views_and_sizes, 1, TPB, hb, client.empty(8, np.float32), hs)
    assert client.read(hs).tolist() == [0, 0]


def test_bad_sizes_are_refused_before_anything_runs(client, kind, fake_api):
    """A negative size, a non-integer one, or one above what a cube of the device can have is a
    ``LaunchArgumentError`` at the call: nothing is launched, and the buffers stay readable."""
    x = client.create(np.ones(TPB, np.float32))
    out = client.create(np.zeros(TPB, np.float32))
    launches = fake_api.launches if kind == "fake" else None
    limit = client.server.max_dynamic_shared_bytes
    for bad in (-1, 1.5, "64", limit + 1):
        with pytest.raises(LaunchArgumentError, match="dynamic shared memory"):
            client.launch(stage_through_dynamic, 1, TPB, x, out, shared_bytes=bad)
    with pytest.raises(LaunchArgumentError, match="dynamic shared memory"):
        with client:
            stage_through_dynamic[1, TPB, 0, -4](np.ones(TPB, np.float32), np.zeros(TPB, np.float32))
    if kind == "fake":
        assert fake_api.launches == launches
    np.testing.assert_array_equal(client.read(out), np.zeros(TPB))
    client.launch(stage_through_dynamic, 1, TPB, x, out, shared_bytes=TPB * 4)   # still works
    np.testing.assert_array_equal(client.read(out), np.full(TPB, 2.0))


def test_capture_replays_with_the_recorded_size(client, kind, fake_api):
    """A launch recorded in a capture window replays with the dynamic shared memory size it was
    launched with (on the GPU path: in the CUDA graph's kernel node)."""
    x = client.create(np.arange(64, dtype=np.float32))
    out = client.empty(64, np.float32)
    client.graph_prepare()
    client.launch(stage_through_dynamic, 2, TPB, x, out, shared_bytes=TPB * 4)
    client.sync()
    client.write(out, np.zeros(64, np.float32))
    client.start_capture()
    client.launch(stage_through_dynamic, 2, TPB, x, out, shared_bytes=TPB * 4)
    graph = client.stop_capture()
    np.testing.assert_array_equal(client.read(out), np.zeros(64))     # recorded, not run
    graph.replay()
    np.testing.assert_array_equal(client.read(out), 2 * np.arange(64))
    if kind == "fake":
        assert fake_api.shared_bytes_launched[-1] == TPB * 4


def test_dry_run_compiles_and_runs_nothing(client):
    """Under a dry run a launch with dynamic shared memory compiles and is skipped: the output
    keeps its contents and the dry run lists no failure."""
    x = client.create(np.ones(TPB, np.float32))
    out = client.create(np.full(TPB, 7.0, np.float32))
    with cube.dry_run() as run:
        client.launch(stage_through_dynamic, 1, TPB, x, out, shared_bytes=TPB * 4)
    assert run.failures == []
    np.testing.assert_array_equal(client.read(out), np.full(TPB, 7.0))


@only("fake", why="the fake driver records what reaches cuLaunchKernel")
def test_shared_mem_bytes_reach_the_driver_on_every_path(client, fake_api):
    """The size is cuLaunchKernel's ``sharedMemBytes`` on the general path, on the warm path
    (a repeated launch), and a launch with another size is not mistaken for the warm one; the
    size is no compile-cache key (another size compiles nothing)."""
    x = client.create(np.arange(TPB, dtype=np.float32))
    out = client.empty(TPB, np.float32)
    client.launch(stage_through_dynamic, 1, TPB, x, out, shared_bytes=TPB * 4)
    stats = client.server.stats
    warm_before, compiles = stats["warm"], stats["compiles"]
    for nbytes in (TPB * 4, TPB * 4, TPB * 8, TPB * 4, TPB * 12):
        client.launch(stage_through_dynamic, 1, TPB, x, out, shared_bytes=nbytes)
        assert fake_api.shared_bytes_launched[-1] == nbytes
    np.testing.assert_array_equal(client.read(out), 2 * np.arange(TPB))
    stats = client.server.stats
    assert stats["warm"] > warm_before          # the repeats took the warm path
    assert stats["compiles"] == compiles


@only("fake", why="the fake driver models the 48 KiB opt-in of cuFuncSetAttribute")
def test_above_48_kib_the_function_is_opted_in(client, fake_api):
    """A size above 48 KiB raises the function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    first (the driver refuses the launch otherwise), once: the launch runs with that size."""
    nbytes = 64 * 1024
    x = client.create(np.arange(TPB, dtype=np.float32))
    out = client.empty(TPB, np.float32)
    before = fake_api.calls["cuFuncSetAttribute"]
    client.launch(stage_through_dynamic, 1, TPB, x, out, shared_bytes=nbytes)
    client.launch(stage_through_dynamic, 1, TPB, x, out, shared_bytes=nbytes)
    np.testing.assert_array_equal(client.read(out), 2 * np.arange(TPB))
    assert fake_api.shared_bytes_launched[-1] == nbytes
    assert fake_api.calls["cuFuncSetAttribute"] == before + 1


def _copy_with_dynamic(x, out):
    buf = cuda.shared.array(0, float32)
    i = cuda.grid(1)
    if i < out.size and i < buf.size:
        buf[i] = x[i]
        out[i] = buf[i]


# The fake compiler cannot compile static shared memory: the kernel declares it for the fake.
_copy_with_dynamic.static_shared_bytes = 16 * 1024
copy_with_dynamic = cube.kernel(_copy_with_dynamic)


@only("fake", why="the fake compiler gives a kernel the static shared memory it declares")
def test_static_plus_dynamic_above_the_limit_fails_the_launch(client, fake_api):
    """What the kernel's static shared memory leaves is checked once it is compiled: a size that
    fits the device but not next to the static part fails the launch's write set with a
    ``LaunchArgumentError`` naming both (a dry run lists the same), and nothing reaches the
    driver; a size that fits next to it runs."""
    x = client.create(np.ones(TPB, np.float32))
    out = client.empty(TPB, np.float32)
    limit = client.server.max_dynamic_shared_bytes
    launches = fake_api.launches
    with cube.dry_run() as run:
        client.launch(copy_with_dynamic, 1, TPB, x, out, shared_bytes=limit - 1024)
    assert [type(f.error) for f in run.failures] == [LaunchArgumentError]
    client.launch(copy_with_dynamic, 1, TPB, x, out, shared_bytes=limit - 1024)
    with pytest.raises(LaunchFailure, match="static shared memory") as info:
        client.read(out)
    assert isinstance(info.value.root, LaunchArgumentError)
    assert fake_api.launches == launches
    client.launch(copy_with_dynamic, 1, TPB, x, out, shared_bytes=limit - 16 * 1024)
    np.testing.assert_array_equal(client.read(out), np.ones(TPB))
