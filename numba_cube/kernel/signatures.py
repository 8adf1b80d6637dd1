"""Explicit signatures of a wrapped dispatcher: ``cuda.jit("void(int32[:], int32)")(f)``.

A numba.cuda dispatcher made with signatures compiles those and nothing else. At each launch
numba resolves the arguments' types against them with its own overload rules (an exact match
wins; else a safe conversion; two equally good ones are ambiguous) and converts every argument to
the chosen signature: a Python ``int`` passed for an ``int32`` parameter *is* an int32 in the
kernel, so ``cuda.clz`` counts 32 bits, and ``0.3425`` passed for a ``float32`` is rounded to
float32 first. Ignoring the signatures would compile the kernel for int64 and float64 instead and
give other numbers without an error, so numba_cube resolves them the same way, with numba's own
typing context, before the launch leaves the issuing thread:

- the arguments resolve to one declared signature: scalars are converted to its types as
  numba-cuda converts them (through ``ctypes``: an int that does not fit the declared integer
  type wraps around, ``0xFFFFFFFF`` for an ``int32`` is ``-1``, which numba.cuda code relies on
  to pass bit patterns), arrays must already have its dtype and dimension count;
- tuples convert item by item; records, enum members and dates must have the declared type
  (``void(Record(...))``: the record's dtype; numba converts none of them);
- none or several resolve: ``LaunchArgumentError`` (a ``TypeError``, as numba raises), naming the
  declared signatures and the arguments' types.

Only numba-cuda's real dispatchers carry signatures: the simulator's ``cuda.jit`` discards them.
"""

from __future__ import annotations

import sys

import numpy as np

from ..errors import LaunchArgumentError

__all__ = ["DeclaredSignatures", "declared_signatures", "launch_types"]

#: argument-type tuples remembered per dispatcher
_MAX_RESOLVED = 256


class DeclaredSignatures:
    """The signatures a dispatcher was declared with, and numba's resolution of arguments."""

    def __init__(self, signatures: tuple, typingctx, py_func):
        self.signatures = signatures
        self._typingctx = typingctx
        self._py_func = py_func
        # argument types -> one converter per argument (None: passed as it is). numba's
        # resolution and the checks of ``_convert`` depend on the types alone, and were most of
        # a launch's cost (stumpy's 26 arguments: ~300 us); a scalar's conversion is per value.
        self._resolved: dict = {}

    def converts_nothing(self) -> bool:
        """Whether a call can convert nothing: every declared parameter an array (numba never
        converts an array: a call with another array type does not compile) and every return
        type ``void``. A device function declared so computes the same compiled for the types
        it is called with (what the CPU translator does), as numba-cuda's generated gufunc
        kernels call theirs: ``void(float64[:], float64[:])``."""
        from numba.core import types

        return all(all(isinstance(a, types.Array) for a in sig.args)
                   and sig.return_type in (types.none, types.void) for sig in self.signatures)

    def describe(self) -> tuple[str, ...]:
        """The signatures as text (what the kernel id covers)."""
        return tuple(str(s) for s in self.signatures)

    def convert(self, kernel_name: str, params: tuple, bound: tuple) -> tuple:
        """``bound`` (bindings and NumPy scalars) with each scalar converted to the type of the
        declared signature the arguments resolve to."""
        actual = launch_types(bound)
        converters = self._resolved.get(actual)
        if converters is not None:
            return tuple(b if c is None else c(b) for b, c in zip(bound, converters))
        chosen = self._resolve(kernel_name, actual)
        converted = tuple(_convert(kernel_name, name, b, want, chosen)      # checks, or raises
                          for name, b, want in zip(params, bound, chosen.args))
        if len(self._resolved) >= _MAX_RESOLVED:        # a program cycling through types
            self._resolved.clear()
        self._resolved[actual] = tuple(_converter(kernel_name, name, b, want, chosen)
                                       for name, b, want in zip(params, bound, chosen.args))
        return converted

    def _resolve(self, kernel_name: str, actual: tuple):
        """The declared signature numba's overload rules choose for ``actual``; raises
        ``LaunchArgumentError`` where numba refuses (no match, or several equally good)."""
        declared = ", ".join(self.describe())
        try:
            chosen = self._typingctx.resolve_overload(self._py_func, list(self.signatures),
                                                      actual, {}, allow_ambiguous=False)
        except TypeError as exc:
            if "No matching definition" in str(exc):
                chosen = None       # numba says no match by raising too, in some of its paths
            else:
                raise LaunchArgumentError(
                    f"kernel {kernel_name}: the arguments ({', '.join(map(str, actual))}) match "
                    f"several declared signatures equally well ({exc}); numba.cuda refuses this "
                    "too: pass arguments of one signature's types") from None
        if chosen is None:
            # numba's words first ("No matching definition"), which code written for numba.cuda
            # may look for in the TypeError.
            raise LaunchArgumentError(
                f"No matching definition for argument type(s) {', '.join(map(str, actual))}: "
                f"kernel {kernel_name} declares only ({declared}); pass arguments of a declared "
                "type, or wrap the plain function (cube.kernel(f)) to compile for any types")
        return chosen


