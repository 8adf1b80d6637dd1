"""Small nopython helpers that generated kernel modules import (besides ``atomics``).

Most exist for speed, not semantics: each one lets LLVM prove something the translator knows but
Numba's code cannot express (``range_item`` is the exception: it computes a loop's value).

``assume_nonneg(x)``
    Returns ``x`` unchanged after telling LLVM (``llvm.assume``) that it is >= 0. The translator
    wraps expressions built only from thread/block ids and dims with ``+`` and ``*`` (e.g. what
    ``cuda.grid(1)`` lowers to), which are non-negative by construction. Numba's indexing wraps a
    *signed* negative index around (``a[i]`` is ``a[i + n if i < 0 else i]``); that select makes
    the address non-affine and stops the loop vectorizer. With the assumption LLVM folds the select
    away: an elementwise kernel went from 1.9x to 1.0x the time of a hand-written ``prange`` loop.

``bound_lt(u)``, ``bound_le(u)``, ``bound_gt(l)``, ``bound_ge(l)``
    Integer bounds for a hoisted guard. For an integer ``i``: ``i < u`` iff ``i < bound_lt(u)``,
    ``i <= u`` iff ``i < bound_le(u)``, ``i > l`` iff ``i >= bound_gt(l)`` and ``i >= l`` iff
    ``i >= bound_ge(l)``, whatever numeric type ``u``/``l`` has (a float bound is rounded the
    right way; NaN gives an empty range, as every comparison with NaN is false). The barrier-free
    path turns ``if i < n:`` around a kernel body into a clamp of the unit loop's range, so the
    body runs without a branch (``emit/flat_kernel.py``).

``range_item(k, args)``
    Item ``k`` of ``range(*args)``, typed as Numba types that range's loop variable: what a
    grid-stride loop run row by row (``passes/stride_interchange.py``) assigns to its variable.

``scalar_replicas(lists)``
    True when every replica list in the tuple ``lists`` holds NumPy arrays, i.e. replicas of
    numbers or booleans (``replica``), False when one holds lists (of arrays or tuples); decided
    when Numba compiles, so the test costs nothing. ``passes/demanded_lanes.py`` skips dead lanes only for
    scalars: adding arrays of different shapes raises, which a skipped lane must not hide.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload

__all__ = ["assume_nonneg", "bound_lt", "bound_le", "bound_gt", "bound_ge", "replica", "range_item",
           "store_differs"]

# Far enough from the int64 limits that "bound - offset" cannot overflow for any real launch.
_HUGE = 1 << 62


@intrinsic
def assume_nonneg(typingctx, x):
    """``x``, with LLVM told that it is non-negative (integers only; other types pass through)."""
    def codegen(context, builder, sig, args):
        value = args[0]
        if isinstance(sig.args[0], types.Integer) and sig.args[0].signed:
            fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(1)])
            assume = cgutils.get_or_insert_function(builder.module, fnty, "llvm.assume")
            builder.call(assume, [builder.icmp_signed(">=", value, ir.Constant(value.type, 0))])
        return value
    return x(x), codegen


def _bound_impl(kind):
    """Overload factory for one of the four bound functions (see the module docstring)."""
    # "lt"/"le" produce an exclusive upper bound, "gt"/"ge" an inclusive lower bound; a NaN
    # operand must give an empty range, i.e. -_HUGE for an upper bound and +_HUGE for a lower one.
    nan_bound = -_HUGE if kind in ("lt", "le") else _HUGE
    use_ceil = kind in ("lt", "ge")          # i < 2.5 iff i < 3;  i <= 2.5 iff i < 3 = floor + 1
    plus_one = 0 if use_ceil else 1

    def impl_factory(x):
        if isinstance(x, (types.Integer, types.Boolean)):
            return lambda x: _to_i64(x) + plus_one
        if isinstance(x, types.Float):
            def impl(x):
                if x != x:
                    return nan_bound
                if x >= _HUGE:
                    return _HUGE
                if x <= -_HUGE:
                    return -_HUGE
                if use_ceil:
                    return int(math.ceil(x))
                return int(math.floor(x)) + 1
            return impl
        return None
    return impl_factory


@intrinsic
def _to_i64(typingctx, x):
    """Integer/boolean -> int64 (sign- or zero-extending as the source type says)."""
    def codegen(context, builder, sig, args):
        return context.cast(builder, args[0], sig.args[0], types.int64)
    return types.int64(x), codegen


def bound_lt(u):
    """Smallest integer ``b`` with ``i < u`` iff ``i < b`` (nopython only)."""
    raise NotImplementedError("bound_lt is only callable from Numba-compiled code")


def bound_le(u):
    """Smallest integer ``b`` with ``i <= u`` iff ``i < b`` (nopython only)."""
    raise NotImplementedError("bound_le is only callable from Numba-compiled code")


def bound_gt(lo):
    """Smallest integer ``b`` with ``i > lo`` iff ``i >= b`` (nopython only)."""
    raise NotImplementedError("bound_gt is only callable from Numba-compiled code")


def bound_ge(lo):
    """Smallest integer ``b`` with ``i >= lo`` iff ``i >= b`` (nopython only)."""
    raise NotImplementedError("bound_ge is only callable from Numba-compiled code")


for _fn, _kind in ((bound_lt, "lt"), (bound_le, "le"), (bound_gt, "gt"), (bound_ge, "ge")):
    overload(_fn)(_bound_impl(_kind))


def scalar_replicas(lists):
    """True when every replica list in ``lists`` holds scalars' replicas (module docstring)."""
    raise NotImplementedError("scalar_replicas is only callable from Numba-compiled code")


