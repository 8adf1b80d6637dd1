"""``numba_cube.dask.map_overlap``: a stencil over chunks grown by halos gives, for every
boundary Dask knows, exactly NumPy's result on the padded array and plain Dask's
``map_overlap`` of the same stencil in NumPy; the halo is trimmed on the device, so a following
kernel takes the trimmed handle chunks."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
import numba_cube.dask as cubed
from numba_cube.dask.graph import LAUNCH_INFIX, launch_handles


@cube.kernel
def smooth(x, out):
    i = cuda.grid(1)
    n = x.size
    if i < n:
        if i == 0 or i == n - 1:
            out[i] = x[i]
        else:
            out[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1]


@cube.kernel
def laplace(x, out):
    i, j = cuda.grid(2)
    n, m = x.shape
    if i < n and j < m:
        if i == 0 or j == 0 or i == n - 1 or j == m - 1:
            out[i, j] = x[i, j]
        else:
            out[i, j] = (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1]) - 4.0 * x[i, j]


@cube.kernel
def square(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * x[i]


def np_smooth(x):
    out = x.copy()
    out[1:-1] = 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:]
    return out


def np_laplace(x):
    out = x.copy()
    inner = (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])
    out[1:-1, 1:-1] = inner - 4.0 * x[1:-1, 1:-1]
    return out


PAD_MODES = {"reflect": "symmetric", "periodic": "wrap", "nearest": "edge"}


def _numpy_reference(xn, boundary):
    """The stencil on the whole array padded as the boundary says (``"none"``: unpadded)."""
    if boundary == "none":
        return np_smooth(xn)
    if isinstance(boundary, float):
        padded = np.pad(xn, 1, mode="constant", constant_values=boundary)
    else:
        padded = np.pad(xn, 1, mode=PAD_MODES[boundary])
    return np_smooth(padded)[1:-1]


@pytest.mark.parametrize("boundary", ["reflect", "periodic", "nearest", "none", 0.5])
def test_a_stencil_with_halos_is_bit_identical_to_numpy_and_dask(thread_client, boundary):
    """Uneven chunks (7, 7, 7, 7, 2), depth 1: equal bit for bit to NumPy on the padded array and
    to ``dask.array.map_overlap`` of the NumPy stencil; the chunks are the input's."""
    xn = np.random.default_rng(4).standard_normal(30)
    x = da.from_array(xn, chunks=7)
    ours = cubed.map_overlap(smooth, x, depth=1, boundary=boundary, dim=8)
    assert ours.chunks == x.chunks
    result = ours.compute()
    np.testing.assert_array_equal(result, _numpy_reference(xn, boundary))
    np.testing.assert_array_equal(
        result, da.map_overlap(np_smooth, x, depth=1, boundary=boundary).compute())


def test_a_two_dimensional_stencil_per_axis_boundaries_and_a_deep_halo(thread_client):
    """2-D, depth 2 along axis 0 and 1 along axis 1, periodic along axis 0 and reflect along
    axis 1, chunks smaller than the depth in places (Dask merges them first): plain Dask's
    result, bit for bit."""
    xn = np.random.default_rng(5).standard_normal((13, 11))
    x = da.from_array(xn, chunks=(4, (5, 5, 1)))
    depth, boundary = {0: 2, 1: 1}, {0: "periodic", 1: "reflect"}
    ours = cubed.map_overlap(laplace, x, depth=depth, boundary=boundary, dim=(4, 4),
                             count=lambda s: ((s[0] + 3) // 4, (s[1] + 3) // 4))
    plain = da.map_overlap(np_laplace, x, depth=depth, boundary=boundary)
    assert ours.chunks == plain.chunks
    np.testing.assert_array_equal(ours.compute(), plain.compute())


@cube.kernel
def smooth_trimming(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 0.25 * x[i] + 0.5 * x[i + 1] + 0.25 * x[i + 2]


def test_trim_false_is_a_kernel_that_trims_itself(thread_client):
    """``trim=False`` as in Dask: the output chunk has the trimmed shape and the kernel writes
    it from the grown input (``out[i]`` from ``x[i + depth]``): plain Dask's result with a
    NumPy function that trims itself, bit for bit."""
    xn = np.random.default_rng(7).standard_normal(25)
    x = da.from_array(xn, chunks=6)
    ours = cubed.map_overlap(smooth_trimming, x, depth=1, boundary="reflect", trim=False, dim=8)
    plain = da.map_overlap(lambda b: 0.25 * b[:-2] + 0.5 * b[1:-1] + 0.25 * b[2:], x, depth=1,
                           boundary="reflect", trim=False)
    assert ours.chunks == plain.chunks == x.chunks
    np.testing.assert_array_equal(ours.compute(), plain.compute())


def test_the_trimmed_chunks_feed_the_next_kernel_as_handles(thread_client):
    """A kernel after ``map_overlap`` takes its trimmed handle chunks (its launch layer depends
    on the overlap's launch layer, not on a read) and gives NumPy's result."""
    xn = np.random.default_rng(6).standard_normal(40)
    x = da.from_array(xn, chunks=10)
    smoothed = cubed.map_overlap(smooth, x, depth=1, boundary="nearest", dim=16)
    squared = cubed.map_blocks(square, smoothed, dim=16)
    below = launch_handles(squared)
    assert below.dask.dependencies[below.name] == {launch_handles(smoothed).name}
    assert LAUNCH_INFIX in launch_handles(smoothed).name
    np.testing.assert_array_equal(squared.compute(), _numpy_reference(xn, "nearest") ** 2)


def test_a_left_right_depth_pair_is_refused():
    """A (left, right) depth per axis is refused with a ``LaunchArgumentError`` naming it."""
    x = da.from_array(np.arange(10.0), chunks=5)
    with pytest.raises(cube.LaunchArgumentError, match="depth"):
        cubed.map_overlap(smooth, x, depth={0: (1, 2)}, boundary="none")
