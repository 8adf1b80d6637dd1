"""CPU implementations of ``cuda.atomic.*``, callable from Numba nopython code.

Why this exists: the CPU backend runs the cubes (blocks) of a launch concurrently on a thread
pool, so an update that CUDA performs atomically on a *global* array must be a real atomic
instruction here too. Without it a ``prange`` histogram lost up to 3.9 M of 16.8 M increments in
the research prototype. Numba has no public
atomics for the CPU target, so each operation is an ``@intrinsic`` that emits LLVM ``atomicrmw``
or a ``cmpxchg`` loop.

Every function follows CUDA's contract: ``op(ary, idx, val)`` updates ``ary[idx]`` and returns the
value it held before (``cas(ary, idx, expected, new)`` likewise). ``idx`` is an integer for 1-D
arrays or a tuple of integers with one entry per dimension; negative indices wrap around as in
Numba's own indexing, and with ``boundscheck=True`` an out-of-range index raises ``IndexError``.
``val`` is cast to the array's dtype. Integer and float dtypes of any width are accepted; the bit
operations (``and_``, ``or_``, ``xor``) and ``inc``/``dec`` are integer-only, as in CUDA.

Two families are exported with the same semantics:

- ``atomic_<op>``: a real atomic with ``monotonic`` ordering (CUDA's atomics are relaxed).
  Float ``max``/``min``/``nanmax``/``nanmin``, ``inc``/``dec`` and float ``exch``/``cas`` use a
  ``cmpxchg`` loop on the integer bit pattern; float ``add``/``sub`` use ``fadd``/``fsub``.
- ``plain_<op>``: an ordinary load / compute / store. The translator uses these for
  ``cuda.shared`` and ``cuda.local`` arrays, which only the worker running the cube can see, so
  the lock prefix would be pure cost.

NaN handling mirrors numba.cuda: ``max``/``min`` leave the cell alone when either the stored value
or ``val`` is NaN; ``nanmax``/``nanmin`` ignore a NaN ``val`` and replace a NaN cell.

``private_atomics`` builds the privatized global atomics (``passes/privatize.py``) on
``element_pointer`` and ``index_ok``.

The generated modules import these by name (``from numba_cube.backends.cpu.kernel_runtime.atomics import
atomic_add as __atomic_add``) so that Numba's on-disk cache can re-import them; changing this file
changes the hash of every generated module (see ``module.SUPPORT_DIGEST``).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = []  # filled in by _export below


# --------------------------------------------------------------------------------------------
# helpers shared by all operations


def index_ok(arr, idx) -> bool:
    """True when ``idx`` can address one element of ``arr`` (int for 1-D, else a full tuple)."""
    if isinstance(idx, types.Integer):
        return arr.ndim == 1
    return (isinstance(idx, types.BaseTuple) and len(idx) == arr.ndim
            and all(isinstance(t, types.Integer) for t in idx.types))


def element_pointer(context, builder, arrty, ary, idxty, idx):
    """Pointer to ``ary[idx]`` with Numba's wraparound and (when enabled) bounds checking."""
    aryobj = context.make_array(arrty)(context, builder, ary)
    if isinstance(idxty, types.BaseTuple):
        inds = cgutils.unpack_tuple(builder, idx, count=len(idxty))
        tys = idxty.types
    else:
        inds, tys = [idx], [idxty]
    inds = [context.cast(builder, i, t, types.intp) for i, t in zip(inds, tys)]
    # boundscheck=True only *requests* a check: cgutils emits it when the function being compiled
    # has boundscheck enabled, exactly like Numba's own getitem.
    return cgutils.get_item_pointer(context, builder, arrty, aryobj, inds,
                                    wraparound=True, boundscheck=True)


def _as_int(builder, ptr, value, dtype):
    """View a float pointer/value as the integer of the same width (cmpxchg needs integers)."""
    ity = ir.IntType(dtype.bitwidth)
    return builder.bitcast(ptr, ity.as_pointer()), builder.bitcast(value, ity), ity


