"""Global constant arrays of records in CPU kernels (``backends/cpu/frontend/records.py``) read back
exactly what NumPy holds, whatever the layout (packed, aligned with padding, subarray and nested
fields); record dtypes the CPU target cannot hold are a CompileError naming the field."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

PACKED = np.array([(1.5, 2), (3.25, -4)], dtype=[("x", np.float64), ("y", np.int64)])
ALIGNED = np.array([(1, 2, 0xDEADBEEF, 8), (4, 5, 0xBEEFDEAD, 10)],
                   dtype=np.dtype([("a", np.uint8), ("b", np.uint8), ("y", np.uint32),
                                   ("z", np.uint8)], align=True))
INNER = np.dtype([("p", np.int16), ("q", np.float32)])
NESTED = np.zeros(3, dtype=[("m", np.float32, (2, 2)), ("inner", INNER)])
NESTED["m"] = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
NESTED["inner"]["p"] = [7, -8, 9]
NESTED["inner"]["q"] = [0.5, 0.25, -1.0]
HALF_FIELD = np.zeros(2, dtype=[("h", np.float16)])


@cube.kernel
def _packed(x, y):
    c = cuda.const.array_like(PACKED)
    i = cuda.grid(1)
    if i < c.size:
        x[i] = c[i]["x"]
        y[i] = c[i]["y"]


@cube.kernel
def _aligned(a, b, y, z):
    i = cuda.grid(1)
    if i < ALIGNED.size:
        a[i] = ALIGNED[i]["a"]
        b[i] = ALIGNED[i]["b"]
        y[i] = ALIGNED[i]["y"]
        z[i] = ALIGNED[i]["z"]


@cube.kernel
def _nested(m, p, q):
    i = cuda.grid(1)
    if i < NESTED.size:
        m[i] = NESTED[i]["m"][1, 0]
        p[i] = NESTED[i]["inner"]["p"]
        q[i] = NESTED[i]["inner"]["q"]


@cube.kernel
def _half_field(out):
    out[0] = HALF_FIELD[0]["h"]


def test_packed_record_constant():
    """Fields of a packed record array read back as NumPy holds them."""
    x, y = np.zeros(2), np.zeros(2, np.int64)
    with cube.client("cpu"):
        _packed[1, 2](x, y)
    np.testing.assert_array_equal(x, PACKED["x"])
    np.testing.assert_array_equal(y, PACKED["y"])


def test_aligned_record_constant_keeps_its_padding():
    """An aligned record dtype (padding before the uint32) keeps its offsets."""
    outs = [np.zeros(2, np.int64) for _ in range(4)]
    with cube.client("cpu"):
        _aligned[1, 2](*outs)
    for out, name in zip(outs, ("a", "b", "y", "z")):
        np.testing.assert_array_equal(out, ALIGNED[name])


def test_subarray_and_nested_fields():
    """A (2, 2) subarray field and a nested record field read back as in NumPy."""
    m, p, q = np.zeros(3, np.float32), np.zeros(3, np.int64), np.zeros(3, np.float32)
    with cube.client("cpu"):
        _nested[1, 3](m, p, q)
    np.testing.assert_array_equal(m, NESTED["m"][:, 1, 0])
    np.testing.assert_array_equal(p, NESTED["inner"]["p"])
    np.testing.assert_array_equal(q, NESTED["inner"]["q"])


def test_float16_field_is_refused():
    """A record field of float16 (no CPU data model for record fields) is a CompileError that
    names the field."""
    with pytest.raises(cube.CompileError, match="'h'"), cube.client("cpu"):
        _half_field[1, 1](np.zeros(1, np.float16))
