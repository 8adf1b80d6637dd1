"""Printing a region whose grid-stride loop runs row by row across the cube's units (the
decision and its rules: ``passes/stride_interchange.py``, whose ``Interchange`` this reads).
"""

from __future__ import annotations

import ast

from numba_cube.backends.cpu.emit.unit_code import Writer
from numba_cube.backends.cpu.emit.unit_loops import unit_loops
from numba_cube.backends.cpu.lower.hidden import SLOT
from numba_cube.backends.cpu.passes.stride_interchange import Interchange

__all__ = ["emit", "IMPORT"]

#: the helper the interchanged loops call (``support.range_item``)
IMPORT = "from numba_cube.backends.cpu.kernel_runtime.support import range_item as __range_item"
#: the initial minimum of the trip counts (larger than any range's length)
_HUGE = "(1 << 62)"


def emit(printer, w: Writer, ic: Interchange) -> None:
    """Print the region of ``ic`` interchanged (see the module docstring); ``printer`` is the
    kernel's ``regions.RegionPrinter``, which recomputes the region's remat names."""
    k = ic.region.index
    stop, step, lo, hi, row, n = (f"__si{k}_{s}" for s in ("stop", "step", "lo", "hi", "k", "n"))
    loop, fn = ic.loop, printer.k.lowered.fn
    w.line(f"# its loop over {ast.unparse(loop.iter)} runs row by row across the units "
           "(passes/stride_interchange.py)")
    names = [stop, step][:len(ic.cube_args)]
    w.code(_at("\n".join(f"{name} = {ast.unparse(e)}" for name, e in zip(names, ic.cube_args)),
               loop), fn)
    # the original range's arguments, unit by unit: the same types, so the same range
    items = [ast.unparse(e) for e in ic.unit_args] + names
    args = f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    mentioned = {m.id for s in ic.region.code for m in ast.walk(s) if isinstance(m, ast.Name)}
    item = _at(f"{loop.target.id} = __range_item({row}, {args})", loop)

    def units(stmts: list[ast.stmt]) -> None:
        body = Writer()
        printer.emit_remat(body, ic.region.live_in, mentioned)
        body.code(ic.prefix + stmts, fn)
        with unit_loops(w, body.text(), grid=False, span=None, shared=[],
                        slot=SLOT in mentioned):
            for line in body.lines:
                w.line(line)

    w.line(f"{lo} = {_HUGE}")
    w.line(f"{hi} = 0")
    units(_at(f"{n} = len(range{args})\n{lo} = min({lo}, {n})\n{hi} = max({hi}, {n})", loop))
    w.line(f"{lo} = min({lo}, {hi})")
    with w.indent(f"for {row} in range({lo}):"):        # full rows
        units(item + loop.body)
    tail = _at(f"if {row} < len(range{args}):\n    pass", loop)[0]
    tail.end_lineno, tail.body = loop.end_lineno, item + loop.body
    with w.indent(f"for {row} in range({lo}, {hi}):"):  # the ragged end
        units([tail])


def _at(src: str, loop: ast.For) -> list[ast.stmt]:
    """``src`` parsed, every node on the loop's first line: an error there points to it
    (``linemarks``)."""
    stmts = ast.parse(src).body
    for node in (m for st in stmts for m in ast.walk(st)):
        if hasattr(node, "lineno"):
            node.lineno = node.end_lineno = loop.lineno
    return stmts
