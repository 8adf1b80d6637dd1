"""numba.cuda's bit intrinsics on the CPU: ``cuda.popc``, ``cuda.clz``, ``cuda.ffs``, ``cuda.brev``.

Each one is an LLVM intrinsic on the argument's own integer type, as numba-cuda lowers it
(``cudaimpl.py``), so the answer depends on the width the kernel sees, never on Python's
unbounded ints: ``clz`` of an ``int32`` counts 32 bits, of an ``int64`` 64.

- ``popc(x)``: the set bits of ``x`` (``llvm.ctpop``), in ``x``'s type; any integer type.
- ``clz(x)``: the leading zero bits (``llvm.ctlz``, defined at zero: the width), in ``x``'s type.
- ``ffs(x)``: the 1-based position of the lowest set bit, 0 for 0 (libdevice's ``__nv_ffs`` /
  ``__nv_ffsll``), as a ``uint32``; 32- and 64-bit integers, the widths numba-cuda lowers.
- ``brev(x)``: the bits of ``x`` reversed (``__nv_brev`` / ``__nv_brevll``); ``uint32`` and
  ``uint64``, the types numba-cuda declares.

An argument of another type is a typing error, which the CPU backend reports as a
``CompileError`` naming the kernel: numba-cuda would convert it by its overload rules, and this
module does not guess at those conversions.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

__all__ = ["popc", "clz", "ffs", "brev"]

_FALSE = ir.Constant(ir.IntType(1), 0)


@intrinsic
def popc(typingctx, x):
    """The number of set bits of ``x``, in ``x``'s type."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])
    return x(x), codegen


@intrinsic
def clz(typingctx, x):
    """The number of leading zero bits of ``x`` (its width for 0), in ``x``'s type."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.ctlz(args[0], _FALSE)
    return x(x), codegen


@intrinsic
def ffs(typingctx, x):
    """The 1-based position of the lowest set bit of ``x``, 0 when ``x`` is 0, as uint32."""
    if not isinstance(x, types.Integer) or x.bitwidth not in (32, 64):
        return None

    def codegen(context, builder, signature, args):
        (value,) = args
        trailing = builder.cttz(value, _FALSE)
        position = builder.add(trailing, ir.Constant(value.type, 1))
        zero = builder.icmp_unsigned("==", value, ir.Constant(value.type, 0))
        result = builder.select(zero, ir.Constant(value.type, 0), position)
        i32 = ir.IntType(32)
        return builder.trunc(result, i32) if x.bitwidth > 32 else result
    return types.uint32(x), codegen


@intrinsic
def brev(typingctx, x):
    """The bits of ``x`` in reverse order (uint32 and uint64)."""
    if x not in (types.uint32, types.uint64):
        return None

    def codegen(context, builder, signature, args):
        (value,) = args
        fn = builder.module.declare_intrinsic("llvm.bitreverse", [value.type])
        return builder.call(fn, [value])
    return x(x), codegen
