"""The passes that decide how a kernel's shape is printed, and the record of their decisions.

``emit/module.py``'s ``PIPELINE`` makes a kernel's *shape* (``emit/flat_kernel.FlatKernel`` or
``emit/cube_kernel.CubeKernel``: what the analyses found, its plan, replicas, uniform names), then
runs two stages of this module on it:

- ``shape_passes`` (``decide_shape``), before the bounds checks: the passes that decide the
  kernel's loops, in the order of ``FLAT_PASSES`` or ``CUBE_PASSES``;
- ``region_passes`` (``decide_regions``), after the bounds checks have rewritten the regions'
  code (the decisions are about the code as printed): ``REGION_PASSES``, per region of a cube
  kernel.

Each pass is a function ``(shape, decisions)`` named after its pass: it says when it applies
(its first lines), and it fills only its own fields of the shape's record (``FlatDecisions``,
``CubeDecisions``: each field names the pass that fills it). The emitters print from the record
and decide nothing; an optional pass switched off (``passes.enabled``) leaves its fields empty,
which prints the kernel as if it never applied.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from numba_cube.backends.cpu.analyze.dataflow import store_counts, stores
from numba_cube.backends.cpu.analyze.guard_bounds import GuardHoist
from numba_cube.backends.cpu.lower.unit_statements import lower_returns, replace_local_markers
from numba_cube.backends.cpu.passes import (
    demanded_lanes, guards, interior, loop_order as looporder, spans, stride_interchange,
)
from numba_cube.backends.cpu.passes.shared_stores import conditional_shared_stores
from numba_cube.backends.cpu.passes.uniform_prologue import split_prologue

__all__ = ["FlatDecisions", "CubeDecisions", "decide_shape", "decide_regions",
           "FLAT_PASSES", "CUBE_PASSES", "REGION_PASSES"]


@dataclass
class FlatDecisions:
    """How a flat kernel's loops are printed (``emit/flat_kernel.py``)."""

    #: loop_order: the inner unit loop walks y (x and y names exchanged in the body)
    swapped: bool = False
    #: loop_order: one loop over a chunk's stretch of each row (``loop_order.global_inner``)
    rows: bool = False
    #: uniform_prologue: the leading statements that run once per chunk, and the names they set
    prologue: list = field(default_factory=list)
    prologue_names: set = field(default_factory=set)
    #: shared_stores: rewrites ``body`` in place of its stores to a uniform element (no field)
    #: guard_hoisting: clamps of the unit loop's range, and tests that skip a whole segment
    lo: list = field(default_factory=list)
    hi: list = field(default_factory=list)
    conds: list = field(default_factory=list)
    #: the unit's code as printed, after every pass above (and ``return`` lowered)
    body: list = field(default_factory=list)
    uses_flag: bool = False


@dataclass
class CubeDecisions:
    """How a cube kernel's regions are printed (``emit/cube_kernel.py``, ``emit/regions.py``)."""

    #: spans: masks whose ones are a prefix or suffix of the cube (mask -> its form)
    monotone: dict = field(default_factory=dict)
    #: spans: regions that only evaluate a monotone mask, filled in closed form (index -> fill)
    closed: dict = field(default_factory=dict)
    #: stride_interchange: regions whose grid-stride loop runs row by row (index -> Interchange)
    interchanged: dict = field(default_factory=dict)
    #: demanded_lanes: shuffle rounds that compute only the lanes read after them
    demand: demanded_lanes.DemandedLanes | None = None
    #: guards: regions that loop over the units their guard admits
    #: (index -> (the code inside the guard, (lo, hi, stride)))
    guards: dict = field(default_factory=dict)
    #: interior: regions printed twice, unguarded in interior cubes
    #: (index -> (its flag's name, the flag's test, the code without the guards))
    interior: dict = field(default_factory=dict)


# ---- flat kernels ------------------------------------------------------------------------------

def loop_order_pass(shape, d: FlatDecisions) -> None:
    """Which coordinate the inner loop walks, and whether it walks whole rows
    (``passes/loop_order.py``); the body in those terms."""
    d.swapped = looporder.inner_axis(shape.lowered.body) == looporder.Y
    source = looporder.swap_xy(shape.lowered.body) if d.swapped else shape.lowered.body
    # one loop over the chunk's stretch of a row where the ids are only the global coordinate;
    # the linear thread id needs the cube's ids
    rows = None if shape.needs_tid else looporder.global_inner(source)
    d.rows = rows is not None
    d.body = rows if rows is not None else source


def uniform_prologue_pass(shape, d: FlatDecisions) -> None:
    """The grid-uniform leading statements run once per chunk (``passes/uniform_prologue.py``)."""
    d.prologue, d.body, d.prologue_names = split_prologue(d.body, shape.lowered.params)


def shared_stores_pass(shape, d: FlatDecisions) -> None:
    """A store every unit makes to one element reads it first and writes only a change
    (``passes/shared_stores.py``); the element is uniform from the parameters, the prologue's
    names and the grid's dimensions."""
    d.body = conditional_shared_stores(d.body, [*shape.lowered.params, *d.prologue_names])


