"""Dynamic cube counts on the CUDA backend (CONTRACT.md section 5).

The GPU path has two mechanisms (``numba_cube/backends/cuda/launch/dynamic.py``): the device-count
wrapper (no host round trip; the default where a kernel allows it) and the blocking 12-byte
read-back. Contract tests run with both (``mode`` fixture) where the contract is the same.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import LaunchFailure
from numba_cube.backends.cuda.launch import dynamic

from _cuda_setup import only

TPB = 32


@cube.kernel
def write_count(n, tpb, count):
    # One unit computes how many cubes the next launch needs: device work producing the grid.
    if cuda.grid(1) == 0:
        count[0] = (n + tpb - 1) // tpb
        count[1] = 1
        count[2] = 1


@cube.kernel
def fill_index(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i + 1.0


@cube.kernel
def fill_strided(out):
    # Reads gridDim through gridsize: the device-count form must see the dynamic count there.
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size:
        out[i] = 2.0
        i += step


@cube.kernel
def mark_blocks(out):
    # blockIdx and gridDim of a 2-D count.
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.y, cuda.blockIdx.x] = cuda.gridDim.x * 10 + cuda.gridDim.y


NDIM = 1   # a global constant: fine for numba-cuda, not a literal the device-count rewrite reads


@cube.kernel
def aliased(out):
    i = cuda.grid(NDIM)
    if i < out.size:
        out[i] = 3.0


@cube.kernel
def refuse(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@pytest.fixture(params=["auto", "readback"])
def mode(request, client, kind):
    """The server's dynamic-count mechanism for one test (GPU path only; the simulator's
    policy server resolves counts on the host)."""
    if kind == "sim":
        if request.param != "auto":
            pytest.skip("the simulator has one mechanism")
        yield "host"
        return
    server = client.server
    dynamic = server.mechanism.dynamic
    saved = dynamic.mode
    dynamic.mode = request.param
    server.channel.call(server.forget_bound_launches)
    try:
        yield request.param
    finally:
        dynamic.mode = saved
        server.channel.call(server.forget_bound_launches)


def test_count_written_by_earlier_device_work(client, mode):
    """The grid comes from three uint32 written by earlier device work on the same stream."""
    count = client.create(np.zeros(3, np.uint32))
    out = client.create(np.zeros(100))
    client.launch(write_count, 1, 1, 100, TPB, count)
    client.launch(fill_index, cube.CubeCount.dynamic(count), TPB, out)
    np.testing.assert_array_equal(client.read(out), np.arange(1, 101.0))


def test_gridsize_and_griddim_see_the_dynamic_count(client, mode):
    """cuda.gridsize/gridDim/blockIdx inside the kernel are those of the dynamic count (a
    grid-stride loop covers the buffer exactly once; a 2-D count shows in gridDim)."""
    count = client.create(np.array([2, 1, 1], np.uint32))
    out = client.create(np.zeros(200))
    client.launch(fill_strided, cube.CubeCount.dynamic(count), TPB, out)
    np.testing.assert_array_equal(client.read(out), np.full(200, 2.0))
    count2 = client.create(np.array([3, 2, 1], np.uint32))
    marks = client.create(np.zeros((2, 3)))
    client.launch(mark_blocks, cube.CubeCount.dynamic(count2), 4, marks)
    np.testing.assert_array_equal(client.read(marks), np.full((2, 3), 32.0))


def test_count_from_another_stream_waits_for_the_producer(client, mode):
    """The count buffer is in the launch's read set: a count produced on another stream is
    waited for before it is read (on the device or by the read-back)."""
    count = client.create(np.zeros(3, np.uint32))
    out = client.create(np.zeros(64))
    producer = client.set_stream(cube.StreamId.new())
    producer.launch(write_count, 1, 1, 64, TPB, count)
    client.launch(fill_index, cube.CubeCount.dynamic(count), TPB, out)
    np.testing.assert_array_equal(client.read(out), np.arange(1, 65.0))


def test_zero_count_dispatches_nothing(client, mode):
    """A count of zero runs nothing and leaves the outputs as they were."""
    count = client.create(np.array([0, 1, 1], np.uint32))
    out = client.create(np.full(32, -1.0))
    client.launch(fill_index, cube.CubeCount.dynamic(count), TPB, out)
    np.testing.assert_array_equal(client.read(out), np.full(32, -1.0))


def test_zero_count_leaves_a_failed_output_failed(client, mode):
    """A zero count claims nothing new: an output that carries a failure keeps it (the GPU path
    reads the count back for such a launch instead of using the device-count form)."""
    x = client.create(np.ones(32))
    out = client.create(np.zeros(32))
    client.launch(refuse, 1, 2048, x, out)              # fails out
    count = client.create(np.array([0, 1, 1], np.uint32))
    client.launch(fill_index, cube.CubeCount.dynamic(count), TPB, out)
    with pytest.raises(LaunchFailure):
        client.read(out)


def test_failed_count_buffer_skips_the_launch(client, mode):
    """A count buffer that carries a failure skips the launch, whose outputs inherit the root."""
    src = client.create(np.ones(3, np.uint32))
    count = client.create(np.zeros(3, np.uint32))
    out = client.create(np.zeros(32))
    client.launch(refuse, 1, 2048, src, count)         # fails the count buffer
    client.launch(fill_index, cube.CubeCount.dynamic(count), TPB, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert info.value.kernel_id == refuse.id


@only("fake", "gpu", why="the GPU path's device-count mechanism")
def test_device_count_form_is_used_where_eligible(client):
    """With the default mode, an eligible kernel's dynamic launch uses the device-count wrapper
    (no read-back); a kernel the rewrite cannot follow falls back to the read-back and is
    still correct."""
    server = client.server
    assert server.mechanism.dynamic.mode == "auto"
    count = client.create(np.array([2, 1, 1], np.uint32))
    out = client.create(np.zeros(64))
    client.launch(fill_index, cube.CubeCount.dynamic(count), TPB, out)
    np.testing.assert_array_equal(client.read(out), np.arange(1, 65.0))
    bound = [b for b in server.channel.call(server.bound_launches) if b.packed is not None
             and b.packed.kernel.name == "fill_index" and b.readback]
    assert bound and all(b.device_count is not None for b in bound)
    out2 = client.create(np.zeros(64))
    client.launch(aliased, cube.CubeCount.dynamic(count), TPB, out2)
    np.testing.assert_array_equal(client.read(out2), np.full(64, 3.0))
    assert isinstance(server.mechanism.dynamic.wrapper_of(aliased), dynamic.Ineligible)


def test_count_beyond_the_limits_is_a_failure_when_read_back(client, kind):
    """A count above CUDA's grid limits cannot be dispatched: with the read-back (and on the
    simulator) it is a failure on the write set."""
    server = client.server
    if kind != "sim":
        server.mechanism.dynamic.mode = "readback"
        server.channel.call(server.forget_bound_launches)
    try:
        count = client.create(np.array([1, 70000, 1], np.uint32))
        out = client.create(np.zeros(8))
        client.launch(fill_index, cube.CubeCount.dynamic(count), TPB, out)
        with pytest.raises(LaunchFailure) as info:
            client.read(out)
        assert isinstance(info.value.root, ValueError)
    finally:
        if kind != "sim":
            server.mechanism.dynamic.mode = "auto"
            server.channel.call(server.forget_bound_launches)
