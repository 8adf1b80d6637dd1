"""Record (structured) dtypes in generated CPU modules: global constant arrays of records (and
the dtype text ``lower/dtypes.py`` uses for shared/local arrays of records).

numba.cuda puts a global array a kernel reads (``cuda.const.array_like(CONST_RECORD)`` or the
global itself) in constant memory, records included. The generated module must be
self-contained text (``frontend/resolve.py``), so a record array is frozen as its bytes and its dtype:

    NAME__const = __np.frombuffer(bytes.fromhex("..."), dtype=__np.dtype({...}, align=...))
                  .reshape(shape)

The dtype is spelled field by field (names, formats, offsets, itemsize, alignment), so padding
and aligned layouts (``np.dtype(..., align=True)``) come back byte for byte; the array is
read-only, as constant memory is. Field types Numba's CPU target can hold: integers, floats
(not float16), complex, bool, nested records and fixed-shape subarrays of those. Anything else
is refused (``constant_line`` returns None with the reason).
"""

from __future__ import annotations

import numpy as np

__all__ = ["constant_line", "dtype_literal", "dtype_source", "unsupported_reason"]

_SCALAR_KINDS = frozenset("biufc")


def dtype_literal(dt: np.dtype):
    """A literal that ``np.dtype`` turns back into ``dt`` (a format string or a dict)."""
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        return (dtype_literal(base), shape)
    if dt.fields is not None:
        names = list(dt.names)
        return {"names": names, "formats": [dtype_literal(dt.fields[n][0]) for n in names],
                "offsets": [dt.fields[n][1] for n in names], "itemsize": dt.itemsize}
    return dt.str


def dtype_source(dt: np.dtype) -> str:
    """Source text that rebuilds the record dtype ``dt`` in a generated module."""
    return f"__np.dtype({dtype_literal(dt)!r}, align={dt.isalignedstruct!r})"


def unsupported_reason(dt: np.dtype) -> str | None:
    """Why a record array of dtype ``dt`` cannot be frozen, or None when it can."""
    if dt.subdtype is not None:
        return unsupported_reason(dt.subdtype[0])
    if dt.fields is not None:
        for name in dt.names:
            reason = unsupported_reason(dt.fields[name][0])
            if reason is not None:
                return f"field {name!r}: {reason}"
        return None
    if dt.kind not in _SCALAR_KINDS:
        return f"dtype {dt} (only numbers, bools and records of them)"
    if dt == np.float16:
        return "float16 (Numba's CPU target has no float16 record fields)"
    return None


def constant_line(name: str, arr: np.ndarray) -> str:
    """The module-level definition of ``name`` as a read-only copy of the record array ``arr``
    (call ``unsupported_reason(arr.dtype)`` first)."""
    data = np.ascontiguousarray(arr).tobytes().hex()
    dtype = dtype_source(arr.dtype)
    return (f"{name} = __np.frombuffer(bytes.fromhex({data!r}), dtype={dtype})"
            f".reshape({arr.shape!r})")
