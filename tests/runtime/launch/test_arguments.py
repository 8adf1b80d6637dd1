"""How launch arguments are bound (runtime/launch/arguments.py, runtime/launch/composite.py): tuples,
namedtuples, records, enum members and dates are kernel arguments, as numba.cuda types them;
the buffers inside tuples are buffers like any other (dependencies, failures); what no kernel
type holds is a ``LaunchArgumentError`` naming the argument.

Binding is checked against numba's own ``typeof`` of the same value; behaviour on the CPU backend
against NumPy, with real compiles and the real stream workers.
"""

from __future__ import annotations

import collections
import enum

import numba
import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.runtime.launch.arguments import bind_arguments
from numba_cube.runtime.launch.composite import RecordRef, TupleArg, TypedScalar

Point = collections.namedtuple("Point", "x y")


class Color(enum.Enum):
    red = 1
    blue = 2


class Level(enum.IntEnum):
    low = 1
    high = 2


class NotANamedTuple(tuple):
    pass


@pytest.fixture
def client():
    return cube.client("cpu")


def _bind(client, kernel, *args):
    return bind_arguments(client.server, client.binding_of, kernel, args)


@cube.kernel
def one(t, out):
    out[0] = 0


@cube.kernel
def scaled_copy(t, out):
    # t = (x, s): out = x * s
    i = cuda.grid(1)
    if i < out.size:
        out[i] = t[0][i] * t[1]


@cube.kernel
def write_first(t, n):
    i = cuda.grid(1)
    if i < n:
        t[0][i] = t[1][i] + 1


@cube.kernel
def add_one(src, dst):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i] + 1


@cube.kernel
def date_plus(d, delta, out):
    out[0] = d + delta


def test_tuple_binds_its_items_as_numba_types_the_tuple(client):
    """A tuple of a handle, numbers and a nested tuple becomes a TupleArg of a binding and NumPy
    scalars, whose Numba type is numba.typeof's of the same tuple with an array in the handle's
    place."""
    h = client.empty(4, np.float32)
    (bound, _) = _bind(client, one, (h, 2, (1.5, True)), client.empty(1))
    assert type(bound) is TupleArg and bound.items[0] == h.binding()
    reference = numba.typeof((np.zeros(4, np.float32), 2, (1.5, True)))
    assert bound.numba_type() == reference


def test_namedtuple_keeps_its_class(client):
    """A namedtuple is typed as numba types it (NamedUniTuple of its class), not as a tuple."""
    (bound, _) = _bind(client, one, Point(1.0, 2.0), client.empty(1))
    assert bound.numba_type() == numba.typeof(Point(1.0, 2.0))
    assert bound.materialize(lambda b: None) == Point(1.0, 2.0)


def test_empty_tuple(client):
    """The empty tuple is an argument (numba: Tuple())."""
    (bound, _) = _bind(client, one, (), client.empty(1))
    assert bound.numba_type() == numba.typeof(()) and bound.bindings() == ()


def test_enum_members_are_typed_by_numba(client):
    """An Enum member is an EnumMember, an IntEnum member an IntEnumMember (not an int64)."""
    (red, _) = _bind(client, one, Color.red, client.empty(1))
    (low, _) = _bind(client, one, Level.low, client.empty(1))
    assert type(red) is TypedScalar and red.numba_type() == numba.typeof(Color.red)
    assert low.numba_type() == numba.typeof(Level.low)


def test_dates_are_typed_by_their_unit(client):
    """datetime64/timedelta64 keep their unit: two units are two types, two signature keys."""
    (day, _) = _bind(client, one, np.datetime64(3, "D"), client.empty(1))
    (sec, _) = _bind(client, one, np.datetime64(3, "s"), client.empty(1))
    assert day.numba_type() == numba.typeof(np.datetime64(3, "D"))
    assert day.key != sec.key


