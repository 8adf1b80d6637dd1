"""numba.cuda's bit intrinsics on the CPU backend give numba-cuda's answers, at the argument's
own width, against a pure-Python reference over each integer type (zero, all ones, the extremes
and random values); arguments of types numba-cuda does not lower are a CompileError."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _values(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    fixed = [0, 1, -1, info.min, info.max, 2, 0x55] if info.min < 0 else [0, 1, info.max, 2, 0x55]
    rand = rng.integers(info.min, info.max, size=40, dtype=dtype, endpoint=True)
    return np.concatenate([np.array(fixed, dtype=dtype), rand])


def _bits(v, width) -> int:
    """The value's two's-complement bit pattern as a non-negative Python int."""
    return int(v) & ((1 << width) - 1)


def _run(kernel, x, out_dtype):
    out = np.zeros(x.size, out_dtype)
    with cube.client("cpu"):
        kernel[(x.size + 63) // 64, 64](x, out)
    return out


@cube.kernel
def _popc(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = cuda.popc(x[i])


@cube.kernel
def _clz(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = cuda.clz(x[i])


@cube.kernel
def _ffs(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = cuda.ffs(x[i])


@cube.kernel
def _brev(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = cuda.brev(x[i])


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_popc_and_clz_at_the_arguments_width(dtype):
    """popc counts set bits and clz leading zeros of the value's own width (clz(0) = width)."""
    x = _values(dtype)
    width = np.dtype(dtype).itemsize * 8
    popc = _run(_popc, x, np.int64)
    clz = _run(_clz, x, np.int64)
    assert popc.tolist() == [bin(_bits(v, width)).count("1") for v in x]
    assert clz.tolist() == [width - _bits(v, width).bit_length() for v in x]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_ffs_is_one_based_and_zero_for_zero(dtype):
    """ffs: the 1-based position of the lowest set bit, 0 for 0."""
    x = _values(dtype)
    width = np.dtype(dtype).itemsize * 8
    got = _run(_ffs, x, np.int64)
    assert got.tolist() == [(_bits(v, width) & -_bits(v, width)).bit_length() for v in x]


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_brev_reverses_the_bits(dtype):
    """brev reverses the bits of a uint32 / uint64."""
    x = _values(dtype)
    width = np.dtype(dtype).itemsize * 8
    got = _run(_brev, x, dtype)
    expected = [int(format(_bits(v, width), f"0{width}b")[::-1], 2) for v in x]
    assert got.tolist() == expected


def test_brev_of_a_signed_integer_is_refused():
    """numba-cuda declares brev for uint32/uint64 only: a signed argument is a CompileError, not
    a guess at numba's conversion."""
    with pytest.raises(cube.LaunchFailure) as info:
        _run(_brev, np.arange(4, dtype=np.int32), np.int32)
    assert isinstance(info.value.root, cube.CompileError)


@cube.kernel
def _bit_count(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i].bit_count()


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_bit_count_method_is_popc(dtype):
    """``x.bit_count()`` on an integer is numba-cuda's overload, ``cuda.popc(x)``: the set bits of
    the value's two's-complement pattern at its own width (so -1 of int8 has 8, not Python's 1)."""
    x = _values(dtype)
    width = np.dtype(dtype).itemsize * 8
    got = _run(_bit_count, x, np.int64)
    assert got.tolist() == [bin(_bits(v, width)).count("1") for v in x]


@cube.kernel
def _float_bit_count(x, out):
    out[0] = x[0].bit_count()


def test_bit_count_of_a_float_is_refused():
    """A float has no bit_count (in numba-cuda either): CompileError."""
    with pytest.raises(cube.LaunchFailure) as info:
        _run(_float_bit_count, np.ones(1), np.int64)
    assert isinstance(info.value.root, cube.CompileError)
