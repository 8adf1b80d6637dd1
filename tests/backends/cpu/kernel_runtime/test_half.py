"""The CPU backend's half type (``backends/cpu/kernel_runtime/half.py``): float16 arrays and scalars
reach kernels as NumPy's float16 bits, conversions to half round to nearest even as NumPy's do, and
``np.float16`` named in a kernel is the same type; a frozen float16 value, which would be Numba's
own float16, is a CompileError, never a silent result."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from halves import assert_same_bits, launch, random_halves


@cube.kernel
def _store(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]


def test_float64_to_half_rounds_to_nearest_even():
    """Storing float64 values into a float16 array rounds as NumPy's float16 conversion does
    (ties to even, subnormals, overflow to inf, NaN)."""
    rng = np.random.default_rng(6)
    halves = np.sort(random_halves(1000, 7).astype(np.float64))
    halves = halves[np.isfinite(halves)]
    ties = (halves[:-1] + halves[1:]) / 2                  # exact midpoints of neighbours
    x = np.concatenate([rng.standard_normal(3000) * 10.0 ** rng.integers(-9, 6, 3000),
                        ties, [65519.0, 65520.0, 2.0 ** -25, 3 * 2.0 ** -26, 1e300, -1e-300]])
    out = np.zeros(x.size, np.float16)
    launch(_store, x.size, x, out)
    with np.errstate(all="ignore"):
        assert_same_bits(out, x.astype(np.float16))


@cube.kernel
def _scalar(out, h):
    out[0] = h * h


def test_float16_scalar_argument_stays_half():
    """An np.float16 scalar argument is a half in the kernel: h * h rounds to half."""
    out = np.zeros(1, np.float16)
    h = np.float16(1.001)
    with cube.client("cpu"):
        _scalar[1, 1](out, h)
    assert_same_bits(out, [h * h])


@cube.kernel
def _conversions(x, out, zeros_size):
    h = np.float16(x[0])
    out[0] = h + np.float16(x[1])
    z = np.zeros(3, np.float16)
    zeros_size[0] = z.size
    out[1] = z[0] + h


def test_np_float16_in_a_kernel_is_the_half_type():
    """np.float16(x) in a kernel converts to half (round to nearest even) and gives a half
    (the sum rounds to half); np.zeros(n, np.float16) holds halves."""
    x = np.array([1.0009765625 + 2.0 ** -12, 2049.0])      # a tie below, an odd integer
    out, zeros_size = np.zeros(2, np.float16), np.zeros(1, np.int64)
    with cube.client("cpu"):
        _conversions[1, 1](x, out, zeros_size)
    h = np.float16(x[0])
    assert_same_bits(out, [h + np.float16(x[1]), h])
    assert zeros_size[0] == 3


@cube.kernel
def _float16_constant(out):
    out[0] = FLOAT16_CONSTANT


FLOAT16_CONSTANT = np.float16(1.5)


def test_float16_scalar_constant_is_refused():
    """A global np.float16 scalar is frozen as Numba's own float16, which does not compile on
    the CPU: CompileError at the launch, never a silent result."""
    with pytest.raises(cube.CompileError), cube.client("cpu"):
        _float16_constant[1, 1](np.zeros(1, np.float16))
