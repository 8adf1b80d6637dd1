"""A barrier region that is one guarded statement loops only over the units the guard admits.

The steps of a shared-memory tree are regions of one ``if``::

    while s > 0:
        if tid < s:                     # region: every unit tests it, the first s run it
            sm[tid] += sm[tid + s]
        cuda.syncthreads()
        s //= 2

Looping over every unit to find the first ``s`` costs a pass over the cube per step (measured: the
block reduction of ``benchmarks/bench_kernels.py``). When the region's whole code is ``if <test>:
<body>`` and the test's leading conjuncts bound ``threadIdx.x`` by values every unit shares
(``tid < s``, ``tid >= off``, ``i < n`` with ``i = cuda.grid(1)``), ``hoisted_guard`` turns them
into the range of the ``__tx`` loop (``flat_kernel.GuardHoist``, the same rule the flat kernels use)
and returns the body without them. Two more forms of conjunct become part of that range here
(``_UnitGuard``; the flat kernels keep them as tests):

- ``threadIdx.x`` (or the linear id ``__tbase + __tx``) plus an offset equal to a value of the
  launch geometry (``tid == 0``, ``i == 0``, ``tid == cuda.blockDim.x - 1``): the range ``[b, b +
  1)``. Both sides are then int64 (ids, sizes, int literals), so the equality is exactly that
  range;
- a residue: ``L % m == c`` or ``L & (m - 1) == c`` (``m`` a power of two), with ``L`` the unit's
  linear id ``__tid`` or ``threadIdx.x`` and ``m``, ``0 <= c < m`` int literals. ``cuda.laneid ==
  c`` lowers to ``(__tid % 32) == c``, the one lane of each warp that stores a warp's result. The
  ``__tx`` loop then steps by ``m`` from the first admitted value (``emit/unit_loops.py``): for ``__tid``,
  whose value is ``__tbase + __tx`` in the nested loops, that start depends on the row, so a 3-D
  cube is exact too (its lanes are linear ids mod 32, not ``threadIdx.x``).

Skipping a unit is only the same program when that unit would have done nothing: the region must
store no per-unit value (a replica written for every unit), read no shuffle result, have no
exits or ``return``, and every hoisted conjunct must be a pure bound of the forms above, part of
the leading run of conjuncts (what follows one that stays is still evaluated as written, so
short-circuit evaluation is unchanged); a conjunct on other coordinates stays a test. What a
skipped unit would still have done is loading its replicas and recomputing ids, which only reads.
A region under a run-time mask keeps its mask's span and per-unit test, and the admitted range
is intersected with that span. ``emit/regions.py`` checks the region-level conditions; this module
checks the code.
"""

from __future__ import annotations

import ast
import copy
from typing import NamedTuple

from numba_cube.backends.cpu.passes import enabled
from numba_cube.backends.cpu.analyze.dataflow import Purity
from numba_cube.backends.cpu.analyze.guard_bounds import GuardHoist, affine_in
from numba_cube.backends.cpu.lower.hidden import (
    BLOCK_DIMS, BLOCK_IDS, GRID_DIMS, LINEAR_TID, NONNEG,
)

#: int64 names a bound may read in the ``__tx`` loop's range (defined before it)
_INT_NAMES = frozenset(BLOCK_IDS + BLOCK_DIMS + GRID_DIMS + ("__ty", "__tz", "__tbase"))
#: literals stay far from int64 overflow (as ``spans._SMALL``)
_SMALL = 1 << 31


class Stride(NamedTuple):
    """Admit the units with ``base % step == residue`` (``base``: ``__tid`` or ``__tx``)."""
    base: str
    step: int
    residue: int


class Admitted(NamedTuple):
    """What ``hoisted_guard`` found: the body without the hoisted conjuncts, lower and upper
    bounds of ``__tx`` (``support.bound_*`` expressions) and an optional stride."""
    body: list
    lo: list
    hi: list
    stride: Stride | None


