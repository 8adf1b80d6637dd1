"""How a launch's arguments travel to the server: handles as bindings, scalars as NumPy scalars.

A scalar's type is part of the compiled signature, so it must be the type numba.cuda would give
it, or results differ from numba.cuda's (an ``np.float32`` coefficient widened to float64 makes
``x * s`` a float64 product; ``cuda.clz`` of an ``np.int32`` counts 32 bits, not 64):

- a NumPy scalar keeps its dtype (``np.float32`` stays float32, ``np.uint8`` uint8);
- a Python ``bool``, ``float`` or ``complex`` is ``bool``, ``float64`` or ``complex128``;
- a Python ``int`` is ``int64``, or ``uint64`` between 2**63 and 2**64 - 1 (``numba.typeof``'s
  rule); beyond that range no kernel type holds it: ``LaunchArgumentError`` naming the argument.

A kernel wrapped from a dispatcher declared with signatures (``cuda.jit("void(int32)")``) takes
the types of the signature its arguments resolve to, as numba.cuda converts them
(``kernel/signatures.py``).

Exact-type lookups come first (a launch binds these every time); the abstract number classes
(``numbers.Integral`` for an ``IntEnum``, ...) are only asked about types those miss.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import LaunchArgumentError
from .handle import Handle

__all__ = ["bind_arguments", "python_int"]

_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1
_UINT64_MAX = 2**64 - 1

#: Python scalars with one fixed type each (``int`` depends on its value: ``python_int``).
_PLAIN_SCALARS = {float: np.float64, bool: np.bool_, complex: np.complex128}

#: NumPy scalar types that are kernel argument types as they are (what numba.cuda types them as).
_NUMPY_SCALARS = frozenset({
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
})
#: Their dtypes: other scalar types of the same dtype (``np.longlong`` is not ``np.int64``, but
#: holds an int64) are kernel argument types too. ``np.longdouble`` and the like are not.
_NUMPY_DTYPES = frozenset(np.dtype(t) for t in _NUMPY_SCALARS)


def python_int(value: int, name: str, kernel) -> np.integer:
    """A Python int as numba types it: int64, else uint64 (2**63 .. 2**64 - 1)."""
    if _INT64_MIN <= value <= _INT64_MAX:
        return np.int64(value)
    if 0 <= value <= _UINT64_MAX:
        return np.uint64(value)
    raise LaunchArgumentError(
        f"argument {name!r} of kernel {kernel.name} is the int {value}, outside every integer "
        f"kernel type (int64 and uint64): pass a float, or split the value")


def bind_arguments(server, own, kernel, args: tuple) -> tuple:
    """Per parameter of ``kernel``: a ``Binding`` for a handle of ``server``'s device (or a foreign
    array the server adopts), a NumPy scalar for a number. ``LaunchArgumentError`` for anything
    else, for the wrong number of arguments, and for an int no kernel type holds. ``own(handle)``
    is the client's check of a handle that is not the common case (a subclass, another device's:
    ``ForeignHandleError``)."""
    if len(args) != len(kernel.params):
        raise LaunchArgumentError(
            f"kernel {kernel.name}({', '.join(kernel.params)}) takes {len(kernel.params)} "
            f"arguments, got {len(args)}")
    bound = []
    for name, a in zip(kernel.params, args):
        kind = type(a)
        # Fast paths first (exact types, no ABC checks): a launch binds these every time.
        if kind is Handle and a.server is server:
            bound.append(a.binding())
        elif kind is int:
            bound.append(np.int64(a) if _INT64_MIN <= a <= _INT64_MAX else python_int(a, name, kernel))
        elif kind in _PLAIN_SCALARS:
            bound.append(_PLAIN_SCALARS[kind](a))
        elif kind in _NUMPY_SCALARS:
            bound.append(a)
        elif isinstance(a, Handle):
            bound.append(own(a))
        elif isinstance(a, np.generic):
            if a.dtype in _NUMPY_DTYPES:
                bound.append(a)
                continue
            raise LaunchArgumentError(
                f"argument {name!r} of kernel {kernel.name} is a NumPy {a.dtype} scalar, which is no "
                f"kernel argument type: pass a bool, integer, float or complex scalar")
        elif isinstance(a, numbers.Integral):       # (bool cannot be subclassed: never here)
            bound.append(python_int(int(a), name, kernel))
        elif isinstance(a, numbers.Real):
            bound.append(np.float64(a))
        elif isinstance(a, numbers.Complex):
            bound.append(np.complex128(a))
        elif isinstance(a, np.ndarray):
            raise LaunchArgumentError(
                f"argument {name!r} is a NumPy array: pass a Handle (client.create(array)), or "
                f"launch with kernel[count, dim](...) to copy host arrays in and out")
        else:
            # Seam for device backends: a foreign device array (e.g. one exposing
            # __cuda_array_interface__) adopted without a copy. Only reached for types the
            # branches above do not know, so it costs nothing on the usual path.
            adopt = getattr(server, "adopt_foreign", None)
            adopted = adopt(a) if adopt is not None else None
            if adopted is None:
                raise LaunchArgumentError(
                    f"argument {name!r} of kernel {kernel.name} has unsupported type "
                    f"{type(a).__name__}: pass a Handle, a NumPy scalar or a Python number")
            bound.append(own(adopted))
    if kernel.signatures is not None:
        # A dispatcher declared with signatures: numba.cuda's conversions (kernel/signatures.py).
        return kernel.signatures.convert(kernel.name, kernel.params, tuple(bound))
    return tuple(bound)
