"""On a GPU: a dispatcher declared with signatures keeps numba.cuda's argument conversions.

(numba-cuda makes such a dispatcher only where it can compile, so these run on a GPU alone; the
resolution itself is tested on any machine in ``tests/kernel/test_signatures.py``.)
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

from _cuda_setup import KIND

pytestmark = pytest.mark.skipif(KIND != "gpu", reason="numba-cuda compiles declared signatures at once")


def _clz(out, x):
    out[0] = cuda.clz(x)


def _add(r, x, y):
    r[0] = x + y


def test_python_int_for_an_int32_signature_counts_32_bits():
    """``cuda.clz`` of a Python int passed for an int32 parameter counts 32 bits (numba.cuda's
    answer), not 64."""
    k = cube.kernel(cuda.jit("void(int32[:], int32)")(_clz))
    out = np.zeros(1, np.int32)
    with cube.client("cuda"):
        k[1, 1](out, 0x00100000)
    assert out[0] == 11


def test_resolution_picks_numbas_overload():
    """float32 arguments run the float32 signature, Python floats the float64 one."""
    k = cube.kernel(cuda.jit(["(float64[::1], float32, float32)",
                              "(float64[::1], float64, float64)"])(_add))
    r = np.zeros(1)
    with cube.client("cuda"):
        k[1, 1](r, np.float32(1), np.float32(2**-25))
        assert r[0] == 1.0
        k[1, 1](r, 1, 2**-25)
        assert r[0] == 1.0000000298023224
        wrapped = np.zeros(1, np.int32)      # 2**40 + 2**20 wraps to 2**20 in an int32, as numba packs it
        cube.kernel(cuda.jit("void(int32[:], int32)")(_clz))[1, 1](wrapped, 2**40 + 2**20)
        assert wrapped[0] == 11
