"""Index algebra for ``passes/lockstep/schedule.py``: which names vary between the units of a cube, which are
non-negative, which indices grow with a unit's position, and when two indices can meet.

The pass asks, for two accesses ``A[f]`` and ``A[g]`` of one segment, whether two different units
can reach one element and in which order the sequential run (units in ascending position, ``x``
fastest) and a warp's lockstep put them. Indices are read as signed sums of terms
(``tid + s - 1`` is ``+tid, +s, -1``): terms common to both sides cancel, and what is left is the
distance between the two units that meet.
"""

from __future__ import annotations

import ast
import math
from collections import Counter

from numba_cube.backends.cpu.analyze.dataflow import assignment_sources, store_counts
from numba_cube.backends.cpu.lower.hidden import (
    BLOCK_DIMS, BLOCK_IDS, GRID_DIMS, LINEAR_TID, NONNEG, THREAD_IDS,
)

__all__ = ["UnitFacts", "terms", "components", "lower_bounded", "nonneg_call", "SHAPE_ONLY",
           "READ_ONLY", "GEOMETRY"]

#: builtins that take an array without touching its elements
SHAPE_ONLY = frozenset({"len"})
#: builtins that read what they are given and write nothing
READ_ONLY = frozenset({"range", "enumerate", "zip", "iter", "min", "max", "sum", "abs", "any",
                       "all", "int", "float", "bool", "round", "complex"})
_PURE_BUILTINS = frozenset({"range", "len", "min", "max", "abs", "int", "float", "round",
                            "bool"})
#: ids that increase with the unit's position in the sequential order (x fastest)
_INCREASING_IDS = frozenset({"__tx", LINEAR_TID})
GEOMETRY = frozenset(BLOCK_DIMS + GRID_DIMS + BLOCK_IDS + THREAD_IDS + (LINEAR_TID,))