def guard_hoisting_pass(shape, d: FlatDecisions) -> None:
    """The leading ``if i < n:`` tests become clamps of the unit loop's range
    (``analyze/guard_bounds.py``); they may use the prologue's names, defined before every
    segment. Then the body as printed: local arrays' storage, ``return`` ending the unit."""
    hoist = GuardHoist(d.body, [*shape.lowered.params, *sorted(d.prologue_names)],
                       shape.purity, looporder.GLOBAL_INNER if d.rows else "__tx")
    body = hoist.run([copy.deepcopy(s) for s in d.body])
    d.lo, d.hi, d.conds = hoist.lo, hoist.hi, hoist.conds
    d.body, d.uses_flag = lower_returns(replace_local_markers(body, set()), [])

# ---- cube kernels ------------------------------------------------------------------------------

def spans_pass(shape, d: CubeDecisions) -> None:
    """Masks that are a prefix or suffix of the cube, and the regions that only fill them
    (``passes/spans.py``). Not in grid mode, nor where a unit may exit."""
    if shape.grid or shape.has_exit:
        return
    d.monotone = spans.monotone_masks(shape.plan, shape.remat, shape.uniform, shape.purity)
    d.closed = spans.closed_fills(shape.regions, d.monotone, shape.remat,
                                  set(shape.uniform) | set(shape.lowered.params), shape.purity)


def stride_interchange_pass(shape, d: CubeDecisions) -> None:
    """Regions whose grid-stride loop runs row by row across the units
    (``passes/stride_interchange.py``, which says when)."""
    d.interchanged = stride_interchange.plan(shape)


def demanded_lanes_pass(shape, d: CubeDecisions) -> None:
    """Shuffle rounds that compute only the lanes read after them
    (``passes/demanded_lanes.py``, which says when)."""
    d.demand = demanded_lanes.DemandedLanes(shape)


# ---- regions of cube kernels, after the bounds checks --------------------------------------------

def guards_pass(shape, d: CubeDecisions, region, code) -> None:
    """A region that is one ``if`` bounding ``threadIdx.x`` (or fixing its lane) loops over the
    units it admits, when skipping the others changes nothing: it stores no per-unit value and
    reads no shuffle result, and no unit exits (``passes/guards.py``)."""
    if shape.grid or shape.has_exit or shape.stores[region.index] \
            or region.live_in & set(shape.shuffles):
        return
    # a bound may read what every unit shares, unless this region assigns it
    names = ((shape.uniform - set().union(*(stores(s) for s in code)))
             | set(shape.lowered.params))
    guarded = guards.hoisted_guard(code, shape.remat, names, shape.purity)
    if guarded is not None:
        d.guards[region.index] = (guarded.body, (guarded.lo, guarded.hi, guarded.stride))


def interior_pass(shape, d: CubeDecisions, region, code) -> None:
    """An unmasked region that no guard narrowed, in cube mode where no unit exits, runs without
    its guards in cubes every unit of which passes them (``passes/interior.py``)."""
    if shape.grid or shape.has_exit or region.ctx is not None or region.index in d.guards:
        return
    assigned = set().union(*(stores(s) for s in code))
    counts = store_counts(shape.lowered.body)
    params = {p for p in shape.lowered.params if not counts[p]}
    uniform = (shape.uniform | params) - assigned
    flag = interior.flag(region.index)
    split = interior.split(code, shape.remat, uniform, shape.purity, flag)
    if split is not None:
        d.interior[region.index] = (flag, *split)


# ---- the lists and the stages ---------------------------------------------------------------------

#: (name, pass) in the order they run; an optional pass is switched off by its name
#: (``passes.enabled``, which the pass's own module asks)
FLAT_PASSES = (("loop_order", loop_order_pass), ("uniform_prologue", uniform_prologue_pass),
               ("shared_stores", shared_stores_pass), ("guard_hoisting", guard_hoisting_pass))
CUBE_PASSES = (("spans", spans_pass), ("stride_interchange", stride_interchange_pass),
               ("demanded_lanes", demanded_lanes_pass))
REGION_PASSES = (("guards", guards_pass), ("interior", interior_pass))


def decide_shape(shape) -> None:
    """The ``shape_passes`` stage: run the passes of the shape's kind in order, each filling
    its fields of a new record, which the shape keeps as ``decisions``."""
    if shape.kind == "flat":
        decisions, passes = FlatDecisions(), FLAT_PASSES
    else:
        decisions, passes = CubeDecisions(), CUBE_PASSES
    for _, run in passes:
        run(shape, decisions)
    shape.decisions = decisions


def decide_regions(shape) -> None:
    """The ``region_passes`` stage (after the bounds checks): per region of a cube kernel, on
    its code as it will be printed (local arrays' storage in place), run ``REGION_PASSES``."""
    if shape.kind != "cube":
        return
    for region in shape.regions:
        # what the printer gives the unit loops (``emit/regions.py``): local arrays' storage in
        # place, and a copy (``lower_returns``; no unit exits where these passes apply)
        code, _ = lower_returns(
            replace_local_markers(region.code, shape.local_replicated, shape.slot), [])
        for _, run in REGION_PASSES:
            run(shape, shape.decisions, region, code)
