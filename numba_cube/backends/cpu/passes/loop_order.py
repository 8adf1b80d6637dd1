"""Which coordinate of a barrier-free kernel the innermost unit loop walks (``emit/flat_kernel.py``).

A flat kernel's units are independent, so the order the CPU runs them in is free; what it
changes is the memory the inner loop touches. numba's own documentation writes 2-D kernels as::

    i, j = cuda.grid(2)
    dst[i, j] = src[i, j] + ...

``x`` (``i``) indexes the *first* axis of C-ordered arrays, so walking ``x`` innermost, as the
flat loop does by default, strides a whole row per unit (``benchmarks/bench_kernels.py``'s
9-point stencil in that form, 2048x2048 float64: 14.9-16.5x the ``prange`` loop a user would
write). ``inner_axis`` reads the kernel's subscripts and
chooses ``y`` instead when the last index of its multi-dimensional subscripts follows ``y`` and
an earlier one follows ``x`` (more such subscripts than the other way round).

**Rows, not cube segments.** The inner loop normally runs one cube's stretch of a row (``for
__bx ...: for __tx in range(lo, hi)``): 16 units for 16x16 cubes, too short for SIMD to pay.
When the body uses the inner thread and block ids only as the global coordinate
``__bx * __bdx + __tx`` (what ``cuda.grid`` lowers to), ``global_inner`` rewrites that to one name,
``__gx``, and the loop walks the chunk's whole stretch of the row. With both, the suite's
stencil runs at 1.94-2.25x and axpy stays at 1.03x.

The choice of axis is carried out by *renaming*: ``swap_xy`` exchanges the names of the ``x`` and ``y``
thread ids, block ids, block sizes and grid sizes in the body, and the chunk function takes its
geometry parameters in swapped order (``flat_kernel.FlatKernel``). The loop nest's text stays as it
is, and every name in it means the other axis: its inner loop then walks the real ``y``.
"""

from __future__ import annotations

import ast
import copy

from numba_cube.backends.cpu.passes import enabled
from numba_cube.backends.cpu.analyze.dataflow import assignment_sources, store_counts

X, Y = "x", "y"
#: the names ``swap_xy`` exchanges, x <-> y
_PAIRS = (("__tx", "__ty"), ("__bx", "__by"), ("__bdx", "__bdy"), ("__gdx", "__gdy"))
_SWAP = {a: b for a, b in _PAIRS} | {b: a for a, b in _PAIRS}


def inner_axis(body: list[ast.stmt]) -> str:
    """``Y`` when the kernel's multi-dimensional subscripts mostly index their last axis that
    follows a thread id with the ``y`` coordinate and an earlier axis with ``x``; else ``X``
    (the default order)."""
    if not enabled("loop_order"):
        return X
    defs = _single_definitions(body)
    votes = 0
    for node in (n for s in body for n in ast.walk(s)):
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple)
                and len(node.slice.elts) >= 2):
            continue
        # the last index that follows a thread id (a constant one after it, a record field or
        # a vector component, changes nothing about which axis is contiguous)
        coords = [_coordinates(e, defs) for e in node.slice.elts]
        while coords and not coords[-1]:
            coords.pop()
        if not coords:
            continue
        *leading, last = coords
        earlier = set().union(*leading)
        if "__ty" in last and "__tx" not in last and "__tx" in earlier:
            votes += 1
        elif "__tx" in last:
            votes -= 1
    return Y if votes > 0 else X


def swap_xy(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` with the ``x`` and ``y`` names of ``_PAIRS`` exchanged."""

    class Swap(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in _SWAP:
                return ast.copy_location(ast.Name(_SWAP[node.id], node.ctx), node)
            return node

    return [Swap().visit(copy.deepcopy(s)) for s in body]


#: the global inner coordinate ``global_inner`` introduces
GLOBAL_INNER = "__gx"


def global_inner(body: list[ast.stmt]) -> list[ast.stmt] | None:
    """``body`` with every ``__bx * __bdx + __tx`` (either order of each operation) replaced by
    ``GLOBAL_INNER``, or None when ``__tx`` or ``__bx`` is used any other way."""
    if not enabled("loop_order"):
        return None

    class Replace(ast.NodeTransformer):
        def visit_BinOp(self, node):
            if _is_global_x(node):
                return ast.copy_location(ast.Name(GLOBAL_INNER, ast.Load()), node)
            return self.generic_visit(node)

    out = [Replace().visit(copy.deepcopy(s)) for s in body]
    left = {n.id for s in out for n in ast.walk(s) if isinstance(n, ast.Name)}
    return None if left & {"__tx", "__bx"} else out


def _is_global_x(node: ast.BinOp) -> bool:
    if not isinstance(node.op, ast.Add):
        return False
    for tid, product in ((node.left, node.right), (node.right, node.left)):
        if (_named(tid, "__tx") and isinstance(product, ast.BinOp)
                and isinstance(product.op, ast.Mult)
                and {getattr(product.left, "id", None), getattr(product.right, "id", None)}
                == {"__bx", "__bdx"}):
            return True
    return False


def _named(e, name: str) -> bool:
    return isinstance(e, ast.Name) and e.id == name


def _single_definitions(body) -> dict[str, ast.expr]:
    """Names assigned exactly once, by a plain assignment: name -> its expression."""
    counts = store_counts(body)
    defs: dict[str, ast.expr] = {}
    for s in (n for st in body for n in ast.walk(st)):
        if isinstance(s, ast.Assign):
            for name, e in assignment_sources(s) or ():
                if counts[name] == 1:
                    defs[name] = e
    return defs


def _coordinates(e: ast.expr, defs, depth: int = 0) -> set[str]:
    """The thread ids (``__tx``, ``__ty``) ``e`` depends on, through single definitions."""
    out: set[str] = set()
    for n in ast.walk(e):
        if isinstance(n, ast.Name):
            if n.id in ("__tx", "__ty"):
                out.add(n.id)
            elif n.id in defs and depth < 8:
                out |= _coordinates(defs[n.id], defs, depth + 1)
    return out
