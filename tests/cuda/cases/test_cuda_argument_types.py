"""Every argument type numba.cuda takes, on the CUDA backend: tuples, namedtuples, records, enum
members, dates (``runtime/launch/composite.py``, packed by ``backends/cuda/launch/packed_launch.py``).

Each result is checked against NumPy (or the kernel's own Python function run on NumPy data).
Under the fake driver the parameters cross a real parameter block (flattened as numba-cuda's
``_prepare_args`` flattens them) and are decoded back from it; ``test_flattening_matches_numba``
compares the flattening with numba-cuda's own where numba-cuda's dispatcher is importable.
"""

from __future__ import annotations

import collections
import enum

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

from _cuda_setup import DEVICE, KIND

Pair = collections.namedtuple("Pair", "scale offset")


class Color(enum.Enum):
    red = 1
    green = 2


class Shape(enum.IntEnum):
    circle = 3
    square = 4


RECORD = np.dtype([("a", np.float64), ("b", np.int32), ("h", np.float32, (2,))], align=True)
PACKED = np.dtype([("a", np.int8), ("b", np.float64)], align=False)


@cube.kernel
def tuple_axpy(t, out):
    # t = (x, (a, b)): out = a * x + b
    i = cuda.grid(1)
    if i < out.size:
        out[i] = t[1][0] * t[0][i] + t[1][1]


