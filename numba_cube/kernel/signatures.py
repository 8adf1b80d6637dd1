"""Explicit signatures of a wrapped dispatcher: ``cuda.jit("void(int32[:], int32)")(f)``.

A numba.cuda dispatcher made with signatures compiles those and nothing else. At each launch
numba resolves the arguments' types against them with its own overload rules (an exact match
wins; else a safe conversion; two equally good ones are ambiguous) and converts every argument to
the chosen signature: a Python ``int`` passed for an ``int32`` parameter *is* an int32 in the
kernel, so ``cuda.clz`` counts 32 bits, and ``0.3425`` passed for a ``float32`` is rounded to
float32 first. Ignoring the signatures would compile the kernel for int64 and float64 instead and
give other numbers without an error, so numba_cube resolves them the same way, with numba's own
typing context, before the launch leaves the issuing thread:

- the arguments resolve to one declared signature: scalars are converted to its types (an int
  that does not fit the declared integer type is a ``LaunchArgumentError``, where numba would
  wrap it silently), arrays must already have its dtype and dimension count;
- none or several resolve: ``LaunchArgumentError`` (a ``TypeError``, as numba raises), naming the
  declared signatures and the arguments' types.

Only numba-cuda's real dispatchers carry signatures: the simulator's ``cuda.jit`` discards them.
"""

from __future__ import annotations

import sys

from ..errors import LaunchArgumentError

__all__ = ["DeclaredSignatures", "declared_signatures", "launch_types"]


class DeclaredSignatures:
    """The signatures a dispatcher was declared with, and numba's resolution of arguments."""

    def __init__(self, signatures: tuple, typingctx, py_func):
        self.signatures = signatures
        self._typingctx = typingctx
        self._py_func = py_func

    def describe(self) -> tuple[str, ...]:
        """The signatures as text (what the kernel id covers)."""
        return tuple(str(s) for s in self.signatures)

    def convert(self, kernel_name: str, params: tuple, bound: tuple) -> tuple:
        """``bound`` (bindings and NumPy scalars) with each scalar converted to the type of the
        declared signature the arguments resolve to."""
        from numba.core import types
        from numba.np import numpy_support

        actual = launch_types(bound)
        declared = ", ".join(self.describe())
        try:
            chosen = self._typingctx.resolve_overload(self._py_func, list(self.signatures),
                                                      actual, {}, allow_ambiguous=False)
        except TypeError as exc:
            raise LaunchArgumentError(
                f"kernel {kernel_name}: the arguments ({', '.join(map(str, actual))}) match "
                f"several declared signatures equally well ({exc}); numba.cuda refuses this "
                "too: pass arguments of one signature's types") from None
        if chosen is None:
            raise LaunchArgumentError(
                f"kernel {kernel_name}: no declared signature ({declared}) matches the "
                f"arguments ({', '.join(map(str, actual))}): pass arguments of a declared type, "
                "or wrap the plain function (cube.kernel(f)) to compile for any types")
        out = []
        for name, b, want in zip(params, bound, chosen.args):
            if hasattr(b, "memory_id"):
                if not (isinstance(want, types.Array) and want.ndim == len(b.shape)
                        and numpy_support.as_dtype(want.dtype) == b.dtype):
                    raise LaunchArgumentError(
                        f"kernel {kernel_name}: argument {name!r} is a {b.dtype} array of "
                        f"{len(b.shape)} dimension(s); the signature it resolves to "
                        f"({chosen}) declares {want}")
                out.append(b)
                continue
            dtype = numpy_support.as_dtype(want)
            value = dtype.type(b)
            if dtype.kind in "iub" and value != b:
                raise LaunchArgumentError(
                    f"kernel {kernel_name}: argument {name!r} is {b!r}, which the declared type "
                    f"{want} cannot hold (numba.cuda would wrap it): pass a value in range")
            out.append(value)
        return tuple(out)


def launch_types(bound: tuple) -> tuple:
    """The Numba types of a launch's bound arguments: a binding of dtype D and ``ndim`` N is
    ``types.Array(D, N, "C")`` (handles are C-contiguous), a scalar the type of its NumPy type."""
    import numba
    from numba.core import types

    return tuple(types.Array(numba.from_dtype(b.dtype), len(b.shape), "C")
                 if hasattr(b, "memory_id") else numba.typeof(b) for b in bound)


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
