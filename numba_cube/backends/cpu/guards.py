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
into the range of the ``__tx`` loop (``flatten.GuardHoist``, the same rule the flat kernels use)
and returns the body without them.

Skipping a unit is only the same program when that unit would have done nothing: the region must
store no per-unit value (a replica written for every unit), read no shuffle result, have no
run-time mask, exits or ``return``, and every hoisted conjunct must be a bound on ``__tx``
alone (a conjunct on other coordinates stays a test). ``regions_emit`` checks the region-level
conditions; this module checks the code.
"""

from __future__ import annotations

import ast
import copy

from numba_cube.backends.cpu.analysis import Purity
from numba_cube.backends.cpu.flatten import GuardHoist


def hoisted_guard(code: list[ast.stmt], remat: dict[str, ast.expr], names: set[str],
                  purity: Purity) -> tuple[list[ast.stmt], list[str], list[str]] | None:
    """``(body, lower bounds, upper bounds)`` of ``__tx`` for a region whose ``code`` is one
    guarded ``if`` (recomputed names in its test stand for their definitions; ``names``: what a
    bound may read, all defined before the unit loop), or None when nothing can be hoisted."""
    if len(code) != 1 or not isinstance(code[0], ast.If) or code[0].orelse:
        return None
    stmt = copy.deepcopy(code[0])
    stmt.test = _substitute(stmt.test, remat)
    hoist = GuardHoist([stmt], sorted(names), purity)
    body = hoist.run([stmt])
    if hoist.conds or not (hoist.lo or hoist.hi):
        return None         # a test on other coordinates, or nothing bounds __tx
    return body, hoist.lo, hoist.hi


def _substitute(e: ast.expr, remat: dict[str, ast.expr]) -> ast.expr:
    class Sub(ast.NodeTransformer):
        def __init__(self, depth=0):
            self.depth = depth

        def visit_Name(self, node):
            if node.id in remat and isinstance(node.ctx, ast.Load) and self.depth < 16:
                return Sub(self.depth + 1).visit(copy.deepcopy(remat[node.id]))
            return node

    return Sub().visit(copy.deepcopy(e))