@cube.kernel
def namedtuple_scale(p, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * p.scale + p.offset


@cube.kernel
def write_through_tuple(t, n):
    i = cuda.grid(1)
    if i < n:
        t[0][i] = t[1][i] * 2


@cube.kernel
def tuple_length(t, out):
    out[0] = len(t)


@cube.kernel
def record_update(r, v):
    r.a = v
    r.b = 7
    r.h[1] = 2.5


@cube.kernel
def record_read(r, out):
    out[0] = r.a + r.b + r.h[0]


@cube.kernel
def enum_compare(c, s, out):
    out[0] = c == Color.green
    out[1] = s == Shape.square


@cube.kernel
def date_store(d, delta, out):
    out[0] = d + delta


@cube.kernel
def struct_array(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i].a + a[i].b


def test_tuple_of_handle_and_nested_scalars(client):
    """A tuple holding a handle and a nested tuple of numbers computes a * x + b, as NumPy."""
    x = np.linspace(0, 1, 40)
    out = client.empty(40, np.float64)
    client.launch(tuple_axpy, 2, 32, (client.create(x), (2.5, -1.0)), out)
    np.testing.assert_allclose(client.read(out), 2.5 * x - 1.0)


def test_tuple_scalars_change_between_launches(client):
    """The numbers inside a tuple are this launch's, not the first launch's (the bound launch is
    reused, its numbers are packed per launch)."""
    x = np.arange(32.0)
    hx = client.create(x)
    out = client.empty(32, np.float64)
    for a in (1.0, 3.0, -2.0):
        client.launch(tuple_axpy, 1, 32, (hx, (a, 0.5)), out)
        np.testing.assert_allclose(client.read(out), a * x + 0.5)


def test_namedtuple_argument(client):
    """A namedtuple is passed with its fields (p.scale, p.offset) as numba.cuda passes it."""
    x = np.arange(32.0)
    out = client.empty(32, np.float64)
    client.launch(namedtuple_scale, 1, 32, Pair(np.float32(0.5), 4), client.create(x), out)
    np.testing.assert_allclose(client.read(out), x * np.float32(0.5) + 4)


def test_write_through_tuple_is_seen_by_the_reader(client):
    """A write through ``t[0][i]`` makes the array in the tuple part of the write set: the read
    waits for it and sees the kernel's values, and an eager launch copies it back."""
    src = np.arange(32, dtype=np.int64)
    dst = client.empty(32, np.int64)
    client.launch(write_through_tuple, 1, 32, (dst, client.create(src)), 32)
    np.testing.assert_array_equal(client.read(dst), src * 2)
    host = np.zeros(32, np.int64)
    with client:
        write_through_tuple[1, 32]((host, src), 32)
    np.testing.assert_array_equal(host, src * 2)


def test_empty_tuple_and_len(client):
    """``len(())`` is 0 and ``len`` of a three-item tuple 3 in the kernel."""
    out = client.empty(1, np.int64)
    client.launch(tuple_length, 1, 1, (), out)
    assert client.read(out)[0] == 0
    client.launch(tuple_length, 1, 1, (1, 2.0, 3), out)
    assert client.read(out)[0] == 3


def test_record_written_in_kernel_is_copied_back_into_the_callers_record():
    """``kernel[1, 1](arr[0], v)``: the record is passed by reference and copied back, so the
    caller's array holds the kernel's writes (numba-cuda's wrap_arg)."""
    arr = np.zeros(2, RECORD)
    expected = arr.copy()
    expected[0]["a"], expected[0]["b"], expected[0]["h"][1] = 1.5, 7, 2.5
    with cube.client(f"{DEVICE}:0"):
        record_update[1, 1](arr[0], 1.5)
    np.testing.assert_array_equal(arr, expected)


def test_record_read_in_kernel():
    """Fields of a record argument, an array field included, are read as NumPy holds them."""
    rec = np.zeros(1, RECORD)[0]
    rec["a"], rec["b"], rec["h"] = 0.25, 3, (1.5, 9.0)
    out = np.zeros(1)
    with cube.client(f"{DEVICE}:0"):
        record_read[1, 1](rec, out)
    assert out[0] == 0.25 + 3 + 1.5


def test_enum_members(client):
    """An Enum and an IntEnum member compare in the kernel as in Python."""
    out = client.empty(2, np.bool_)
    client.launch(enum_compare, 1, 1, Color.green, Shape.circle, out)
    np.testing.assert_array_equal(client.read(out), [True, False])
    client.launch(enum_compare, 1, 1, Color.red, Shape.square, out)
    np.testing.assert_array_equal(client.read(out), [False, True])


def test_datetime_and_timedelta(client):
    """A datetime64 plus a timedelta64 is NumPy's sum, in NumPy's unit."""
    d, delta = np.datetime64("2014-01-01"), np.timedelta64(40, "D")
    out = client.empty(1, "datetime64[D]")
    client.launch(date_store, 1, 1, d, delta, out)
    assert client.read(out)[0] == d + delta


@pytest.mark.parametrize("dtype", [RECORD, PACKED], ids=["aligned", "packed"])
def test_structured_array_is_a_buffer(client, dtype):
    """An array of a structured dtype (aligned or packed) is a buffer like any other. On a GPU
    numba-cuda refuses to load a misaligned field of a packed record (its strict alignment):
    that refusal is the launch's compile failure, numba's error class included."""
    a = np.zeros(32, dtype)
    a["a"] = np.arange(32) % 7
    a["b"] = np.arange(32)
    out = client.empty(32, np.float64)
    client.launch(struct_array, 1, 32, client.create(a), out)
    if KIND == "gpu" and dtype is PACKED:
        from numba.core.errors import NumbaError

        with pytest.raises(NumbaError, match="is not aligned"):
            client.read(out)
        return
    np.testing.assert_allclose(client.read(out), a["a"] + a["b"])


def test_tuple_is_flattened_into_separate_parameters():
    """A tuple (array, (float64, int64)) is laid out as numba-cuda passes it: the array's
    5 + 2 * ndim parameters, then one parameter per number, nine in all."""
    from numba_cube.backends.cuda.kernels.compiler import arg_kinds
    from numba_cube.backends.cuda.launch.packed_launch import ArgLayout
    from numba_cube.runtime.launch.composite import TupleArg
    from numba_cube.runtime.memory.handle import Binding

    b = Binding(1, 0, (4,), np.dtype(np.float64))
    kinds = arg_kinds((TupleArg((b, TupleArg((np.float64(1.0), np.int64(2)), None)), None),))
    assert kinds == (("array", 1, 8), ("scalar", np.dtype(np.float64)), ("scalar", np.dtype(np.int64)))
    assert ArgLayout(kinds).nparams == 9


def test_flattening_matches_numba():
    """The scalar leaves of a tuple, an enum member and a date are the parameters numba-cuda's own
    ``_prepare_args`` makes, in its order and with its values."""
    try:
        from numba.cuda.dispatcher import _Kernel
    except ImportError:
        pytest.skip("numba-cuda's dispatcher is not importable here (the simulator replaces it)")
    import ctypes

    import numba

    from numba_cube.backends.cuda.launch.packed_launch import flat_leaves
    from numba_cube.runtime.launch.composite import TupleArg, TypedScalar

    class NoExtensions:
        extensions = ()
        _prepare_args = _Kernel._prepare_args

    values = [((np.int32(3), (2.5, np.int8(-1))), TupleArg((np.int32(3), TupleArg(
                   (np.float64(2.5), np.int8(-1)), None)), None)),
              (Shape.square, TypedScalar(Shape.square)),
              (np.datetime64(5, "D"), TypedScalar(np.datetime64(5, "D")))]
    for value, bound in values:
        params: list = []
        _Kernel._prepare_args(NoExtensions(), numba.typeof(value), value, 0, [], params)
        theirs = [p.value if isinstance(p, ctypes._SimpleCData) else p for p in params]
        ours = [v.item() for v in flat_leaves((bound,))]
        assert ours == theirs


@cube.kernel
def record_in_tuple(t, v):
    t[0].a = v
    t[1][0] = t[0].b


@pytest.mark.skipif(KIND == "sim", reason="numba-cuda's simulator gives attribute access only to "
                    "a top-level record (its reference fails the same way)")
def test_record_inside_a_tuple_is_a_device_pointer():
    """A record inside a tuple is a pointer to its device copy, copied back (numba-cuda's
    _prepare_args recurses into tuples): the write reaches the caller's array."""
    arr = np.zeros(2, RECORD)
    arr[0]["b"] = 5
    out = np.zeros(1, np.int64)
    with cube.client(f"{DEVICE}:0"):
        record_in_tuple[1, 1]((arr[0], out), 2.5)
    assert arr[0]["a"] == 2.5 and arr[0]["b"] == 5 and out[0] == 5
    assert arr[1]["a"] == 0 and arr[1]["b"] == 0
