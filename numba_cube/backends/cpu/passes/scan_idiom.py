"""The Hillis-Steele scan idiom on an integer shared array, run by one unit in one pass.

GPU code scans a cube's values in shared memory in log2(n) rounds::

    off = 1
    while off < N:
        t = sm[tid - off] if tid >= off else 0       # or: t = 0 / if tid >= off: t = sm[...]
        cuda.syncthreads()
        sm[tid] += t
        cuda.syncthreads()
        off *= 2

Fission runs that as two unit loops a round: n log n additions where a CPU needs n. After rounds
with offsets ``1, 2, ..., w/2`` (``w``: the first power of two at or above N), ``sm[u]`` holds
the sum of the ``w`` values ending at ``u`` -- by induction: a round adds the window of the same
width that ends just before. Integer addition modulo the element's width is associative and
commutative, so that sum in any order is the same number the rounds leave; ``windowed_scan``
(``kernel_runtime/scans.py``) computes it in one pass. Float sums are not rewritten: their rounding
depends on the order.

``rewrite(body, shared)`` replaces each matching loop (and the ``off = 1`` before it) by::

    if __bdy * __bdz == 1 and __bdx <= <size of sm>:
        __syncthreads()
        if __tx == 0:
            windowed_scan(sm, __bdx, N)
        __syncthreads()
        off = doubling_end(N)                       # off's value after the loop
    else:
        off = 1
        while off < N: ...                          # the loop as written

The test is uniform, so the plan makes it cube-level control; the second copy runs the
rounds unchanged for cubes the rewrite does not cover (rows of threads sharing one ``tid``, a
cube larger than the array). What must hold, or the loop is left as it is:

- ``sm`` is a shared array of constant 1-D size whose dtype is a signed integer or an unsigned
  one of at most 32 bits (``t = ... else 0`` types a uint64 round as float64 in Numba, and
  numba-cuda, so its rounds round: not rewritten); nothing assigns the name;
- ``tid`` is ``cuda.threadIdx.x`` (``__tx``), or a name assigned exactly once in the kernel, at
  its top level, to it;
- ``t`` appears nowhere else in the kernel (its last round's value is not computed), ``off``
  is not read by ``N``, and ``N`` reads no memory;
- every unit runs the loop: the kernel has no ``return``, and every statement around the loop
  is a ``for``/``while``/``if`` whose test reads only constants, parameters the kernel never
  assigns, block ids and sizes, shapes and the targets of such ``for`` loops, with no ``break``
  or ``continue`` in the loops around it.
"""

from __future__ import annotations

import ast
import copy

from numba_cube.backends.cpu.passes import enabled
from numba_cube.backends.cpu.analyze.dataflow import Purity, store_counts
from numba_cube.backends.cpu.lower.hidden import DOUBLING_END, UNIFORM_IDS, is_barrier

__all__ = ["rewrite", "SCAN_DTYPES"]

#: shared dtypes whose rounds compute in int64 and store modulo the width (see the docstring)
SCAN_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"})

_MODULE = "numba_cube.backends.cpu.kernel_runtime.scans"
_SCAN = "__windowed_scan"
_END = DOUBLING_END


def rewrite(body: list[ast.stmt], params: list[str], shared, purity: Purity, env) -> list:
    """``body`` with every matching Hillis-Steele loop rewritten (see the module docstring)."""
    if not enabled("scan_idiom") or any(isinstance(n, ast.Return) for s in body for n in ast.walk(s)):
        return body
    counts = store_counts(body)
    sizes = {d.name: _size(d) for d in shared if not d.dynamic and d.dtype in SCAN_DTYPES}
    arrays = {name: size for name, size in sizes.items() if size is not None
              and counts[name] == 0}
    if not arrays:
        return body
    tids = {"__tx"} | {s.targets[0].id for s in body if _is_tid_binding(s, counts)}
    fixed = {p for p in params if counts[p] == 0} | set(UNIFORM_IDS)
    matcher = _Matcher(arrays, tids, purity, body)
    out = matcher.stmts(body, fixed)
    if matcher.rewritten:
        env.helper(_MODULE, "windowed_scan", _SCAN)
        env.helper(_MODULE, "doubling_end", _END)
    return out