class UnitFacts:
    """What the pass knows of the kernel's names: single definitions, unit dependence, signs."""

    def __init__(self, body: list[ast.stmt], params: set[str]):
        self.counts = store_counts(body)
        self.defs: dict[str, list[ast.expr]] = {}
        for node in ast.walk(ast.Module(body=list(body), type_ignores=[])):
            if isinstance(node, ast.stmt):
                for name, e in assignment_sources(node) or ():
                    self.defs.setdefault(name, []).append(e)
                if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                    self.defs.setdefault(node.target.id, []).append(node.iter)
        self.params = params
        # a name stored in a way assignment_sources cannot read (a tuple from a call, a
        # subscript target) may hold anything: unit-dependent
        self.opaque = {n for n, c in self.counts.items() if c != len(self.defs.get(n, []))}
        self.unit_dependent = self._fixpoint(self._depends_on_unit, grow=True)
        self.nonneg = self._fixpoint(self._nonneg_def, grow=False)

    def _fixpoint(self, test, grow: bool) -> set[str]:
        """Names whose every definition passes ``test`` (``grow=False``: start from all and
        drop) or some definition does (``grow=True``: start from none and add)."""
        names = set(self.opaque) if grow else set(self.defs)
        changed = True
        while changed:
            changed = False
            for name, exprs in self.defs.items():
                if self.counts[name] != len(exprs) and not grow:
                    ok = False                  # stored in ways assignment_sources cannot read
                else:
                    ok = (any if grow else all)(test(e, names) for e in exprs)
                if grow and ok and name not in names:
                    names.add(name)
                    changed = True
                elif not grow and not ok and name in names:
                    names.discard(name)
                    changed = True
        return names

    @staticmethod
    def _depends_on_unit(e: ast.expr, dependent: set[str]) -> bool:
        for n in ast.walk(e):
            if isinstance(n, ast.Name) and (n.id in THREAD_IDS or n.id == LINEAR_TID
                                            or n.id in dependent):
                return True
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) \
                    and n.value.attr == "shape":
                continue                # a shape is the same for every unit
            if isinstance(n, ast.Subscript) or (isinstance(n, ast.Call)
                                                and not nonneg_call(n) and not _pure_call(n)):
                return True             # memory, or a call: may differ between units
        return False

    def _nonneg_def(self, e: ast.expr, names: set[str]) -> bool:
        return self.is_nonneg(e, names)

    def is_nonneg(self, e: ast.expr, names: set[str] | None = None, bounds=frozenset()) -> bool:
        names = self.nonneg if names is None else names
        if isinstance(e, ast.Constant):
            return type(e.value) is int and e.value >= 0
        if isinstance(e, ast.Name):
            return e.id in GEOMETRY or e.id in names or e.id in bounds
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Mult, ast.FloorDiv,
                                                          ast.RShift, ast.Mod, ast.LShift)):
            return self.is_nonneg(e.left, names, bounds) and self.is_nonneg(e.right, names, bounds)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            if e.func.id == NONNEG or e.func.id in SHAPE_ONLY:
                return True
            if e.func.id == "max":
                return any(self.is_nonneg(a, names, bounds) for a in e.args)
            if e.func.id == "min":
                return bool(e.args) and all(self.is_nonneg(a, names, bounds) for a in e.args)
        if isinstance(e, ast.Attribute):
            return e.attr == "size"
        if isinstance(e, ast.Subscript):
            return isinstance(e.value, ast.Attribute) and e.value.attr == "shape"
        return False

    def increasing(self, e: ast.expr, depth: int = 0) -> bool:
        """Does ``e`` grow with the unit's position, by exactly one unit-varying term?"""
        if depth > 8:
            return False
        if isinstance(e, ast.Name):
            if e.id in _INCREASING_IDS:
                return True
            exprs = self.defs.get(e.id, [])
            return (self.counts[e.id] == 1 and len(exprs) == 1
                    and self.increasing(exprs[0], depth + 1))
        varying = [(sign, t) for sign, t in terms(e) if self.varies(t)]
        if len(varying) != 1 or varying[0][0] != 1:
            return False
        term = varying[0][1]
        if isinstance(term, ast.BinOp) and isinstance(term.op, ast.Mult):
            # k * X with a positive literal k grows with X
            for k, x in ((term.left, term.right), (term.right, term.left)):
                if isinstance(k, ast.Constant) and type(k.value) is int and k.value > 0:
                    return self.increasing(x, depth + 1)
            return False
        return not isinstance(term, ast.BinOp) and self.increasing(term, depth + 1)

    def varies(self, e: ast.expr) -> bool:
        return self._depends_on_unit(e, self.unit_dependent)

    def disjoint(self, a: ast.expr, b: ast.expr) -> bool:
        """``B + p`` and ``B + q`` with constants ``p != q``: no two units meet there when ``B``
        is the same for every unit (``row`` and ``row - 1``), nor when every term of ``B`` is a
        multiple of ``k`` and ``k`` does not divide ``p - q`` (``2 * tid`` and ``2 * tid + 1``)."""
        a_terms = [(sign, ast.dump(t), t) for sign, t in terms(a)]
        b_terms = [(sign, ast.dump(t), t) for sign, t in terms(b)]
        common = Counter((s, d) for s, d, _ in a_terms) & Counter((s, d) for s, d, _ in b_terms)
        rest_a = Counter((s, d) for s, d, _ in a_terms) - common
        rest_b = Counter((s, d) for s, d, _ in b_terms) - common
        constants = [(s, t) for s, d, t in a_terms if (s, d) in rest_a] + \
                    [(-s, t) for s, d, t in b_terms if (s, d) in rest_b]
        if not all(isinstance(t, ast.Constant) and type(t.value) is int for _, t in constants):
            return False
        gap = sum(s * t.value for s, t in constants)
        if gap == 0:
            return False
        base = [t for s, d, t in a_terms if (s, d) in common]
        if not any(self.varies(t) for t in base):
            return True
        # B(u) - B(v) is a multiple of k for any two units: it cannot equal a gap k does not divide
        factors = [_literal_factor(t) for t in base if self.varies(t)]   # uniform ones cancel
        return all(f is not None and f > 1 for f in factors) and \
            gap % math.gcd(*factors) != 0

    def distance_nonneg(self, stored: ast.expr, loaded: ast.expr, bounds) -> bool:
        """Is ``loaded - stored`` >= 0, the same for every unit, over an index that grows with
        the unit's position? (Then the unit that reads ``loaded`` runs first.)"""
        s_terms = [(sign, ast.dump(t), t) for sign, t in terms(stored)]
        l_terms = [(sign, ast.dump(t), t) for sign, t in terms(loaded)]
        common = Counter((s, d) for s, d, _ in s_terms) & Counter((s, d) for s, d, _ in l_terms)
        base = [t for s, d, t in s_terms if (s, d) in common and s == 1]
        if not any(self.increasing(t) for t in base):
            return False
        left = Counter((s, d) for s, d, _ in s_terms) - common
        right = Counter((s, d) for s, d, _ in l_terms) - common
        extra = [(s, t) for s, d, t in l_terms if (s, d) in right] + \
                [(-s, t) for s, d, t in s_terms if (s, d) in left]
        # distance = (loaded - stored) = sum of extra terms: each must be >= 0 and the same
        # for every unit (else the reader/writer order could flip between units)
        return all(sign == 1 and self.is_nonneg(t, bounds=bounds)
                   and not self.varies(t) for sign, t in extra)


