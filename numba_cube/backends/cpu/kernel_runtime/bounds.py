"""The run-time half of the CPU backend's bounds checks: ``checked_index``, which generated
kernel modules import when they are compiled with ``boundscheck=True`` (``passes/bounds/checks.py`` rewrites
their subscripts to call it), and ``described``, which turns what it raises into the message;
then the helpers of checks hoisted out of loops (``prechecked``, ``in_bounds``, ``range_ends``,
``small``: ``bounds._Loop``).

``checked_index(array, index, site, cube, unit)`` returns ``index`` unchanged once every integer
component of it lies inside its axis (``-size <= i < size``: Numba wraps a negative index around,
as numba-cuda does). Otherwise it records ``(site, axis, size, *cube, *unit, *components)`` for
the failing thread (``record_failure``) and raises the constant ``IndexError(MARK)``: a message
built as a string inside the kernel costs every access, not only the failing one
(``benchmarks/bench_cpu.py --boundscheck``: that made the checked axpy 35x and the tiled matmul
about 350x their unchecked times). ``site`` numbers the subscript in the generated module's
``__bounds_sites`` table (the array's text); ``cube`` and ``unit`` are the block and thread
index, ``(x, y, z)`` (along the loop over a row's global coordinate, the pair ``(global
coordinate, -block size)`` instead, divided out here: no division runs until a check fails).
The backend's launch (``server.py``) hands the exception to ``described``,
which takes the failing thread's record and makes it::

    kernel k: a[12] out of bounds for axis 0 with size 10 (cube (1, 0, 0), unit (2, 0, 0))

It is an overload, inlined by Numba where it is called (``inline="always"``): called as a
function, the array argument was reference-counted at each access (the checked axpy 13x
slower), and an intrinsic emitting the same tests kept LLVM from folding them in the 9-point
stencil (3.7x instead of 1.1x). What it checks is decided from the types when the kernel
compiles: an index of integers and slices, one per axis at most, by one function written out
for that pattern (``_check_for``; a slice takes up its axis, is never out of bounds, and is
shown as ``:``). Any other index of an array (an integer array, ``None``, ...) goes through
``_probe``, compiled with Numba's own ``boundscheck=True``, which raises Numba's plain
``IndexError``: the functions that call the checker are compiled without Numba's flag
(``bounds.relax``), so every array index they use must be checked here, one way or the other.
What is not an array (a tuple, a record) is returned untouched: Numba checks a tuple's run-time
index whatever its flag, and a record takes only literal fields.

A literal index is checked by a statement of its own, ``__checked(out, 0, ...)``, before the
statement that uses it (``passes/bounds/checks.py``): the literal stays in the subscript, where Numba needs it
to type ``t[0]`` of a tuple. (A function returning the checked array instead, ``f(t, 0)[0][i] =
v``, lost the store: Numba's dead-code pass did not see that the array it returned was ``t``'s.)

Why a record and a constant exception, not ``IndexError(MARK, site, ..., components)``: Numba
never frees an exception whose arguments are run-time values (the wrapper that turns the native
exception into a Python one keeps a reference to the pickled exception and to the tuple of boxed
arguments: ``numba/core/callconv.py``, ``unpack_dynamic_exception``, and
``numba_runtime_build_excinfo_struct`` in ``_helperlib.c``), so every failing launch leaked about
0.8 KB. A constant exception is unpickled once and memoised. The record is stored by a cold,
never-inlined function (``_recorder``: it takes the GIL and calls ``_keep_record``, which keeps
the values in a ``threading.local``) on the failing branch only: a check that passes runs the
same two comparisons as before. It is per thread because launches run on several threads at
once; the thread that raises the exception is the one ``described`` runs on (a chunk failing in
the parallel region is re-run serially on the launching thread: ``module._guarded_parallel``).
"""

from __future__ import annotations

import hashlib
import threading

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic, overload

__all__ = ["checked_index", "described", "MARK", "prechecked", "in_bounds", "range_ends", "small",
           "record_failure"]

