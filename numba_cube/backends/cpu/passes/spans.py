"""Masked blocks whose units are a prefix or a suffix of the cube: their span in a few reads.

The commonest run-time mask (``analyze/plan.py``'s ``MaskedIf``) is a test of the thread index against a
bound every unit shares: ``if tid < 32:`` around the second stage of a warp reduction, ``if i <
n:`` around a barrier. Such a test is *monotone* in ``threadIdx.x``: its per-unit side grows with
``threadIdx.x`` (``__tx``, plus or minus block ids and sizes) and its other side is the same value
for every unit, so the units that take the body are a prefix (``<``, ``<=``) or a suffix (``>``,
``>=``) of the values of ``threadIdx.x``. In a cube with ``blockDim.y == blockDim.z == 1`` those
are a prefix or suffix of the slots, and the span and flags that ``warps.mask_span``
computes with a pass over the cube follow from one boundary slot, which ``mask_edge`` finds by
binary search in the evaluated mask (8 reads for 256 units; measured: the pass cost the warp
block-sum benchmark an eighth of its time).

The mask is still evaluated per unit, so the test keeps its own semantics (int against float,
NaN, a bound of any type); only the search for where its ones end changes. The general path
runs instead for any other cube shape (the generated code tests it), and the fast one is never
chosen under another mask, in a kernel where units exit (an exited unit leaves a 0 in the
middle) or in grid mode (slots span cubes): ``CubeKernel`` asks for ``monotone_masks`` only
where none of these holds.

**Closed form.** Where the region that evaluates such a mask is that evaluation alone
(``mask[__slot] = 1 if <test> else 2``, the region after a barrier, as ``if tid < 32:`` of the
warp block-sum), the test is also a bound of ``threadIdx.x`` in ``guards.hoisted_guard``'s sense
(``tid < 32`` is ``__tx < __bound_lt(32)``: the rule that narrows guarded regions and flat
kernels' ``if i < n:``). In a 1-D cube the edge is then that bound clamped to ``[0, __nt)``,
and the region fills the mask with two slice assignments of the same values the per-unit loop
stores (``emit_closed_fill``): every later reader of the mask (divergence checks, per-unit tests,
shuffle partners) sees the same array, and the edge needs no search. Knowing the edge as an
expression also lets LLVM fold the loops under the block (measured: the warp block-sum 49 -> 44
ms serial at 2^24). Other cube shapes run the region's loop as before. The bound is evaluated
once per cube instead of once per unit: it is pure and reads only shared values, and the region
has no other statement, so a bound that raises raises before any effect, as unit 0 would.
"""

from __future__ import annotations

import ast

from numba_cube.backends.cpu.passes import enabled
from numba_cube.backends.cpu.passes import guards
from numba_cube.backends.cpu.analyze.dataflow import Purity, stores
from numba_cube.backends.cpu.lower.hidden import NONNEG, SLOT, UNIFORM_IDS
from numba_cube.backends.cpu.analyze.plan_items import Ctrl, MaskedIf, Region

PREFIX, SUFFIX = "prefix", "suffix"
#: offsets added to threadIdx.x stay far from int64 overflow, which would break monotonicity
_SMALL = 1 << 31

_INCREASING_SIDE = {ast.Lt: PREFIX, ast.LtE: PREFIX, ast.Gt: SUFFIX, ast.GtE: SUFFIX}
_MIRRORED = {PREFIX: SUFFIX, SUFFIX: PREFIX}


def monotone_masks(items, remat: dict[str, ast.expr], uniform: set[str],
                   purity: Purity) -> dict[str, str]:
    """``mask -> PREFIX | SUFFIX`` for the masked ``if`` statements of ``items`` that are not under
    another mask and whose test is monotone in threadIdx.x (module docstring)."""
    out: dict[str, str] = {}
    if not enabled("spans"):
        return out
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


def closed_fills(regions: list[Region], monotone: dict[str, str], remat, names: set[str],
                 purity: Purity) -> dict[int, tuple[str, str, str]]:
    """Region index -> ``(mask, kind, edge expression)`` for the regions that only evaluate a
    monotone mask whose test is a bound ``guards.hoisted_guard`` hoists whole (module
    docstring); ``names``: what a bound may read (shared values and parameters)."""
    out = {}
    if not enabled("spans"):
        return out
    for r in regions:
        code = r.code
        if r.ctx is not None or len(code) != 1 or not isinstance(code[0], ast.Assign):
            continue
        s = code[0]
        t, v = s.targets[0], s.value
        if not (len(s.targets) == 1 and isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name) and t.value.id in monotone
                and isinstance(t.slice, ast.Name) and t.slice.id == SLOT
                and isinstance(v, ast.IfExp) and _is_const(v.body, 1)
                and _is_const(v.orelse, 2)):
            continue
        kind = monotone[t.value.id]
        probe = ast.If(v.test, [ast.Pass()], [])
        hoisted = guards.hoisted_guard([probe], remat, names - stores(s), purity)
        if hoisted is None or hoisted.stride is not None or not (
                len(hoisted.body) == 1 and isinstance(hoisted.body[0], ast.Pass)):
            continue                # a conjunct kept as a test, or not a bound at all
        bounds = hoisted.hi if kind == PREFIX else hoisted.lo
        other = hoisted.lo if kind == PREFIX else hoisted.hi
        if len(bounds) != 1 or other:
            continue
        out[r.index] = (t.value.id, kind, bounds[0])
    return out


def _is_const(e: ast.expr, value: int) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) is int and e.value == value
