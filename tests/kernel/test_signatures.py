"""Explicit signatures of a wrapped dispatcher are honoured the way numba.cuda honours them.

numba-cuda's dispatchers with signatures need a GPU to be made (they compile at once), so these
tests build ``DeclaredSignatures`` over Numba's CPU typing context, whose overload resolution is
the same code; ``tests/cuda/cases/test_cuda_signatures.py`` runs the end-to-end twin on a GPU.
"""

from __future__ import annotations

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


def test_an_int_the_declared_type_cannot_hold_is_refused(r):
    """Where numba would wrap 2**40 into an int32 silently, the launch is refused."""
    with pytest.raises(cube.LaunchArgumentError, match="cannot hold"):
        _declared(BY_I32).convert("k", ("r", "x", "y"), (r, np.int64(2**40), np.int64(1)))


def test_no_matching_signature_is_a_type_error(r):
    """An array of another dtype matches no declared signature: LaunchArgumentError (a
    TypeError, as numba raises)."""
    i64 = cube.client("cpu").empty(1, np.int64).binding()
    with pytest.raises(TypeError, match="no declared signature"):
        _declared(BY_F64).convert("k", ("r", "x", "y"), (i64, np.float64(1), np.float64(2)))