#: The first argument of the raw ``IndexError`` of a failed check.
MARK = "numba_cube.bounds"
#: What a slice component is reported as in the raw exception (no index can be this value).
_SLICE = -(1 << 63)


@njit(boundscheck=True)
def _probe(array, index):
    """``array[index]`` under Numba's own bounds check: its plain ``IndexError`` for an index
    form ``checked_index`` does not take apart (the result is returned so that the access
    stays)."""
    return array[index]


def checked_index(array, index, site, cube, unit):
    """``index``, after checking it against ``array``'s shape (nopython only; module docstring)."""
    raise NotImplementedError("checked_index runs inside generated kernels only")


def _unchanged(array, index, site, cube, unit):
    return index


def _probing(array, index, site, cube, unit):
    _probe(array, index)
    return index


_CHECKS: dict = {}


def _check_for(pattern: tuple):
    """The check of an index whose components are ``pattern`` (``"i"`` an integer, ``":"`` a
    slice; ``()`` for a bare integer): written out as one function, with no call in it, so
    that Numba inlines one function per subscript (nested inlined helpers, one per component,
    made a checked kernel take up to 9x as long to compile as an unchecked one)."""
    found = _CHECKS.get(pattern)
    if found is not None:
        return found
    bare = not pattern
    comps = ["index"] if bare else [f"index[{k}]" for k in range(len(pattern))]
    kinds = "i" if bare else pattern
    shown = ", ".join(c if kind == "i" else str(_SLICE) for c, kind in zip(comps, kinds))
    lines = ["def check(array, index, site, cube, unit):"]
    for axis, (c, kind) in enumerate(zip(comps, kinds)):
        if kind != "i":
            continue            # a slice is clipped to its axis: nothing to check
        lines += [f"    n = array.shape[{axis}]",
                  f"    if {c} >= n or {c} < -n:",
                  f"        record((site, {axis}, n, cube[0], cube[1], cube[2], unit[0], unit[1],"
                  f" unit[2], {shown}))",
                  "        raise IndexError(MARK)"]
    lines.append("    return index")
    namespace = {"MARK": MARK, "record": record_failure}
    exec("\n".join(lines), namespace)
    found = _CHECKS[pattern] = namespace["check"]
    return found


@overload(checked_index, inline="always")
def _checked_index(array, index, site, cube, unit):
    if not isinstance(array, types.Buffer):
        return _unchanged       # a tuple (Numba checks it anyway), a record, a scalar
    components = list(index.types) if isinstance(index, types.BaseTuple) else [index]
    if (not isinstance(array, types.Array) or not 1 <= len(components) <= array.ndim
            or not all(isinstance(c, (types.Integer, types.SliceType)) for c in components)):
        return _probing
    if not any(isinstance(c, types.Integer) for c in components):
        return _unchanged       # slices only: a slice is clipped to its axis, never outside it
    if not isinstance(index, types.BaseTuple):
        return _check_for(())
    return _check_for(tuple("i" if isinstance(c, types.Integer) else ":" for c in components))


def described(exc: BaseException, kernel_name: str, sites: tuple) -> BaseException:
    """The ``IndexError`` with its message for the raw one of a failed check (and this thread's
    record of it, which it takes); any other exception as it is."""
    if not (isinstance(exc, IndexError) and getattr(exc, "args", ()) == (MARK,)):
        return exc
    values, _failure.values = getattr(_failure, "values", None), None
    if values is None:      # cannot happen: the check records before it raises
        return IndexError(f"kernel {kernel_name}: an index out of bounds (which one was not "
                          f"recorded: please report this as a numba_cube bug)")
    site, axis, size, cube, unit, components = (values[0], values[1], values[2],
                                                list(values[3:6]), list(values[6:9]), values[9:])
    for d in range(3):
        if unit[d] < 0:     # (global coordinate, -block size) along a row loop (passes/bounds/checks.py)
            cube[d], unit[d] = divmod(cube[d], -unit[d])
    name = sites[site] if 0 <= site < len(sites) else "?"
    shown = ", ".join(":" if c == _SLICE else str(c) for c in components)
    return IndexError(f"kernel {kernel_name}: {name}[{shown}] out of bounds for axis {axis} with "
                      f"size {size} (cube {tuple(cube)}, unit {tuple(unit)})")


