"""float16 operators and math functions in CPU kernels (``backends/cpu/kernel_runtime/fp16.py``)
follow numba-cuda's typing: a half with a half (or an int8) is a half operation that rounds its
result, as NumPy's float16 does, math.* of a half is the float64 result rounded once, and other
mixes promote as numba-cuda and NumPy promote them."""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

import numba_cube as cube
from halves import assert_same_bits, launch, random_halves


@cube.kernel
def _chain(a, b, c, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] + b[i] * c[i] - a[i] / c[i]


def test_operators_on_halves_round_after_every_operation():
    """``a + b * c - a / c`` on float16 operands is a float16 expression: every operation rounds
    to half (numba-cuda's typing), not once at the store."""
    a, b, c = random_halves(2000, 3), random_halves(2000, 4), random_halves(2000, 5)
    out = np.zeros_like(a)
    launch(_chain, a.size, a, b, c, out)
    with np.errstate(all="ignore"):
        assert_same_bits(out, a + b * c - a / c)


@cube.kernel
def _math(x, sin, sqrt, floor, rcp, ceil_h):
    i = cuda.grid(1)
    if i < x.size:
        sin[i] = math.sin(x[i])
        sqrt[i] = math.sqrt(x[i])
        floor[i] = math.floor(x[i])
        rcp[i] = cuda.fp16.hrcp(x[i])
        ceil_h[i] = cuda.fp16.hceil(x[i])


def test_math_on_halves_is_the_float64_result_rounded_once():
    """math.sin/sqrt/floor of a half are halves (numba-cuda's typing) equal to the float64
    result rounded to half; hrcp and hceil likewise."""
    x = np.abs(random_halves(1000, 9))
    outs = [np.zeros_like(x) for _ in range(5)]
    launch(_math, x.size, x, *outs)
    wide = x.astype(np.float64)
    with np.errstate(all="ignore"):
        refs = (np.sin(wide), np.sqrt(wide), np.floor(wide), 1.0 / wide, np.ceil(wide))
        for got, want in zip(outs, refs):
            assert_same_bits(got, want.astype(np.float16))


@cube.kernel
def _mixed(h, f, i8, i64, with_f32, with_i8, with_i64):
    i = cuda.grid(1)
    if i < h.size:
        with_f32[i] = h[i] + f[i]
        with_i8[i] = h[i] * i8[i]
        with_i64[i] = h[i] * i64[i]


def test_mixed_operands_promote_as_numba_cuda_and_numpy_do():
    """A half with a float32 is a float32 operation, with an int8 a half operation (int8 converts
    to half safely), with an int64 a float64 one: numba-cuda's rules, which NumPy's promotion
    agrees with (results stored as float64 to see the precision they were computed in)."""
    rng = np.random.default_rng(11)
    h = rng.uniform(-100, 100, 500).astype(np.float16)
    f = rng.uniform(-100, 100, 500).astype(np.float32) / np.float32(3)
    i8 = rng.integers(-128, 127, 500, dtype=np.int8)
    i64 = rng.integers(-10**6, 10**6, 500, dtype=np.int64)
    outs = [np.zeros(500) for _ in range(3)]
    launch(_mixed, 500, h, f, i8, i64, *outs)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(outs[0], (h + f).astype(np.float64))
        np.testing.assert_array_equal(outs[1], (h * i8).astype(np.float64))
        np.testing.assert_array_equal(outs[2], (h * i64).astype(np.float64))
    assert (h * i8).dtype == np.float16 and (h + f).dtype == np.float32
