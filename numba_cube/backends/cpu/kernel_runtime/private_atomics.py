"""Nopython helpers for global atomics privatized per chunk (the translator's side: ``privatize``).

Why this exists: a histogram kernel (``cuda.atomic.add(hist, data[i], 1)`` per element) spends
almost all its time on the CPU in contended ``lock``-prefixed adds to a few hot cache lines. When
the translator has proved that a kernel touches an array *only* through ``cuda.atomic.add``/``sub``
whose results are unused, each chunk of the launch (``emit/entry_points.py``: ``CHUNKS``) may accumulate into a
zeroed private copy of the array with plain adds and merge it into the real array at the end with
one atomic add per non-zero element. For integers this is exact: wrapping addition modulo 2^n is
associative and commutative, so the final value is the one every interleaving of CUDA's atomics
gives.

- ``private_copy(real, units_per_chunk, data_bytes, nchunks, alias_free)``: the chunk's private
  copy, the same shape and dtype as ``real`` (so in-range indices are the same), or an empty array
  (first axis 0) when the policy below says no: then every update takes today's atomic path.
- ``private_add(real, private, idx, val)`` / ``private_sub``: wrap ``idx`` against ``real``'s shape
  as Numba's indexing does; when the result lies inside ``private``, a plain update of
  ``private``; otherwise exactly today's ``atomic_add(real, idx, val)`` (so an out-of-range index
  raises the same ``IndexError`` as before -- numba's ``get_item_pointer`` checks the atomics'
  bounds whether or not ``boundscheck`` is on -- and nothing is written next to the copy).
- ``merge_private(real, private)``: one atomic add of each non-zero private element into ``real``.
- ``array_bytes(x)``: ``x.nbytes`` for an array, 0 for anything else (the launch's data size).
- ``may_alias(a, b)``: whether argument ``b`` could share memory with array ``a`` (address ranges
  for arrays, False for scalars, True -- conservatively -- for anything else).

Policy (``private_copy``), decided per chunk at run time from the array's size:

- integer dtypes only. Float atomics are never summed privately: adding a chunk's partial sum
  is a *re-association*, not a re-ordering of the atomic adds, and can give a result no
  interleaving gives (``1e16 + 1 + 1`` is ``1e16`` in every order; ``1e16 + (1 + 1)`` is not).
  A float array gets an ordered log of its adds instead (``logged_atomics``: ``private_copy``
  returns the log, ``private_add``/``private_sub`` record into it, ``merge_private`` applies it);
- the array does not overlap any other argument of the launch that is not itself privatized
  (``alias_free``): a plain read through an alias must see every add, as on the GPU;
- time: at least ``UNITS_PER_ELEMENT`` units per private element in the chunk, so that zeroing
  and merging (one pass each over the copy per chunk) stay small next to the chunk's work;
- memory: the copies alive at once (one per running chunk, at most ``min(nchunks, MAX_WORKERS)``)
  take at most ``1 / MEMORY_FRACTION`` of the bytes of the launch's array arguments.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.cpython.unsafe.tuple import tuple_setitem
from numba.extending import intrinsic, overload, register_jitable

from numba_cube.backends.cpu.kernel_runtime.atomics import atomic_add, element_pointer, index_ok
from numba_cube.backends.cpu.kernel_runtime.logged_atomics import apply_log, logged_add, logged_sub, new_log

__all__ = ["worth_privatizing", "private_copy", "private_add", "private_sub", "merge_private", "array_bytes",
           "may_alias", "UNITS_PER_ELEMENT", "MEMORY_FRACTION", "MAX_WORKERS"]

#: a chunk privatizes only when it runs at least this many units per element of the copy
UNITS_PER_ELEMENT = 16
#: the private copies alive at once take at most 1/MEMORY_FRACTION of the launch's array bytes
MEMORY_FRACTION = 16
#: the most chunks running at once: Numba's thread pool never exceeds NUMBA_NUM_THREADS
#: (``set_num_threads`` can only lower it). A constant, not ``numba.get_num_threads()``, which
#: would make the generated module uncacheable (see ``emit/entry_points.py``: ``CHUNKS``). Numba freezes it into the
#: cached machine code, so a later change of NUMBA_NUM_THREADS keeps the old bound until the cache
#: is rebuilt: acceptable, as it only bounds memory, never decides a result.
MAX_WORKERS = numba.config.NUMBA_NUM_THREADS


# --------------------------------------------------------------------------------------------
# the private copy and the merge


@register_jitable
def worth_privatizing(size, nbytes, units_per_chunk, data_bytes, nchunks):
    """The time and memory rules of the module docstring, for an array of ``size`` elements
    (``nbytes`` bytes) in a chunk of ``units_per_chunk`` units of a launch of ``nchunks`` chunks
    whose array arguments hold ``data_bytes`` bytes."""
    workers = min(nchunks, MAX_WORKERS)
    return (size > 0 and size * UNITS_PER_ELEMENT <= units_per_chunk
            and nbytes * workers * MEMORY_FRACTION <= data_bytes)


def private_copy(real, units_per_chunk, data_bytes, nchunks, alias_free):
    """Python stub; the nopython implementation is the overload below."""
    raise NotImplementedError("private_copy is only callable from nopython code")


@overload(private_copy)
def _private_copy(real, units_per_chunk, data_bytes, nchunks, alias_free):
    if not isinstance(real, types.Array):
        return None
    if isinstance(real.dtype, types.Float):
        # floats get an ordered log, not a copy (module docstring, ``logged_atomics``)
        return lambda real, units_per_chunk, data_bytes, nchunks, alias_free: new_log(
            real, units_per_chunk, nchunks, alias_free)
    exact = isinstance(real.dtype, types.Integer)

    def impl(real, units_per_chunk, data_bytes, nchunks, alias_free):
        shape = real.shape
        if not (exact and alias_free and worth_privatizing(
                real.size, real.nbytes, units_per_chunk, data_bytes, nchunks)):
            # an empty first axis: no index is inside it, so every update stays atomic
            shape = tuple_setitem(shape, 0, 0)
        return np.zeros(shape, real.dtype)
    return impl


def merge_private(real, private):
    """Python stub; the nopython implementation is the overload below."""
    raise NotImplementedError("merge_private is only callable from nopython code")


@overload(merge_private)
def _merge_private(real, private):
    """An integer array's private copy: add each non-zero element into ``real`` atomically
    (other chunks merge into the same array at the same time; adding 0 would change nothing, so
    it is skipped). A float array's log: apply its entries in order."""
    if isinstance(real, types.Array) and isinstance(real.dtype, types.Float):
        return lambda real, private: apply_log(real, private)

    def impl(real, private):
        for idx in np.ndindex(private.shape):
            value = private[idx]
            if value != 0:
                atomic_add(real, idx, value)
    return impl


