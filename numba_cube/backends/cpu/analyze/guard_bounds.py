"""Guard hoisting: the leading ``if i < n:`` tests of a unit's body as bounds of its loop.

Almost every CUDA kernel starts with ``i = cuda.grid(1)`` followed by ``if i < n:`` (or ``if i >=
n: return``). Inside the unit loop that branch blocks vectorization, so when the guard compares
an expression ``__tx + r`` (``r`` independent of ``__tx``) with a bound that does not depend on the
unit, ``GuardHoist`` turns it into a clamp of the loop's ``[__lo, __hi)``; comparisons that do not
involve ``__tx`` at all (``y < m`` in a 2-D kernel) are tested once per segment. Only a leading run
of ``and``-ed conjuncts (or ``or``-ed return conditions) is hoisted, so short-circuit evaluation of
the rest is unchanged.

The affine helpers (``affine_in``, ``split_terms``, ``FLIPPED``) are what the guard passes
(``passes/guards.py``, ``passes/interior.py``) read as well. The flat kernel's emitter
(``emit/flat_kernel.py``) prints the bounds found here.
"""

from __future__ import annotations

import ast
import copy

from numba_cube.backends.cpu.analyze.dataflow import Purity, assignment_sources, store_counts
from numba_cube.backends.cpu.lower.hidden import BLOCK_DIMS, BLOCK_IDS, GRID_DIMS, NONNEG

__all__ = ["GuardHoist", "affine_in", "split_terms", "FLIPPED"]


# names a hoisted bound may use: they are all defined before the segment's unit loop
_SEGMENT_NAMES = set(BLOCK_IDS + BLOCK_DIMS + GRID_DIMS + ("__ty", "__tz"))
_NEGATE = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt}
#: a comparison with its sides swapped (``a < b`` is ``b > a``)
FLIPPED = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}
_BOUND = {ast.Lt: ("hi", "lt"), ast.LtE: ("hi", "le"), ast.Gt: ("lo", "gt"), ast.GtE: ("lo", "ge")}


class GuardHoist:
    """Finds the leading guards of a body and turns them into bounds/conditions."""

    def __init__(self, body, params, purity: Purity, inner: str = "__tx"):
        self.purity = purity
        self.inner = inner                           # the inner loop's variable
        self.counts = store_counts(body)
        self.names = _SEGMENT_NAMES | set(params)
        self.defs: dict[str, ast.expr] = {}          # single pure assignments seen so far
        self.lo: list[str] = []
        self.hi: list[str] = []
        self.conds: list[str] = []

    def run(self, body: list[ast.stmt]) -> list[ast.stmt]:
        """Return the body with hoisted guards removed (the pure prefix statements stay)."""
        prefix: list[ast.stmt] = []
        rest = list(body)
        while rest:
            s = rest[0]
            src = assignment_sources(s)
            if src and isinstance(s, ast.Assign) and all(
                    self.counts[n] == 1 and self.purity.expr(e, self.names | {self.inner} | set(
                        self.defs)) for n, e in src):
                self.defs.update(src)
                prefix.append(rest.pop(0))
                continue
            if isinstance(s, ast.If) and not s.orelse:
                if len(rest) == 1:                       # if C: <body>   (last statement)
                    kept = self._conjuncts(split_terms(s.test, ast.And), negate=False)
                    if kept is None:
                        return prefix + self.run(s.body)
                    if kept is not s.test:
                        s.test = kept
                    return prefix + rest
                if len(s.body) == 1 and isinstance(s.body[0], ast.Return):   # if C: return
                    kept = self._conjuncts(split_terms(s.test, ast.Or), negate=True)
                    if kept is None:
                        rest.pop(0)
                        continue
                    if kept is not s.test:
                        s.test = kept
            return prefix + rest
        return prefix

    def _conjuncts(self, terms, negate):
        """Hoist a leading run of ``terms``; None if all were hoisted, else the remaining test."""
        for k, term in enumerate(terms):
            if not self._hoist(term, negate):
                if k == 0:
                    return terms[0] if len(terms) == 1 else ast.BoolOp(
                        ast.Or() if negate else ast.And(), terms)
                rest = terms[k:]
                return rest[0] if len(rest) == 1 else ast.BoolOp(
                    ast.Or() if negate else ast.And(), rest)
        return None

    def _hoist(self, term, negate) -> bool:
        if not (isinstance(term, ast.Compare) and len(term.ops) == 1
                and type(term.ops[0]) in _NEGATE):
            return False
        op = type(term.ops[0])
        if negate:
            op = _NEGATE[op]
        left, right = self._expand(term.left), self._expand(term.comparators[0])
        la, ra = affine_in(left, self.inner), affine_in(right, self.inner)
        if la is None or ra is None:
            return False
        (kl, rl), (kr, rr) = la, ra
        if not all(self.purity.expr(e, self.names) for e in (rl, rr) if e is not None):
            return False
        if kl == kr == 0:
            cmp = ast.Compare(left, [op()], [right])
            self.conds.append(ast.unparse(cmp))
            return True
        if (kl, kr) == (0, 1):
            (kl, rl), (kr, rr), op = (kr, rr), (kl, rl), FLIPPED[op]
        if (kl, kr) != (1, 0):
            return False
        bound = _src(rr) if rl is None else f"({_src(rr)}) - ({_src(rl)})"
        side, kind = _BOUND[op]
        (self.hi if side == "hi" else self.lo).append(f"__bound_{kind}({bound})")
        return True

    def _expand(self, e):
        """Substitute the prefix's single assignments, so bounds use only segment-level names."""
        defs = self.defs

        class Sub(ast.NodeTransformer):
            def visit_Name(self, node):
                if node.id in defs and isinstance(node.ctx, ast.Load):
                    return Sub().visit(copy.deepcopy(defs[node.id]))
                return node
        return Sub().visit(copy.deepcopy(e))


def split_terms(test, op_type):
    """The terms of an ``and``/``or`` chain; ``a < b < c`` counts as ``a < b and b < c`` when
    evaluating ``b`` twice is harmless (no calls in it)."""
    terms = list(test.values) if isinstance(test, ast.BoolOp) and isinstance(
        test.op, op_type) else [test]
    out = []
    for t in terms:
        if (op_type is ast.And and isinstance(t, ast.Compare) and len(t.ops) > 1
                and not any(isinstance(n, ast.Call) for c in t.comparators[:-1]
                            for n in ast.walk(c))):
            operands = [t.left, *t.comparators]
            out += [ast.Compare(copy.deepcopy(operands[k]), [op], [copy.deepcopy(operands[k + 1])])
                    for k, op in enumerate(t.ops)]
        else:
            out.append(t)
    return out


def _src(e):
    return ast.unparse(e) if e is not None else "0"


def affine_in(e, inner: str):
    """``(k, r)`` with ``e == k * inner + r`` (``r`` None for 0), or None if not affine in the
    inner loop's variable."""
    if isinstance(e, ast.Name) and e.id == inner:
        return 1, None
    if not any(isinstance(n, ast.Name) and n.id == inner for n in ast.walk(e)):
        return 0, e
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == NONNEG:
        return affine_in(e.args[0], inner)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        a, b = affine_in(e.left, inner), affine_in(e.right, inner)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e.op, ast.Add) else -1
        k = a[0] + sign * b[0]
        if b[1] is None:
            r = a[1]
        elif a[1] is None:
            r = b[1] if sign == 1 else ast.UnaryOp(ast.USub(), b[1])
        else:
            r = ast.BinOp(a[1], e.op, b[1])
        return k, r
    return None
