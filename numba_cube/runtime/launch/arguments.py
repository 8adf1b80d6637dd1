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

Tuples and namedtuples (of anything a parameter may be), enum members (an ``IntEnum`` member
is an ``IntEnumMember`` to numba, not an int64), ``datetime64`` and ``timedelta64`` scalars, and
records staged by the numba-style launch (``RecordArgument``) become composites
(``launch/composite.py``). A NumPy record passed to ``client.launch`` itself is refused: numba.cuda
copies a record back into the caller's after the launch, which an asynchronous launch cannot.

Exact-type lookups come first (a launch binds these every time); everything else
(``_bind_other``: composites, handles of another device, the abstract number classes, ...) is
only asked about types those miss.
"""

from __future__ import annotations

import enum
import numbers

import numpy as np

from numba_cube.errors import LaunchArgumentError
from numba_cube.runtime.launch.composite import RecordRef, TupleArg, TypedScalar
from numba_cube.runtime.memory.handle import Handle

__all__ = ["bind_arguments", "python_int", "RecordArgument"]

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
    array the server adopts), a NumPy scalar for a number, a composite (``launch/composite.py``) for a
    tuple, a record passed by reference, an enum member or a date. ``LaunchArgumentError`` for
    anything else, for the wrong number of arguments, and for an int no kernel type holds.
    ``own(handle)`` is the client's check of a handle that is not the common case (a subclass,
    another device's: ``ForeignHandleError``)."""
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
        else:
            bound.append(_bind_other(server, own, kernel, name, a))
    if kernel.signatures is not None:
        # A dispatcher declared with signatures: numba.cuda's conversions (kernel/signatures.py).
        return kernel.signatures.convert(kernel.name, kernel.params, tuple(bound))
    return tuple(bound)


def _bind_other(server, own, kernel, name: str, a):
    """One argument the fast paths of ``bind_arguments`` do not know (also every item of a
    tuple, which may be anything a parameter may be)."""
    kind = type(a)
    if kind is Handle and a.server is server:
        return a.binding()
    if kind is int:
        return python_int(a, name, kernel)
    if kind in _PLAIN_SCALARS:
        return _PLAIN_SCALARS[kind](a)
    if kind in _NUMPY_SCALARS:
        return a
    if kind is RecordArgument:
        return RecordRef(own(a.handle))
    if isinstance(a, Handle):
        return own(a)
    if isinstance(a, np.generic):
        if a.dtype in _NUMPY_DTYPES:
            return a
        if a.dtype.kind in "mM":
            return TypedScalar(a)               # typed by its unit, passed as its int64
        if a.dtype.fields is not None:
            raise LaunchArgumentError(
                f"argument {name!r} of kernel {kernel.name} is a NumPy record ({a.dtype}), which "
                "numba.cuda passes by reference and copies back after the launch: launch with "
                "kernel[count, dim](...), which does the same, or pass the records as a Handle "
                "of their dtype (an array parameter)")
        raise LaunchArgumentError(
            f"argument {name!r} of kernel {kernel.name} is a NumPy {a.dtype} scalar, which is no "
            f"kernel argument type: pass a bool, integer, float or complex scalar")
    if isinstance(a, enum.Enum):
        # Before the number classes: an IntEnum member is an IntEnumMember to numba, not an int.
        return _enum_member(a, name, kernel)
    if isinstance(a, numbers.Integral):       # (bool cannot be subclassed: never here)
        return python_int(int(a), name, kernel)
    if isinstance(a, numbers.Real):
        return np.float64(a)
    if isinstance(a, numbers.Complex):
        return np.complex128(a)
    if isinstance(a, tuple):
        cls = kind if kind is not tuple else None
        if cls is not None and not hasattr(cls, "_fields"):
            raise LaunchArgumentError(
                f"argument {name!r} of kernel {kernel.name} is a {kind.__name__}, a subclass of "
                "tuple that is not a namedtuple: pass a plain tuple or a namedtuple")
        items = tuple(_bind_other(server, own, kernel, f"{name}[{i}]", v) for i, v in enumerate(a))
        return TupleArg(items, cls)
    if isinstance(a, np.ndarray):
        raise LaunchArgumentError(
            f"argument {name!r} is a NumPy array: pass a Handle (client.create(array)), or "
            f"launch with kernel[count, dim](...) to copy host arrays in and out")
    # Seam for device backends: a foreign device array (e.g. one exposing
    # __cuda_array_interface__) adopted without a copy. Only reached for types the
    # branches above do not know, so it costs nothing on the usual path.
    adopt = getattr(server, "adopt_foreign", None)
    adopted = adopt(a) if adopt is not None else None
    if adopted is None:
        raise LaunchArgumentError(
            f"argument {name!r} of kernel {kernel.name} has unsupported type "
            f"{type(a).__name__}: pass a Handle, a NumPy scalar, a Python number, a tuple of "
            "those, an enum member or a datetime64/timedelta64")
    return own(adopted)


def _enum_member(a: enum.Enum, name: str, kernel):
    """An enum member as numba types it (``EnumMember``/``IntEnumMember`` of its class)."""
    try:
        return TypedScalar(a)
    except Exception as exc:  # noqa: BLE001 - numba cannot type this enum (mixed value types, ...)
        raise LaunchArgumentError(
            f"argument {name!r} of kernel {kernel.name} is the enum member {a!r}, whose value "
            f"numba.cuda cannot pass to a kernel ({type(exc).__name__}: {exc}): give the enum "
            "values of one number type (or tuples of numbers)") from None


class RecordArgument:
    """A structured scalar staged into a one-element ``handle`` of its dtype: how the numba-style
    launch (``client/eager.py``) passes a record by reference, as numba.cuda does, and copies it back."""

    __slots__ = ("handle",)

    def __init__(self, handle: Handle):
        self.handle = handle
