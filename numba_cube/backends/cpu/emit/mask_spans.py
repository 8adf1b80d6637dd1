"""Printing the spans of masks that are a prefix or a suffix of the cube (the masks and the
regions filled in closed form are decided by ``passes/spans.py``): a mask's fill from its edge,
and the span and flags of a masked block from that edge or a search.
"""

from __future__ import annotations

from numba_cube.backends.cpu.emit import warps as warps_emit
from numba_cube.backends.cpu.emit.unit_code import Writer
from numba_cube.backends.cpu.passes.spans import PREFIX

__all__ = ["closed_edge", "emit_closed_fill", "emit_bounds", "IMPORT", "GUARD"]

IMPORT = "from numba_cube.backends.cpu.kernel_runtime.warps import mask_edge as __mask_edge"
#: the cube shapes where threadIdx.x is the slot
GUARD = "__bdy * __bdz == 1"


def closed_edge(mask: str) -> str:
    """The name of ``mask``'s edge computed by ``emit_closed_fill``."""
    return f"{mask}c"


def emit_closed_fill(w: Writer, mask: str, kind: str, bound: str, total: str) -> None:
    """Print ``if <1-D cube>:`` and the fill of ``mask`` from its edge (module docstring); the
    caller prints the region's loops for other shapes in the ``else``."""
    edge = closed_edge(mask)
    first, second = (1, 2) if kind == PREFIX else (2, 1)
    with w.indent(f"if {GUARD}:"):
        w.line(f"{edge} = min(max({bound}, 0), {total})")
        w.line(f"{mask}[:{edge}] = {first}")
        w.line(f"{mask}[{edge}:{total}] = {second}")


def emit_bounds(w: Writer, mask: str, sel: int, kind: str, total: str,
                closed: bool = False) -> str:
    """Print the span and flags (``warps.emit_bounds``'s span form) of ``mask == sel``;
    returns the test 'some unit is selected'. Where threadIdx.x is the slot, they follow from
    the boundary slot: the ones of a PREFIX mask are ``[0, edge)`` and its twos (the ``else``)
    the rest, a SUFFIX mask the other way round. Elsewhere the general pass runs, and its span
    is widened to the same fixed end (0 or the cube's size), so that the loops under the block
    see that end as a constant in both cases (measured: a fifth of the warp block-sum benchmark
    when the span starts at a known 0). A wider span is only slower: where it is not dense, the
    loops test each unit's mask. ``closed``: the mask was filled by ``emit_closed_fill``, whose
    edge is taken instead of searching."""
    lo, hi = warps_emit.bounds(mask, sel)
    whole, dense = warps_emit.whole_flag(mask, sel), warps_emit.dense_flag(mask, sel)
    edge = f"{mask}e{sel}"
    first = (kind == PREFIX) == (sel == 1)          # is the span the part before the edge?
    with w.indent(f"if {GUARD}:"):
        w.line(f"{edge} = " + (closed_edge(mask) if closed else
                               f"__mask_edge({mask}, {total}, {kind == PREFIX})"))
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
