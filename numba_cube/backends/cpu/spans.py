"""Masked blocks whose units are a prefix or a suffix of the cube: their span in a few reads.

The commonest run-time mask (``plan.py``'s ``MaskedIf``) is a test of the thread index against a
bound every unit shares: ``if tid < 32:`` around the second stage of a warp reduction, ``if i <
n:`` around a barrier. Such a test is *monotone* in ``threadIdx.x``: its per-unit side grows with
``threadIdx.x`` (``__tx``, plus or minus block ids and sizes) and its other side is the same value
for every unit, so the units that take the body are a prefix (``<``, ``<=``) or a suffix (``>``,
``>=``) of the values of ``threadIdx.x``. In a cube with ``blockDim.y == blockDim.z == 1`` those
are a prefix or suffix of the slots, and the span and flags that ``warps_runtime.mask_span``
computes with a pass over the cube follow from one boundary slot, which ``mask_edge`` finds by
binary search in the evaluated mask (8 reads for 256 units; measured: the pass cost the warp
block-sum benchmark an eighth of its time).

The mask is still evaluated per unit, so the test keeps its own semantics (int against float,
NaN, a bound of any type); only the search for where its ones end changes. The general path
runs instead for any other cube shape (the generated code tests it), and the fast one is never
chosen under another mask, in a kernel where units exit (an exited unit leaves a 0 in the
middle) or in grid mode (slots span cubes): ``CubeKernel`` asks for ``monotone_masks`` only
where none of these holds.
"""

from __future__ import annotations

import ast

from numba_cube.backends.cpu import warps_emit
from numba_cube.backends.cpu.analysis import Purity
from numba_cube.backends.cpu.hidden import NONNEG, UNIFORM_IDS
from numba_cube.backends.cpu.plan import Ctrl, MaskedIf
from numba_cube.backends.cpu.unitcode import Writer

PREFIX, SUFFIX = "prefix", "suffix"
IMPORT = "from numba_cube.backends.cpu.warps_runtime import mask_edge as __mask_edge"
#: the cube shapes where threadIdx.x is the slot
GUARD = "__bdy * __bdz == 1"
#: offsets added to threadIdx.x stay far from int64 overflow, which would break monotonicity
_SMALL = 1 << 31

_INCREASING_SIDE = {ast.Lt: PREFIX, ast.LtE: PREFIX, ast.Gt: SUFFIX, ast.GtE: SUFFIX}
_MIRRORED = {PREFIX: SUFFIX, SUFFIX: PREFIX}


def monotone_masks(items, remat: dict[str, ast.expr], uniform: set[str],
                   purity: Purity) -> dict[str, str]:
    """``mask -> PREFIX | SUFFIX`` for the masked ``if`` statements of ``items`` that are not under
    another mask and whose test is monotone in threadIdx.x (module docstring)."""
    out: dict[str, str] = {}
    for it in items:
        if isinstance(it, MaskedIf):
            kind = test_kind(it.node.test, remat, uniform, purity)
            if kind is not None:
                out[it.mask] = kind
        elif isinstance(it, Ctrl):            # a cube-level block: still under no mask
            out.update(monotone_masks(it.body + it.orelse, remat, uniform, purity))
    return out


def test_kind(test: ast.expr, remat, uniform, purity) -> str | None:
    """PREFIX or SUFFIX when ``test`` is monotone in threadIdx.x, else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    kind = _INCREASING_SIDE.get(type(test.ops[0]))
    left, right = test.left, test.comparators[0]
    if kind is None:
        return None
    if _increasing(left, remat) and _shared(right, remat, uniform, purity):
        return kind
    if _increasing(right, remat) and _shared(left, remat, uniform, purity):
        return _MIRRORED[kind]
    return None


def _increasing(e: ast.expr, remat: dict[str, ast.expr], depth: int = 0) -> bool:
    """Is ``e`` threadIdx.x plus a cube-level offset (so it grows with threadIdx.x)? Recomputed
    names stand for their definitions (``tid`` for ``__tx``)."""
    if depth > 16:
        return False
    if isinstance(e, ast.Name):
        return e.id == "__tx" or (e.id in remat and _increasing(remat[e.id], remat, depth + 1))
    if isinstance(e, ast.Call):
        return (isinstance(e.func, ast.Name) and e.func.id == NONNEG and len(e.args) == 1
                and _increasing(e.args[0], remat, depth + 1))
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return ((_increasing(e.left, remat, depth + 1) and _geometry(e.right))
                or (_geometry(e.left) and _increasing(e.right, remat, depth + 1)))
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub):
        return _increasing(e.left, remat, depth + 1) and _geometry(e.right)
    return False


def _geometry(e: ast.expr) -> bool:
    """Is ``e`` an integer made of block ids, launch sizes and small constants?"""
    if isinstance(e, ast.Constant):
        return type(e.value) is int and abs(e.value) < _SMALL
    if isinstance(e, ast.Name):
        return e.id in UNIFORM_IDS
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
        return _geometry(e.left) and _geometry(e.right)
    return False


def _shared(e: ast.expr, remat, uniform: set[str], purity: Purity) -> bool:
    """Does ``e`` have one value for every unit, read from no memory (the bound side)?"""
    names = {n.id for n in ast.walk(e) if isinstance(n, ast.Name)}
    return not (names & set(remat)) and purity.expr(e, uniform)


def emit_bounds(w: Writer, mask: str, sel: int, kind: str, total: str) -> str:
    """Print the span and flags (``warps_emit.emit_bounds``'s span form) of ``mask == sel``;
    returns the test 'some unit is selected'. Where threadIdx.x is the slot, they follow from
    the boundary slot: the ones of a PREFIX mask are ``[0, edge)`` and its twos (the ``else``)
    the rest, a SUFFIX mask the other way round. Elsewhere the general pass runs, and its span
    is widened to the same fixed end (0 or the cube's size), so that the loops under the block
    see that end as a constant in both cases (measured: a fifth of the warp block-sum benchmark
    when the span starts at a known 0). A wider span is only slower: where it is not dense, the
    loops test each unit's mask."""
    lo, hi = warps_emit.bounds(mask, sel)
    whole, dense = warps_emit.whole_flag(mask, sel), warps_emit.dense_flag(mask, sel)
    edge = f"{mask}e{sel}"
    first = (kind == PREFIX) == (sel == 1)          # is the span the part before the edge?
    with w.indent(f"if {GUARD}:"):
        w.line(f"{edge} = __mask_edge({mask}, {total}, {kind == PREFIX})")
        w.line(f"{lo}, {hi} = " + (f"0, {edge}" if first else f"{edge}, {total}"))
        # every warp the span touches is whole when its inner end is a warp boundary (the
        # cube's last warp may be partial), and every slot in it is selected
        w.line(f"{whole} = {edge} % 32 == 0 or {edge} == {total}")
        w.line(f"{dense} = True")
    with w.indent("else:"):
        start, end = f"{edge}s", f"{edge}h"
        w.line(f"{start}, {end}, {whole}, {dense} = __mask_span({mask}, {sel}, __exited, "
               f"{total}, {total})")
        if first:
            w.line(f"{dense} = {dense} and {start} == 0")
            w.line(f"{lo}, {hi} = 0, {end}")
        else:
            w.line(f"{dense} = {dense} and {end} == {total}")
            w.line(f"{lo}, {hi} = {start}, {total}")
    return f"{lo} < {hi}"