# --------------------------------------------------------------------------------------------
# launch-level facts: data size, aliasing


def array_bytes(x):
    """Python stub; the nopython implementation is the overload below."""
    raise NotImplementedError("array_bytes is only callable from nopython code")


@overload(array_bytes)
def _array_bytes(x):
    if isinstance(x, types.Array):
        return lambda x: x.nbytes
    return lambda x: 0


@register_jitable
def _address_range(a):
    """``[lo, hi)``: the bytes an array with at least one element can touch."""
    lo = a.ctypes.data
    hi = lo
    for k in range(a.ndim):
        span = (a.shape[k] - 1) * a.strides[k]
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi + a.itemsize


def may_alias(a, b):
    """Python stub; the nopython implementation is the overload below."""
    raise NotImplementedError("may_alias is only callable from nopython code")


#: argument types that carry no memory another argument could share
_SCALARS = (types.Number, types.Boolean, types.NoneType, types.NPDatetime, types.NPTimedelta,
            types.Omitted)


@overload(may_alias)
def _may_alias(a, b):
    if not isinstance(a, types.Array):
        return None
    if isinstance(b, types.Array):
        def impl(a, b):
            if a.size == 0 or b.size == 0:
                return False
            a_lo, a_hi = _address_range(a)
            b_lo, b_hi = _address_range(b)
            return a_lo < b_hi and b_lo < a_hi
        return impl
    if isinstance(b, _SCALARS):
        return lambda a, b: False
    return lambda a, b: True      # tuples, records, anything else: assume it may


# --------------------------------------------------------------------------------------------
# the update


