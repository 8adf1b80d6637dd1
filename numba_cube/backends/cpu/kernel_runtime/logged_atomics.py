"""Float global atomics deferred in a per-chunk ordered log (the float side of ``private_atomics``).

Why this exists: a block reduction ends every cube with ``cuda.atomic.add(total, 0, block_sum)``.
On the CPU each of those is a compare-and-swap loop on one cache line that every core of the
machine wants at once: on 16 cores the two reductions of ``benchmarks/bench_kernels.py`` ran at
2-3x their hand-written references, where 2 cores hid the cost. Integer arrays are privatized
(a private copy merged at the chunk's end), but a float partial sum would be a *re-association*:
``1e16 + 1 + 1`` is ``1e16`` in every order of the adds, ``1e16 + (1 + 1)`` is not.

So a float array gets a *log* instead of a copy: each add of the chunk is recorded in order as
(byte offset of the element, value), and the log is applied when the chunk ends (or when it is
full), in the order of the log (``apply_log``: a run of entries on one element lands with one
compare-and-swap). Every add still happens on the real array, rounded on its own; it only
happens later within the same launch, and a run's adds happen back to back. That is one of the
orders a GPU's relaxed atomics may take, so the result is one a GPU can give, bit for bit.
What makes the delay invisible is ``passes/privatize.py``'s proof: the kernel touches the array
*only* through add/sub atomics whose results it ignores, and no other argument of the launch
overlaps it (``alias_free``), so nothing inside the launch can read the array before the end.

The log is one ``float64`` array ``[count, offset_0, value_0, offset_1, value_1, ...]``: each
entry's byte offset from the array's data pointer (exact in a float64 below 2^53) and its value,
cast to the array's dtype first (exact in a float64 for float32 and float64 arrays; other float
dtypes are not logged). One array, not a tuple of three: with a tuple (count, offsets, values)
the block reduction took 8.7 ms at one thread against 6.2 ms with one array (the VM; likely
Numba's reference counting of the arrays unpacked on every add). A sub logs the negated value (IEEE 754 defines ``x - v`` as
``x + (-v)``). Byte offsets make one log work for any number of dimensions and any strides. An index outside the array is never logged: it takes today's atomic
path at once, which raises the same ``IndexError`` as before and writes nothing.

Policy (``new_log``): a log of ``min(LOG_CAPACITY, units of the chunk)`` entries when the launch
runs in at least ``LOG_MIN_CHUNKS`` chunks, the array is alias-free and the chunk runs at least
``LOG_MIN_UNITS`` units; otherwise an empty log, and every add is today's atomic. With few
chunks there is little contention, and logging costs more than it saves. Measured with
``benchmarks/bench_float_atomics.py`` (time logged / time atomic, block reduction and warp-shuffle
reduction of 2^24 float64): 1 thread 1.17 and 1.07, 2 threads 1.02 and 1.07 (the 2-core VM);
4 threads 0.82 and 1.00, 8 threads 0.42 and 0.90, 16 threads 0.16 and 0.68 (the 16-core host of
an H100 machine).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload, register_jitable

from numba_cube.backends.cpu.kernel_runtime.atomics import atomic_add, index_ok

__all__ = ["new_log", "logged_add", "logged_sub", "apply_log", "LOG_CAPACITY", "LOG_MIN_UNITS",
           "LOG_MIN_CHUNKS"]

#: entries of a chunk's log: 1,024 entries are 16 KiB for float64, and a full log is applied at
#: once, so memory stays bounded whatever the number of adds
LOG_CAPACITY = 1024
#: a chunk of fewer units logs nothing: allocating the log would cost more than it saves
LOG_MIN_UNITS = 256
#: a launch of fewer chunks logs nothing: its atomics are hardly contended (module docstring)
LOG_MIN_CHUNKS = 3


def new_log(real, units_per_chunk, nchunks, alias_free):
    """Python stub; the nopython implementation is the overload below."""
    raise NotImplementedError("new_log is only callable from nopython code")


@overload(new_log)
def _new_log(real, units_per_chunk, nchunks, alias_free):
    if not (isinstance(real, types.Array) and isinstance(real.dtype, types.Float)):
        return None
    # float16 (and anything wider than float64) keeps today's atomic: no log
    loggable = real.dtype in (types.float32, types.float64)

    def impl(real, units_per_chunk, nchunks, alias_free):
        capacity = 0
        if (loggable and nchunks >= LOG_MIN_CHUNKS and alias_free
                and units_per_chunk >= LOG_MIN_UNITS and real.size > 0):
            capacity = min(LOG_CAPACITY, units_per_chunk)
        log = np.empty(1 + 2 * capacity, np.float64)
        log[0] = 0
        return log
    return impl


@register_jitable
def apply_log(real, log):
    """Apply the log's entries to ``real`` in order and empty it.

    A run of consecutive entries on one element (a block reduction's whole log) is applied as
    one indivisible step: read the element, add the run's values to it one after another, each
    add rounded on its own in the array's dtype, and store the result with one compare-and-swap
    on the bits read; if another chunk changed the element meanwhile, start the run again from
    its new value. A successful swap is exactly the run's adds done back to back with no other
    add between them, which is one order a GPU's atomics may take; and the element's cache line
    changes hands once per run instead of once per add (16 cores contending for one line made
    each of a block reduction's adds cost about 50 ns)."""
    n = int(log[0])
    k = 0
    while k < n:
        offset = log[1 + 2 * k]
        end = k + 1
        while end < n and log[1 + 2 * end] == offset:
            end += 1
        at = int(offset)
        while True:
            old = _load_at(real, at)
            acc = old
            for j in range(k, end):
                # exact: the value was cast to the array's dtype before it was logged
                acc = acc + _cast_like(real, log[2 + 2 * j])
            if _swap_at(real, at, old, acc):
                break
        k = end
    log[0] = 0


def _logged_update(negate: bool):
    def update(real, log, idx, val):
        # cast first, as the atomic does, then negate (never negate an unsigned integer)
        value = -_cast_like(real, val) if negate else _cast_like(real, val)
        offset = _element_offset(real, idx)
        if log.shape[0] == 1 or offset < 0:
            # no log, or an index outside the array: today's atomic (which raises for the latter)
            atomic_add(real, idx, value)
            return
        n = int(log[0])
        if 1 + 2 * n == log.shape[0]:
            apply_log(real, log)
            n = 0
        log[1 + 2 * n] = offset
        log[2 + 2 * n] = value
        log[0] = n + 1
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


def _float_pointer(context, builder, realty, real, offset, offty):
    """``real``'s data pointer moved by ``offset`` bytes."""
    arr = context.make_array(realty)(context, builder, real)
    base = builder.bitcast(arr.data, ir.IntType(8).as_pointer())
    byte = builder.gep(base, [context.cast(builder, offset, offty, types.intp)])
    return builder.bitcast(byte, arr.data.type)


@intrinsic
def _load_at(typingctx, real, offset):
    """The element at ``offset`` bytes into ``real``'s data (a relaxed atomic load: other
    chunks may be swapping it)."""
    if not (isinstance(real, types.Array) and isinstance(real.dtype, types.Float)
            and isinstance(offset, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        realty, offty = sig.args
        ptr = _float_pointer(context, builder, realty, args[0], args[1], offty)
        ity = ir.IntType(realty.dtype.bitwidth)
        bits = builder.load_atomic(builder.bitcast(ptr, ity.as_pointer()), "monotonic",
                                   realty.dtype.bitwidth // 8)
        return builder.bitcast(bits, ptr.type.pointee)

    return real.dtype(real, offset), codegen


@intrinsic
def _swap_at(typingctx, real, offset, expected, new):
    """Compare-and-swap on the *bits* of the element at ``offset`` bytes (a float compare would
    never match a NaN, and would match -0.0 with 0.0): True when ``expected``'s bits were there
    and ``new`` replaced them."""
    if not (isinstance(real, types.Array) and isinstance(real.dtype, types.Float)
            and isinstance(offset, types.Integer) and expected == real.dtype
            and new == real.dtype):
        return None

    def codegen(context, builder, sig, args):
        realty, offty = sig.args[:2]
        ptr = _float_pointer(context, builder, realty, args[0], args[1], offty)
        ity = ir.IntType(realty.dtype.bitwidth)
        res = builder.cmpxchg(builder.bitcast(ptr, ity.as_pointer()),
                              builder.bitcast(args[2], ity), builder.bitcast(args[3], ity),
                              "monotonic", "monotonic")
        return builder.extract_value(res, 1)

    return types.boolean(real, offset, expected, new), codegen
