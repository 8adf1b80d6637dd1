"""Names the translator introduces into generated code, and small helpers about them.

Every such name contains ``__`` (user identifiers may not, see ``frontend.check_reserved``):

- the unit's coordinates ``__tx/__ty/__tz`` (loop variables), its cube ``__bx/__by/__bz``, the
  launch geometry ``__bdx..`` / ``__gdx..`` (parameters of every generated kernel) and the unit's
  linear index in its cube ``__tid``;
- markers the lowering leaves for later passes: the barrier statement ``__syncthreads()``, the
  warp exchange ``__exchange__('<op>', k, <operand names>)`` (operands mostly in
  ``__xm<k>``/``__xv<k>``/``__xb<k>``, results in ``__xr<k>``/``__xp<k>``, see ``lower/warps.py``),
  the grid sync ``__gridsync__()``, the lockstep point ``__lockstep__()`` (``passes/lockstep/schedule.py``: a
  split without a barrier's agreement check, where units exchange values through memory), local array declarations ``x = __local__('x')``, the counters ``__sacc<k>`` of syncthreads_count/and/or;
- the run-time masks of ``if``/``while`` statements whose condition is not provably uniform,
  ``__m<k>``, and a unit's slot in per-unit arrays, ``__slot`` (``analyze/plan.py``, ``emit/cube_kernel.py``);
- ``__nn(x)``: ``support.assume_nonneg``, wrapped around index arithmetic that is non-negative by
  construction (``NonNegWrapper``), so that Numba's negative-index wraparound folds away and thread
  loops vectorize.
"""

from __future__ import annotations

import ast

DIMS = ("x", "y", "z")
THREAD_IDS = ("__tx", "__ty", "__tz")
BLOCK_IDS = ("__bx", "__by", "__bz")
BLOCK_DIMS = ("__bdx", "__bdy", "__bdz")
GRID_DIMS = ("__gdx", "__gdy", "__gdz")
LINEAR_TID = "__tid"
#: every hidden id a lowered body may mention, in the canonical order used for device parameters
HIDDEN_IDS = THREAD_IDS + BLOCK_IDS + BLOCK_DIMS + GRID_DIMS + (LINEAR_TID,)
#: hidden ids with the same value for every unit of a cube
UNIFORM_IDS = frozenset(BLOCK_IDS + BLOCK_DIMS + GRID_DIMS)
#: hidden ids with the same value for every unit of the grid
GRID_UNIFORM_IDS = frozenset(BLOCK_DIMS + GRID_DIMS)

BARRIER = "__syncthreads"
EXCHANGE = "__exchange__"
GRID_SYNC = "__gridsync__"
#: a split point the translator inserts where a region's units exchange values through memory
LOCKSTEP = "__lockstep__"
#: a unit's index in the per-unit ``[slots]`` arrays of the generated chunk
SLOT = "__slot"
LOCAL_MARKER = "__local__"
NONNEG = "__nn"
#: ``scans.doubling_end`` in generated code (``passes/scan_idiom.py``): pure, like ``NONNEG``
DOUBLING_END = "__doubling_end"

#: prefix of the cube-level counters behind syncthreads_count/and/or (always uniform)
ACC_PREFIX = "__sacc"


def _marker(stmt: ast.stmt) -> str | None:
    if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)):
        return stmt.value.func.id
    return None


def is_barrier(stmt: ast.stmt) -> bool:
    """Is ``stmt`` the lowered barrier ``__syncthreads()``?"""
    return _marker(stmt) == BARRIER


def exchange_of(stmt: ast.stmt) -> tuple[str, int, list[str]] | None:
    """``(op, k, operand names)`` for a warp exchange marker
    ``__exchange__('<op>', k, '<mask>', ...)``, else None."""
    if _marker(stmt) != EXCHANGE:
        return None
    op, k, *operands = (a.value for a in stmt.value.args)
    return op, k, operands


def is_grid_sync(stmt: ast.stmt) -> bool:
    return _marker(stmt) == GRID_SYNC


def is_lockstep(stmt: ast.stmt) -> bool:
    """Is ``stmt`` a lockstep point (``passes/lockstep/schedule.py``)?"""
    return _marker(stmt) == LOCKSTEP


def is_split(stmt: ast.stmt) -> bool:
    """Does ``stmt`` end a region: a barrier, a warp exchange, a grid sync or a lockstep
    point?"""
    return _marker(stmt) in (BARRIER, EXCHANGE, GRID_SYNC, LOCKSTEP)


def contains_barrier(node: ast.AST) -> bool:
    """Does ``node`` contain a split point (barrier, warp exchange, grid sync)? Such code runs
    cube by cube in regions (``emit/cube_kernel.py``)."""
    return any(is_split(n) for n in ast.walk(node) if isinstance(n, ast.stmt))


def contains_grid_sync(nodes) -> bool:
    return any(is_grid_sync(n) for s in nodes for n in ast.walk(s) if isinstance(n, ast.stmt))


class NonNegWrapper(ast.NodeTransformer):
    """Wrap maximal ``+``/``*`` trees of hidden ids and non-negative int literals in ``__nn``.

    Such values are >= 0 by construction; telling LLVM so removes Numba's negative-index
    wraparound and lets thread loops vectorize (see ``support.assume_nonneg``).
    """

    def visit_BinOp(self, node):
        if _nonneg_tree(node):
            return ast.copy_location(ast.Call(ast.Name(NONNEG, ast.Load()), [node], []), node)
        return self.generic_visit(node)

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id == NONNEG:
            return node              # already wrapped (cuda.grid)
        return self.generic_visit(node)


def _nonneg_tree(node) -> bool:
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, (ast.Add, ast.Mult)) and _nonneg_tree(
            node.left) and _nonneg_tree(node.right)
    if isinstance(node, ast.Name):
        return node.id in HIDDEN_IDS
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id == NONNEG
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0
