"""Explicit signatures of a wrapped dispatcher are honoured the way numba.cuda honours them.

numba-cuda's dispatchers with signatures need a GPU to be made (they compile at once), so these
tests build ``DeclaredSignatures`` over Numba's CPU typing context, whose overload resolution is
the same code; ``tests/cuda/cases/test_cuda_signatures.py`` runs the end-to-end twin on a GPU.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from numba.core import types
from numba.core.registry import cpu_target

import numba_cube as cube
from numba_cube.kernel.signatures import DeclaredSignatures


def _kernel(r, x, y):
    r[0] = x + y


def _declared(*sigs):
    return DeclaredSignatures(tuple(sigs), cpu_target.typing_context, _kernel)


F64_1D = types.Array(types.float64, 1, "C")
BY_F32 = types.void(F64_1D, types.float32, types.float32)
BY_F64 = types.void(F64_1D, types.float64, types.float64)
BY_I32 = types.void(F64_1D, types.int32, types.int32)


@pytest.fixture(scope="module")
def r():
    return cube.client("cpu").empty(1).binding()


def test_exact_numpy_scalars_pick_their_signature(r):
    """np.float32 arguments resolve to the float32 signature and stay float32."""
    out = _declared(BY_F32, BY_F64).convert("k", ("r", "x", "y"), (r, np.float32(1), np.float32(2)))
    assert [type(v) for v in out[1:]] == [np.float32, np.float32]


def test_python_numbers_are_converted_to_the_declared_type(r):
    """Python numbers for an int32-only signature become int32 (numba.cuda converts them);
    Python floats prefer the float64 signature over the float32 one, as numba's rules do."""
    out = _declared(BY_I32).convert("k", ("r", "x", "y"), (r, np.int64(5), np.int64(-7)))
    assert [type(v) for v in out[1:]] == [np.int32, np.int32] and out[1] == 5 and out[2] == -7
    out = _declared(BY_F32, BY_F64).convert("k", ("r", "x", "y"), (r, np.float64(1), np.float64(2.0**-25)))
    assert type(out[1]) is np.float64 and out[2] == 2.0**-25


def test_an_int_the_declared_type_cannot_hold_wraps_as_numba_packs_it(r):
    """An int out of the declared type's range wraps as numba-cuda's ctypes packing wraps it
    (0xFFFFFFFF for an int32 is -1: numba.cuda code passes bit patterns this way)."""
    out = _declared(BY_I32).convert("k", ("r", "x", "y"),
                                    (r, np.int64(0xFFFFFFFF), np.int64(2**40 + 3)))
    assert type(out[1]) is np.int32
    assert (out[1], out[2]) == (ctypes.c_int32(0xFFFFFFFF).value, ctypes.c_int32(2**40 + 3).value)


def test_no_matching_signature_is_a_type_error(r):
    """An array of another dtype matches no declared signature: LaunchArgumentError (a
    TypeError, as numba raises)."""
    i64 = cube.client("cpu").empty(1, np.int64).binding()
    with pytest.raises(TypeError, match="No matching definition"):
        _declared(BY_F64).convert("k", ("r", "x", "y"), (i64, np.float64(1), np.float64(2)))


# -- composites: tuples, records, dates ---------------------------------------------------------

def test_tuple_items_are_converted_to_the_declared_tuple(r):
    """A tuple of Python ints for a declared UniTuple(int32, 2) arrives as int32 items (numba
    converts each member), in a tuple again."""
    from numba_cube.runtime.launch.composite import TupleArg

    sig = types.void(F64_1D, types.UniTuple(types.int32, 2), types.int32)
    out = _declared(sig).convert("k", ("r", "x", "y"),
                                 (r, TupleArg((np.int64(5), np.int64(-7)), None), np.int64(1)))
    assert type(out[1]) is TupleArg and [type(v) for v in out[1].items] == [np.int32, np.int32]
    assert out[1].materialize(None) == (5, -7)


def test_record_resolves_against_a_declared_record(r):
    """A record passed by reference matches ``void(..., Record)`` of its own dtype, and no
    signature of another record dtype."""
    import numba

    from numba_cube.runtime.launch.composite import RecordRef
    from numba_cube.runtime.memory.handle import Binding

    dtype = np.dtype([("a", np.float64), ("b", np.int32)], align=True)
    other = np.dtype([("a", np.float32)])
    rec = RecordRef(Binding(1, 0, (1,), dtype))
    sig = types.void(F64_1D, numba.from_dtype(dtype), types.int32)
    out = _declared(sig).convert("k", ("r", "x", "y"), (r, rec, np.int64(1)))
    assert out[1] is rec
    wrong = types.void(F64_1D, numba.from_dtype(other), types.int32)
    with pytest.raises(cube.LaunchArgumentError, match="No matching definition"):
        _declared(wrong).convert("k", ("r", "x", "y"), (r, rec, np.int64(1)))


def test_date_resolves_against_its_unit(r):
    """A datetime64[D] matches a declared NPDatetime('D')."""
    from numba_cube.runtime.launch.composite import TypedScalar

    d = TypedScalar(np.datetime64(3, "D"))
    sig = types.void(F64_1D, types.NPDatetime("D"), types.int32)
    assert _declared(sig).convert("k", ("r", "x", "y"), (r, d, np.int64(1)))[1] is d


@pytest.mark.parametrize("host", [
    np.zeros((3, 4)),                         # C
    np.asfortranarray(np.zeros((3, 4))),      # F
    np.zeros((4, 3)).T,                       # F (a transpose)
    np.zeros((3, 8))[:, ::2],                 # A (a step)
], ids=["C", "F", "transpose", "step"])
def test_array_layouts_resolve_as_numba_resolves_them(host):
    """A binding's launch type has the layout numba.typeof gives the same NumPy array, so a
    declared float64[::1, :] (F), float64[:, ::1] (C) or float64[:, :] (A) signature accepts
    it exactly when numba's own overload resolution accepts that array."""
    import numba

    from numba_cube.kernel.signatures import launch_types

    client = cube.client("cpu")
    if host.flags.c_contiguous or host.flags.f_contiguous:
        h = client.create(host)                 # (create keeps C and F layouts)
    else:
        h = client.create(host.base)[:, ::2]    # the same view of a handle
    assert launch_types((h.binding(),)) == (numba.typeof(host),)
    for layout in ("C", "F", "A"):
        sig = types.void(types.Array(types.float64, 2, layout))
        try:
            numba_accepts = cpu_target.typing_context.resolve_overload(
                _kernel, [sig], [numba.typeof(host)], {}, allow_ambiguous=False) is not None
        except TypeError:       # numba's "No matching definition"
            numba_accepts = False
        if numba_accepts:
            assert _declared(sig).convert("k", ("a",), (h.binding(),)) == (h.binding(),)
        else:
            with pytest.raises(cube.LaunchArgumentError):
                _declared(sig).convert("k", ("a",), (h.binding(),))
