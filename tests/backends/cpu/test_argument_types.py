"""Every argument type numba.cuda takes, on the CPU backend, with numba.cuda's semantics: tuples
and namedtuples (of numbers, arrays, nested tuples, empty), records passed by reference and
copied back, arrays of structured dtypes, enum members, datetime64/timedelta64.

References are NumPy, or the kernel's own Python function run on NumPy data (as numba-cuda's
tests do: ``pyfunc(expected[0], src)``), never numba_cube itself.
"""

from __future__ import annotations

import collections
import enum

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

Coeffs = collections.namedtuple("Coeffs", "a b")

NESTED = np.dtype([("g", np.int32), ("h", np.float32, (2,))], align=True)
NESTED_2D = np.dtype([("i", np.int32), ("j", np.float32, (2, 2))], align=False)
ALIGNED = np.dtype([("a", np.int8), ("b", np.float64), ("c", np.complex64)], align=True)
PACKED = np.dtype([("a", np.int8), ("b", np.float64), ("c", np.complex64)], align=False)


class Mode(enum.Enum):
    add = 1
    sub = 2


class Bits(enum.IntEnum):
    one = 1
    three = 3


@pytest.fixture
def client():
    return cube.client("cpu")


def linear(t, out):
    # t = (x, Coeffs(a, b)) or (x, (a, b))
    i = cuda.grid(1)
    if i < out.size:
        out[i] = t[1][0] * t[0][i] + t[1][1]


