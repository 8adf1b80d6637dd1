"""The element-wise kernels several ``numba_cube.dask`` tests chain (``axpy -> square -> halve``),
defined once in an importable module: the workers of a local cluster unpickle them by reference.
References in the tests are the same expressions in NumPy."""

from __future__ import annotations

from numba import cuda

import numba_cube as cube


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cube.kernel
def square(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * x[i]


@cube.kernel
def halve(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 0.5 * x[i]
