"""The dynamic shared memory size of a launch, through the runtime (``client.launch(...,
shared_bytes=n)``, numba's ``kernel[count, dim, stream, n]``).

The size is part of the launch like its geometry: checked on the issuing thread (a bad one is a
``LaunchArgumentError`` before anything is queued, also for a zero grid), carried by the request
to the dispatch, kept by a capture for every replay, compiled but not run under a dry run, and
never a compile-cache key. Run on the CPU backend (a real translation and Numba compile); the
expected values are NumPy's.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float64, int64

import numba_cube as cube
from numba_cube.errors import LaunchArgumentError
from numba_cube.runtime.launch.geometry import MAX_DYNAMIC_SHARED_BYTES


@pytest.fixture
def client():
    with cube.stream():          # captures belong to a stream: tests must not see each other's
        yield cube.client("cpu")


@cube.kernel
def sizes_and_sum(x, out):
    """out[cube] = x's cube block summed through dynamic memory; out[-1] = its element count."""
    buf = cuda.shared.array(0, float64)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    i = b * cuda.blockDim.x + t
    if t < buf.size:
        buf[t] = x[i]
    cuda.syncthreads()
    if t == 0:
        total = 0.0
        for k in range(buf.size):
            total += buf[k]
        out[b] = total
        out[out.size - 1] = buf.size


def _expected(x, cubes, tpb, nbytes):
    n = min(nbytes // 8, tpb)
    out = np.zeros(cubes + 1)
    out[:cubes] = x.reshape(cubes, tpb)[:, :n].sum(axis=1)
    out[-1] = nbytes // 8
    return out


def test_keyword_and_numba_config_give_the_kernel_its_size(client):
    """``client.launch(..., shared_bytes=n)`` and ``kernel[count, dim, stream, n]`` (numba's
    fourth value; the third, numba's stream, is not numba_cube's) size the kernel's dynamic
    shared memory; 0 or no size gives an empty array."""
    x = np.arange(64.0)
    for nbytes in (8 * 8, 5 * 8 + 7, 0):
        out = client.empty(5, np.float64)
        client.launch(sizes_and_sum, 4, 16, client.create(x), out, shared_bytes=nbytes)
        np.testing.assert_array_equal(client.read(out), _expected(x, 4, 16, nbytes))
    host = np.zeros(5)
    with client:
        sizes_and_sum[4, 16, 0, 16 * 8](x, host)
    np.testing.assert_array_equal(host, _expected(x, 4, 16, 16 * 8))


@pytest.mark.parametrize("bad", [-8, 2.0, "16", None, MAX_DYNAMIC_SHARED_BYTES + 1])
def test_bad_sizes_are_refused_on_the_issuing_thread(client, bad):
    """A negative or non-integer size, or one above what a cube can have on any GPU
    (``MAX_DYNAMIC_SHARED_BYTES``), is a ``LaunchArgumentError`` at the call, also for a zero
    grid; nothing is queued: the output keeps its contents and the device keeps working."""
    x = client.create(np.ones(16))
    out = client.create(np.full(2, 7.0))
    with pytest.raises(LaunchArgumentError, match="dynamic shared memory"):
        client.launch(sizes_and_sum, 1, 16, x, out, shared_bytes=bad)
    with pytest.raises(LaunchArgumentError, match="dynamic shared memory"):
        client.launch(sizes_and_sum, 0, 16, x, out, shared_bytes=bad)
    with pytest.raises(LaunchArgumentError, match="dynamic shared memory"):
        with client:
            sizes_and_sum[1, 16, 0, bad](np.ones(16), np.zeros(2))
    np.testing.assert_array_equal(client.read(out), [7.0, 7.0])
    client.launch(sizes_and_sum, 1, 16, x, out, shared_bytes=16 * 8)
    np.testing.assert_array_equal(client.read(out), [16.0, 16.0])


def test_a_backend_without_dynamic_shared_memory_refuses_a_size():
    """A backend that declares none (``HostBackend.max_dynamic_shared_bytes`` = 0, the default)
    refuses a launch that asks for some with a ``LaunchArgumentError`` naming the device, instead
    of running the kernel without it; a launch with 0 bytes runs."""
    from numba_cube.testing import register_python_backend

    register_python_backend("rt_shared_bytes_none", inline=True)
    plain = cube.client("rt_shared_bytes_none:0")
    out = plain.create(np.zeros(1))

    def set_one(a):
        a[0] = 1.0

    with pytest.raises(LaunchArgumentError, match="does not support dynamic shared memory"):
        plain.launch(set_one, 1, 1, out, shared_bytes=8)
    plain.launch(set_one, 1, 1, out, shared_bytes=0)
    assert plain.read(out)[0] == 1.0


def test_capture_replays_with_the_size_it_recorded(client):
    """A recorded launch keeps its size: each replay runs with it, whatever sizes eager launches
    in between used."""
    x = np.arange(32.0)
    hx = client.create(x)
    out = client.empty(3, np.float64)
    other = client.empty(3, np.float64)
    client.graph_prepare()
    client.launch(sizes_and_sum, 2, 16, hx, out, shared_bytes=4 * 8)
    client.sync()
    client.start_capture()
    client.launch(sizes_and_sum, 2, 16, hx, out, shared_bytes=4 * 8)
    graph = client.stop_capture()
    client.write(out, np.zeros(3))
    client.launch(sizes_and_sum, 2, 16, hx, other, shared_bytes=16 * 8)
    graph.replay()
    np.testing.assert_array_equal(client.read(out), _expected(x, 2, 16, 4 * 8))
    np.testing.assert_array_equal(client.read(other), _expected(x, 2, 16, 16 * 8))


@cube.kernel
def count_items(out):
    dyn = cuda.shared.array(0, int64)
    out[0] = dyn.size


def test_dry_run_compiles_once_and_runs_nothing(client):
    """Under a dry run a launch with a size compiles and is skipped (its output untouched); the
    real launches after it, with any size, compile nothing more."""
    out = client.create(np.full(1, -1, np.int64))
    compiles = client.server.stats["compiles"]
    with cube.dry_run() as run:
        client.launch(count_items, 1, 1, out, shared_bytes=64)
    assert run.failures == []
    assert client.read(out)[0] == -1
    compiled = client.server.stats["compiles"]
    assert compiled == compiles + 1
    for nbytes in (64, 24):
        client.launch(count_items, 1, 1, out, shared_bytes=nbytes)
        assert client.read(out)[0] == nbytes // 8
    assert client.server.stats["compiles"] == compiled


def test_autotune_candidates_launch_with_their_own_sizes(client, monkeypatch):
    """A tuner's candidates may differ in their dynamic shared memory size: each launch gets its
    own, and the winner's result is the NumPy one for the size it launched with."""
    monkeypatch.setenv("NUMBA_CUBE_AUTOTUNE_CACHE", "0")      # nothing written to the cache dir
    x = np.arange(64.0)
    hx = client.create(x)
    out = client.empty(5, np.float64)

    def with_bytes(nbytes):
        def run(client, x, out):
            client.launch(sizes_and_sum, 4, 16, x, out, shared_bytes=nbytes)
        return run

    tuner = cube.Tuner("shared-bytes-test", {"full": with_bytes(16 * 8), "also-full": with_bytes(16 * 8 + 4)},
                       key=lambda x, out: x.size)
    tuner(client, hx, out)
    got = client.read(out)
    np.testing.assert_array_equal(got[:4], _expected(x, 4, 16, 16 * 8)[:4])
    assert got[4] in (16.0, (16 * 8 + 4) // 8)