def _converter(kernel_name: str, name: str, b, want, chosen):
    """How later arguments of ``b``'s type convert to ``want``, once ``_convert`` has checked
    one: None for arrays and composites (their type is the check), a function for scalars."""
    from numba.core import types
    from numba.np import numpy_support

    from numba_cube.runtime.launch.composite import COMPOSITE_TYPES, TupleArg

    if hasattr(b, "memory_id") or (type(b) in COMPOSITE_TYPES and type(b) is not TupleArg):
        return None
    if type(b) is TupleArg or isinstance(want, types.BaseTuple):
        return lambda v: _convert(kernel_name, name, v, want, chosen)
    dtype = numpy_support.as_dtype(want)
    if dtype.kind in "iu":
        return lambda v: np.asarray(v).astype(dtype)[()]
    return dtype.type


def _convert(kernel_name: str, name: str, b, want, chosen):
    """One bound argument converted to the declared type ``want`` of the chosen signature."""
    from numba.core import types
    from numba.np import numpy_support

    from numba_cube.runtime.launch.composite import COMPOSITE_TYPES, TupleArg

    if hasattr(b, "memory_id"):
        if not (isinstance(want, types.Array) and want.ndim == len(b.shape)
                and numpy_support.as_dtype(want.dtype) == b.dtype):
            raise LaunchArgumentError(
                f"kernel {kernel_name}: argument {name!r} is a {b.dtype} array of "
                f"{len(b.shape)} dimension(s); the signature it resolves to "
                f"({chosen}) declares {want}")
        return b
    if type(b) is TupleArg:
        # A tuple converts item by item, as numba converts each member (int64 items passed for
        # a UniTuple(int32, n) are int32 in the kernel).
        if not isinstance(want, types.BaseTuple) or len(want) != len(b.items):
            raise LaunchArgumentError(
                f"kernel {kernel_name}: argument {name!r} is a tuple of {len(b.items)} item(s); "
                f"the signature it resolves to ({chosen}) declares {want}")
        items = tuple(_convert(kernel_name, f"{name}[{i}]", v, w, chosen)
                      for i, (v, w) in enumerate(zip(b.items, want)))
        return TupleArg(items, b.cls)
    if type(b) in COMPOSITE_TYPES:
        # Records, enum members, dates: numba converts none of them; they must be the type.
        if b.numba_type() != want:
            raise LaunchArgumentError(
                f"kernel {kernel_name}: argument {name!r} is a {b.numba_type()}; the signature "
                f"it resolves to ({chosen}) declares {want}")
        return b
    dtype = numpy_support.as_dtype(want)
    if dtype.kind in "iu":
        # numba-cuda packs an integer argument with ctypes (c_int32(v) and the like), which keeps
        # the low bits: the C conversion NumPy's astype makes too.
        return np.asarray(b).astype(dtype)[()]
    return dtype.type(b)


def launch_types(bound: tuple) -> tuple:
    """The Numba types of a launch's bound arguments: a binding of dtype D and ``ndim`` N is
    ``types.Array(D, N, L)``, its layout L ("C", "F" or "A") from its strides as ``numba.typeof``
    gives it for the same NumPy array (``Binding.layout``), so declared signatures
    (``float64[::1, :]``) match as in numba-cuda; a scalar the type of its NumPy type, a
    composite (a tuple, a record, an enum member, a date: ``runtime/launch/composite.py``) its own."""
    from numba_cube.runtime.launch.composite import leaf_type

    return tuple(leaf_type(b) for b in bound)


def declared_signatures(fn) -> DeclaredSignatures | None:
    """The declared signatures of a numba-cuda dispatcher made with some (a kernel or a device
    function), else None."""
    dispatcher_class = getattr(sys.modules.get("numba.cuda.dispatcher"), "CUDADispatcher", None)
    if dispatcher_class is None or not isinstance(fn, dispatcher_class):
        return None
    # numba keeps "compiles nothing but its signatures" only as this flag (set by cuda.jit's
    # disable_compile() when it is given signatures); there is no public accessor.
    if getattr(fn, "_can_compile", True):
        return None
    signatures = tuple(fn.nopython_signatures)
    if not signatures:
        return None
    return DeclaredSignatures(signatures, fn.typingctx, fn.py_func)