def tuple_of_arrays_sum(arrays, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = arrays[0][i] + arrays[1][i] + arrays[2][i]


def split_write(t, n):
    i = cuda.grid(1)
    if i < n:
        t[0][i] = t[1][i] * 3
        t[2][0][i] = -t[1][i]


def shape_reshape(shape, a, out):
    b = a.reshape(shape)
    out[0] = b[1, 0]


def record_write(r):
    r.g = 2
    r.h[0] = 3.0
    r.h[1] = 4.0


def record_write_2d(r):
    r.i = 3
    r.j[0, 0] = 5.0
    r.j[1, 1] = 8.0


def assign_nested(r, src):
    r["h"] = src


def record_fields(r, out):
    out[0] = r.g + r.h[0] * r.h[1]


def struct_fields(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i].a + a[i].b + a[i].c.real


def enum_select(mode, bits, x, out):
    i = cuda.grid(1)
    if i < out.size:
        if mode == Mode.add:
            out[i] = x[i] + bits
        else:
            out[i] = x[i] - bits


def date_shift(d, delta, out):
    out[0] = d + delta
    out[1] = d - delta


def _numpy_linear(x, a, b):
    return a * x + b


@pytest.mark.parametrize("coeffs", [(2.0, -1.0), Coeffs(2.0, -1.0), Coeffs(np.float32(0.5), 3)],
                         ids=["tuple", "namedtuple", "namedtuple-mixed"])
def test_tuple_with_array_and_coefficients(coeffs):
    """``kernel[grid, block]((x, (a, b)), out)`` computes a * x + b with the tuple's types."""
    x = np.linspace(-1, 1, 100)
    out = np.zeros(100)
    with cube.client("cpu"):
        cube.kernel(linear)[4, 32]((x, coeffs), out)
    np.testing.assert_array_equal(out, _numpy_linear(x, coeffs[0], coeffs[1]))


def test_tuple_of_arrays(client):
    """A tuple of three handles is three buffers read by the kernel."""
    xs = [np.arange(50.0) * k for k in (1, 2, 3)]
    out = client.empty(50)
    client.launch(cube.kernel(tuple_of_arrays_sum), 2, 32, tuple(client.create(x) for x in xs), out)
    np.testing.assert_array_equal(client.read(out), xs[0] + xs[1] + xs[2])


def test_host_arrays_in_tuples_are_copied_back(client):
    """Host arrays written through a tuple (also a nested one) are copied back into the caller's
    arrays, as top-level ones are; the read-only one keeps its values."""
    src = np.arange(40, dtype=np.int64)
    a, b = np.zeros(40, np.int64), np.zeros(40, np.int64)
    with client:
        cube.kernel(split_write)[2, 32]((a, src, (b,)), 40)
    np.testing.assert_array_equal(a, src * 3)
    np.testing.assert_array_equal(b, -src)
    np.testing.assert_array_equal(src, np.arange(40))


def test_shape_tuple_argument(client):
    """A shape tuple of ints is a UniTuple(int64) the kernel reshapes with (test_array_reshape)."""
    a = np.arange(6.0)
    out = np.zeros(1)
    with client:
        cube.kernel(shape_reshape)[1, 1]((3, 2), a, out)
    assert out[0] == a.reshape((3, 2))[1, 0]


def test_record_written_in_kernel_reaches_the_callers_array(client):
    """A record taken as ``arr[0]`` is passed by reference and copied back: the caller's array
    holds the kernel's writes (a scalar field and an array field), the other record is intact."""
    got = np.zeros(2, NESTED)
    expected = np.zeros(2, NESTED)
    expected[0]["g"], expected[0]["h"] = 2, (3.0, 4.0)
    with client:
        cube.kernel(record_write)[1, 1](got[0])
    np.testing.assert_array_equal(got, expected)


def test_record_with_a_2d_field_of_a_packed_dtype(client):
    """The same through a packed dtype with a 2-D array field."""
    got = np.ones(2, NESTED_2D)
    expected = np.ones(2, NESTED_2D)
    expected[1]["i"] = 3
    expected[1]["j"][0, 0], expected[1]["j"][1, 1] = 5.0, 8.0
    with client:
        cube.kernel(record_write_2d)[1, 1](got[1])
    np.testing.assert_array_equal(got, expected)


def test_array_assigned_to_a_nested_field(client):
    """``r["h"] = src`` writes the record's array field (test_assign_array_to_nested); the
    Python function on the NumPy record is the reference."""
    src = np.array([7.5, -1.0], np.float32)
    got = np.zeros(2, NESTED)
    expected = np.zeros(2, NESTED)
    with client:
        cube.kernel(assign_nested)[1, 1](got[1], src)
    assign_nested(expected[1], src)
    np.testing.assert_array_equal(got, expected)


def test_record_fields_are_read(client):
    """Fields of a record copy (``arr.copy()[0]``, a record owning its bytes) read as NumPy's."""
    rec = np.zeros(1, NESTED).copy()[0]
    rec["g"], rec["h"] = 5, (1.5, 4.0)
    out = np.zeros(1)
    with client:
        cube.kernel(record_fields)[1, 1](rec, out)
    assert out[0] == 5 + np.float32(1.5) * np.float32(4.0)


def test_recarray_record(client):
    """A record of a recarray (``np.record``) is passed by reference like an ``np.void``."""
    got = np.zeros(2, NESTED).view(np.recarray)
    expected = np.zeros(2, NESTED).view(np.recarray)
    with client:
        cube.kernel(record_write)[1, 1](got[0])
    record_write(expected[0])           # a recarray's record has attribute access in Python too
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", [ALIGNED, PACKED], ids=["aligned", "packed"])
def test_structured_arrays_are_buffers(client, dtype):
    """Arrays of a structured dtype, aligned or packed, are handles and host arrays like others."""
    a = np.zeros(64, dtype)
    a["a"], a["b"], a["c"] = np.arange(64) % 5, np.linspace(0, 1, 64), np.arange(64) * (1 + 2j)
    expected = a["a"] + a["b"] + a["c"].real
    out = client.empty(64)
    client.launch(cube.kernel(struct_fields), 2, 32, client.create(a), out)
    np.testing.assert_allclose(client.read(out), expected)
    host_out = np.zeros(64)
    with client:
        cube.kernel(struct_fields)[2, 32](a, host_out)
    np.testing.assert_allclose(host_out, expected)


@pytest.mark.parametrize("mode, bits", [(Mode.add, Bits.one), (Mode.sub, Bits.three)])
def test_enum_members(client, mode, bits):
    """An Enum member compares with the enum's members, an IntEnum member is an integer."""
    x = np.arange(32, dtype=np.int64)
    out = client.empty(32, np.int64)
    client.launch(cube.kernel(enum_select), 1, 32, mode, bits, client.create(x), out)
    expected = x + int(bits) if mode is Mode.add else x - int(bits)
    np.testing.assert_array_equal(client.read(out), expected)


@pytest.mark.parametrize("unit", ["D", "s", "ns"])
def test_datetime_and_timedelta(client, unit):
    """d + delta and d - delta are NumPy's, in the argument's unit."""
    d, delta = np.datetime64(1_000_000, unit), np.timedelta64(12, unit)
    out = client.empty(2, f"datetime64[{unit}]")
    client.launch(cube.kernel(date_shift), 1, 1, d, delta, out)
    np.testing.assert_array_equal(client.read(out), np.array([d + delta, d - delta]))


def record_in_tuple(t, v):
    t[0].a = v
    t[1][0] = t[0].b


def test_record_inside_a_tuple_is_passed_by_reference(client):
    """A record inside a tuple is passed by reference too (numba-cuda's _prepare_args recurses
    into tuples): its write reaches the caller's array, its field is read."""
    dtype = np.dtype([("a", np.float64), ("b", np.int32)], align=True)
    arr = np.zeros(2, dtype)
    arr[0]["b"] = 5
    out = np.zeros(1, np.int64)
    with client:
        cube.kernel(record_in_tuple)[1, 1]((arr[0], out), 2.5)
    expected = np.zeros(2, dtype)
    expected[0] = (2.5, 5)
    np.testing.assert_array_equal(arr, expected)
    assert out[0] == 5
