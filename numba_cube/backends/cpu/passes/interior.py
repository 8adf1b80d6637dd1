"""Cubes wholly inside their guards: a region printed once more, its guards' tests known true.

GPU code guards every access that a partial cube at the edge of the data could make::

    x, y = cuda.grid(2)
    sA[ty, tx] = 0
    if y < A.shape[0] and tx + i * TILE < A.shape[1]:    # always true but at the edges
        sA[ty, tx] = A[y, tx + i * TILE]
    sm[tid] = x[i] if i < x.size else 0.0

Fission prints such a region as a loop over the cube's units with the test in every unit, and
the test keeps LLVM from vectorizing the loop (measured on the tiled matmul of
``benchmarks/bench_kernels.py``: the tile loads with their tests took 40% of the kernel). Most
cubes are interior: the test holds for every one of their units. ``split`` finds the tests (of
``if`` statements and conditional expressions, at any depth of the region) that are such
guards and returns a cube-level check that they hold for every unit, with the region's code in
which each of those tests is replaced by the check's name. ``emit/regions.py`` prints::

    __in<k> = <check>
    if __in<k>:
        <the loops, each guard's test now reading __in<k>>
    else:
        <the loops as before>

Inside ``if __in<k>:`` LLVM knows the flag is true and folds the branches away; Numba still
types both sides of each branch as before (a name assigned in a guarded body meets its other
value with the same unified type), so nothing but the test changes.

Why it is exact. A guard's test is a conjunction of comparisons ``L op R`` (``<``, ``<=``,
``>``, ``>=``) where one side is a sum of the unit's coordinates ``__tx``, ``__ty``, ``__tz``
(each at most once, coefficient 1) and of values every unit shares, and the other side is such
a shared value alone, and the coordinate side names the cube's place in the data (a block id or
a shared name: ``tid < s`` splits every cube, it is no edge guard, and a copy for it would
only cost compile time). Shared values are constants, block ids and sizes, uniform names and
parameters the region does not assign, ``x.shape[k]`` / ``x.size``, combined by ``+ - *`` (no
division, no call but ``__nn``: the check evaluates them at cube level, where they must not
raise; evaluating the test has no effect either). Names that the region assigns exactly once,
purely, in a statement before the test (``x = __bx * 32 + tx``), and recomputed names stand for
their definitions.

The coordinate side ``f`` is non-decreasing in each coordinate, and the units' coordinates are
exactly the box ``[0, blockDim)``, so ``f`` is largest at the corner ``(blockDim - 1)`` on
every axis and smallest at ``(0, 0, 0)``. The check evaluates ``f`` at that corner, with the
same expression and types: ``f(high) op R`` for ``<`` and ``<=``, ``f(low) op R`` for ``>`` and
``>=``. It holds only if the test holds for every unit (a NaN bound fails it, and every unit's
test too); where it holds, every replaced test would have been true. (Integer sums that
overflow are outside this, as they are outside all of Numba's compiled code: Numba adds
integers with LLVM's no-signed-wrap flag, so an int64 sum past its end is undefined in the
per-unit test itself, and ``passes/guards.py`` relies on the same.)
"""

from __future__ import annotations

import ast
import copy

from numba_cube.backends.cpu.passes import enabled
from numba_cube.backends.cpu.analyze.dataflow import Purity, store_counts
from numba_cube.backends.cpu.analyze.guard_bounds import FLIPPED, split_terms
from numba_cube.backends.cpu.lower.hidden import BLOCK_DIMS, NONNEG, THREAD_IDS, UNIFORM_IDS

_UPPER = (ast.Lt, ast.LtE)          # holds everywhere iff it holds at the high corner
_LOWER = (ast.Gt, ast.GtE)          # ... at the low corner
#: a coordinate's value at the high corner of the cube
_HIGH = {t: f"({d} - 1)" for t, d in zip(THREAD_IDS, BLOCK_DIMS)}


def split(code: list[ast.stmt], remat: dict[str, ast.expr], shared: set[str],
          purity: Purity, flag: str) -> tuple[str, list[ast.stmt]] | None:
    """``(check, code with each guard's test replaced by the name flag)`` for a region's
    ``code`` (module docstring), or None when no test is a guard. ``shared``: names with one
    value for every unit that the region does not assign (uniform names, parameters);
    ``remat``: recomputed names."""
    if not enabled("interior"):
        return None
    counts = store_counts(code)
    defs = {n: e for n, e in remat.items() if not counts[n]}
    checks: list[str] = []

    class Guards(ast.NodeTransformer):
        def visit_If(self, node):
            return self._test(node)

        def visit_IfExp(self, node):
            return self._test(node)

        def _test(self, node):
            self.generic_visit(node)
            terms = [_check(t, defs, shared, purity) for t in split_terms(node.test, ast.And)]
            if all(terms):
                checks.extend(terms)
                node.test = ast.Name(flag, ast.Load())
            return node

    out = []
    for s in code:
        out.append(Guards().visit(copy.deepcopy(s)))
        if (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and counts[s.targets[0].id] == 1
                and _simple(s.value, set(defs) | shared | set(THREAD_IDS))):
            defs[s.targets[0].id] = s.value
    if not checks:
        return None
    return " and ".join(dict.fromkeys(checks)), out