def test_tuple_key_covers_element_types_not_values(client):
    """Two tuples of the same types share a signature key; other element types do not."""
    h = client.empty(4)
    (a, _) = _bind(client, one, (h, 1.0), client.empty(1))
    (b, _) = _bind(client, one, (h, 2.0), client.empty(1))
    (c, _) = _bind(client, one, (h, np.float32(2.0)), client.empty(1))
    assert a.key == b.key and a.key != c.key and a.type_key != c.type_key


@pytest.mark.parametrize("value, where", [
    ((1, np.zeros(3)), r"'t\[1\]'"),
    (([1, 2],), r"'t\[0\]'"),
    ((1, "x"), r"'t\[1\]'"),
])
def test_unsupported_item_of_a_tuple_is_refused_by_name(client, value, where):
    """A host array, a list or a string inside a tuple: LaunchArgumentError naming the item."""
    with pytest.raises(cube.LaunchArgumentError, match=where):
        client.launch(one, 1, 1, value, client.empty(1))


def test_tuple_subclass_that_is_no_namedtuple_is_refused(client):
    """numba cannot type a plain tuple subclass: refused at the call, not at compile time."""
    with pytest.raises(cube.LaunchArgumentError, match="not a namedtuple"):
        client.launch(one, 1, 1, NotANamedTuple((1, 2)), client.empty(1))


def test_record_to_client_launch_is_refused_naming_the_eager_launch(client):
    """A NumPy record passed to client.launch: refused (numba.cuda copies a record back into the
    caller's after the launch, which an asynchronous launch cannot), pointing to kernel[...]."""
    rec = np.zeros(1, [("a", np.float64)])[0]
    with pytest.raises(cube.LaunchArgumentError, match=r"record .*kernel\[count, dim\]"):
        client.launch(one, 1, 1, rec, client.empty(1))


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}, "text", None])
def test_other_types_are_refused_by_name(client, value):
    """A list, dict, str or None is no kernel argument type: LaunchArgumentError naming 't'."""
    with pytest.raises(cube.LaunchArgumentError, match="'t'"):
        client.launch(one, 1, 1, value, client.empty(1))
    client.sync()


def test_record_argument_binds_by_reference(client):
    """A staged record (the numba-style launch's RecordArgument) is a RecordRef to its handle's
    buffer, typed as numba types the record."""
    from numba_cube.runtime.launch.arguments import RecordArgument

    dtype = np.dtype([("a", np.float64), ("b", np.int16)], align=True)
    h = client.create(np.zeros(1, dtype))
    (bound, _) = _bind(client, one, RecordArgument(h), client.empty(1))
    assert type(bound) is RecordRef and bound.binding == h.binding()
    assert bound.numba_type() == numba.typeof(np.zeros(1, dtype)[0])


def test_tuple_scalars_are_this_launchs(client):
    """Numbers inside a tuple change between launches of one bound launch: each result is NumPy's."""
    x = np.arange(16.0)
    hx, out = client.create(x), client.empty(16)
    for s in (2.0, -0.5, 3.0):
        client.launch(scaled_copy, 1, 16, (hx, s), out)
        np.testing.assert_array_equal(client.read(out), x * s)


def test_tuple_element_types_decide_the_code(client):
    """(x, np.float32(1/3)) multiplies in float32, (x, 1/3) in float64: NumPy's product for each
    (the compiled signature covers the tuple's element types)."""
    x = np.linspace(0.1, 7.3, 64, dtype=np.float32)
    hx, out = client.create(x), client.empty(64)
    client.launch(scaled_copy, 1, 64, (hx, np.float32(1 / 3)), out)
    as_float32 = client.read(out)
    client.launch(scaled_copy, 1, 64, (hx, 1 / 3), out)
    as_float64 = client.read(out)
    np.testing.assert_array_equal(as_float32, (x * np.float32(1 / 3)).astype(np.float64))
    np.testing.assert_array_equal(as_float64, x.astype(np.float64) * (1 / 3))
    assert not np.array_equal(as_float32, as_float64)