def _cas_loop(builder, ptr, val, dtype, step):
    """Emit ``do { old = *ptr; want, new = step(old) } while (want && !cas(ptr, old, new))``.

    Returns the value observed last, which is the old value CUDA's functions return: either the
    one that was replaced, or the one that made ``want`` false.
    """
    is_float = isinstance(dtype, types.Float)
    if is_float:
        iptr, _, ity = _as_int(builder, ptr, val, dtype)
    else:
        iptr, ity = ptr, val.type
    align = dtype.bitwidth // 8
    entry = builder.basic_block
    loop = builder.append_basic_block("cas.loop")
    attempt = builder.append_basic_block("cas.attempt")
    done = builder.append_basic_block("cas.done")
    first = builder.load_atomic(iptr, "monotonic", align)
    builder.branch(loop)

    builder.position_at_end(loop)
    old_bits = builder.phi(ity)
    old_bits.add_incoming(first, entry)
    old = builder.bitcast(old_bits, val.type) if is_float else old_bits
    want, new = step(builder, old)
    builder.cbranch(want, attempt, done)

    builder.position_at_end(attempt)
    new_bits = builder.bitcast(new, ity) if is_float else new
    res = builder.cmpxchg(iptr, old_bits, new_bits, "monotonic", "monotonic")
    old_bits.add_incoming(builder.extract_value(res, 0), attempt)
    builder.cbranch(builder.extract_value(res, 1), done, loop)

    builder.position_at_end(done)
    return old


def _plain_update(builder, ptr, val, dtype, step):
    """Non-atomic twin of ``_cas_loop``: one load, one (possibly unchanged) store."""
    old = builder.load(ptr)
    want, new = step(builder, old)
    builder.store(builder.select(want, new, old), ptr)
    return old


# --------------------------------------------------------------------------------------------
# the per-operation "step" functions: given the old value, do we store, and what?

_TRUE = ir.Constant(ir.IntType(1), 1)


def _step_fixed(op):
    """Plain arithmetic update, used by the non-atomic variants of add/sub/and/or/xor/exch."""
    def make(dtype, val):
        def step(builder, old):
            if op == "exch":
                return _TRUE, val
            if isinstance(dtype, types.Float):
                fn = {"add": builder.fadd, "sub": builder.fsub}[op]
            else:
                fn = {"add": builder.add, "sub": builder.sub, "and_": builder.and_,
                      "or_": builder.or_, "xor": builder.xor}[op]
            return _TRUE, fn(old, val)
        return step
    return make


def _step_minmax(op):
    """max/min/nanmax/nanmin with numba.cuda's NaN rules (floats) or plain compare (ints)."""
    def make(dtype, val):
        def step(builder, old):
            if isinstance(dtype, types.Integer):
                cmp = builder.icmp_signed if dtype.signed else builder.icmp_unsigned
                better = cmp(">" if op.endswith("max") else "<", val, old)
                return better, val
            if op in ("max", "min"):
                # ordered compare: false when either side is NaN, so NaN leaves the cell alone
                better = builder.fcmp_ordered("<" if op == "max" else ">", old, val)
            else:
                # unordered compare: true when the cell is NaN; but a NaN val never wins
                better = builder.and_(
                    builder.fcmp_unordered("<" if op == "nanmax" else ">", old, val),
                    builder.fcmp_ordered("==", val, val))
            return better, val
        return step
    return make


def _step_incdec(op):
    """CUDA's wrapping counters: inc -> (old >= val ? 0 : old + 1); dec -> (old == 0 || old > val
    ? val : old - 1). Comparisons are unsigned for unsigned dtypes, as in CUDA."""
    def make(dtype, val):
        def step(builder, old):
            cmp = builder.icmp_signed if dtype.signed else builder.icmp_unsigned
            zero, one = ir.Constant(old.type, 0), ir.Constant(old.type, 1)
            if op == "inc":
                new = builder.select(cmp(">=", old, val), zero, builder.add(old, one))
            else:
                wrap = builder.or_(builder.icmp_unsigned("==", old, zero), cmp(">", old, val))
                new = builder.select(wrap, val, builder.sub(old, one))
            return _TRUE, new
        return step
    return make


# atomicrmw opcodes where LLVM has one; None means "use the cmpxchg loop"
_RMW_INT = {"add": "add", "sub": "sub", "and_": "and", "or_": "or", "xor": "xor",
            "exch": "xchg", "max": "max", "min": "min", "nanmax": "max", "nanmin": "min"}
_RMW_FLOAT = {"add": "fadd", "sub": "fsub"}
_INT_ONLY = {"and_", "or_", "xor", "inc", "dec"}


def _step_for(op):
    if op in ("max", "min", "nanmax", "nanmin"):
        return _step_minmax(op)
    if op in ("inc", "dec"):
        return _step_incdec(op)
    return _step_fixed(op)


