"""The CPU backend's half type: IEEE binary16 on Numba's CPU target, stored as the bits NumPy's
float16 uses.

Numba's CPU target has no data model for ``types.float16`` ("NotImplementedError: float16"), so
a float16 array could not reach a generated kernel. ``HALF`` is a subclass of ``types.Float``
stored as LLVM ``half`` (2 bytes), so arrays of it are the NumPy float16 buffers themselves, with
no copy and no reinterpretation. It is a separate type, not a data model patched onto
``types.float16``, so that nothing changes for any other ``njit`` code in the process. This
module holds the type, its boxing, its conversions and the rounding every half result goes
through; ``kernel_runtime/fp16.py`` gives it numba-cuda's operator and math rules, ``kernel_runtime/fp16_functions.py`` the
``cuda.fp16.*`` intrinsics.

Rounding to half (``round_to_half``) is done in integer arithmetic, to nearest, ties to even:
LLVM's ``fptrunc`` to half is correct on its own, but the optimizer narrows
``fptrunc(fadd(fpext a, fpext b))`` back to a half ``fadd``, which the x86 backend then evaluates
in float32 across consecutive operations (``a + b * c`` rounded once instead of twice, seen on
this target). Integer operations are opaque to that, so each operation rounds exactly once, as
on the GPU. Conversions to half from floats and integers (``lower_cast``) use it too.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.core.imputils import lower_cast
from numba.core.typeconv import Conversion
from numba.core.typing.templates import signature
from numba.extending import NativeValue, box, models, register_model, unbox

__all__ = ["HALF", "HalfType", "round_to_half", "rounded", "in_float64", "half_abs",
           "scalar_type"]


class HalfType(types.Float):
    """IEEE binary16 on the CPU target (see the module docstring)."""

    def __init__(self):
        super().__init__("float16")

    @property
    def key(self):
        # Distinct from Numba's types.float16 (same name), which has no CPU data model.
        return "numba_cube.float16"

    def can_convert_to(self, typingctx, other):
        # The conversion table of types.float16 (promote to float32/float64, unsafe to ints).
        if isinstance(other, HalfType):
            return Conversion.exact
        return typingctx.can_convert(types.float16, other)

    def can_convert_from(self, typingctx, other):
        return typingctx.can_convert(other, types.float16)

    def cast_python_value(self, value):
        return np.float16(value)


HALF = HalfType()


@register_model(HalfType)
class _HalfModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.HalfType())


@unbox(HalfType)
def _unbox_half(typ, obj, c):
    as_float = c.pyapi.number_float(obj)
    wide = c.pyapi.float_as_double(as_float)
    c.pyapi.decref(as_float)
    # Not ``fptrunc`` to half: x86 has no double -> half instruction, so LLVM makes it a call
    # of compiler-rt's ``__truncdfhf2``, which llvmlite 0.50's JIT does not resolve ("LLVM ERROR:
    # Symbol not found", an abort of the process). Numba compiles this unboxing into the Python
    # wrapper of every function with a half argument (a device function's own dispatcher too).
    return NativeValue(round_to_half(c.builder, wide), is_error=c.pyapi.c_api_error())


@box(HalfType)
def _box_half(typ, val, c):
    return c.pyapi.float_from_double(c.builder.fpext(val, c.pyapi.double))


@lower_cast(HalfType, HalfType)
def _half_to_half(context, builder, fromty, toty, val):
    return val


@lower_cast(types.Float, HalfType)
def _float_to_half(context, builder, fromty, toty, val):
    return round_to_half(builder, val)


@lower_cast(types.Integer, HalfType)
def _integer_to_half(context, builder, fromty, toty, val):
    # every integer a half can hold (|x| < 65520) is exact in a double; larger ones give inf
    wide = (builder.sitofp if fromty.signed else builder.uitofp)(val, ir.DoubleType())
    return round_to_half(builder, wide)


def round_to_half(builder, value):
    """``value`` (float or double) rounded to half, to nearest, ties to even, in integer
    arithmetic (see the module docstring for why not ``fptrunc``)."""
    double, i64, i16 = ir.DoubleType(), ir.IntType(64), ir.IntType(16)
    if value.type != double:
        value = builder.fpext(value, double)           # exact
    bits = builder.bitcast(value, i64)
    magnitude = builder.and_(bits, ir.Constant(i64, 0x7FFF_FFFF_FFFF_FFFF))
    sign = builder.trunc(builder.lshr(bits, ir.Constant(i64, 48)), i16)
    sign = builder.and_(sign, ir.Constant(i16, 0x8000))

    def const(x):
        return ir.Constant(i64, x)
    # normal halves: rebias the exponent, add just under half an ulp plus the lowest kept bit
    # (ties to even), shift; a carry into the exponent gives the next binade or infinity
    odd = builder.and_(builder.lshr(magnitude, const(42)), const(1))
    normal = builder.add(builder.add(magnitude, const(((15 - 1023) << 52) + (1 << 41) - 1)), odd)
    normal = builder.lshr(normal, const(42))
    # subnormal halves (below 2**-14): adding 2**28 leaves the ulp at 2**-24, the half
    # subnormal step, so the double addition itself rounds to nearest even
    magic = 0x41B0_0000_0000_0000                       # 2.0 ** 28
    shifted = builder.fadd(builder.bitcast(magnitude, double), ir.Constant(double, 2.0 ** 28))
    subnormal = builder.sub(builder.bitcast(shifted, i64), const(magic))
    is_subnormal = builder.icmp_unsigned("<", magnitude, const(0x3F10_0000_0000_0000))
    result = builder.select(is_subnormal, subnormal, normal)
    is_big = builder.icmp_unsigned(">=", magnitude, const(0x40F0_0000_0000_0000))   # 65536
    is_nan = builder.icmp_unsigned(">", magnitude, const(0x7FF0_0000_0000_0000))
    special = builder.select(is_nan, const(0x7E00), const(0x7C00))
    result = builder.trunc(builder.select(is_big, special, result), i16)
    return builder.bitcast(builder.or_(result, sign), ir.HalfType())


def rounded(method):
    """Codegen of a binary half operation: the float32 operation (``method`` of the IR
    builder), rounded to half once; float32 has more than 2 * 11 + 2 bits, so this is the
    correctly rounded half result of ``+ - * /``."""
    def codegen(context, builder, sig, args):
        wide = [builder.fpext(a, ir.FloatType()) for a in args]
        return round_to_half(builder, getattr(builder, method)(*wide))
    return codegen


def in_float64(compute):
    """Codegen of a half -> half function computed by ``compute`` (a float64 -> float64
    function Numba can compile) and rounded to half once."""
    def codegen(context, builder, sig, args):
        wide = [builder.fpext(a, ir.DoubleType()) for a in args]
        f8 = types.float64
        result = context.compile_internal(builder, compute, signature(f8, *([f8] * len(args))),
                                          wide)
        return round_to_half(builder, result)
    return codegen


def half_abs(context, builder, sig, args):
    """Codegen of ``abs`` of a half (exact: the sign bit cleared)."""
    fabs = builder.module.declare_intrinsic("llvm.fabs", [ir.HalfType()])
    return builder.call(fabs, args)


def scalar_type(dtype: np.dtype):
    """The CPU backend's Numba type for a NumPy scalar dtype: ``HALF`` for float16 (which
    ``numba.from_dtype`` would make Numba's ``types.float16``, not compilable on the CPU)."""
    return HALF if dtype == np.float16 else numba.from_dtype(dtype)