def _literal_factor(t: ast.expr) -> int | None:
    """``k`` for a term ``k * x`` or ``x * k`` (``k`` an int literal), ``t`` itself if it is
    an int literal; else None."""
    if isinstance(t, ast.Constant) and type(t.value) is int:
        return abs(t.value)
    if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult):
        for k in (t.left, t.right):
            if isinstance(k, ast.Constant) and type(k.value) is int:
                return abs(k.value)
    return None


def _pure_call(n: ast.Call) -> bool:
    """A builtin or ``math``/NumPy function: the same for every unit given the same args."""
    f = n.func
    if isinstance(f, ast.Name):
        return f.id in _PURE_BUILTINS
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
        and f.value.id in ("math", "__np")


def nonneg_call(n: ast.AST) -> bool:
    """``__nn(...)`` wraps geometry arithmetic (``hidden.NonNegWrapper``): not a real call."""
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == NONNEG


def terms(e: ast.expr, sign: int = 1) -> list[tuple[int, ast.expr]]:
    """The signed summands of ``e`` (``a + b - c`` -> ``[(1, a), (1, b), (-1, c)]``)."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        right = -sign if isinstance(e.op, ast.Sub) else sign
        return terms(e.left, sign) + terms(e.right, right)
    if nonneg_call(e) and len(e.args) == 1:
        return terms(e.args[0], sign)
    return [(sign, e)]


def components(index: ast.expr) -> list[ast.expr]:
    return list(index.elts) if isinstance(index, ast.Tuple) else [index]


def lower_bounded(test: ast.expr) -> frozenset:
    """Names ``n`` that a conjunct ``x < n`` (``x <= n``, ``n > x``, ``n >= x``) of ``test``
    bounds from below by a unit index ``x``: positive wherever the body runs (``x >= 0``)."""
    conjuncts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) \
        else [test]
    out = set()
    for c in conjuncts:
        if not (isinstance(c, ast.Compare) and len(c.ops) == 1):
            continue
        left, right, op = c.left, c.comparators[0], c.ops[0]
        if isinstance(op, (ast.Gt, ast.GtE)):
            left, right = right, left
        elif not isinstance(op, (ast.Lt, ast.LtE)):
            continue
        if isinstance(right, ast.Name) and isinstance(left, ast.Name):
            out.add((left.id, right.id))
    return frozenset(out)