def _private_update(op: str):
    """Build ``private_<op>(real, private, idx, val)`` for op ``add`` or ``sub``."""
    def typer(typingctx, real, private, idx, val):
        if not isinstance(real, types.Array) or not real.mutable or not index_ok(real, idx):
            return None
        if not (isinstance(private, types.Array) and private.ndim == real.ndim
                and private.dtype == real.dtype):
            return None
        dtype = real.dtype
        if not isinstance(dtype, types.Integer):
            return None                     # floats are logged (``logged_atomics``), not copied
        if not isinstance(val, (types.Number, types.Boolean)):
            return None

        def codegen(context, builder, sig, args):
            realty, privty, idxty, valty = sig.args
            v = context.cast(builder, args[3], valty, dtype)
            inside, wrapped = _inside_private(context, builder, realty, args[0], privty,
                                              args[1], idxty, args[2])
            with builder.if_else(inside, likely=True) as (in_private, elsewhere):
                with in_private:
                    priv = context.make_array(privty)(context, builder, args[1])
                    ptr = cgutils.get_item_pointer2(
                        context, builder, data=priv.data,
                        shape=cgutils.unpack_tuple(builder, priv.shape, privty.ndim),
                        strides=cgutils.unpack_tuple(builder, priv.strides, privty.ndim),
                        layout=privty.layout, inds=wrapped, wraparound=False,
                        boundscheck=False)
                    old = builder.load(ptr)
                    builder.store(getattr(builder, op)(old, v), ptr)
                with elsewhere:
                    # the original index, not ``wrapped``: wrapping twice could move it
                    ptr = element_pointer(context, builder, realty, args[0], idxty, args[2])
                    builder.atomic_rmw(op, ptr, v, "monotonic")
            return context.get_dummy_value()

        return types.none(real, private, idx, val), codegen

    typer.__name__ = f"private_{op}"
    return intrinsic(typer)


def _inside_private(context, builder, realty, real, privty, private, idxty, idx):
    """``(inside, wrapped)``: the index wrapped against ``real``'s shape as Numba's indexing
    wraps it, and whether that lies inside ``private`` on every axis (an unsigned compare also
    rejects what is still negative)."""
    if isinstance(idxty, types.BaseTuple):
        inds, tys = cgutils.unpack_tuple(builder, idx, count=len(idxty)), idxty.types
    else:
        inds, tys = [idx], [idxty]
    inds = [context.cast(builder, i, t, types.intp) for i, t in zip(inds, tys)]
    real_shape = cgutils.unpack_tuple(builder, context.make_array(realty)(
        context, builder, real).shape, realty.ndim)
    priv_shape = cgutils.unpack_tuple(builder, context.make_array(privty)(
        context, builder, private).shape, privty.ndim)
    zero = ir.Constant(inds[0].type, 0)
    inside = ir.Constant(ir.IntType(1), 1)
    wrapped = []
    for ind, real_dim, priv_dim in zip(inds, real_shape, priv_shape):
        ind = builder.select(builder.icmp_signed("<", ind, zero), builder.add(ind, real_dim), ind)
        wrapped.append(ind)
        inside = builder.and_(inside, builder.icmp_unsigned("<", ind, priv_dim))
    return inside, wrapped


_copy_add = _private_update("add")
_copy_sub = _private_update("sub")


def private_add(real, private, idx, val):
    """Python stub; the nopython implementation is the overload below."""
    raise NotImplementedError("private_add is only callable from nopython code")


def private_sub(real, private, idx, val):
    """Python stub; the nopython implementation is the overload below."""
    raise NotImplementedError("private_sub is only callable from nopython code")


@overload(private_add)
def _private_add(real, private, idx, val):
    if isinstance(real, types.Array) and isinstance(real.dtype, types.Float):
        return lambda real, private, idx, val: logged_add(real, private, idx, val)
    return lambda real, private, idx, val: _copy_add(real, private, idx, val)


@overload(private_sub)
def _private_sub(real, private, idx, val):
    if isinstance(real, types.Array) and isinstance(real.dtype, types.Float):
        return lambda real, private, idx, val: logged_sub(real, private, idx, val)
    return lambda real, private, idx, val: _copy_sub(real, private, idx, val)
