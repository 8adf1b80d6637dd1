"""float16 on the CPU backend with numba-cuda's semantics: typing and lowering of the half type.

The type itself, ``HALF``, is in ``kernel_runtime/half.py`` (re-exported here); the server types float16 arrays
and scalars as ``HALF`` (``server.arg_type``), and importing this module registers what the type
means with Numba's CPU target (typing templates marked for the "cpu" target, lowerings keyed on
``HALF``: nothing changes for any other type).

What the type means is what numba-cuda makes float16 mean (``numba/cuda/_internal/cuda_fp16.py``,
``cudadecl.py``, ``cudamath.py``), rule for rule:

- ``+ - * /`` (and their in-place forms), unary ``- + abs`` and the comparisons take two halves,
  or a half and a value that converts to half exactly, by promotion or safely (``int8``,
  ``uint8``), and give a half (a bool for comparisons): each operation rounds its result to half,
  as the GPU's ``__hadd`` etc. do (``half.rounded``: the float32 operation, rounded once, the
  correctly rounded half result). Any other mix (a half and a float32 or an int64) falls to Numba's own rules, as in
  numba-cuda, through the same conversion table: ``HALF`` converts as ``types.float16`` does.
- ``float(h)`` is a half; ``math.sin cos exp exp2 log log2 log10 sqrt fabs ceil floor trunc`` of
  a half are halves (numba-cuda's ``Math_unary_with_fp16``), computed in float64 and rounded
  once (the GPU uses approximations for the transcendental ones: results agree to the last bit
  or within the GPU's error, never worse).
- ``cuda.fp16.*``: ``kernel_runtime/fp16_functions.py``.

``np.float16`` / ``numba.float16`` named in a kernel (``np.float16(x)``, ``np.zeros(n,
np.float16)``, shared and local arrays) is ``HALF`` too (``resolve.freeze``, ``lower/dtypes.py``). A
frozen float16 *value* (a global ``np.float16`` scalar or float16 array) is still Numba's own
float16, which does not compile on the CPU: the launch fails with a ``CompileError``.
"""

from __future__ import annotations

import math
import operator

import numpy as np
from numba.core import types
from numba.core.imputils import lower_builtin
from numba.core.typeconv import Conversion
from numba.core.typing.templates import AbstractTemplate, infer_global, signature

from numba_cube.backends.cpu.kernel_runtime.half import (
    HALF, HalfType, half_abs, in_float64, rounded, scalar_type,
)

__all__ = ["HALF", "HalfType", "scalar_type", "MATH_FUNCTIONS", "FLOAT64_FUNCTIONS"]


# ---- typing: numba-cuda's float16 operator rules ------------------------------------------

#: Numba tries a function's templates in order and takes the first that matches; its own
#: (float32, float32) template for ``+`` would match a half by promotion. Templates marked for
#: the "cpu" target are tried before the generic ones (``utils.order_by_target_specificity``).
_CPU_FIRST = {"target": "cpu"}


def _operator_template(op, result):
    """numba-cuda's ``_fp16_binary_operator``: one half operand, the other converting to half
    exactly, by promotion or safely; both become halves."""
    class HalfOperator(AbstractTemplate):
        key = op
        metadata = _CPU_FIRST

        def generic(self, args, kws):
            if kws or len(args) != 2 or not any(isinstance(a, HalfType) for a in args):
                return None
            other = args[1] if isinstance(args[0], HalfType) else args[0]
            if self.context.can_convert(other, HALF) in (
                    Conversion.exact, Conversion.promote, Conversion.safe):
                return signature(result or HALF, HALF, HALF)
            return None
    infer_global(op)(HalfOperator)


def _unary_template(fn):
    class HalfUnary(AbstractTemplate):
        key = fn
        metadata = _CPU_FIRST

        def generic(self, args, kws):
            if not kws and len(args) == 1 and isinstance(args[0], HalfType):
                return signature(HALF, HALF)
            return None
    infer_global(fn)(HalfUnary)


_ARITHMETIC = (operator.add, operator.iadd, operator.sub, operator.isub, operator.mul,
               operator.imul, operator.truediv, operator.itruediv)
_COMPARISONS = (operator.eq, operator.ne, operator.ge, operator.gt, operator.le, operator.lt)
for _op in _ARITHMETIC:
    _operator_template(_op, None)
for _op in _COMPARISONS:
    _operator_template(_op, types.boolean)
for _fn in (abs, operator.abs, operator.neg, operator.pos, float):
    _unary_template(_fn)


# One float64 function per operation, each with its own code object: Numba's compile_internal
# caches by ``__code__``, so functions made by one factory would share one compiled body.
def _sin(x):
    return math.sin(x)


def _cos(x):
    return math.cos(x)


def _exp(x):
    return math.exp(x)


def _exp2(x):
    return math.exp2(x)


def _exp10(x):
    return 10.0 ** x


def _log(x):
    return math.log(x)


def _log2(x):
    return math.log2(x)


def _log10(x):
    return math.log10(x)


def _sqrt(x):
    return math.sqrt(x)


def _fabs(x):
    return math.fabs(x)


def _ceil(x):
    return np.ceil(x)                # not math.ceil: Numba's gives an int64 (garbage for inf/NaN)


def _floor(x):
    return np.floor(x)


def _trunc(x):
    return np.trunc(x)


def _rint(x):
    return np.rint(x)                # round half to even, as CUDA's hrint


def _tanh(x):
    return math.tanh(x)


#: float64 functions by name, each computing one half operation before its rounding
FLOAT64_FUNCTIONS = {f.__name__[1:]: f for f in (
    _sin, _cos, _exp, _exp2, _exp10, _log, _log2, _log10, _sqrt, _fabs, _ceil, _floor, _trunc,
    _rint, _tanh)}
#: math functions numba-cuda types half -> half, with the float64 function that computes them
MATH_FUNCTIONS = {getattr(math, name): FLOAT64_FUNCTIONS[name] for name in (
    "sin", "cos", "exp", "exp2", "log", "log2", "log10", "sqrt", "fabs", "ceil", "floor",
    "trunc")}
for _fn in MATH_FUNCTIONS:
    _unary_template(_fn)


# ---- lowering ---------------------------------------------------------------------------

for _fn, _compute in MATH_FUNCTIONS.items():
    lower_builtin(_fn, HALF)(in_float64(_compute))


@lower_builtin(float, HALF)
def _float_of_half(context, builder, sig, args):
    return args[0]


lower_builtin(abs, HALF)(half_abs)
lower_builtin(operator.abs, HALF)(half_abs)


_METHODS = {operator.add: "fadd", operator.iadd: "fadd", operator.sub: "fsub",
            operator.isub: "fsub", operator.mul: "fmul", operator.imul: "fmul",
            operator.truediv: "fdiv", operator.itruediv: "fdiv"}
for _op, _method in _METHODS.items():
    lower_builtin(_op, HALF, HALF)(rounded(_method))
# Comparisons, neg and pos need no rounding: Numba's lowering for types.Float (fcmp, fneg) covers
# HALF, a Float subclass.


