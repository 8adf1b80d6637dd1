"""The CUDA dialects kernels are written in: ``numba.cuda`` and ``numba_cuda_mlir.cuda``.

numba_cube reads a kernel written against numba-cuda's ``numba.cuda`` or against NVIDIA's
successor, numba-cuda-mlir (``from numba_cuda_mlir import cuda``), which keeps numba.cuda's
kernel API under its own package: the same names (``cuda.threadIdx.x``, ``cuda.shared.array``,
``cuda.atomic.add``, ...) with its own objects, and its own copy of Numba's type objects
(``numba_cuda_mlir.cuda.float32`` is a ``numba_cuda_mlir.numba_cuda.types.Float``, not
``numba.float32``). Nothing here imports either package: modules are recognised by their name
in ``sys.modules``, objects by the module that defines them.

Two kinds of attributes of a CUDA module are told apart:

- CUDA's own builtins (stubs, intrinsics, vector types, API namespaces), named by their path
  below the module (``"atomic.add"``): ``defined_in_cuda``;
- the scalar *type objects* the module re-exports (``cuda.float32``, ``cuda.int64``,
  ``cuda.boolean``, numba.cuda's ``cuda.double``): values, usable as dtypes and casts wherever
  the same Numba type is. ``numba_scalar_type`` turns numba-cuda-mlir's copies into Numba's own.
"""

from __future__ import annotations

import types as pytypes

import numpy as np

__all__ = ["CUDA_MODULE_NAMES", "defined_in_cuda", "is_cuda_module", "is_mlir_dispatcher",
           "is_mlir_scalar", "is_scalar_type_object", "numba_scalar_type"]

#: module names under which a CUDA kernel API lives: numba.cuda (the second name is numba-cuda's
#: real package, which a .pth redirector installs as ``numba.cuda``) and numba-cuda-mlir's
CUDA_MODULE_NAMES = ("numba.cuda", "numba_cuda.numba.cuda", "numba_cuda_mlir.cuda")

#: packages whose objects are CUDA builtins when a CUDA module exports them
_CUDA_OWNERS = ("numba.cuda", "numba_cuda", "numba_cuda_mlir")

#: numba-cuda-mlir's copy of Numba's type classes, and the scalar classes among them
_MLIR_TYPES_PACKAGE = "numba_cuda_mlir.numba_cuda.types"
_SCALAR_CLASSES = frozenset({"Integer", "Float", "Complex", "Boolean"})


def is_cuda_module(obj) -> bool:
    """Whether ``obj`` is one of the CUDA modules (``numba.cuda``, ``numba_cuda_mlir.cuda``)."""
    return isinstance(obj, pytypes.ModuleType) and obj.__name__ in CUDA_MODULE_NAMES


def _owner(value) -> str:
    owner = getattr(value, "__module__", None)
    return owner if isinstance(owner, str) else ""


def is_scalar_type_object(value) -> bool:
    """A Numba scalar type object with a NumPy dtype (``numba.float32``), or numba-cuda-mlir's
    copy of one. ``cuda.bfloat16`` is none: it stays a CUDA builtin, which the CPU backend
    refuses by name."""
    return numba_scalar_type(value) is not None


def is_mlir_scalar(value) -> bool:
    """numba-cuda-mlir's copy of a Numba scalar type object (by its class: imports nothing)."""
    return (not isinstance(value, type) and type(value).__name__ in _SCALAR_CLASSES
            and _owner(type(value)).startswith(_MLIR_TYPES_PACKAGE + "."))


def defined_in_cuda(value) -> bool:
    """CUDA's own objects among a CUDA module's attributes, not what it re-exports (Numba's
    types as ``cuda.double``, NumPy, numba-cuda-mlir's copies of Numba's scalar types)."""
    owner = _owner(value)
    if not (owner in _CUDA_OWNERS or owner.startswith(tuple(p + "." for p in _CUDA_OWNERS))):
        return False
    return not is_scalar_type_object(value)


def numba_scalar_type(value):
    """Numba's own type object for a scalar type object of a CUDA dialect: ``value`` itself
    for Numba's, the Numba type of the same name for numba-cuda-mlir's (``float32`` ->
    ``numba.float32``); None for anything else, and for the types without a NumPy dtype
    (``bfloat16``, numba-cuda-mlir's ``complex32``)."""
    from numba.core import types as nbtypes
    from numba.core.errors import NumbaError
    from numba.np import numpy_support

    if isinstance(value, (nbtypes.Number, nbtypes.Boolean)):
        try:
            numpy_support.as_dtype(value)
        except (NotImplementedError, NumbaError):
            return None
        return value
    if not is_mlir_scalar(value):
        return None
    try:
        dtype = np.dtype(str(value))
        # (NumPy parses "complex32" as a 2-byte dtype of no scalar kind Numba knows)
        return numpy_support.from_dtype(dtype) if dtype.kind in "biufc" else None
    except (TypeError, ValueError, NotImplementedError, NumbaError):
        return None


def is_mlir_dispatcher(obj) -> bool:
    """Whether ``obj`` is what numba-cuda-mlir's ``cuda.jit`` makes (a kernel, or a device
    function with ``device=True``). Its options claim ``nopython`` like a CPU ``njit``'s, so it
    is told apart by its class."""
    return any(c.__name__ == "Dispatcher" and c.__module__.startswith("numba_cuda_mlir.")
               for c in type(obj).__mro__)
