"""Helpers shared by the float16 tests (test_half, test_fp16, test_fp16_functions): random
halves over the whole range, bitwise comparison, and a one-line launch."""

from __future__ import annotations

import numpy as np

import numba_cube as cube


def random_halves(n, seed):
    """Random halves over the whole range (normal, subnormal, zero, inf, NaN), from random bits."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
    fixed = np.array([0.0, -0.0, 1.0, -1.0, 65504.0, 6e-8, np.inf, -np.inf, np.nan], np.float16)
    return np.concatenate([fixed, bits.view(np.float16)])


def assert_same_bits(got, want):
    """Equal as float16 bit patterns, any NaN matching any NaN."""
    got, want = np.asarray(got, np.float16), np.asarray(want, np.float16)
    nan = np.isnan(got) & np.isnan(want)
    mismatch = (got.view(np.uint16) != want.view(np.uint16)) & ~nan
    assert not mismatch.any(), list(zip(got[mismatch][:5], want[mismatch][:5]))


def launch(kernel, n, *args):
    """``kernel`` over ``n`` units (cubes of 64) on the CPU backend, numba-style."""
    with cube.client("cpu"):
        kernel[(n + 63) // 64, 64](*args)
