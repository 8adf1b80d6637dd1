"""Float global atomics deferred in a per-chunk ordered log (the float side of ``private_atomics``).

Why this exists: a block reduction ends every cube with ``cuda.atomic.add(total, 0, block_sum)``.
On the CPU each of those is a compare-and-swap loop on one cache line that every core of the
machine wants at once: on 16 cores the two reductions of ``benchmarks/bench_kernels.py`` ran at
2-3x their hand-written references, where 2 cores hid the cost. Integer arrays are privatized
(a private copy merged at the chunk's end), but a float partial sum would be a *re-association*:
``1e16 + 1 + 1`` is ``1e16`` in every order of the adds, ``1e16 + (1 + 1)`` is not.

So a float array gets a *log* instead of a copy: each add of the chunk is recorded in order as
(byte offset of the element, value), and the log is applied when the chunk ends (or when it is
full) with one real atomic add per entry, in the order of the log. Every add still happens, alone
and atomically, on the real array; it only happens later within the same launch. That is one of
the orders a GPU's relaxed atomics may take, so the result is one a GPU can give, bit for bit.
What makes the delay invisible is ``passes/privatize.py``'s proof: the kernel touches the array
*only* through add/sub atomics whose results it ignores, and no other argument of the launch
overlaps it (``alias_free``), so nothing inside the launch can read the array before the end.

The log is a tuple ``(count, offsets, values)``: ``count`` an ``intp[1]``, ``offsets`` the
entries' byte offsets from the array's data pointer (``intp[capacity]``), ``values`` the entries'
values already cast to the array's dtype (``dtype[capacity]``); a sub logs the negated value
(IEEE 754 defines ``x - v`` as ``x + (-v)``). Byte offsets make one log work for any number of
dimensions and any strides. An index outside the array is never logged: it takes today's atomic
path at once, which raises the same ``IndexError`` as before and writes nothing.

Policy (``new_log``): a log of ``min(LOG_CAPACITY, units of the chunk)`` entries when the array is
alias-free and the chunk runs at least ``LOG_MIN_UNITS`` units; otherwise an empty log, and every
add is today's atomic.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload, register_jitable

from numba_cube.backends.cpu.kernel_runtime.atomics import atomic_add, index_ok

__all__ = ["new_log", "logged_add", "logged_sub", "apply_log", "LOG_CAPACITY", "LOG_MIN_UNITS"]

#: entries of a chunk's log: 1,024 entries are 16 KiB for float64, and a full log is applied at
#: once, so memory stays bounded whatever the number of adds
LOG_CAPACITY = 1024
#: a chunk of fewer units logs nothing: allocating the log would cost more than it saves
LOG_MIN_UNITS = 256


def new_log(real, units_per_chunk, alias_free):
    """Python stub; the nopython implementation is the overload below."""
    raise NotImplementedError("new_log is only callable from nopython code")


@overload(new_log)
def _new_log(real, units_per_chunk, alias_free):
    if not (isinstance(real, types.Array) and isinstance(real.dtype, types.Float)):
        return None
    dtype = real.dtype

    def impl(real, units_per_chunk, alias_free):
        capacity = 0
        if alias_free and units_per_chunk >= LOG_MIN_UNITS and real.size > 0:
            capacity = min(LOG_CAPACITY, units_per_chunk)
        return (np.zeros(1, np.intp), np.empty(capacity, np.intp), np.empty(capacity, dtype))
    return impl


@register_jitable
def apply_log(real, log):
    """Apply the log's entries to ``real`` in order, one real atomic add each, and empty it."""
    count, offsets, values = log
    for k in range(count[0]):
        _atomic_add_at(real, offsets[k], values[k])
    count[0] = 0


def _logged_update(negate: bool):
    def update(real, log, idx, val):
        count, offsets, values = log
        # cast first, as the atomic does, then negate (never negate an unsigned integer)
        value = -_cast_like(real, val) if negate else _cast_like(real, val)
        offset = _element_offset(real, idx)
        if offsets.shape[0] == 0 or offset < 0:
            # no log, or an index outside the array: today's atomic (which raises for the latter)
            atomic_add(real, idx, value)
            return
        n = count[0]
        if n == offsets.shape[0]:
            apply_log(real, log)
            n = 0
        offsets[n] = offset
        values[n] = value
        count[0] = n + 1
    return register_jitable(update)


logged_add = _logged_update(negate=False)
logged_sub = _logged_update(negate=True)


@intrinsic
def _cast_like(typingctx, real, val):
    """``val`` cast to ``real``'s dtype, as the atomics cast it."""
    if not (isinstance(real, types.Array) and isinstance(val, (types.Number, types.Boolean))):
        return None

    def codegen(context, builder, sig, args):
        return context.cast(builder, args[1], sig.args[1], sig.return_type)

    return real.dtype(real, val), codegen


@intrinsic
def _element_offset(typingctx, real, idx):
    """The byte offset of ``real[idx]`` from its data pointer, after Numba's wraparound of
    negative indices; -1 when the index lies outside the array."""
    if not isinstance(real, types.Array) or not index_ok(real, idx):
        return None

    def codegen(context, builder, sig, args):
        realty, idxty = sig.args
        if isinstance(idxty, types.BaseTuple):
            inds, tys = cgutils.unpack_tuple(builder, args[1], count=len(idxty)), idxty.types
        else:
            inds, tys = [args[1]], [idxty]
        arr = context.make_array(realty)(context, builder, args[0])
        shape = cgutils.unpack_tuple(builder, arr.shape, realty.ndim)
        strides = cgutils.unpack_tuple(builder, arr.strides, realty.ndim)
        intp = context.get_value_type(types.intp)
        zero = ir.Constant(intp, 0)
        inside = ir.Constant(ir.IntType(1), 1)
        offset = zero
        for ind, ty, dim, stride in zip(inds, tys, shape, strides):
            ind = context.cast(builder, ind, ty, types.intp)
            ind = builder.select(builder.icmp_signed("<", ind, zero), builder.add(ind, dim), ind)
            # unsigned: an index still negative after wrapping is outside too
            inside = builder.and_(inside, builder.icmp_unsigned("<", ind, dim))
            offset = builder.add(offset, builder.mul(ind, stride))
        return builder.select(inside, offset, ir.Constant(intp, -1))

    return types.intp(real, idx), codegen


@intrinsic
def _atomic_add_at(typingctx, real, offset, value):
    """A relaxed atomic float add of ``value`` at ``offset`` bytes into ``real``'s data."""
    if not (isinstance(real, types.Array) and isinstance(real.dtype, types.Float)
            and isinstance(offset, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        realty, offty, valty = sig.args
        arr = context.make_array(realty)(context, builder, args[0])
        base = builder.bitcast(arr.data, ir.IntType(8).as_pointer())
        byte = builder.gep(base, [context.cast(builder, args[1], offty, types.intp)])
        ptr = builder.bitcast(byte, arr.data.type)
        v = context.cast(builder, args[2], valty, realty.dtype)
        builder.atomic_rmw("fadd", ptr, v, "monotonic")
        return context.get_dummy_value()

    return types.none(real, offset, value), codegen
