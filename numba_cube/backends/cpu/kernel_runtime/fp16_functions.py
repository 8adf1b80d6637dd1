"""``cuda.fp16.*`` on the CPU backend: numba-cuda's half intrinsics as Numba intrinsics on
``HALF``.

The translator replaces ``cuda.fp16.<name>(...)`` with the function of that name here
(``lower/cuda_calls.py``, for the names in ``FP16_FUNCTIONS``; others stay a ``CompileError``). Arguments
are numbers, converted to half as a call converts them; results are halves (bools for the
comparisons), each rounded once, as numba-cuda's ``cuda_fp16`` bindings compute them:

- ``hadd hsub hmul hdiv`` (and the ``_rn`` spellings): the correctly rounded result;
- ``hfma``: fused, one rounding (a float64 fma, in which the product of two halves is exact);
- ``hneg habs``: exact;
- ``hmax hmin``: a NaN operand gives the other one, +0 is above -0 (CUDA's ``__hmax``/``__hmin``);
- ``heq hne hge hgt hle hlt``: ordered comparisons (false with a NaN); ``hequ ...``: unordered;
- ``hsin hcos hlog hlog2 hlog10 hexp hexp2 hexp10 hsqrt hrsqrt hrcp hceil hfloor htrunc hrint
  htanh``: the float64 result rounded once (the GPU approximates the transcendental ones, so its
  last bit may differ; ``hrint`` rounds half to even).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import types
from numba.core.typing.templates import signature
from numba.extending import intrinsic

from numba_cube.backends.cpu.kernel_runtime import fp16
from numba_cube.backends.cpu.kernel_runtime.half import (
    HALF, half_abs, in_float64, round_to_half, rounded,
)

__all__ = ["FP16_FUNCTIONS"]

_F = fp16.FLOAT64_FUNCTIONS


def _half_signature(n, result=None):
    return signature(result or HALF, *([HALF] * n))


def _fp16_intrinsic(name, n, codegen, result=None):
    """A kernel-callable ``cuda.fp16.<name>`` taking ``n`` numbers (converted to half as a call
    converts its arguments) and returning a half (or ``result``)."""
    def check(args):
        if not all(isinstance(a, types.Number) for a in args):
            return None
        return _half_signature(n, result), codegen

    # Fixed arities: Numba treats a ``*args`` typer as a star-argument call.
    if n == 1:
        def typer(typingctx, x):
            return check((x,))
    elif n == 2:
        def typer(typingctx, x, y):
            return check((x, y))
    else:
        def typer(typingctx, x, y, z):
            return check((x, y, z))
    typer.__name__ = typer.__qualname__ = name
    return intrinsic(typer)


def _compare(op, ordered=True):
    def codegen(context, builder, sig, args):
        compare = builder.fcmp_ordered if ordered else builder.fcmp_unordered
        return compare(op, *args)
    return codegen


def _fma(context, builder, sig, args):
    wide = [builder.fpext(a, ir.DoubleType()) for a in args]
    double = ir.DoubleType()
    fma = builder.module.declare_intrinsic("llvm.fma", [double],
                                           ir.FunctionType(double, [double] * 3))
    return round_to_half(builder, builder.call(fma, wide))


def _reciprocal(of_sqrt):
    """``1 / x`` or ``1 / sqrt(x)`` in float64, rounded once; spelled in LLVM so that a zero
    gives inf as on the GPU (a compiled Python ``1.0 / x`` may carry Python's error model)."""
    def codegen(context, builder, sig, args):
        double = ir.DoubleType()
        wide = builder.fpext(args[0], double)
        if of_sqrt:
            sqrt = builder.module.declare_intrinsic("llvm.sqrt", [double],
                                                    ir.FunctionType(double, [double]))
            wide = builder.call(sqrt, [wide])
        return round_to_half(builder, builder.fdiv(ir.Constant(double, 1.0), wide))
    return codegen


def _extremum(take_larger):
    """CUDA's ``__hmax``/``__hmin``: a NaN operand gives the other one (both NaN: NaN), and of
    +0 and -0 the max is +0, the min -0."""
    def codegen(context, builder, sig, args):
        a, b = args
        i16 = ir.IntType(16)
        a_bits, b_bits = builder.bitcast(a, i16), builder.bitcast(b, i16)
        a_negative = builder.icmp_signed("<", a_bits, ir.Constant(i16, 0))
        if take_larger:
            a_wins = builder.or_(builder.fcmp_ordered(">", a, b), builder.and_(
                builder.fcmp_ordered("==", a, b), builder.not_(a_negative)))
        else:
            a_wins = builder.or_(builder.fcmp_ordered("<", a, b), builder.and_(
                builder.fcmp_ordered("==", a, b), a_negative))
        b_is_nan = builder.fcmp_unordered("uno", b, b)
        return builder.select(builder.or_(a_wins, b_is_nan), a, b)
    return codegen


def _neg(context, builder, sig, args):
    return builder.fneg(args[0])


FP16_FUNCTIONS = {
    "hadd": _fp16_intrinsic("hadd", 2, rounded("fadd")),
    "hsub": _fp16_intrinsic("hsub", 2, rounded("fsub")),
    "hmul": _fp16_intrinsic("hmul", 2, rounded("fmul")),
    "hdiv": _fp16_intrinsic("hdiv", 2, rounded("fdiv")),
    "hfma": _fp16_intrinsic("hfma", 3, _fma),
    "hneg": _fp16_intrinsic("hneg", 1, _neg),
    "habs": _fp16_intrinsic("habs", 1, half_abs),
    "hmax": _fp16_intrinsic("hmax", 2, _extremum(True)),
    "hmin": _fp16_intrinsic("hmin", 2, _extremum(False)),
    "heq": _fp16_intrinsic("heq", 2, _compare("=="), types.boolean),
    "hne": _fp16_intrinsic("hne", 2, _compare("!="), types.boolean),
    "hge": _fp16_intrinsic("hge", 2, _compare(">="), types.boolean),
    "hgt": _fp16_intrinsic("hgt", 2, _compare(">"), types.boolean),
    "hle": _fp16_intrinsic("hle", 2, _compare("<="), types.boolean),
    "hlt": _fp16_intrinsic("hlt", 2, _compare("<"), types.boolean),
    "hequ": _fp16_intrinsic("hequ", 2, _compare("==", False), types.boolean),
    "hneu": _fp16_intrinsic("hneu", 2, _compare("!=", False), types.boolean),
    "hgeu": _fp16_intrinsic("hgeu", 2, _compare(">=", False), types.boolean),
    "hgtu": _fp16_intrinsic("hgtu", 2, _compare(">", False), types.boolean),
    "hleu": _fp16_intrinsic("hleu", 2, _compare("<=", False), types.boolean),
    "hltu": _fp16_intrinsic("hltu", 2, _compare("<", False), types.boolean),
    "hsin": _fp16_intrinsic("hsin", 1, in_float64(_F["sin"])),
    "hcos": _fp16_intrinsic("hcos", 1, in_float64(_F["cos"])),
    "hlog": _fp16_intrinsic("hlog", 1, in_float64(_F["log"])),
    "hlog2": _fp16_intrinsic("hlog2", 1, in_float64(_F["log2"])),
    "hlog10": _fp16_intrinsic("hlog10", 1, in_float64(_F["log10"])),
    "hexp": _fp16_intrinsic("hexp", 1, in_float64(_F["exp"])),
    "hexp2": _fp16_intrinsic("hexp2", 1, in_float64(_F["exp2"])),
    "hexp10": _fp16_intrinsic("hexp10", 1, in_float64(_F["exp10"])),
    "hsqrt": _fp16_intrinsic("hsqrt", 1, in_float64(_F["sqrt"])),
    "hrsqrt": _fp16_intrinsic("hrsqrt", 1, _reciprocal(of_sqrt=True)),
    "hrcp": _fp16_intrinsic("hrcp", 1, _reciprocal(of_sqrt=False)),
    "hceil": _fp16_intrinsic("hceil", 1, in_float64(_F["ceil"])),
    "hfloor": _fp16_intrinsic("hfloor", 1, in_float64(_F["floor"])),
    "htrunc": _fp16_intrinsic("htrunc", 1, in_float64(_F["trunc"])),
    "hrint": _fp16_intrinsic("hrint", 1, in_float64(_F["rint"])),
    "htanh": _fp16_intrinsic("htanh", 1, in_float64(_F["tanh"])),
}
# numba-cuda's cuda.fp16 exports the round-to-nearest spellings too
for _alias, _name in (("hadd_rn", "hadd"), ("hsub_rn", "hsub"), ("hmul_rn", "hmul")):
    FP16_FUNCTIONS[_alias] = FP16_FUNCTIONS[_name]
globals().update(FP16_FUNCTIONS)