def _size(decl) -> int | None:
    try:
        shape = ast.literal_eval(decl.shape)
    except (ValueError, SyntaxError):
        return None
    if isinstance(shape, tuple):
        shape = shape[0] if len(shape) == 1 else None
    return shape if isinstance(shape, int) and shape > 0 else None


def _is_tid_binding(s: ast.stmt, counts) -> bool:
    return (isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name) and counts[s.targets[0].id] == 1
            and isinstance(s.value, ast.Name) and s.value.id == "__tx")


def _name(e, ids=None) -> str | None:
    if isinstance(e, ast.Name) and (ids is None or e.id in ids):
        return e.id
    return None


class _Matcher:
    def __init__(self, arrays, tids, purity, body):
        self.arrays, self.tids, self.purity = arrays, tids, purity
        self.whole = body
        self.rewritten = 0

    # -- walking the statements around the loop -------------------------------------------------
    def stmts(self, stmts: list[ast.stmt], uniform: set[str]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        k = 0
        while k < len(stmts):
            s = stmts[k]
            nxt = stmts[k + 1] if k + 1 < len(stmts) else None
            found = self._loop(s, nxt, uniform) if nxt is not None else None
            if found is not None:
                out.append(found)
                k += 2
                continue
            out.append(self._nested(s, uniform))
            k += 1
        return out

    def _nested(self, s: ast.stmt, uniform: set[str]) -> ast.stmt:
        """``s`` with loops rewritten inside it, where every unit runs its body."""
        if isinstance(s, ast.For) and isinstance(s.target, ast.Name) and not s.orelse \
                and self._uniform(s.iter, uniform) and not _leaves(s.body):
            s.body = self.stmts(s.body, uniform | {s.target.id})
        elif isinstance(s, ast.While) and not s.orelse and self._uniform(s.test, uniform) \
                and not _leaves(s.body):
            s.body = self.stmts(s.body, uniform)
        elif isinstance(s, ast.If) and self._uniform(s.test, uniform):
            s.body = self.stmts(s.body, uniform)
            s.orelse = self.stmts(s.orelse, uniform)
        return s

    def _uniform(self, e: ast.expr, uniform: set[str]) -> bool:
        return self.purity.expr(e, uniform)

    # -- the loop itself ---------------------------------------------------------------------------
    def _loop(self, init: ast.stmt, loop: ast.stmt, uniform: set[str]) -> ast.stmt | None:
        """The rewrite of ``init`` (``off = 1``) followed by ``loop``, or None."""
        if not (isinstance(init, ast.Assign) and len(init.targets) == 1
                and isinstance(init.value, ast.Constant) and type(init.value.value) is int
                and init.value.value == 1 and isinstance(loop, ast.While) and not loop.orelse):
            return None
        off = _name(init.targets[0])
        bound = _bound(loop.test, off)
        if off is None or bound is None or off in {n.id for n in ast.walk(bound)
                                                   if isinstance(n, ast.Name)} \
                or not self._uniform(bound, uniform):
            return None
        body = loop.body
        read = _read(body, off, self.tids, self.arrays)
        if read is None:
            return None
        t, sm, tid, used = read
        rest = body[used:]
        if len(rest) != 4 or not is_barrier(rest[0]) or not is_barrier(rest[2]) \
                or not _adds(rest[1], sm, tid, t) or not _doubles(rest[3], off):
            return None
        if self._elsewhere(t, loop):
            return None
        self.rewritten += 1
        size = self.arrays[sm]
        fast = ast.parse(
            f"if __bdy * __bdz == 1 and __bdx <= {size}:\n"
            f"    __syncthreads()\n"
            f"    if __tx == 0:\n"
            f"        {_SCAN}({sm}, __bdx, {ast.unparse(bound)})\n"
            f"    __syncthreads()\n"
            f"    {off} = {_END}({ast.unparse(bound)})\n").body[0]
        for node in ast.walk(fast):        # the loop's line, for the generated line marks
            if hasattr(node, "lineno"):
                ast.copy_location(node, loop)
        fast.orelse = [copy.deepcopy(init), loop]
        return fast

    def _elsewhere(self, t: str, loop: ast.While) -> bool:
        """Does ``t`` appear in the kernel outside ``loop``?"""
        inside = sum(1 for n in ast.walk(loop) if isinstance(n, ast.Name) and n.id == t)
        total = sum(1 for s in self.whole for n in ast.walk(s)
                    if isinstance(n, ast.Name) and n.id == t)
        return total != inside


def _leaves(body) -> bool:
    """Can a unit leave this loop early (break/continue anywhere inside)?"""
    return any(isinstance(n, (ast.Break, ast.Continue)) for s in body for n in ast.walk(s))


def _bound(test: ast.expr, off: str) -> ast.expr | None:
    """N of ``off < N`` or ``N > off``."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, ast.Lt) and _name(left) == off:
        return right
    if isinstance(op, ast.Gt) and _name(right) == off:
        return left
    return None


def _is_guard(test: ast.expr, tid: str, off: str) -> bool:
    """``tid >= off`` or ``off <= tid``."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    return (isinstance(op, ast.GtE) and _name(left) == tid and _name(right) == off) or \
        (isinstance(op, ast.LtE) and _name(left) == off and _name(right) == tid)


def _shifted(e: ast.expr, arrays, tid: str, off: str) -> str | None:
    """The array of ``sm[tid - off]``, or None."""
    if isinstance(e, ast.Subscript) and _name(e.value, arrays) and isinstance(e.slice, ast.BinOp) \
            and isinstance(e.slice.op, ast.Sub) and _name(e.slice.left) == tid \
            and _name(e.slice.right) == off:
        return e.value.id
    return None


def _zero(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) is int and e.value == 0


def _read(body, off, tids, arrays):
    """``(t, sm, tid, statements used)`` of the round's read, in either form, or None."""
    first = body[0] if body else None
    if not (isinstance(first, ast.Assign) and len(first.targets) == 1):
        return None
    t = _name(first.targets[0])
    if t is None:
        return None
    value = first.value
    if isinstance(value, ast.IfExp) and _zero(value.orelse):
        for tid in tids:
            sm = _shifted(value.body, arrays, tid, off)
            if sm is not None and _is_guard(value.test, tid, off):
                return t, sm, tid, 1
        return None
    second = body[1] if len(body) > 1 else None
    if _zero(value) and isinstance(second, ast.If) and not second.orelse \
            and len(second.body) == 1 and isinstance(second.body[0], ast.Assign) \
            and len(second.body[0].targets) == 1 and _name(second.body[0].targets[0]) == t:
        for tid in tids:
            sm = _shifted(second.body[0].value, arrays, tid, off)
            if sm is not None and _is_guard(second.test, tid, off):
                return t, sm, tid, 2
    return None


def _adds(s: ast.stmt, sm: str, tid: str, t: str) -> bool:
    """``sm[tid] += t``, ``sm[tid] = sm[tid] + t`` or ``sm[tid] = t + sm[tid]``."""
    def at(e):
        return isinstance(e, ast.Subscript) and _name(e.value) == sm and _name(e.slice) == tid

    if isinstance(s, ast.AugAssign):
        return at(s.target) and isinstance(s.op, ast.Add) and _name(s.value) == t
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and at(s.targets[0]) \
            and isinstance(s.value, ast.BinOp) and isinstance(s.value.op, ast.Add):
        a, b = s.value.left, s.value.right
        return (at(a) and _name(b) == t) or (_name(a) == t and at(b))
    return False


def _doubles(s: ast.stmt, off: str) -> bool:
    """``off *= 2``, ``off <<= 1``, ``off += off``, ``off = off * 2`` (either order),
    ``off = off + off``."""
    def const(e, v):
        return isinstance(e, ast.Constant) and type(e.value) is int and e.value == v

    if isinstance(s, ast.AugAssign) and _name(s.target) == off:
        return (isinstance(s.op, ast.Mult) and const(s.value, 2)) or \
            (isinstance(s.op, ast.LShift) and const(s.value, 1)) or \
            (isinstance(s.op, ast.Add) and _name(s.value) == off)
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and _name(s.targets[0]) == off \
            and isinstance(s.value, ast.BinOp):
        a, op, b = s.value.left, s.value.op, s.value.right
        if isinstance(op, ast.Mult):
            return (_name(a) == off and const(b, 2)) or (const(a, 2) and _name(b) == off)
        if isinstance(op, ast.Add):
            return _name(a) == off and _name(b) == off
    return False
