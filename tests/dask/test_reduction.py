"""``numba_cube.dask.reduction``: a kernel's per-chunk partials (one per cube, or as many as
``partials`` says) combined by Dask's tree reduction equal NumPy's reduction; a chain of
kernels before it hands over its handle chunks."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
import numba_cube.dask as cubed
from numba_cube.dask.graph import launch_handles


@cube.kernel
def cube_sums(x, partials):
    if cuda.threadIdx.x == 0:
        start = cuda.blockIdx.x * cuda.blockDim.x
        stop = min(start + cuda.blockDim.x, x.size)
        acc = x[start]
        for i in range(start + 1, stop):
            acc += x[i]
        partials[cuda.blockIdx.x] = acc


@cube.kernel
def cube_maxima(x, partials):
    if cuda.threadIdx.x == 0:
        start = cuda.blockIdx.x * cuda.blockDim.x
        stop = min(start + cuda.blockDim.x, x.size)
        best = x[start]
        for i in range(start + 1, stop):
            best = max(best, x[i])
        partials[cuda.blockIdx.x] = best


@cube.kernel
def products(x, y, partials):
    i = cuda.grid(1)
    if i < x.size:
        partials[i] = x[i] * y[i]


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def test_integer_block_sums_equal_numpys_sum(thread_client):
    """int64 (exact in any order): one partial per cube, uneven chunks, a tree of
    ``split_every=2``: NumPy's sum, as a 0-d int64 array; ``keepdims`` keeps the rank."""
    xn = np.arange(-500, 1501, dtype=np.int64)
    x = da.from_array(xn, chunks=300)
    total = cubed.reduction(cube_sums, x, dim=32, split_every=2)
    assert total.shape == () and total.dtype == np.int64
    assert total.compute() == xn.sum()
    assert cubed.reduction(cube_sums, x, dim=32, keepdims=True).compute().shape == (1,)


def test_a_maximum_with_numpys_max_as_combine(thread_client):
    """``combine=np.max``: the partials' maximum, NumPy's exactly."""
    xn = np.random.default_rng(8).standard_normal(1000)
    x = da.from_array(xn, chunks=128)
    assert cubed.reduction(cube_maxima, x, combine=np.max, dim=16).compute() == xn.max()


def test_a_dot_product_after_a_chain_takes_the_chains_handles(thread_client):
    """``partials=`` one per element over two arrays, one of them an ``axpy`` output: its
    handle chunks go to the reduction's launches, and the sum is NumPy's dot product."""
    xn = np.random.default_rng(9).standard_normal(700)
    x = da.from_array(xn, chunks=200)
    y = cubed.map_blocks(axpy, 2.0, x, x, dim=64)
    dot = cubed.reduction(products, y, x, partials=lambda shape: shape[0], dim=64)
    partial_layer = next(n for n in dot.dask.layers if n.startswith("products-partials-"))
    assert launch_handles(y).name in dot.dask.dependencies[partial_layer]
    np.testing.assert_allclose(dot.compute(), np.dot(3.0 * xn, xn), rtol=1e-12)


def test_a_partials_kernel_that_never_writes_them_is_refused():
    """A partials kernel that never writes its partials is refused at the call."""
    @cube.kernel
    def forgets(x, partials):
        i = cuda.grid(1)
        if i < x.size:
            unused = x[i]  # noqa: F841

    with pytest.raises(cube.LaunchArgumentError, match="'partials'"):
        cubed.reduction(forgets, da.from_array(np.arange(4.0), chunks=2))