# ---- the record of a failed check (module docstring: "Why a record") ------------------------

_failure = threading.local()


def _keep_record(values: tuple) -> None:
    """Called by a failing check's native code, with the GIL, on the thread that will raise."""
    _failure.values = values


@intrinsic
def record_failure(typingctx, values):
    """Keep the tuple of integers ``values`` as this thread's record of a failed check."""
    if not (isinstance(values, types.BaseTuple)
            and all(isinstance(types.unliteral(t), types.Integer) for t in values.types)):
        return None
    plain = tuple(types.unliteral(t) for t in values.types)

    def codegen(context, builder, sig, args):
        items = cgutils.unpack_tuple(builder, args[0], len(plain))
        cast = [context.cast(builder, v, t, p) for v, t, p in zip(items, values.types, plain)]
        builder.call(_recorder(context, builder.module, plain), cast)
        return context.get_dummy_value()
    return types.none(values), codegen


def _recorder(context, module, item_types: tuple):
    """The module's function ``void(items...)`` that boxes the items, takes the GIL and calls
    ``_keep_record`` with their tuple: one per module and item types, internal, cold and never
    inlined, so that a check's failing branch holds one call."""
    digest = hashlib.sha256(str(item_types).encode()).hexdigest()[:16]
    name = f"numba_cube_bounds_record_{digest}"
    found = module.globals.get(name)
    if found is not None:
        return found
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(),
                                             [context.get_value_type(t) for t in item_types]),
                     name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    pyapi = context.get_python_api(builder)
    gil = pyapi.gil_ensure()
    keep = pyapi.unserialize(pyapi.serialize_object(_keep_record))
    boxed = [pyapi.from_native_value(t, a) for t, a in zip(item_types, fn.args)]
    packed = pyapi.tuple_pack(boxed)
    result = pyapi.call_function_objargs(keep, [packed])
    with builder.if_then(cgutils.is_null(builder, result), likely=False):
        pyapi.err_clear()   # nothing can go wrong; if it did, ``described`` says it lost the record
    for obj in (result, packed, keep, *boxed):
        pyapi.decref(obj)   # Py_DecRef: NULL is let through
    pyapi.gil_release(gil)
    builder.ret_void()
    return fn


# ---- checks hoisted out of a loop (passes/bounds/checks.py, "Loops") ----------------------------------------

#: A hoisted check takes a loop whose range's ends are at most this far from 0 ...
_MOST_END = 1 << 40
#: ... and indices whose coefficient of the loop variable is at most this: then no index of the
#: loop wraps around int64 unless one at an end does, and that one is far outside any array.
_MOST_COEFFICIENT = 1 << 20


# Intrinsics: their code is emitted where they are called, with nothing for Numba to type and
# inline per call. (With these and the checks all inlined overloads, a check per component, the
# tiled matmul's module took 28 s to compile, against 2.5 s unchecked.)

@intrinsic
def prechecked(typingctx, index):
    """``index``: the mark of a subscript whose every index in its loop was checked before the
    loop ran."""
    return index(index), lambda context, builder, sig, args: args[0]