def hoisted_guard(code: list[ast.stmt], remat: dict[str, ast.expr], names: set[str],
                  purity: Purity) -> Admitted | None:
    """The units a region whose ``code`` is one guarded ``if`` admits (recomputed names in its
    test stand for their definitions; ``names``: what a bound may read, all defined before the
    unit loop), or None when nothing can be hoisted."""
    if not enabled("guards") or len(code) != 1 or not isinstance(code[0], ast.If) or code[0].orelse:
        return None
    stmt = copy.deepcopy(code[0])
    stmt.test = _substitute(stmt.test, remat)
    hoist = _UnitGuard([stmt], sorted(names), purity)
    body = hoist.run([stmt])
    if hoist.conds or not (hoist.lo or hoist.hi or hoist.stride):
        return None         # a test on other coordinates, or nothing bounds __tx
    return Admitted(body, hoist.lo, hoist.hi, hoist.stride)


class _UnitGuard(GuardHoist):
    """``GuardHoist`` that also hoists geometry equalities and one residue (module docstring)."""

    def __init__(self, body, params, purity: Purity):
        super().__init__(body, params, purity)
        self.stride: Stride | None = None

    def _hoist(self, term, negate) -> bool:
        if negate or not (isinstance(term, ast.Compare) and len(term.ops) == 1
                          and isinstance(term.ops[0], ast.Eq)):
            return super()._hoist(term, negate)
        left, right = self._expand(term.left), self._expand(term.comparators[0])
        return self._residue(left, right) or self._residue(right, left) \
            or self._equality(left, right)

    def _residue(self, e: ast.expr, c: ast.expr) -> bool:
        if self.stride is not None or not _int_literal(c) or not isinstance(e, ast.BinOp):
            return False
        base, m = e.left, e.right
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) \
                and base.func.id == NONNEG and len(base.args) == 1:
            base = base.args[0]
        if not (isinstance(base, ast.Name) and base.id in (LINEAR_TID, "__tx")
                and _int_literal(m) and m.value > 0):
            return False
        if isinstance(e.op, ast.Mod):
            step = m.value
        elif isinstance(e.op, ast.BitAnd) and m.value & (m.value + 1) == 0:
            step = m.value + 1                      # x & (2**k - 1) == x % 2**k for x >= 0
        else:
            return False
        if not 0 <= c.value < step:
            return False
        self.stride = Stride(base.id, step, c.value)
        return True

    def _equality(self, left: ast.expr, right: ast.expr) -> bool:
        # the linear id is ``__tbase + __tx`` in the nested loops (``emit/unit_loops.py``)
        left, right = _linear(left), _linear(right)
        la, ra = affine_in(left, self.inner), affine_in(right, self.inner)
        if la is None or ra is None:
            return False
        (kl, rl), (kr, rr) = la, ra
        if (kl, kr) == (0, 1):
            (kl, rl), (kr, rr) = (kr, rr), (kl, rl)
        if (kl, kr) != (1, 0) or not all(_int_geometry(e) for e in (rl, rr) if e is not None):
            return False
        b = ast.unparse(rr) if rl is None else f"({ast.unparse(rr)}) - ({ast.unparse(rl)})"
        self.lo.append(f"{b}")
        self.hi.append(f"{b} + 1")
        return True


def _linear(e: ast.expr) -> ast.expr:
    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id == LINEAR_TID:
                return ast.BinOp(ast.Name("__tbase", ast.Load()), ast.Add(),
                                 ast.Name("__tx", ast.Load()))
            return node
    return Sub().visit(copy.deepcopy(e))


def _int_literal(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) is int and abs(e.value) < _SMALL


def _int_geometry(e: ast.expr) -> bool:
    """Is ``e`` an int64 made of block ids, launch sizes, ``__ty``/``__tz`` and int literals?"""
    if isinstance(e, ast.Constant):
        return _int_literal(e)
    if isinstance(e, ast.Name):
        return e.id in _INT_NAMES
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
        return _int_geometry(e.left) and _int_geometry(e.right)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return _int_geometry(e.operand)
    if isinstance(e, ast.Call):
        return (isinstance(e.func, ast.Name) and e.func.id == NONNEG and len(e.args) == 1
                and not e.keywords and _int_geometry(e.args[0]))
    return False


def _substitute(e: ast.expr, remat: dict[str, ast.expr]) -> ast.expr:
    class Sub(ast.NodeTransformer):
        def __init__(self, depth=0):
            self.depth = depth

        def visit_Name(self, node):
            if node.id in remat and isinstance(node.ctx, ast.Load) and self.depth < 16:
                return Sub(self.depth + 1).visit(copy.deepcopy(remat[node.id]))
            return node

    return Sub().visit(copy.deepcopy(e))