def test_dates_of_two_units_are_two_kernels(client):
    """The same kernel launched with a datetime64[D] and then a datetime64[s] adds one day in
    each unit, as NumPy does (no bound launch of the first unit is reused for the second)."""
    for unit in ("D", "s"):
        d = np.datetime64(100, unit)
        out = client.empty(1, f"datetime64[{unit}]")
        client.launch(date_plus, 1, 1, d, np.timedelta64(1, "D"), out)
        assert client.read(out)[0] == d + np.timedelta64(1, "D")


def test_a_write_through_a_tuple_orders_a_reader_on_another_stream(client):
    """A launch writing through ``t[0][i]`` on one stream, a launch reading that buffer on
    another: the reader waits for the writer (the tuple's array is in the write set)."""
    src = np.arange(1 << 14, dtype=np.int64)
    mid = client.empty(src.size, np.int64)
    dst = client.empty(src.size, np.int64)
    hsrc = client.create(src)
    with cube.stream():
        client.launch(write_first, (src.size + 255) // 256, 256, (mid, hsrc), src.size)
    with cube.stream():
        client.launch(add_one, (src.size + 255) // 256, 256, mid, dst)
    np.testing.assert_array_equal(client.read(dst), src + 2)


def test_a_failure_is_recorded_on_the_tuples_written_array():
    """A launch that fails (an index past the end, bounds checked) records its failure on the
    array written through the tuple: reading it raises, with the root cause."""
    checked = cube.client("cpu", boundscheck=True)
    short = checked.empty(4, np.int64)
    checked.launch(write_first, 1, 8, (short, checked.create(np.arange(8))), 8)
    with pytest.raises(cube.LaunchFailure) as info:
        checked.read(short)
    assert isinstance(info.value.root, IndexError)
    # The device keeps working: a correct launch into a fresh buffer reads back.
    fresh = checked.empty(8, np.int64)
    checked.launch(write_first, 1, 8, (fresh, checked.create(np.arange(8))), 8)
    np.testing.assert_array_equal(checked.read(fresh), np.arange(8) + 1)


def test_tuple_arrays_are_never_repaired_by_a_launch_that_may_not_write_them():
    """An array of a tuple whose *other* item is written is in the read set too: a failed one
    skips the launch and keeps its failure, never marked repaired without being written."""
    checked = cube.client("cpu", boundscheck=True)
    bad = checked.empty(4, np.int64)
    checked.launch(write_first, 1, 8, (bad, checked.create(np.arange(8))), 8)   # fails: bad
    out = checked.empty(8, np.int64)
    checked.launch(write_first, 1, 8, (out, bad), 0)          # n = 0: writes nothing
    with pytest.raises(cube.LaunchFailure):
        checked.read(bad)
    with pytest.raises(cube.LaunchFailure):
        checked.read(out)                                       # skipped: inherited


def test_handle_of_another_device_inside_a_tuple_is_refused(client):
    """A handle of another device inside a tuple is refused as a top-level one is."""
    other = cube.client("cpu:1")
    with pytest.raises(cube.ForeignHandleError):
        client.launch(one, 1, 1, (other.empty(4),), client.empty(1))


class Named(enum.Enum):
    first = "first"


class Mixed(enum.Enum):
    whole = 1
    half = 0.5


@pytest.mark.parametrize("member", [Named.first, Mixed.half], ids=["str-valued", "mixed-types"])
def test_enum_numba_cuda_cannot_pass_is_refused_by_name(client, member):
    """An enum whose values are strings, or numbers of different types, is refused at the call,
    naming the argument (numba.cuda cannot pass such a member to a kernel)."""
    with pytest.raises(cube.LaunchArgumentError, match="'t'.*enum member"):
        client.launch(one, 1, 1, member, client.empty(1))
    client.sync()
