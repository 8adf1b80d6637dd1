"""Element types of ``cuda.shared.array`` / ``cuda.local.array`` beyond NumPy scalar names.

The translator spells a scalar element type ``__np.<name>`` (``__np.float32``). Two kinds
numba-cuda accepts need a module-level name instead, which ``array_dtype_name`` binds in the
generated module and returns (hidden names start with ``__``, see ``ArrayDecl.dtype_expr``):

- float16 (``numba.float16``, ``np.float16``, ``"float16"``): ``__half``, the CPU backend's half
  type (``fp16.HALF``), so that elements are halves with numba-cuda's arithmetic; NumPy's
  float16 would be Numba's own, which does not compile on the CPU.
- records (a NumPy structured dtype, or a Numba ``Record`` type such as
  ``numba.from_dtype(dt)``): ``__rec_<digest>``, the dtype rebuilt field by field
  (``records.dtype_source``), with subarray and nested fields.
"""

from __future__ import annotations

import hashlib

import numpy as np
from numba.core import types as nbtypes
from numba.np import numpy_support

from numba_cube.backends.cpu.frontend import records

__all__ = ["array_dtype_name"]

HALF_NAME = "__half"


def _record_dtype(obj) -> np.dtype | None:
    if isinstance(obj, nbtypes.Record):
        return numpy_support.as_dtype(obj)
    if isinstance(obj, np.dtype) and obj.fields is not None:
        return obj
    return None


def array_dtype_name(env, obj, scalar_name: str | None) -> str | None:
    """The module-level name of the element type ``obj`` (``scalar_name`` is what
    ``resolve.numpy_scalar_name`` made of it) when it is float16 or a record, bound in ``env``;
    None for other types. Raises ``ValueError`` with the reason for records the CPU target
    cannot hold."""
    if scalar_name == "float16":
        return env.helper("numba_cube.backends.cpu.kernel_runtime.fp16", "HALF", HALF_NAME)
    dt = _record_dtype(obj)
    if dt is None:
        return None
    reason = records.unsupported_reason(dt)
    if reason is not None:
        raise ValueError(reason)
    source = records.dtype_source(dt)
    name = "__rec_" + hashlib.sha256(source.encode()).hexdigest()[:12]
    line = f"{name} = {source}"
    if line not in env.constants:
        env.constants.append(line)
    return name