def _check(term: ast.expr, defs, shared: set[str], purity: Purity) -> str | None:
    """The cube-level check that ``term`` holds for every unit, or None if it is no guard."""
    if not (isinstance(term, ast.Compare) and len(term.ops) == 1
            and isinstance(term.ops[0], _UPPER + _LOWER)):
        return None
    op, left, right = type(term.ops[0]), _expand(term.left, defs), _expand(term.comparators[0],
                                                                           defs)
    if _ids(right) and not _ids(left):
        left, right, op = right, left, FLIPPED[op]
    if _ids(right) or not _ids(left) or not _coefficients_one(left):
        return None
    place = {n.id for n in ast.walk(left) if isinstance(n, ast.Name)}
    if not place - set(THREAD_IDS) - set(BLOCK_DIMS) - {NONNEG}:
        return None         # a split inside every cube (``tid < s``), not the data's edge
    names = shared | UNIFORM_IDS
    if not (_simple(left, names | set(THREAD_IDS)) and _simple(right, names)
            and purity.expr(left, names | set(THREAD_IDS)) and purity.expr(right, names)):
        return None
    corner = _HIGH if op in _UPPER else {t: "0" for t in THREAD_IDS}
    return f"({ast.unparse(_at(left, corner))}) {_OPS[op]} ({ast.unparse(right)})"


_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def _ids(e: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(e) if isinstance(n, ast.Name) and n.id in THREAD_IDS}


def _coefficients_one(e: ast.expr) -> bool:
    """Is ``e`` a sum in which each coordinate appears once, added (never subtracted or
    multiplied)?"""
    seen: list[str] = []

    def walk(node, sign: int) -> bool:
        if isinstance(node, ast.Name) and node.id in THREAD_IDS:
            seen.append(node.id)
            return sign == 1
        if isinstance(node, ast.Call):      # __nn(x): x itself (``_simple`` checked the callee)
            return walk(node.args[0], sign)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return walk(node.left, sign) and walk(node.right, sign)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            return walk(node.left, sign) and walk(node.right, -sign)
        return not _ids(node)

    return walk(e, 1) and len(seen) == len(set(seen))


def _simple(e: ast.expr, names: set[str]) -> bool:
    """Is ``e`` built from ``names``, constants, ``+ - *``, ``x.shape[k]``, ``x.size`` and
    ``__nn``, nothing that could raise?"""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    if isinstance(e, ast.Name):
        return e.id in names or e.id in UNIFORM_IDS
    if isinstance(e, ast.BinOp):
        return (isinstance(e.op, (ast.Add, ast.Sub, ast.Mult))
                and _simple(e.left, names) and _simple(e.right, names))
    if isinstance(e, ast.UnaryOp):
        return isinstance(e.op, ast.USub) and _simple(e.operand, names)
    if isinstance(e, ast.Call):
        return (isinstance(e.func, ast.Name) and e.func.id == NONNEG and len(e.args) == 1
                and not e.keywords and _simple(e.args[0], names))
    if isinstance(e, ast.Attribute):
        return e.attr == "size" and isinstance(e.value, ast.Name) and e.value.id in names
    if isinstance(e, ast.Subscript):
        return (isinstance(e.value, ast.Attribute) and e.value.attr == "shape"
                and isinstance(e.value.value, ast.Name) and e.value.value.id in names
                and isinstance(e.slice, ast.Constant) and type(e.slice.value) is int)
    return False


def _expand(e: ast.expr, defs: dict[str, ast.expr], depth: int = 0) -> ast.expr:
    """``e`` with every name of ``defs`` replaced by its definition (to a fixed depth)."""
    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in defs and isinstance(node.ctx, ast.Load) and depth < 16:
                return _expand(copy.deepcopy(defs[node.id]), defs, depth + 1)
            return node

    return Sub().visit(copy.deepcopy(e))


def _at(e: ast.expr, values: dict[str, str]) -> ast.expr:
    """``e`` with each coordinate replaced by the source text in ``values``, and without its
    ``__nn`` hints: a corner outside the cube (one of ``blockDim`` 0) may be negative, and a
    false hint would be undefined behaviour."""
    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in values:
                return ast.parse(values[node.id], mode="eval").body
            return node

        def visit_Call(self, node):
            if isinstance(node.func, ast.Name) and node.func.id == NONNEG:
                return self.visit(node.args[0])
            return self.generic_visit(node)

    return Sub().visit(copy.deepcopy(e))


def flag(region: int) -> str:
    """The name of region ``region``'s check in the generated code."""
    return f"__in{region}"
