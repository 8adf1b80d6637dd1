"""Scalar launch arguments are typed as numba.cuda types them (runtime/launch/arguments.py), on the CPU
backend with real Numba compiles, checked against NumPy's arithmetic in the same types."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


@cube.kernel
def scale(x, s, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * s


@cube.kernel
def invert(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ~a


@cube.kernel
def negate(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = -a


@pytest.fixture
def client():
    return cube.client("cpu")


def _run(client, kernel, scalar, out_dtype, *, first=None, n=64):
    out = client.empty(n, out_dtype)
    args = (scalar, out) if first is None else (client.create(first), scalar, out)
    client.launch(kernel, 1, n, *args)
    return client.read(out)


def test_float32_scalar_keeps_float32_arithmetic(client):
    """x * np.float32(1/3) with x float32, stored into a float64 array, is NumPy's float32
    product (not the float64 one, which differs from it for these x)."""
    x = np.linspace(0.1, 7.3, 64, dtype=np.float32)
    s = np.float32(1 / 3)
    got = _run(client, scale, s, np.float64, first=x)
    float32_product = (x * s).astype(np.float64)
    float64_product = x.astype(np.float64) * np.float64(s)
    assert not np.array_equal(float32_product, float64_product)   # the test can tell them apart
    np.testing.assert_array_equal(got, float32_product)


def test_python_float_is_float64(client):
    """A Python float is float64 (numba.typeof(2.5)): the float64 product of the same x."""
    x = np.linspace(0.1, 7.3, 64, dtype=np.float32)
    got = _run(client, scale, 1 / 3, np.float64, first=x)
    np.testing.assert_array_equal(got, x.astype(np.float64) * (1 / 3))


@pytest.mark.parametrize("kernel, scalar, out_dtype", [
    (invert, np.uint8(200), np.int64),      # uint8 ~200 is 55; int64 ~200 would be -201
    (negate, np.int8(-128), np.int64),      # int8 -(-128) wraps to -128; int64 would be 128
    (negate, np.uint16(1), np.int64),       # uint16 -1 is 65535
    (invert, np.int32(-5), np.int64),
    (invert, np.ulonglong(200), np.uint64),  # not np.uint64, but a uint64 all the same
    (invert, 200, np.int64),                # a Python int is int64: -201
    (invert, 2**63, np.uint64),             # beyond int64: uint64, as numba.typeof(2**63)
    (invert, 2**64 - 1, np.uint64),
    (negate, -2**63, np.int64),             # the most negative int64 wraps to itself
], ids=["uint8", "int8", "uint16", "int32", "ulonglong", "int", "int-2**63", "int-2**64-1",
                        "int-min"])
def test_integer_scalars_keep_their_type(client, kernel, scalar, out_dtype):
    """An integer scalar is computed with in its own type: NumPy scalars keep their dtype, a
    Python int is what numba.typeof gives it (int64, or uint64 from 2**63 to 2**64 - 1)."""
    typed = np.asarray(scalar)[()]          # NumPy types a Python int the same way
    with np.errstate(over="ignore"):        # int8 -(-128) wraps, as in the kernel
        ref = (~typed) if kernel is invert else (-typed)
    got = _run(client, kernel, scalar, out_dtype, n=8)
    np.testing.assert_array_equal(got, np.full(8, ref, dtype=out_dtype))


@pytest.mark.parametrize("value", [2**64, -2**63 - 1, 10**30], ids=["2**64", "-2**63-1", "10**30"])
def test_int_beyond_every_integer_type_is_a_launch_argument_error(client, value):
    """A Python int no kernel integer type holds is LaunchArgumentError (a TypeError) naming the
    argument, on the issuing thread; nothing reaches the device, which keeps working."""
    out = client.empty(8, np.int64)
    with pytest.raises(cube.LaunchArgumentError, match="'a'"):
        client.launch(invert, 1, 8, value, out)
    client.sync()
    client.launch(invert, 1, 8, 1, out)
    np.testing.assert_array_equal(client.read(out), np.full(8, ~1))


# (datetime64 and timedelta64 are kernel argument types, as numba types them:
# tests/runtime/launch/test_arguments.py)
@pytest.mark.parametrize("value", [np.str_("a"), np.void(b"ab"), np.longdouble(1.5)],
                         ids=["str_", "void", "longdouble"])
def test_numpy_scalar_without_a_kernel_type_is_refused(client, value):
    """A NumPy scalar that is not a bool, integer, float or complex is LaunchArgumentError naming
    the argument (it would otherwise reach the compile stage on the device thread)."""
    out = client.empty(8, np.int64)
    with pytest.raises(cube.LaunchArgumentError, match="'a'"):
        client.launch(invert, 1, 8, value, out)
    client.sync()
