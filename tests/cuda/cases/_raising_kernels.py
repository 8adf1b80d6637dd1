"""The kernels of ``test_cuda_raising_kernels.py``, in a module pytest does not rewrite (its
assertion rewriting would change the message of an ``assert`` inside a kernel)."""

from __future__ import annotations

from numba import cuda

import numba_cube as cube


class KernelError(Exception):
    """What ``raise_bare`` raises (a user class, decoded by reference)."""


@cube.kernel
def checked_double(out, x):
    i = cuda.grid(1)
    if i < out.size:
        if x[i] < 0:
            raise ValueError("negative input")
        out[i] = 2 * x[i]


@cube.kernel
def asserted_copy(out, x):
    i = cuda.grid(1)
    if i < out.size:
        assert x[i] != 7, "seven is not allowed"
        out[i] = x[i]


@cube.kernel
def add_one(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + 1


@cube.kernel
def count_up(x, limit):
    i = cuda.grid(1)
    if i < x.size:
        if x[i] >= limit:
            raise ValueError("limit reached")
        x[i] += 1


@cube.kernel
def bounded_fill(out, value, limit):
    i = cuda.grid(1)
    if i < out.size:
        if value > limit:
            raise ValueError("value above limit")
        out[i] = value


@cube.kernel
def raise_bare(out):
    if cuda.threadIdx.x == 3:
        raise KernelError
    out[cuda.threadIdx.x] = 1


@cuda.jit(device=True)
def _check_positive(v):
    if v <= 0:
        raise KeyError("from the device function")
    return v


@cube.kernel
def through_device_function(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _check_positive(x[i])


@cube.kernel
def raise_writing_nothing(x):
    if x[cuda.threadIdx.x] < 0:
        raise ValueError("no buffer to carry this")


@cube.kernel
def accumulate(y, x):
    i = cuda.grid(1)
    if i < y.size:
        y[i] += x[i]
