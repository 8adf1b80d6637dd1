"""Launch geometry: CubeDim, CubeCount, dynamic counts (API.md geometry, CONTRACT.md 1.1 and 5)."""

from __future__ import annotations

import numpy as np
import pytest

import numba_cube as cube
from numba_cube import CubeCount, CubeDim, LaunchArgumentError, LaunchFailure

from .._util import drain, host_contents


# -- value types ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    (4, (4, 1, 1)), ((4,), (4, 1, 1)), ((4, 2), (4, 2, 1)), ((4, 2, 3), (4, 2, 3)),
    ([4, 2], (4, 2, 1)), (np.int32(5), (5, 1, 1)), ((np.int64(2), 3), (2, 3, 1)),
])
def test_ints_and_tuples_are_accepted(value, expected):
    """API.md: ints and tuples (1 to 3 dimensions, missing ones are 1) are accepted wherever a
    CubeDim or CubeCount is expected."""
    assert CubeDim.coerce(value).as_tuple() == expected
    assert CubeCount.coerce(value).as_tuple() == expected


def test_coerce_passes_values_through():
    """API.md: a CubeDim/CubeCount is accepted as is."""
    d, c = CubeDim(2, 3), CubeCount(4)
    assert CubeDim.coerce(d) is d and CubeCount.coerce(c) is c
    assert d.num_elems == 6 and c.num_elems == 4


@pytest.mark.parametrize("bad", [(), (1, 2, 3, 4), 2.0, "4", (1, 2.5), None, -1, (4, -1)])
def test_bad_geometry_is_a_launch_argument_error(bad):
    """API.md errors: a geometry that is not 1-3 non-negative integers is a LaunchArgumentError
    (also a TypeError), raised on the issuing thread."""
    for cls in (CubeDim, CubeCount):
        with pytest.raises(LaunchArgumentError) as info:
            cls.coerce(bad)
        assert isinstance(info.value, TypeError)


def test_cube_dim_is_at_least_one():
    """1.1: a cube of zero units is not a launch; CubeDim refuses 0 in any dimension."""
    for bad in [0, (4, 0), (1, 1, 0)]:
        with pytest.raises(LaunchArgumentError):
            CubeDim.coerce(bad)
    with pytest.raises(LaunchArgumentError):
        CubeDim(0)


def test_cube_count_constructor_validates_like_coerce():
    """API.md geometry: CubeCount(x, y, z) made directly takes the same non-negative integers as
    coerce; a negative or fractional dimension must not slip past the zero-grid gate."""
    for bad in [(-1,), (2, -3), (1.5,)]:
        with pytest.raises(LaunchArgumentError):
            CubeCount(*bad)
    assert CubeCount(0, 2).is_zero


def test_zero_count():
    """1.1 gate 1: a static count with any dimension 0 is zero; a dynamic count is never
    (statically) zero."""
    assert CubeCount.coerce(0).is_zero
    assert CubeCount.coerce((3, 0)).is_zero
    assert CubeCount.coerce((1, 1, 0)).is_zero
    assert not CubeCount.coerce((1, 1, 1)).is_zero


# -- dynamic counts -------------------------------------------------------------------------------


@cube.kernel
def fill_ones(out):
    out[:] = 1.0


@cube.kernel
def fail_into(x, out):
    out[:] = x
    raise ValueError("count producer failed")



def test_kernels_io_as_assumed():
    """4.2 (precondition of this module): the IO analysis gives the read/write sets used here."""
    a = np.zeros(4)
    assert fill_ones.io(a) == {"out": "w"}
    assert fail_into.io(a, a) == {"x": "r", "out": "w"}


def test_dynamic_count_needs_a_handle_of_twelve_bytes(devices):
    """5, API.md: CubeCount.dynamic takes a handle (or a view) holding three uint32."""
    client = devices.fresh()
    with pytest.raises(LaunchArgumentError):
        CubeCount.dynamic(np.ones(3, np.uint32))
    with pytest.raises(LaunchArgumentError):
        CubeCount.dynamic(client.create(np.ones(2, np.uint32)))
    h = client.create(np.ones(4, np.uint32))
    count = CubeCount.dynamic(h[1:])
    assert count.is_dynamic and not count.is_zero
    assert count.handle.offset == 4


def test_dynamic_count_runs_when_nonzero(devices):
    """5: a dynamic count read as (x, y, z) > 0 dispatches the launch."""
    client = devices.fresh()
    counts = client.create(np.array([2, 1, 1], np.uint32))
    out = client.create(np.zeros(4))
    client.launch(fill_ones, CubeCount.dynamic(counts), 1, out)
    np.testing.assert_array_equal(client.read(out), np.ones(4))


def test_dynamic_count_of_zero_dispatches_nothing_and_claims_nothing(devices):
    """5: a count that resolves to zero in any dimension dispatches nothing and claims nothing
    new: the output keeps its contents and stays readable."""
    client = devices.fresh()
    counts = client.create(np.array([4, 0, 1], np.uint32))
    out = client.create(np.full(4, 5.0))
    client.launch(fill_ones, CubeCount.dynamic(counts), 1, out)
    np.testing.assert_array_equal(client.read(out), np.full(4, 5.0))


def test_failed_count_buffer_skips_the_launch_and_propagates(devices):
    """5: the count buffer is in the launch's read set: a failed count buffer skips the launch and
    its outputs inherit the same root cause."""
    client = devices.fresh()
    src = client.create(np.array([1, 1, 1], np.uint32))
    counts = client.empty(3, np.uint32)
    client.launch(fail_into, 1, 1, src, counts)
    out = client.create(np.full(4, 5.0))
    client.launch(fill_ones, CubeCount.dynamic(counts), 1, out)
    with pytest.raises(LaunchFailure) as at_count:
        client.read(counts)
    with pytest.raises(LaunchFailure) as at_out:
        client.read(out)
    assert at_out.value.root is at_count.value.root
    assert at_out.value.kernel_id == fail_into.id
    assert at_out.value.chain == (fail_into.id, fill_ones.id)
    np.testing.assert_array_equal(host_contents(client, out), np.full(4, 5.0))   # did not run


def test_dynamic_count_waits_for_its_producer(devices):
    """5: the count is read after the work that writes it (here on another stream)."""
    client = devices.fresh()
    counts = client.create(np.zeros(3, np.uint32))
    out = client.create(np.full(4, 5.0))
    with cube.stream():
        client.write(counts, np.array([1, 1, 1], np.uint32))
    with cube.stream():
        client.launch(fill_ones, CubeCount.dynamic(counts), 1, out)
    drain(client)
    np.testing.assert_array_equal(client.read(out), np.ones(4))
