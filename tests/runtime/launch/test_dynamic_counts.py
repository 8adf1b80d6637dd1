"""Dynamic cube counts on the CPU backend (CONTRACT.md section 5)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


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
def slow_then_count(x, count):
    # Burns a little time before writing the count, so a missing dependency would read stale bytes.
    i = cuda.grid(1)
    if i == 0:
        acc = 0.0
        for k in range(200000):
            acc += x[k % x.size]
        count[0] = 4 if acc > -1.0 else 0
        count[1] = 1
        count[2] = 1


@pytest.fixture(scope="module")
def client():
    return cube.client("cpu")


def test_count_written_by_earlier_device_work(client):
    """The grid comes from three uint32 written by earlier device work on the same stream."""
    count = client.create(np.zeros(3, np.uint32))
    out = client.create(np.zeros(100))
    client.launch(write_count, 1, 1, 100, 32, count)
    client.launch(fill_index, cube.CubeCount.dynamic(count), 32, out)
    np.testing.assert_array_equal(client.read(out), np.arange(1, 101.0))


def test_count_from_another_stream_waits_for_queued_producer(client):
    """The producing work must have run, including work still queued on another stream, before
    the 12 bytes are read: the count buffer is in the launch's read set."""
    count = client.create(np.zeros(3, np.uint32))
    x = client.create(np.ones(16))
    out = client.create(np.zeros(128))
    with cube.stream():
        client.launch(slow_then_count, 1, 1, x, count)
    with cube.stream():
        client.launch(fill_index, cube.CubeCount.dynamic(count), 32, out)
    expected = np.zeros(128)
    expected[:128] = np.arange(1, 129.0)
    np.testing.assert_array_equal(client.read(out), expected)


def test_zero_count_dispatches_nothing_and_claims_nothing(client):
    """A count that resolves to zero in any dimension dispatches nothing and claims nothing new:
    the output keeps its contents and stays readable."""
    count = client.create(np.array([0, 1, 1], np.uint32))
    out = client.create(np.full(8, 7.0))
    client.launch(fill_index, cube.CubeCount.dynamic(count), 32, out)
    np.testing.assert_array_equal(client.read(out), np.full(8, 7.0))


def test_failed_count_buffer_skips_and_propagates_root(client):
    """A failed count buffer skips the launch and its writes inherit the count's root cause."""
    checked = cube.client("cpu", boundscheck=True)
    count = checked.create(np.zeros(3, np.uint32))
    out = checked.create(np.zeros(8))
    checked.launch(write_count, 1, 1, 8, 4, count[:2])     # writes count[2]: out of bounds on the view
    checked.launch(fill_index, cube.CubeCount.dynamic(count), 32, out)
    with pytest.raises(cube.LaunchFailure) as first:
        checked.read(count[:2])
    with pytest.raises(cube.LaunchFailure) as second:
        checked.read(out)
    assert second.value.root is first.value.root
    assert isinstance(first.value.root, IndexError)


def test_unresolvable_count_goes_through_failed_writing(client):
    """A count that cannot be resolved (past the largest grid) fails the launch's outputs without
    running it: contents unchanged, a read raises with the reason."""
    count = client.create(np.array([1, 70000, 70000], np.uint32))
    out = client.create(np.full(4, 3.0))
    client.launch(fill_index, cube.CubeCount.dynamic(count), 32, out)
    with pytest.raises(cube.LaunchFailure) as info:
        client.read(out)
    assert isinstance(info.value.root, ValueError)
    assert "exceeds" in str(info.value.root)
    np.testing.assert_array_equal(client.server.host_array(out.binding()), np.full(4, 3.0))


def test_count_in_a_view_of_a_larger_buffer(client):
    """A view into a larger buffer works as the count buffer."""
    big = client.create(np.array([9, 9, 2, 1, 1, 9], np.uint32))
    out = client.create(np.zeros(64))
    client.launch(fill_index, cube.CubeCount.dynamic(big[2:5]), 32, out)
    np.testing.assert_array_equal(client.read(out), np.arange(1, 65.0))


def test_dynamic_count_refuses_short_or_foreign_handles(client):
    """The count handle needs 12 bytes and must belong to the launching client's device."""
    with pytest.raises(cube.LaunchArgumentError):
        cube.CubeCount.dynamic(client.create(np.zeros(2, np.uint32)))
    other = cube.client("cpu:1")
    foreign = other.create(np.array([1, 1, 1], np.uint32))
    out = client.create(np.zeros(4))
    with pytest.raises(cube.ForeignHandleError):
        client.launch(fill_index, cube.CubeCount.dynamic(foreign), 32, out)
