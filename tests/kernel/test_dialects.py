"""The CUDA dialects' type objects (``numba_cube/kernel/dialects.py``) as kernels spell them.

numba.cuda re-exports Numba's scalar types (``cuda.float32 is numba.float32``, ``cuda.double``,
``cuda.boolean``, ...); kernels use them as the dtype of ``cuda.shared.array`` /
``cuda.local.array`` and as casts (``cuda.float32(x)``). Which of them numba-cuda accepts as an
array dtype is read off numba-cuda's own typing (its typing context resolves the object to a
``NumberClass``, a dtype spec); each of those runs on the CPU backend with the values NumPy gives
for the same conversion. numba-cuda-mlir's dialect has its own file (``test_dialects_mlir.py``).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from numba import cuda
from numba.core import types as nbtypes

import numba_cube as cube
from numba_cube.kernel import dialects
from dtype_walk import expected_values, run_every_type, write_kernel

#: numba-cuda accepts bfloat16 arrays on a GPU; the CPU backend has no bfloat16 arithmetic
CPU_REFUSED = {"bfloat16"}
# (Vector types such as cuda.float32x4 are no array dtype for numba-cuda: its typing resolves
# them to a Function, which parse_dtype refuses, so the walk below leaves them out by itself.)


def numba_cuda_array_dtypes(module) -> dict[str, object]:
    """The scalar type objects ``module`` (numba.cuda) exports that numba-cuda's typing takes as
    an array dtype: attribute name -> object."""
    from numba.cuda.descriptor import cuda_target
    from numba.cuda.typing.npydecl import parse_dtype

    typing = cuda_target.typing_context
    typing.refresh()                    # (loads numba-cuda's typing registries, as a compile does)
    found = {}
    for name in sorted(dir(module)):
        value = getattr(module, name, None)
        if name.startswith("_") or not isinstance(value, nbtypes.Type):
            continue
        spec = typing.resolve_value_type(value)
        if isinstance(spec, nbtypes.NumberClass) and parse_dtype(spec) is not None:
            found[name] = value
    return found


def test_every_scalar_type_numba_cuda_exports_is_an_array_dtype_and_a_cast(tmp_path):
    """Every scalar type object numba.cuda exports that numba-cuda's typing takes as an array
    dtype (``cuda.float32``, ``cuda.double``, ``cuda.boolean``, ``cuda.c8``, ``cuda.uintp``,
    ...) works as the dtype of a shared and a local array, by keyword and positionally, and as a
    cast: the values are NumPy's conversions of the same inputs (each distinct object under
    one of its names: aliases are the same object)."""
    accepted = numba_cuda_array_dtypes(cuda)
    assert {"float32", "float64", "int32", "boolean", "complex64", "double"} <= set(accepted)
    # one spelling per distinct object (cuda.i4, cuda.intc and cuda.int32 are one object):
    # the translator resolves every spelling to the object, then works on the object only
    first: dict[int, str] = {}
    for name in sorted(set(accepted) - CPU_REFUSED):
        first.setdefault(id(accepted[name]), name)
    names = sorted(first.values())
    x = np.array([0.0, 1.75, 2.5, 100.25])
    kernel = write_kernel(tmp_path, "cuda_type_walk", "from numba import cuda", names)
    got = run_every_type(kernel, len(names), x)
    dtypes = [numba.np.numpy_support.as_dtype(accepted[n]) for n in names]
    np.testing.assert_array_equal(got, expected_values(dtypes, x))


def test_cuda_bfloat16_is_refused_naming_the_dtype():
    """``cuda.bfloat16`` (accepted by numba-cuda on a GPU) has no CPU arithmetic here: a
    ``CompileError`` naming the dtype and the line, not another element type."""
    assert "bfloat16" in numba_cuda_array_dtypes(cuda)

    @cube.kernel
    def half_brain(out):
        s = cuda.shared.array(4, dtype=cuda.bfloat16)
        out[0] = s[0]

    with pytest.raises(cube.CompileError, match="bfloat16") as info:
        half_brain[1, 1](np.zeros(1, np.float32))
    assert "dtype of a cuda shared/local array" in str(info.value)
    assert info.value.lineno == half_brain.py_func.__code__.co_firstlineno + 2


def test_numba_types_are_their_own_scalar_types():
    """Numba's own scalar types map to themselves; anything that is not a scalar type object
    with a NumPy dtype maps to None (a vector type, a function, a NumPy type: the translator
    handles those; ``cuda.bfloat16``, which stays a CUDA builtin the CPU backend refuses)."""
    for value in (numba.float32, numba.types.int8, cuda.boolean, cuda.c16, numba.types.float16):
        assert dialects.numba_scalar_type(value) is value
    for value in (np.float32, "float32", cuda.float32x4, cuda.grid, None, cuda.bfloat16):
        assert dialects.numba_scalar_type(value) is None


def test_cuda_builtins_are_cuda_objects_and_reexported_types_are_not():
    """``defined_in_cuda``: numba.cuda's stubs and intrinsics are CUDA's own; the Numba types
    and NumPy objects it re-exports are not."""
    for value in (cuda.threadIdx, cuda.syncthreads, cuda.atomic, cuda.float32x4, cuda.bfloat16):
        assert dialects.defined_in_cuda(value)
    for value in (cuda.float32, cuda.double, np.float32, numba.njit):
        assert not dialects.defined_in_cuda(value)
    assert dialects.is_cuda_module(cuda) and not dialects.is_cuda_module(numba)
