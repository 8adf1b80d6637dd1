"""``cuda.fp16.*`` in CPU kernels (``backends/cpu/kernel_runtime/fp16_functions.py``) computes what
numba-cuda's half intrinsics compute, bit for bit: hadd/hsub/hmul/hdiv against NumPy's float16, the
fused hfma against an exact rational reference, hmax/hmin and the comparisons by CUDA's NaN and
signed-zero rules."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numba import cuda

import numba_cube as cube
from halves import assert_same_bits, launch, random_halves


@cube.kernel
def _arith(a, b, add, sub, mul, div):
    i = cuda.grid(1)
    if i < a.size:
        add[i] = cuda.fp16.hadd(a[i], b[i])
        sub[i] = cuda.fp16.hsub(a[i], b[i])
        mul[i] = cuda.fp16.hmul(a[i], b[i])
        div[i] = cuda.fp16.hdiv(a[i], b[i])


def test_hadd_hsub_hmul_hdiv_round_each_result_to_half():
    """cuda.fp16.hadd/hsub/hmul/hdiv give NumPy float16's results bit for bit."""
    a, b = random_halves(3000, 1), random_halves(3000, 2)
    outs = [np.zeros_like(a) for _ in range(4)]
    launch(_arith, a.size, a, b, *outs)
    with np.errstate(all="ignore"):
        for got, want in zip(outs, (a + b, a - b, a * b, a / b)):
            assert_same_bits(got, want)


def _round_to_half(q: Fraction) -> np.float16:
    """The half nearest to the exact ``q``, ties to even (finite results only)."""
    h = np.float16(float(q))
    candidates = [h, np.nextafter(h, np.float16(np.inf)), np.nextafter(h, np.float16(-np.inf))]
    candidates = [c for c in candidates if np.isfinite(c)]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - q),
                                          int(np.array(c).view(np.uint16)) & 1))


@cube.kernel
def _fma(a, b, c, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = cuda.fp16.hfma(a[i], b[i], c[i])


def test_hfma_rounds_once():
    """cuda.fp16.hfma is fused: a * b + c exactly, rounded to half once."""
    rng = np.random.default_rng(8)
    a, b, c = (rng.uniform(-40, 40, 3000).astype(np.float16) for _ in range(3))
    out = np.zeros_like(a)
    launch(_fma, a.size, a, b, c, out)
    want = [_round_to_half(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
            for x, y, z in zip(a, b, c)]
    assert_same_bits(out, want)


@cube.kernel
def _extrema(a, b, hi, lo, eq, ne, lt):
    i = cuda.grid(1)
    if i < a.size:
        hi[i] = cuda.fp16.hmax(a[i], b[i])
        lo[i] = cuda.fp16.hmin(a[i], b[i])
        eq[i] = cuda.fp16.heq(a[i], b[i])
        ne[i] = cuda.fp16.hne(a[i], b[i])
        lt[i] = cuda.fp16.hlt(a[i], b[i])


def test_hmax_hmin_and_comparisons_follow_cuda():
    """hmax/hmin return the other operand for one NaN and put +0 above -0 (CUDA's __hmax/__hmin);
    heq/hne/hlt are ordered comparisons (false with a NaN)."""
    nan, inf = np.nan, np.inf
    a = np.array([1.0, nan, 2.0, nan, 0.0, -0.0, -inf, 3.0], np.float16)
    b = np.array([2.0, 5.0, nan, nan, -0.0, 0.0, 1.0, 3.0], np.float16)
    hi, lo = np.zeros_like(a), np.zeros_like(a)
    eq, ne, lt = (np.zeros(a.size, np.bool_) for _ in range(3))
    launch(_extrema, a.size, a, b, hi, lo, eq, ne, lt)
    assert_same_bits(hi, [2.0, 5.0, 2.0, nan, 0.0, 0.0, 1.0, 3.0])
    assert_same_bits(lo, [1.0, 5.0, 2.0, nan, -0.0, -0.0, -inf, 3.0])
    np.testing.assert_array_equal(eq, [False, False, False, False, True, True, False, True])
    np.testing.assert_array_equal(ne, [True, False, False, False, False, False, True, False])
    np.testing.assert_array_equal(lt, [True, False, False, False, False, False, True, False])


def test_hfma_reference_is_exact():
    """The test's own exact-rounding helper picks the nearest half and breaks ties to even."""
    assert _round_to_half(Fraction(1) + Fraction(1, 2048)) == np.float16(1.0)
    assert _round_to_half(Fraction(1) + Fraction(3, 2048)) == np.float16(1.001953125)
    assert math.isclose(float(_round_to_half(Fraction(1, 3))), 1 / 3, rel_tol=1e-3)
