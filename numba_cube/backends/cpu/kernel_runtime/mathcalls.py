"""``math`` functions numba-cuda supports and Numba's CPU target lacks: ``fmod``, ``remainder``,
``nextafter``, ``modf``; and ``cuda.fma``, which numba-cuda fuses.

The translator replaces each of these ``math`` functions, wherever a kernel names it
(``math.fmod``, ``from math import fmod``), with the function of the same name here
(``substitute``, called by ``resolve.freeze``). They are typed as numba-cuda types them
(``cudamath.py``: ``(float32, float32) -> float32`` and ``(float64, float64) -> float64``, other
numbers converted by Numba's rules, so two int64 give a float64) and compute what libdevice
computes, which is C's ``<math.h>``:

- ``fmod(x, y)``: ``x - n*y`` with ``n`` truncated, exact (LLVM ``frem``); NaN for ``y == 0``
  where Python's ``math.fmod`` raises.
- ``remainder(x, y)``: IEEE 754 remainder, ``n`` rounded to nearest even (C ``remainder``,
  ``remainderf``); NaN for ``y == 0``.
- ``nextafter(x, y)``: the next representable value after ``x`` towards ``y`` in the argument's
  own type (C ``nextafter``, ``nextafterf``).
- ``modf(x)``: ``(fractional part, integral part)``, both with ``x``'s sign, ``(±0, ±inf)`` for
  infinities (C ``modf``).

``fma(a, b, c)`` is what ``cuda.fma`` becomes (``lower/cuda_calls.py``): numba-cuda lowers it to LLVM's
``llvm.fma``, one rounding of the exact ``a * b + c``, for float32 and float64 (other numbers
converted, two int64 to float64); ``a * b + c`` written out would round twice.

They are separate functions, not typings added to ``math.fmod`` itself, so that no other ``njit``
code in the process changes meaning (Python's ``math.fmod(1.0, 0.0)`` raises).
"""

from __future__ import annotations

import math

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import lower_builtin
from numba.core.typing.templates import ConcreteTemplate, infer_global, signature

__all__ = ["fmod", "remainder", "nextafter", "modf", "fma", "substitute"]


# The Python bodies below are the same functions for Python callers (the generated kernels call
# the compiled versions registered further down): C's semantics, NaN where Python's math raises.

def fmod(x, y):
    """C's ``fmod``: the remainder with the sign of ``x``; NaN for ``y == 0`` or infinite ``x``."""
    if y == 0 or math.isinf(x) or math.isnan(x) or math.isnan(y):
        return math.nan
    return math.fmod(x, y)


def remainder(x, y):
    """IEEE remainder (``x - n*y``, ``n`` the nearest integer, ties to even); NaN where C's is."""
    if y == 0 or math.isinf(x) or math.isnan(x) or math.isnan(y):
        return math.nan
    return math.remainder(x, y)


def nextafter(x, y):
    """C's ``nextafter``: the next double after ``x`` towards ``y``."""
    return math.nextafter(x, y)


def modf(x):
    """C's ``modf`` as ``(fractional, integral)``, both with the sign of ``x``."""
    return math.modf(x)


def fma(a, b, c):
    """``a * b + c`` with one rounding, as ``cuda.fma``."""
    if not all(math.isfinite(v) for v in (a, b, c)):
        return a * b + c
    from fractions import Fraction

    return float(Fraction(a) * Fraction(b) + Fraction(c))


_SUBSTITUTES = {math.fmod: fmod, math.remainder: remainder, math.nextafter: nextafter,
                math.modf: modf}


def substitute(obj):
    """The replacement for ``obj`` when it is one of the ``math`` functions above, else None."""
    try:
        return _SUBSTITUTES.get(obj)
    except TypeError:                        # unhashable globals (lists, arrays) are not these
        return None


_FLOATS = (types.float32, types.float64)

for _fn in (fmod, remainder, nextafter):
    infer_global(_fn)(type(f"Math_{_fn.__name__}", (ConcreteTemplate,), {
        "key": _fn, "cases": [signature(t, t, t) for t in _FLOATS]}))

infer_global(fma)(type("Cuda_fma", (ConcreteTemplate,), {
    "key": fma, "cases": [signature(t, t, t, t) for t in _FLOATS]}))

infer_global(modf)(type("Math_modf", (ConcreteTemplate,), {
    "key": modf, "cases": [signature(types.UniTuple(t, 2), t) for t in _FLOATS]}))


@lower_builtin(fmod, types.float32, types.float32)
@lower_builtin(fmod, types.float64, types.float64)
def _fmod(context, builder, sig, args):
    return builder.frem(*args)


def _libm(c_name_double):
    """Lowering by a call of the C math library's function (``<name>f`` for float32), which
    the JIT resolves in the process, as it does for Numba's own ``math.sin``."""
    def codegen(context, builder, sig, args):
        ty = args[0].type
        name = c_name_double if ty == ir.DoubleType() else c_name_double + "f"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty, ty]), name)
        return builder.call(fn, args)
    return codegen


for _fn, _c_name in ((remainder, "remainder"), (nextafter, "nextafter")):
    for _ty in _FLOATS:
        lower_builtin(_fn, _ty, _ty)(_libm(_c_name))


@lower_builtin(fma, types.float32, types.float32, types.float32)
@lower_builtin(fma, types.float64, types.float64, types.float64)
def _fma(context, builder, sig, args):
    ty = args[0].type
    fused = builder.module.declare_intrinsic("llvm.fma", [ty], ir.FunctionType(ty, [ty] * 3))
    return builder.call(fused, args)


@lower_builtin(modf, types.float32)
@lower_builtin(modf, types.float64)
def _modf(context, builder, sig, args):
    (x,) = args
    ty = x.type

    def intrinsic_call(name, *operands):
        fnty = ir.FunctionType(ty, [ty] * len(operands))
        return builder.call(builder.module.declare_intrinsic(name, [ty], fnty), operands)
    integral = intrinsic_call("llvm.trunc", x)
    # x - trunc(x) is exact; an infinity's fractional part is 0, and the sign is always x's
    # (modf(-2.0) is (-0.0, -2.0))
    is_inf = builder.fcmp_ordered("==", intrinsic_call("llvm.fabs", x), ir.Constant(ty, math.inf))
    fraction = builder.select(is_inf, ir.Constant(ty, 0.0), builder.fsub(x, integral))
    fraction = intrinsic_call("llvm.copysign", fraction, x)
    return context.make_tuple(builder, sig.return_type, (fraction, integral))