@intrinsic
def in_bounds(typingctx, array, index):
    """Whether ``index`` lies inside ``array`` as ``checked_index`` decides it, without raising:
    True for what is not an array (nothing a wild index reaches), False for an index form it does
    not take apart (an array index, more components than axes, ...)."""
    components = list(index.types) if isinstance(index, types.BaseTuple) else [index]
    sig = types.boolean(array, index)
    if not isinstance(array, types.Buffer):
        return sig, lambda context, builder, sig, args: cgutils.true_bit
    if (not isinstance(array, types.Array) or not 1 <= len(components) <= array.ndim
            or not all(isinstance(c, types.Integer) for c in components)):
        return sig, lambda context, builder, sig, args: cgutils.false_bit

    def codegen(context, builder, sig, args):
        arrayty, indexty = sig.args
        ary = context.make_array(arrayty)(context, builder, args[0])
        shapes = cgutils.unpack_tuple(builder, ary.shape, arrayty.ndim)
        values = (cgutils.unpack_tuple(builder, args[1], len(components))
                  if isinstance(indexty, types.BaseTuple) else [args[1]])
        inside = cgutils.true_bit
        for value, ty, size in zip(values, components, shapes):
            if ty.signed:
                i = context.cast(builder, value, ty, types.intp)
                ok = builder.and_(builder.icmp_signed("<", i, size),
                                  builder.icmp_signed(">=", i, builder.neg(size)))
            else:
                ok = builder.icmp_unsigned("<", context.cast(builder, value, ty, types.uintp),
                                           size)
            inside = builder.and_(inside, ok)
        return inside
    return sig, codegen


@intrinsic
def range_ends(typingctx, start, stop, step):
    """``(ok, first, last)`` of ``range(start, stop, step)`` as int64: ``ok`` when the range is
    not empty, its arguments are signed integers and its ends (and step) are within
    ``_MOST_END`` of 0."""
    result = types.Tuple((types.boolean, types.int64, types.int64))
    sig = result(start, stop, step)
    if not all(isinstance(t, types.Integer) and t.signed for t in (start, stop, step)):
        def never(context, builder, sig, args):
            zero = context.get_constant(types.int64, 0)
            return context.make_tuple(builder, result, [cgutils.false_bit, zero, zero])
        return sig, never

    def codegen(context, builder, sig, args):
        a, b, s = (context.cast(builder, v, t, types.int64) for v, t in zip(args, sig.args))
        one, lim = (context.get_constant(types.int64, c) for c in (1, _MOST_END))
        zero = context.get_constant(types.int64, 0)

        def near(v):
            return builder.and_(builder.icmp_signed("<=", v, lim),
                                builder.icmp_signed(">=", v, builder.neg(lim)))
        up, down = builder.icmp_signed(">", s, zero), builder.icmp_signed("<", s, zero)
        # the last item: a + (b - a - 1) // s * s going up, a - (a - b - 1) // -s * -s going
        # down; both divisions of non-negative numbers when the range is not empty (the
        # divisor is 1 where neither applies, so no division by zero is ever executed)
        divisor = builder.select(up, s, builder.select(down, builder.neg(s), one))
        span = builder.select(up, builder.sub(builder.sub(b, a), one),
                              builder.sub(builder.sub(a, b), one))
        steps = builder.mul(builder.sdiv(span, divisor), divisor)
        last = builder.select(up, builder.add(a, steps), builder.sub(a, steps))
        nonempty = builder.or_(builder.and_(up, builder.icmp_signed("<", a, b)),
                               builder.and_(down, builder.icmp_signed(">", a, b)))
        ok = builder.and_(builder.and_(near(a), near(b)),
                          builder.and_(near(s), nonempty))
        return context.make_tuple(builder, result, [ok, a, last])
    return sig, codegen


@intrinsic
def small(typingctx, coefficient):
    """Whether an index's coefficient of a loop variable is at most ``_MOST_COEFFICIENT``."""
    sig = types.boolean(coefficient)
    if not (isinstance(coefficient, types.Integer) and coefficient.signed):
        return sig, lambda context, builder, sig, args: cgutils.false_bit

    def codegen(context, builder, sig, args):
        c = context.cast(builder, args[0], sig.args[0], types.int64)
        lim = context.get_constant(types.int64, _MOST_COEFFICIENT)
        return builder.and_(builder.icmp_signed("<=", c, lim),
                            builder.icmp_signed(">=", c, builder.neg(lim)))
    return sig, codegen
