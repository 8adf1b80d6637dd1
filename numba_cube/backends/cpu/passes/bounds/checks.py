"""Bounds checks whose ``IndexError`` says where: which array, which index, which axis and
size, and which unit went out of bounds.

With ``boundscheck=True`` (the CPU backend's default; ``cube.client("cpu", boundscheck=False)``
turns it off) every subscript in the kernel's own code has its index passed through
``bounds.checked_index`` with the array's site (its text's place in the module's
``__bounds_sites``) and the unit's block and thread index::

    out[i] = a[i + 2]
    # becomes
    out[__checked(out, i, 0, (__bx, __by, __bz), (__tx, __ty, __tz))] = \
        a[__checked(a, i + 2, 1, (__bx, __by, __bz), (__tx, __ty, __tz))]
    # with __bounds_sites = ('out', 'a') at module level

Every subscript, not only those of parameters and shared arrays: a view (``row = a[i]``), an
inlined device function's renamed parameter and an array inside a tuple (``t[0][i]``, the
subscripted expression written twice: it is pure) are arrays too, and the checker returns the
index of anything that is not an array untouched. A literal index stays literal, where Numba
needs it to type ``t[0]`` of a tuple: it is checked by a statement of its own before the
statement that uses it (``out[0] = s`` gets ``__checked(out, 0, 0, ...)`` in front of it), where
that statement evaluates it whatever the values (not in a branch of a conditional expression, an
operand of ``and``/``or`` after the first, or the test of a ``while``: those are left to Numba's
check, below).

Numba's own check (``njit(boundscheck=True)``) then adds nothing but its cost. Measured with
``benchmarks/bench_kernels.py --boundscheck`` on the 2-core VM (2026-12-04): checked with
Numba's flag as well, the suite ran 1.38x its unchecked time (geometric mean; the 9-point
stencil 4.50x, the tiled matmul 3.29x); without it, 1.19x. So ``relax`` reads the finished
module and compiles each function without Numba's flag when every array access in it is
checked here (or is the translator's own: ``internal_storage``); a function with any other subscript
keeps Numba's flag, which still guards what the rewrite leaves (an index with ``None``, ``...``
or a starred item, a subscript of a call, the hoisted tests of a flat kernel's guards, a device
function that is not inlined). Numba's atomics check their index whatever the flag
(``atomics.element_pointer``).

Loops. A check at each access of an inner loop (``for j in range(16): tmp += sA[ty, j] *
sB[j, tx]``) keeps LLVM from unrolling and vectorizing it: the tiled matmul ran 2.6-3x its
unchecked time. An innermost ``range`` loop whose indices are affine in its variable is checked
once, at the range's ends, before it runs (``_Loop``); with that the suite runs at 1.05-1.10x
(wall time; 1.02-1.06x in CPU time), no kernel above 1.3x.

The rewrite runs on the finished shape (``emit/module.py`` calls ``add_checks`` after ``emit/flat_kernel.py`` or
``emit/cube_kernel.py`` has planned the loops), so no analysis sees the calls: the plan and every
optimisation are the ones the kernel gets without them; only the text of the unit loops may
differ (fission prints coordinate loops for a body that names the coordinates). Without
``boundscheck`` nothing here runs and the generated module is what it was.

Where the unit's ids live depends on the shape of the loops: a flat kernel in *rows* mode has
only the global inner coordinate (``loop_order.GLOBAL_INNER``), and one whose loop order is
*swapped* holds the real ``x`` in the ``y`` names (``passes/loop_order.py``). Code a cube kernel
runs once per cube (between its unit loops, and the tests of its cube-level
``if``/``while``/``for``) is code every unit runs alike: it is reported as unit ``(0, 0, 0)``, the
first that would fail (and, in grid mode, where it runs once per grid, of cube ``(0, 0, 0)``).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import itertools
from pathlib import Path

from numba_cube.backends.cpu.passes.bounds.affine import (
    affine_coefficient, as_expr, assign, parse_expression, parse_statement, substitute,
)
from numba_cube.backends.cpu.passes.bounds.coverage import (
    CHECKER, IN_BOUNDS, PRECHECKED, RANGE_ENDS, SMALL, index_items, index_value, is_literal_index,
    names_tuple, relax, repeatable, safe_unchecked,
)
from numba_cube.backends.cpu.passes.loop_order import GLOBAL_INNER
from numba_cube.backends.cpu.analyze.plan_items import Ctrl, MaskedIf, MaskedWhile, Region, Uniform

__all__ = ["CHECKER", "SITES", "add_checks", "import_line", "sites_line", "relax"]

#: the generated module's tuple of the checked arrays' names (``CpuProgram.bounds_sites``)
SITES = "__bounds_sites"
_RUNTIME = Path(__file__).parents[2] / "kernel_runtime" / "bounds.py"

def import_line() -> str:
    """The generated module's import of the checker. Its comment carries the digest of the
    run-time module, so editing it changes the text (and so the files and caches) of checked
    kernels only."""
    digest = hashlib.sha256(_RUNTIME.read_bytes()).hexdigest()[:16]
    return (f"from numba_cube.backends.cpu.kernel_runtime.bounds import checked_index as {CHECKER}, "
            f"prechecked as {PRECHECKED}, in_bounds as {IN_BOUNDS}, "
            f"range_ends as {RANGE_ENDS}, small as {SMALL}  # bounds_runtime {digest}")

def sites_line(sites: tuple) -> str:
    return f"{SITES} = {sites!r}"

def add_checks(shape) -> tuple:
    """Rewrite, in place, the subscripts in the code of ``shape`` before it is emitted (a flat
    kernel's body is in its decisions, a cube kernel is known by its plan); the sites, the texts
    of the subscripted values in the order the checks number them."""
    sites: list[str] = []
    loops = itertools.count(1)
    plan = getattr(shape, "plan", None)
    if plan is not None:
        cube = ("0", "0", "0") if shape.grid else ("__bx", "__by", "__bz")
        in_units = _Checks(sites, loops, ("__bx", "__by", "__bz"), ("__tx", "__ty", "__tz"))
        per_cube = _Checks(sites, loops, cube, ("0", "0", "0"))
        _plan_items(plan, in_units, per_cube)
        return tuple(sites)
    # Along a row loop (looporder.global_inner) the unit is passed as (global coordinate,
    # -block size), divided out only on failure (bounds_runtime.described): divisions at every
    # access made stumpy's gpu_stump kernel 2.5x its unchecked time.
    loops_chosen = shape.decisions        # the flat kernel's loops (passes/shape_passes.py)
    inner_cube, inner_unit = ((GLOBAL_INNER, "-__bdx") if loops_chosen.rows else ("__bx", "__tx"))
    if loops_chosen.swapped:   # x and y names are exchanged: the inner loop walks the real y
        cube, unit = ("__by", inner_cube, "__bz"), ("__ty", inner_unit, "__tz")
    else:
        cube, unit = (inner_cube, "__by", "__bz"), (inner_unit, "__ty", "__tz")
    loops_chosen.body[:] = _Checks(sites, loops, cube, unit).statements(loops_chosen.body)
    return tuple(sites)

def _plan_items(items: list, in_units: "_Checks", per_cube: "_Checks") -> None:
    for item in items:
        if isinstance(item, Region):
            item.code[:] = in_units.statements(item.code)
        elif isinstance(item, Uniform):
            stmts = per_cube.statements([item.stmt])
            # one statement stays one: checks in front of it go into an ``if True:`` with it
            item.stmt = stmts[0] if len(stmts) == 1 else ast.fix_missing_locations(
                ast.copy_location(ast.If(ast.Constant(True), stmts, []), item.stmt))
        elif isinstance(item, (Ctrl, MaskedIf)):
            if isinstance(item, Ctrl):      # a cube-level test or iterable, printed as it is
                node = item.node
                if isinstance(node, ast.For):
                    node.iter = per_cube.visit(node.iter)
                else:
                    node.test = per_cube.visit(node.test)
            _plan_items(item.body, in_units, per_cube)
            _plan_items(item.orelse, in_units, per_cube)
        elif isinstance(item, MaskedWhile):
            _plan_items(item.body, in_units, per_cube)

class _Checks(ast.NodeTransformer):
    """Passes the index of every subscript through the checker (module docstring)."""

    def __init__(self, sites: list, loops, cube: tuple, unit: tuple):
        self.sites = sites
        self.loops = loops
        self.cube = names_tuple(cube)
        self.unit = names_tuple(unit)
        self.loop: _Loop | None = None      # the loop whose checked copy is being rewritten
        #: checks of literal indices to put in front of the statement being rewritten (None
        #: outside a statement: a cube-level test), and whether the expression being rewritten
        #: is one that statement may not evaluate
        self.pending: list | None = None
        self.conditional = 0

    def statements(self, stmts: list) -> list:
        out = []
        for s in stmts:
            new = self.visit(s)
            out.extend(new if isinstance(new, list) else [new])
        return out

    def visit(self, node):
        if not isinstance(node, ast.stmt):
            return super().visit(node)
        saved, self.pending = self.pending, []
        try:
            new = super().visit(node)
            checks = self.pending
        finally:
            self.pending = saved
        if not checks:
            return new
        return [*checks, *(new if isinstance(new, list) else [new])]

    def _conditionally(self, nodes: list) -> list:
        self.conditional += 1
        try:
            return [self.visit(n) for n in nodes]
        finally:
            self.conditional -= 1

    def visit_IfExp(self, node):
        node.test = self.visit(node.test)
        node.body, node.orelse = self._conditionally([node.body, node.orelse])
        return node

    def visit_BoolOp(self, node):
        node.values = [self.visit(node.values[0]), *self._conditionally(node.values[1:])]
        return node

    def visit_While(self, node):
        node.test = self._conditionally([node.test])[0]     # evaluated again at each round
        node.body = self.statements(node.body)
        node.orelse = self.statements(node.orelse)
        return node

    def visit_Lambda(self, node):
        return node

    def visit_NamedExpr(self, node):
        self.conditional += 1       # may rebind a name a check in front of the statement reads
        try:
            return self.generic_visit(node)
        finally:
            self.conditional -= 1

    def visit_Subscript(self, node):
        label = ast.unparse(node.value)         # the value as written, before its own checks
        if self.loop is not None and self.loop.covers(node):
            node.slice = ast.Call(ast.Name(PRECHECKED, ast.Load()), [node.slice], [])
            return ast.fix_missing_locations(node)
        node = self.generic_visit(node)
        target = node.value
        if safe_unchecked(node) or not repeatable(target):
            return node         # nothing to check, or left to Numba's check (relax)
        if is_literal_index(node.slice):
            if self.pending is not None and not self.conditional:
                check = self._check(CHECKER, label, copy.deepcopy(target),
                                    copy.deepcopy(node.slice))
                self.pending.append(ast.fix_missing_locations(
                    ast.copy_location(ast.Expr(check), node)))
            return node
        index = index_value(node.slice)
        if index is None:
            return node
        node.slice = ast.copy_location(self._check(CHECKER, label, copy.deepcopy(target), index),
                                       node.slice)
        return ast.fix_missing_locations(node)

    def visit_For(self, node):
        loop = _Loop.of(node) if self.loop is None else None
        if loop is None:
            return self.generic_visit(node)
        return loop.rewrite(node, self, next(self.loops))

    def _check(self, checker: str, label: str, target: ast.expr, index: ast.expr) -> ast.Call:
        if label not in self.sites:
            self.sites.append(label)
        site = ast.Constant(self.sites.index(label))
        return ast.Call(ast.Name(checker, ast.Load()),
                        [target, index, site, copy.deepcopy(self.cube),
                         copy.deepcopy(self.unit)], [])

# ---- checks hoisted out of loops -----------------------------------------------------------------

class _Loop:
    """An innermost ``for v in range(...)`` loop whose subscripts are, some of them, checked once
    for the whole loop instead of at each access (module docstring, "Loops")::

        for j in range(16):
            tmp += sA[ty, j] * sB[j, tx]
        # becomes
        __lp1b = 16
        __lp1ok, __lp1f, __lp1l = __range_ends(0, __lp1b, 1)
        __lp1ok = __lp1ok & __in_bounds(sA, (ty, __lp1f)) & __in_bounds(sA, (ty, __lp1l)) & ...
        if not __lp1ok:                 # not certified by the ends: every item, then raise
            __lp1bad = False
            __lp1at = __lp1b
            for __lp1v in range(__lp1b):
                if not __lp1bad:
                    if not (__in_bounds(sA, (ty, __lp1v)) & __in_bounds(sB, (__lp1v, tx))):
                        __lp1bad = True
                        __lp1at = __lp1v
            if __lp1bad:
                __checked(sA, (ty, __lp1at), ...)       # the first that is out raises
                __checked(sB, (__lp1at, tx), ...)
        for j in range(__lp1b):
            tmp += sA[__prechecked((ty, j))] * sB[__prechecked((j, tx))]

    A subscript is covered when every iteration evaluates it (``_unconditional``: not under an
    ``if`` or a conditional expression, in a body with no ``break``, ``continue``, ``return``,
    ``raise`` or ``assert``), its value is a name the loop does not assign and every component
    of its index is affine in ``v`` (``_affine``). Each component is then monotone in ``v``, so
    its values over the loop lie between those at the range's first and last items: inside the
    array at both, it is inside at every item. That is the certificate, taken when the range is
    not empty, its arguments are signed integers, its ends and the coefficients of ``v`` are
    small enough that no index wraps around int64 without one at an end being far out of any
    array (``bounds.range_ends``, ``small``). Otherwise the scan evaluates every index
    the loop will use, as the loop will, and raises the checker's ``IndexError`` for the first
    item where one is out, before the loop runs: an access the loop makes, though an unchecked
    one of an earlier item (of a subscript this does not cover) would have failed first.

    The slow path is a scan and not a checked copy of the loop because a loop with checks in
    the same function, even one that never runs, kept LLVM from optimising the fast one (the
    tiled matmul of ``benchmarks/bench_kernels.py``: 0.51 s with a checked copy, 0.17-0.19 s
    with the scan or none); the scan has no exit inside its loop."""

    def __init__(self, node: ast.For, var: str, assigned: set[str]):
        self.node = node
        self.var = var
        self.assigned = assigned
        self.covered = [s for s in _unconditional(node.body)
                        if self._coefficients(s) is not None]

    @classmethod
    def of(cls, node: ast.For) -> "_Loop | None":
        it = node.iter
        if not (isinstance(node.target, ast.Name) and not node.orelse
                and isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range" and 1 <= len(it.args) <= 3 and not it.keywords
                and not any(isinstance(a, ast.Starred) for a in it.args)):
            return None
        inner = [n for s in node.body for n in ast.walk(s)]
        if any(isinstance(n, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.Lambda,
                              ast.comprehension, ast.Break, ast.Continue, ast.Return,
                              ast.Raise, ast.Assert, ast.Try)) for n in inner):
            return None         # innermost loops whose every iteration runs the whole body
        assigned = {node.target.id} | {n.id for n in inner if isinstance(n, ast.Name)
                                       and not isinstance(n.ctx, ast.Load)}
        loop = cls(node, node.target.id, assigned)
        return loop if loop.covered else None

    def covers(self, node: ast.Subscript) -> bool:
        return any(node is s for s in self.covered)

    def _coefficients(self, node: ast.Subscript):
        """The coefficients of ``v`` in the components of ``node``'s index (0 where it does not
        appear), or None when the subscript is not covered."""
        if not (isinstance(node.value, ast.Name) and node.value.id not in self.assigned):
            return None
        if is_literal_index(node.slice) or safe_unchecked(node):
            return None         # checked as it is (a literal must stay in the subscript)
        coefficients = [affine_coefficient(c, self.var, self.assigned) for c in index_items(node.slice)]
        return None if any(c is None for c in coefficients) else coefficients

    def rewrite(self, node: ast.For, checks: _Checks, k: int) -> list:
        p = f"__lp{k}"
        args = [checks.visit(a) for a in node.iter.args]       # evaluated once, checked
        temps = [f"{p}{'abc'[i] if len(args) > 1 else 'b'}" for i in range(len(args))]
        pre = [assign(t, a) for t, a in zip(temps, args)]
        start, stop, step = (["0", temps[0], "1"] if len(temps) == 1
                             else [temps[0], temps[1], "1"] if len(temps) == 2 else temps)
        ok, first, last = f"{p}ok", f"{p}f", f"{p}l"
        pre.append(parse_statement(f"{ok}, {first}, {last} = {RANGE_ENDS}({start}, {stop}, {step})"))
        loop_range = f"range({', '.join(temps)})"

        def at(s: ast.Subscript, value: str) -> str:
            return ast.unparse(substitute(copy.deepcopy(s.slice), self.var, value))

        tests = []
        for s in self.covered:
            for coefficient in self._coefficients(s):
                if not (isinstance(coefficient, int) and abs(coefficient) <= 1 << 20):
                    tests.append(f"{SMALL}({ast.unparse(as_expr(coefficient))})")
            tests += [f"{IN_BOUNDS}({s.value.id}, {at(s, end)})" for end in (first, last)]
        # ``&``, not ``and``: every test is pure and cheap, and branches would cost more
        pre.append(parse_statement(f"{ok} = {' & '.join(dict.fromkeys([ok] + tests))}"))
        v, bad, where = f"{p}v", f"{p}bad", f"{p}at"
        inside = " & ".join(dict.fromkeys(f"{IN_BOUNDS}({s.value.id}, {at(s, v)})"
                                          for s in self.covered))
        raising = "\n".join(
            "        " + ast.unparse(checks._check(CHECKER, s.value.id, s.value,
                                                   parse_expression(at(s, where))))
            for s in self.covered)
        pre.append(parse_statement(
            f"if not {ok}:\n"
            f"    {bad} = False\n"
            f"    {where} = {temps[0]}\n"
            f"    for {v} in {loop_range}:\n"
            f"        if not {bad}:\n"
            f"            if not ({inside}):\n"
            f"                {bad} = True\n"
            f"                {where} = {v}\n"
            f"    if {bad}:\n{raising}"))
        node.iter = parse_expression(loop_range)
        checks.loop = self
        try:
            node.body = checks.statements(node.body)
        finally:
            checks.loop = None
        return [ast.fix_missing_locations(ast.copy_location(s, node)) for s in pre + [node]]

def _unconditional(stmts: list) -> list:
    """The subscripts that running ``stmts`` evaluates whatever the values (not under an ``if``
    or the branches of a conditional expression, nor after the first operand of ``and``/``or``):
    for a loop body without ``break``, ``continue`` or ``return``, those of every iteration."""
    found: list = []

    def expr(e):
        if isinstance(e, ast.IfExp):
            expr(e.test)
            return
        if isinstance(e, ast.BoolOp):
            expr(e.values[0])
            return
        if isinstance(e, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp,
                          ast.DictComp)):
            return
        if isinstance(e, ast.Subscript):
            found.append(e)
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                expr(child)

    for s in stmts:
        if isinstance(s, ast.If):
            expr(s.test)
        elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    expr(child)
    return found
