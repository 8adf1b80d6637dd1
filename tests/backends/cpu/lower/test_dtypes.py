"""Shared and local arrays of float16 and of record dtypes on the CPU backend
(``backends/cpu/lower/dtypes.py``): float16 elements are halves with numba-cuda's arithmetic (each
operation rounded, as NumPy's float16), record elements keep every field (subarrays included),
checked against NumPy; dynamic shared memory of such elements is a CompileError."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

RECORD = np.dtype([("i", np.int32), ("j", np.float32, (3, 2))])
NB_RECORD = numba.from_dtype(RECORD)


@cube.kernel
def _half_shared(x, out):
    s = cuda.shared.array(64, dtype=numba.types.float16)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    out[t] = s[t] * s[63 - t] + s[t]


def test_float16_shared_array_rounds_like_numpy():
    """A float16 shared array holds halves; s[t] * s[63 - t] + s[t] rounds after each operation
    (NumPy float16 reference), read across the barrier by another unit."""
    x = np.random.default_rng(1).uniform(-30, 30, 64).astype(np.float16)
    out = np.zeros(64, np.float16)
    with cube.client("cpu"):
        _half_shared[1, 64](x, out)
    np.testing.assert_array_equal(out.view(np.uint16), (x * x[::-1] + x).view(np.uint16))


@cube.kernel
def _half_local(out):
    a = cuda.local.array(3, np.float16)
    a[0] = 1
    a[1] = 2049                   # not a half: rounds to 2048 (ties to even)
    a[2] = a[0] / 3
    out[0] = a[1]
    out[1] = a[2]
    out[2] = a.size


def test_float16_local_array():
    """A float16 local array converts what is stored to half (2049 -> 2048) and divides in
    half (1 / 3 as NumPy's float16)."""
    out = np.zeros(3, np.float16)
    with cube.client("cpu"):
        _half_local[1, 1](out)
    np.testing.assert_array_equal(out, [np.float16(2049), np.float16(1) / np.float16(3), 3])


@cube.kernel
def _record_shared(x, y):
    sm = cuda.shared.array(32, dtype=NB_RECORD)
    t = cuda.threadIdx.x
    sm[t] = x[t]
    cuda.syncthreads()
    y[t] = sm[31 - t]


def test_shared_record_array_copies_every_field():
    """A shared array of a record dtype with a (3, 2) subarray field carries whole records
    across the barrier (each unit reads another's)."""
    x = np.zeros(32, RECORD)
    x["i"] = np.arange(32)
    x["j"] = np.arange(32 * 6, dtype=np.float32).reshape(32, 3, 2)
    y = np.zeros_like(x)
    with cube.client("cpu"):
        _record_shared[1, 32](x, y)
    np.testing.assert_array_equal(y, x[::-1])


@cube.kernel
def _record_local(out):
    r = cuda.local.array(2, RECORD)
    r[1]["i"] = 7
    r[1]["j"][2, 1] = 2.5
    out[0] = r[1]["i"]
    out[1] = r[1]["j"][2, 1]


def test_local_record_array():
    """A local array of a NumPy record dtype has its fields."""
    out = np.zeros(2)
    with cube.client("cpu"):
        _record_local[1, 1](out)
    np.testing.assert_array_equal(out, [7.0, 2.5])


@cube.kernel
def _half_dynamic(out):
    s = cuda.shared.array(0, dtype=numba.types.float16)
    out[0] = s.size


def test_dynamic_shared_float16_is_refused():
    """Dynamic shared memory of float16 elements is a CompileError naming the construct."""
    with pytest.raises(cube.CompileError, match="dynamic"), cube.client("cpu"):
        _half_dynamic[1, 1, 0, 8](np.zeros(1, np.float16))
