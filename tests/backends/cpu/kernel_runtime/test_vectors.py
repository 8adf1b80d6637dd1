"""numba.cuda's vector types in CPU kernels (``backends/cpu/kernel_runtime/vectors.py``):
constructors convert numbers to the base type (as NumPy's scalar conversion does) and splice vectors
of the same base, ``.x/.y/.z/.w`` read them back; aliases (``double4``, ``short2``) name the same
types; a wrong element count or a vector of another base is a CompileError, as numba-cuda's typing
refuses it."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


@cube.kernel
def _construct(out):
    v1 = cuda.float64x4(1.0, 3.0, 5.0, 7.0)
    v2 = cuda.short2(10, 11.7)
    v3 = cuda.float32x4(cuda.float32x2(1.5, 2.25), 3, v1.w)
    v4 = cuda.double4(v1)
    v5 = cuda.uint8x3(300, cuda.uint8x2(1, 2))
    out[0] = v1.x
    out[1] = v1.y
    out[2] = v1.z
    out[3] = v1.w
    out[4] = v2.x
    out[5] = v2.y
    out[6] = v3.x
    out[7] = v3.y
    out[8] = v3.z
    out[9] = v3.w
    out[10] = v4.z
    out[11] = v5.x
    out[12] = v5.z


def test_construction_and_fields():
    """Fields read back the constructor's elements, each converted to the base type (int16 of
    11.7 is 11, uint8 of 300 wraps to 44), with vectors spliced in place."""
    out = np.zeros(13)
    with cube.client("cpu"):
        _construct[1, 1](out)
    want = [1.0, 3.0, 5.0, 7.0, 10, np.float64(11.7).astype(np.int16), 1.5, 2.25, 3.0, 7.0, 5.0,
            np.array(300).astype(np.uint8), 2]
    np.testing.assert_array_equal(out, np.array(want, np.float64))


@cube.kernel
def _too_few(out):
    v = cuda.float32x3(1.0, 2.0)
    out[0] = v.x


@cube.kernel
def _other_base(out):
    v = cuda.float32x2(cuda.float64x1(1.0), 2.0)
    out[0] = v.x


@pytest.mark.parametrize("kernel", [_too_few, _other_base], ids=["count", "base"])
def test_mismatched_constructor_is_a_compile_error(kernel):
    """Two elements for a 3-vector, or a float64 vector spliced into a float32 one, do not type
    (numba-cuda has no such overload): the launch fails with CompileError."""
    with pytest.raises(cube.CompileError), cube.client("cpu"):
        kernel[1, 1](np.zeros(1))
