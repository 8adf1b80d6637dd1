"""The loops over a cube's units that every region of a fissioned kernel runs in (``emit/cube_kernel.py``).

A region's body is written first; its text then decides the loops' shape:

- a body that names the unit's coordinates (``__tx``, ``__ty``, ``__tz``) runs in three nested
  loops over ``blockDim.z``, ``.y`` and ``.x``, with the slot ``__tid = __tbase + __tx``;
- any other body runs in one loop over the slots ``__tid`` (the same units in the same order:
  slots are linear thread ids), which LLVM vectorizes more readily (measured: the loops under
  ``if tid < 32:`` of the warp block-sum benchmark, and the scan steps of a shared-memory
  compaction).

A region narrowed by its guard (``passes/guards.py``) always runs in the nested loops, its ``__tx`` loop
over the admitted range (stepping by ``m`` for a residue ``L % m == c``, from a start computed per
row when ``L`` is the linear id).

Under a run-time mask the loops cover only the mask's span ``[lo, hi)`` of slots; in grid mode
(``emit/cube_kernel.py``'s docstring) the loops sit inside a loop over every cube of the grid, which first
selects that cube's shared arrays, and the per-unit arrays are indexed by the grid-wide slot.
"""

from __future__ import annotations

import re
from contextlib import ExitStack, contextmanager

from numba_cube.backends.cpu.lower.hidden import LINEAR_TID, SLOT
from numba_cube.backends.cpu.emit.unit_code import Writer

#: the unit's coordinates in the cube, which only the three nested loops define
_COORDINATES = re.compile(r"\b__t[xyz]\b|\b__tbase\b")


def needs_coordinates(body: str) -> bool:
    """Does the generated ``body`` name ``__tx``, ``__ty``, ``__tz`` (or their row base)?"""
    return _COORDINATES.search(body) is not None


@contextmanager
def unit_loops(w: Writer, body: str, *, grid: bool, span: tuple[str, str] | None,
               shared: list[str], slot: bool, tx_range: tuple | None = None,
               lanes: tuple[str, str] | None = None, whole_warps: bool = False):
    """Open the loops for ``body`` (its text); ``span``: the names of the mask's slot bounds,
    or None; ``shared``: the shared arrays the body names (grid mode selects the cube's);
    ``slot``: the body uses ``__slot`` (always defined in grid mode); ``tx_range``: lower and
    upper bounds of ``threadIdx.x`` and a ``guards.Stride`` or None (``passes/guards.py``: the units a
    hoisted guard admits; under a mask, intersected with ``span``);
    ``lanes``: names of the bounds ``[lo, hi)`` of the lanes to run in each warp
    (``passes/demanded_lanes.py``), honoured by the one loop over slots only: every other shape runs all
    lanes, which is always correct (the other lanes' values are dead); ``whole_warps``: the
    span is a run of whole warps, so no lane range is clipped to it."""
    with ExitStack() as stack:
        if grid:
            stack.enter_context(w.indent("for __bid in range(__nb):"))
            w.line("__bx = __bid % __gdx")
            w.line("__by = __bid // __gdx % __gdy")
            w.line("__bz = __bid // (__gdx * __gdy)")
            for name in shared:
                w.line(f"{name} = {name}__g[__bid]")
        # a span is a run of slots in one cube: grid mode's slots span cubes, so it loops over
        # every unit there and the body skips the ones the mask leaves out
        if span is not None and grid:
            span = None
        if not needs_coordinates(body) and tx_range is None and lanes is not None and not grid:
            lo, hi = span if span is not None else ("0", "__nt")
            first = "0" if lo == "0" else f"{lo} - {lo} % 32"          # the first warp
            stack.enter_context(w.indent(f"for __wb in range({first}, {hi}, 32):"))
            if whole_warps:
                stack.enter_context(w.indent(f"for __tid in range(__wb + {lanes[0]}, "
                                             f"__wb + {lanes[1]}):"))
            else:
                stack.enter_context(w.indent(f"for __tid in range(max({lo}, __wb + {lanes[0]}), "
                                             f"min({hi}, __wb + {lanes[1]})):"))
        elif not needs_coordinates(body) and tx_range is None:
            bounds = ", ".join(span) if span is not None else "__nt"
            stack.enter_context(w.indent(f"for __tid in range({bounds}):"))
        else:
            stack.enter_context(w.indent("for __tz in range(__bdz):"))
            stack.enter_context(w.indent("for __ty in range(__bdy):"))
            w.line("__tbase = (__tz * __bdy + __ty) * __bdx")
            if tx_range is not None:
                lows, highs, stride = tx_range
                if span is not None:            # a masked region: within the mask's span too
                    lows = [f"{span[0]} - __tbase", *lows]
                    highs = [f"{span[1]} - __tbase", *highs]
                lo = f"max(0, {', '.join(lows)})" if lows else "0"
                hi = f"min(__bdx, {', '.join(highs)})" if highs else "__bdx"
                if stride is None:
                    stack.enter_context(w.indent(f"for __tx in range({lo}, {hi}):"))
                else:
                    # the first __tx >= lo whose base (``__tbase + __tx`` for the linear id)
                    # has the residue, then every step-th
                    offset = " - __tbase" if stride.base == LINEAR_TID else ""
                    if lo == "0":
                        start = (f"({stride.residue}{offset}) % {stride.step}" if offset
                                 else f"{stride.residue}")
                    else:
                        w.line(f"__txlo = {lo}")
                        start = f"__txlo + ({stride.residue}{offset} - __txlo) % {stride.step}"
                    stack.enter_context(w.indent(f"for __tx in range({start}, {hi}, "
                                                 f"{stride.step}):"))
            elif span is not None:
                lo, hi = span
                stack.enter_context(w.indent(f"for __tx in range(max(0, {lo} - __tbase), "
                                             f"min(__bdx, {hi} - __tbase)):"))
            else:
                stack.enter_context(w.indent("for __tx in range(__bdx):"))
            w.line("__tid = __tbase + __tx")
        if grid:
            w.line(f"{SLOT} = __bid * __nt + __tid")
        elif slot:
            w.line(f"{SLOT} = __tid")
        yield