@overload(scalar_replicas)
def _scalar_replicas_impl(lists):
    scalars = all(isinstance(t, types.List) and isinstance(t.dtype, types.Array)
                  for t in lists.types)
    return lambda lists: scalars


def replica(n, x):
    """``n`` slots typed like ``x``, all holding ``x`` (nopython only)."""
    raise NotImplementedError("replica is only callable from Numba-compiled code")


@overload(replica)
def _replica_impl(n, x):
    if isinstance(x, (types.Number, types.Boolean)):
        return lambda n, x: np.full(n, x)

    def impl(n, x):
        return [x] * n
    return impl


@intrinsic
def range_item(typingctx, k, args):
    """Item ``k`` of ``range(*args)`` (``0 <= k < len(range(*args))``), in the element type that
    Numba's ``for i in range(*args)`` gives ``i`` (int32, int64 or uint64, by its typing of
    ``range``). ``stride_interchange`` computes a grid-stride loop's iterations out of order with
    it; an ``i`` of another type could change the loop body's arithmetic."""
    if not isinstance(args, types.BaseTuple) or not 1 <= len(args) <= 3:
        return None
    sig = typingctx.resolve_function_type(typingctx.resolve_value_type(range), tuple(args), {})
    if sig is None or not isinstance(k, types.Integer):
        return None
    dtype = sig.return_type.dtype

    def codegen(context, builder, signature, llargs):
        vals = [context.cast(builder, v, t, dtype)
                for v, t in zip(cgutils.unpack_tuple(builder, llargs[1], len(args)), args)]
        start = vals[0] if len(vals) > 1 else context.get_constant(dtype, 0)
        step = vals[2] if len(vals) > 2 else context.get_constant(dtype, 1)
        # modular arithmetic in the element type, as the range's own repeated "+= step": the
        # item itself lies in [start, stop), so it is exact
        return builder.add(start, builder.mul(context.cast(builder, llargs[0], k, dtype), step))
    return dtype(k, args), codegen


def store_differs(old, new):
    """Whether storing ``new`` over the element ``old`` would change the element's bits
    (``passes/shared_stores.py``)."""
    return True


@overload(store_differs)
def _store_differs_impl(old, new):
    # ``new`` is compared as the store writes it: cast to the element's type (float64 0.1 over a
    # float32 element is float32(0.1)). Floats compare equal but store differently for the two
    # zeros, and a NaN is stored whatever the element holds. Anything else (complex, records, a
    # float stored into an integer element) is always stored: the rewrite is only for speed.
    # (half precision has its own type here, fp16.py: always stored)
    if old in (types.float32, types.float64) and isinstance(new, (types.Float, types.Integer,
                                                                  types.Boolean)):
        as_element = np.dtype(str(old)).type

        def impl(old, new):
            value = as_element(new)
            return value != old or math.copysign(1.0, value) != math.copysign(1.0, old)
        return impl
    if isinstance(old, (types.Integer, types.Boolean)) and isinstance(new, (types.Integer,
                                                                            types.Boolean)):
        as_element = np.dtype(str(old)).type
        return lambda old, new: as_element(new) != old
    return lambda old, new: True