def _make_update(op: str, atomic: bool):
    """Build the intrinsic ``atomic_<op>`` / ``plain_<op>`` (three arguments: ary, idx, val)."""
    make_step = _step_for(op)

    def typer(typingctx, ary, idx, val):
        if not isinstance(ary, types.Array) or not ary.mutable or not index_ok(ary, idx):
            return None
        dtype = ary.dtype
        if not isinstance(dtype, (types.Integer, types.Float)):
            return None
        if op in _INT_ONLY and not isinstance(dtype, types.Integer):
            return None
        if not isinstance(val, (types.Number, types.Boolean)):
            return None

        def codegen(context, builder, sig, args):
            arrty, idxty, valty = sig.args
            ptr = element_pointer(context, builder, arrty, args[0], idxty, args[1])
            v = context.cast(builder, args[2], valty, dtype)
            step = make_step(dtype, v)
            if not atomic:
                return _plain_update(builder, ptr, v, dtype, step)
            if isinstance(dtype, types.Integer) and op in _RMW_INT:
                rmw = _RMW_INT[op]
                if rmw in ("max", "min") and not dtype.signed:
                    rmw = "u" + rmw
                return builder.atomic_rmw(rmw, ptr, v, "monotonic")
            if isinstance(dtype, types.Float) and op in _RMW_FLOAT:
                return builder.atomic_rmw(_RMW_FLOAT[op], ptr, v, "monotonic")
            if isinstance(dtype, types.Float) and op == "exch":
                iptr, ival, _ = _as_int(builder, ptr, v, dtype)
                old = builder.atomic_rmw("xchg", iptr, ival, "monotonic")
                return builder.bitcast(old, v.type)
            return _cas_loop(builder, ptr, v, dtype, step)

        return dtype(ary, idx, val), codegen

    typer.__name__ = f"{'atomic' if atomic else 'plain'}_{op.rstrip('_')}"
    return intrinsic(typer)


def _make_cas(atomic: bool):
    """Build ``atomic_cas`` / ``plain_cas``: ``cas(ary, idx, expected, new) -> old``.

    Floats are compared by bit pattern (what ``cmpxchg`` on the integer view does), so a NaN
    ``expected`` matches a stored NaN with the same bits.
    """
    def typer(typingctx, ary, idx, expected, new):
        if not isinstance(ary, types.Array) or not ary.mutable or not index_ok(ary, idx):
            return None
        dtype = ary.dtype
        if not isinstance(dtype, (types.Integer, types.Float)):
            return None

        def codegen(context, builder, sig, args):
            arrty, idxty, ety, nty = sig.args
            ptr = element_pointer(context, builder, arrty, args[0], idxty, args[1])
            e = context.cast(builder, args[2], ety, dtype)
            n = context.cast(builder, args[3], nty, dtype)
            is_float = isinstance(dtype, types.Float)
            if is_float:
                ptr, e_bits, _ = _as_int(builder, ptr, e, dtype)
                n_bits = builder.bitcast(n, e_bits.type)
            else:
                e_bits, n_bits = e, n
            if atomic:
                res = builder.cmpxchg(ptr, e_bits, n_bits, "monotonic", "monotonic")
                old = builder.extract_value(res, 0)
            else:
                old = builder.load(ptr)
                builder.store(builder.select(builder.icmp_unsigned("==", old, e_bits),
                                             n_bits, old), ptr)
            return builder.bitcast(old, e.type) if is_float else old

        return dtype(ary, idx, expected, new), codegen

    typer.__name__ = "atomic_cas" if atomic else "plain_cas"
    return intrinsic(typer)


#: the cuda.atomic names the translator maps onto this module (``compare_and_swap`` is lowered
#: to ``cas`` with index 0 by the translator)
OPS = ("add", "sub", "max", "min", "nanmax", "nanmin", "exch", "and_", "or_", "xor",
       "inc", "dec", "cas")


def _export():
    g = globals()
    for op in OPS:
        for atomic in (True, False):
            fn = _make_cas(atomic) if op == "cas" else _make_update(op, atomic)
            name = f"{'atomic' if atomic else 'plain'}_{op.rstrip('_')}"
            g[name] = fn
            __all__.append(name)


_export()


def function_name(op: str, atomic: bool) -> str:
    """Name under which this module exports cuda.atomic.<op> (atomic or plain variant)."""
    return f"{'atomic' if atomic else 'plain'}_{op.rstrip('_')}"
