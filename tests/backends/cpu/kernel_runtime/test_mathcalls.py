"""math.fmod, math.remainder, math.nextafter and math.modf in CPU kernels
(``backends/cpu/kernel_runtime/mathcalls.py``) give C's answers, as numba-cuda's libdevice does, in
the argument's own float type, against Python's math module and NumPy; integer arguments become
float64, and a zero divisor gives NaN where Python's math.fmod would raise. cuda.fma is fused
(one rounding), against an exact rational reference."""

from __future__ import annotations

import math
from fractions import Fraction
from math import fmod as imported_fmod

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


def _operands(dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(500) * 10.0 ** rng.integers(-3, 4, 500)
    y = rng.standard_normal(500) * 10.0 ** rng.integers(-3, 4, 500)
    x = np.concatenate([x, [5.5, -5.5, 7.0, 5.0, 0.0, -0.0, np.inf, 1.0]])
    y = np.concatenate([y, [2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 2.0, np.inf]])
    return x.astype(dtype), y.astype(dtype)


@cube.kernel
def _binary(x, y, fm, rem, nxt, fm_imported):
    i = cuda.grid(1)
    if i < x.size:
        fm[i] = math.fmod(x[i], y[i])
        rem[i] = math.remainder(x[i], y[i])
        nxt[i] = math.nextafter(x[i], y[i])
        fm_imported[i] = imported_fmod(x[i], y[i])


def _c_semantics(fn, a, b):
    """Python's ``fn(a, b)``, with NaN where Python raises for a domain error (C returns NaN)."""
    try:
        return fn(float(a), float(b))
    except ValueError:
        return math.nan


def _run_binary(x, y):
    outs = [np.zeros_like(x) for _ in range(4)]
    with cube.client("cpu"):
        _binary[(x.size + 63) // 64, 64](x, y, *outs)
    return outs


def test_float64_against_python_math():
    """float64: fmod, remainder (IEEE, ties to even) and nextafter equal Python's math results
    exactly, whether the kernel says math.fmod or imported fmod."""
    x, y = _operands(np.float64, 1)
    fm, rem, nxt, fm_imported = _run_binary(x, y)
    np.testing.assert_array_equal(fm, [_c_semantics(math.fmod, a, b) for a, b in zip(x, y)])
    np.testing.assert_array_equal(fm_imported, fm)
    np.testing.assert_array_equal(rem, [_c_semantics(math.remainder, a, b)
                                        for a, b in zip(x, y)])
    np.testing.assert_array_equal(nxt, [math.nextafter(a, b) for a, b in zip(x, y)])


def test_float32_stays_float32():
    """float32 operands are computed in float32: nextafter steps one float32 ulp, fmod matches
    NumPy's float32 fmod, remainder the float64 remainder of the same values (exact in float32)."""
    x, y = _operands(np.float32, 2)
    fm, rem, nxt, _ = _run_binary(x, y)
    np.testing.assert_array_equal(nxt, np.nextafter(x, y))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(fm, np.fmod(x, y))
    want = np.array([_c_semantics(math.remainder, a, b) for a, b in zip(x, y)], np.float32)
    np.testing.assert_array_equal(rem, want)


@cube.kernel
def _by_zero(x, y, out):
    out[0] = math.fmod(x[0], y[0])
    out[1] = math.remainder(x[0], y[0])


def test_zero_divisor_is_nan():
    """fmod(x, 0) and remainder(x, 0) are NaN (C and libdevice), not an exception."""
    out = np.zeros(2)
    with cube.client("cpu"):
        _by_zero[1, 1](np.array([3.0]), np.array([0.0]), out)
    assert np.isnan(out).all()


@cube.kernel
def _ints(x, y, fm, rem):
    i = cuda.grid(1)
    if i < x.size:
        fm[i] = math.fmod(x[i], y[i])
        rem[i] = math.remainder(x[i], y[i])


def test_integer_operands_become_float64():
    """int64 operands are converted to float64 (numba-cuda's typing): fmod(-7, 2) is -1.0 and
    remainder(-7, 2) is 1.0 (the quotient -3.5 rounds to the even -4)."""
    x, y = np.array([-7, 7, 9], np.int64), np.array([2, -2, 4], np.int64)
    fm, rem = np.zeros(3), np.zeros(3)
    with cube.client("cpu"):
        _ints[1, 3](x, y, fm, rem)
    pairs = list(zip(x.tolist(), y.tolist()))
    np.testing.assert_array_equal(fm, [math.fmod(a, b) for a, b in pairs])
    np.testing.assert_array_equal(rem, [math.remainder(a, b) for a, b in pairs])


@cube.kernel
def _modf(x, frac, whole):
    i = cuda.grid(1)
    if i < x.size:
        frac[i], whole[i] = math.modf(x[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_modf_matches_numpy(dtype):
    """math.modf gives (fractional, integral) with x's sign, (±0, ±inf) for infinities and NaNs
    for NaN, as NumPy's modf, bit for bit (signed zeros included)."""
    x = np.array([2.5, -2.5, -2.0, 0.0, -0.0, 1e30, np.inf, -np.inf, np.nan, 0.75], dtype)
    frac, whole = np.zeros_like(x), np.zeros_like(x)
    with cube.client("cpu"):
        _modf[1, x.size](x, frac, whole)
    want_frac, want_whole = np.modf(x)
    np.testing.assert_array_equal(frac, want_frac)
    np.testing.assert_array_equal(whole, want_whole)
    np.testing.assert_array_equal(np.signbit(frac), np.signbit(want_frac))


@cube.kernel
def _fma(a, b, c, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = cuda.fma(a[i], b[i], c[i])


def test_cuda_fma_rounds_once():
    """cuda.fma is fused, as numba-cuda's llvm.fma: the exact a * b + c rounded once to float64
    (a rational reference), which differs from a * b + c rounded twice."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(2000), rng.standard_normal(2000)
    c = -(a * b)                                     # cancels the rounded product: the fused
    out = np.zeros(2000)                             # result is the product's rounding error
    with cube.client("cpu"):
        _fma[(a.size + 63) // 64, 64](a, b, c, out)
    want = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(out, want)
    assert np.count_nonzero(out) > 1000               # twice-rounded a * b + c would be 0


def test_python_bodies_have_the_kernels_semantics():
    """Called from Python, the replacements answer as the compiled ones do (C's semantics):
    fmod as NumPy's fmod, NaN for a zero divisor where Python's math raises, fma rounded once."""
    import math
    from fractions import Fraction

    from numba_cube.backends.cpu.kernel_runtime import mathcalls

    for x, y in [(5.5, 2.0), (-5.5, 2.0), (1.0, 0.0), (math.inf, 3.0)]:
        with np.errstate(invalid="ignore"):
            want = float(np.fmod(x, y))
        got = mathcalls.fmod(x, y)
        assert (math.isnan(want) and math.isnan(got)) or got == want
    assert math.isnan(mathcalls.remainder(1.0, 0.0)) and mathcalls.remainder(5.5, 2.0) == -0.5
    assert mathcalls.fma(0.1, 10.0, -1.0) == float(Fraction(0.1) * 10 - 1) != 0.1 * 10.0 - 1.0
    assert mathcalls.modf(-2.5) == (-0.5, -2.0)
