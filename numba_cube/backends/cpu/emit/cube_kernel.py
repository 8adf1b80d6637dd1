"""Emit a kernel that has barriers (or shared memory) as loops over cubes and units.

Shape of the generated chunk function, which
``emit/module.py`` calls once per ``prange`` iteration (parallel variant) or once (serial variant)::

    def <kernel>__chunk(__c, __nchunks, <geometry>, <params>):
        <shared arrays, local buffers, per-unit replica arrays, exit mask: allocated per chunk>
        for __bid in <cubes of chunk __c>:
            __bx, __by, __bz = <decompose __bid>
            <plan: regions as unit loops (``emit/regions.py``); uniform statements and cube-level
             control in between>

Allocating per *chunk* (a few per worker) instead of per cube saves an NRT allocation per cube;
shared memory is uninitialised in CUDA anyway, so reusing it across the chunk's cubes is fine.

A per-unit name live across a region boundary is kept in a ``[units]`` replica ``x__r``. Its type
is not known before Numba's type inference, so the first store of a chunk allocates it with
``support.replica(__nt, x)`` (typed from the value: ``np.full`` for numbers, a list for arrays and
tuples) and parks it in a list ``x__l``. That list is created empty at chunk level: Numba refines
an empty list's type from its first ``append``, and a name defined at chunk level is defined for
every later use in source order, which Numba's bytecode analysis requires. Each cube starts by
loading ``x__r = x__l[0]`` for the replicas that exist (once per cube, not per region: each load
is a reference count update). ``x__ok`` says whether the replica exists yet: the regions' loops
test it before loading or storing ``x`` (``emit/regions.py``), except those that run after a
top-level region storing ``x`` (``CubeKernel._certainly_allocated``).
Names that are pure functions of thread/block ids are recomputed instead
(``analysis.remat_definitions``), and local arrays that outlive a region get one slice per unit
(``x__r[__tid]``).

Warp exchanges, run-time masks and their checks are printed by ``emit/warps.py``; a masked block's
span is printed before it, and its regions loop over that span (``emit/regions.py``). Shuffle rounds
over a literal tuple of offsets whose result only some lanes read afterwards are printed
unrolled, each round's regions over the lanes still demanded (``passes/demanded_lanes.py``).

What this module prints about regions beyond the plan (masks' spans, interchanged and narrowed
loops, demanded lanes, interior cubes) the passes decided before: ``CubeKernel.decisions``
(``passes/shape_passes.py``). Nothing here asks a pass.

**Grid mode.** A kernel that syncs the grid (``cuda.cg.this_grid().sync()``) cannot finish one
cube before starting the next, so the cube loop moves inside every region: a region runs for
every unit of every cube, and the grid sync is a region boundary like a barrier. Everything a cube
keeps across it is then per cube: shared arrays get a leading cube axis (``sm__g[__bid]``),
replicas, masks and exit flags one slot per unit of the grid (``__slot = __bid * __nt + __tid``),
and what runs between regions runs once per grid (block ids are not uniform there). The launcher
makes one chunk of the whole grid, so grid mode runs on one worker thread.
"""

from __future__ import annotations

import ast

from numba_cube.backends.cpu.lower import dynamic_shared as dynshared
from numba_cube.backends.cpu.passes.demanded_lanes import IMPORT as DEMANDED_LANES_IMPORT
from numba_cube.backends.cpu.emit import interchanged_region, mask_spans, warps as warps_emit
from numba_cube.backends.cpu.analyze.dataflow import Purity, stores
from numba_cube.backends.cpu.lower.hidden import ACC_PREFIX, HIDDEN_IDS, LINEAR_TID, SLOT
from numba_cube.backends.cpu.lower.lowering import Lowered
from numba_cube.backends.cpu.analyze.plan_items import (
    Check, CubePlan, Ctrl, Exchange, Flow, MaskedIf, MaskedWhile, Region, Uniform,
)
from numba_cube.backends.cpu.emit.regions import RegionPrinter, mentioned_names
from numba_cube.backends.cpu.emit.unit_code import Writer


class CubeKernel:
    """Everything needed to print one kernel with split points (both its variants)."""

    kind = "cube"

    def __init__(self, lowered: Lowered, cube_plan: CubePlan, remat: dict[str, ast.expr],
                 purity: Purity):
        self.lowered = lowered
        self.purity = purity
        self.plan = cube_plan.items
        self.regions = regions = cube_plan.regions
        self.uniform = cube_plan.uniform
        self.masks = cube_plan.masks
        self.exchanges = cube_plan.exchanges
        self.grid = cube_plan.grid
        fn = lowered.fn
        if self.grid:
            _refuse_in_grid_mode(lowered, regions)
        shared = {d.name for d in lowered.shared}
        local = {d.name for d in lowered.local}
        #: shuffle results are read in place by the region that uses them (no replica)
        self.shuffles = {ex.outputs[0]: ex for ex in self.exchanges
                         if ex.op in warps_emit.SHUFFLES}
        results = {o for ex in self.exchanges for o in ex.outputs} - set(self.shuffles)
        operands = {i for ex in self.exchanges for i in ex.inputs}
        per_unit = (set().union(*(stores(s) for r in regions for s in r.code)) | results) \
            - self.uniform - set(HIDDEN_IDS) - shared
        # exchange operands are read as whole arrays by the helpers: never recomputed
        self.remat = {n: e for n, e in remat.items()
                      if n in per_unit and n not in local and n not in operands}
        # local arrays whose contents must survive a barrier get per-unit slices
        self.local_replicated = {n for r in regions for n in r.live_in & local}
        crossing = set(results)
        for r in regions:
            crossing |= r.live_in | (r.live_out & set().union(*(stores(s) for s in r.code)))
        self.replicated = sorted((crossing & per_unit) - set(self.remat) - local)
        # a region that never mentions a saved name need not load it: its replica is unchanged
        self.loads = {r.index: sorted(r.live_in & set(self.replicated) & mentioned_names(r.code))
                      for r in regions}
        self.stores = {r.index: sorted(r.live_out & set(self.replicated)
                                       & set().union(*(stores(s) for s in r.code)))
                       for r in regions}
        stored_anywhere = set().union(results, *self.stores.values())
        for name in self.replicated:
            if name not in stored_anywhere:
                node = next((n for r in regions for s in r.code for n in ast.walk(s)
                             if isinstance(n, ast.Name) and n.id == name), None)
                raise fn.error(f"{name!r} is read after a barrier but never assigned before one "
                               "(it may be used before assignment)",
                               f"use of {name!r} before assignment across a barrier", node)
        self.has_exit = any(isinstance(n, ast.Return) for r in regions for s in r.code
                            for n in ast.walk(s))
        #: run-time masks, exchanges or checks: the helpers need the exited flags of every unit
        self.tracks_units = bool(self.masks or self.exchanges or cube_plan.checks)
        #: the generated code raises DivergenceError (codegen guards the parallel variant)
        self.may_raise = bool(self.exchanges or cube_plan.checks)
        #: masked blocks that decide a full mask's agreement once (``spanned_contexts``), and
        #: replicas that shuffles read up to 31 slots past the end (``REPLICA_PAD``)
        self.spanned = warps_emit.spanned_contexts(self.exchanges, self.uniform)
        self.padded = warps_emit.padded_values(self.exchanges, self.uniform)
        # a unit's index in per-unit arrays: its id in the cube, or in the grid (grid mode)
        self.slot = SLOT if self.grid else LINEAR_TID
        self.total = "__NT" if self.grid else "__nt"
        #: number of work items the launcher splits into chunks (see ``emit/module.py``); in grid
        #: mode one chunk runs every cube, region by region
        self.work = "min(__gdx * __gdy * __gdz, 1)" if self.grid else "__gdx * __gdy * __gdz"
        self.allocated = self._certainly_allocated(self.plan)
        # a region that reads a shuffle's result and changes masks or exit flags as it goes
        # needs the shuffle to record who executed it
        self.snapshots = {ex.k for name, ex in self.shuffles.items()
                          if any(name in r.live_in
                                 and warps_emit.changes_activity(r.code, self.masks)
                                 for r in regions)}
        #: what the passes decided about its regions (``passes/shape_passes.CubeDecisions``:
        #: spans, stride interchange, demanded lanes, guards, interior), filled by the
        #: pipeline's ``shape_passes`` and ``region_passes`` stages before anything is printed
        self.decisions = None
        #: the demanded-lane loop being printed -> its round (``_items``)
        self.rounds: dict[int, int] = {}
        #: prints each region as loops over the units (``emit/regions.py``)
        self.printer = RegionPrinter(self)

    @property
    def imports(self) -> list[str]:
        """The helpers the printed kernel imports: warp exchanges' and masks', those of the
        passes' decisions."""
        d = self.decisions
        imports = list(warps_emit.IMPORTS) if self.tracks_units else []
        if d.monotone:
            imports.append(mask_spans.IMPORT)
        if self.spanned or d.monotone:
            imports.append(warps_emit.SPAN_IMPORT)
        if d.interchanged:
            imports.append(interchanged_region.IMPORT)
        if d.demand.loops:
            imports.append(DEMANDED_LANES_IMPORT)
        return imports

    def _certainly_allocated(self, plan) -> dict[int, set[str]]:
        """Region index -> replica arrays certainly allocated before that region runs.

        A region at the top of the plan runs for every cube, and its unit loop stores each of its
        saved names for every unit that has not exited; so every region after it may load and
        store those names without the ``x__ok`` test (if all units exited, no later unit runs).
        Dropping the test from the hot loop matters: the allocation path in it keeps LLVM from
        treating the replica's data pointer as loop-invariant. A top-level exchange allocates
        its results the same way.
        """
        out: dict[int, set[str]] = {}
        certain: set[str] = set()
        for item in plan:
            for r in _regions_in(item):
                out[r.index] = set(certain)
            if isinstance(item, Region):
                certain |= set(self.stores[item.index])
            elif isinstance(item, Exchange):
                certain |= set(item.outputs)
        return out

    # ---- printing ---------------------------------------------------------------------------

    def emit_chunk(self, w: Writer, name: str, decorator: str) -> None:
        """``name(__c, __nchunks, <geometry>, <params>)``: run chunk ``__c`` of the cubes."""
        params = ["__c", "__nchunks", "__gdx", "__gdy", "__gdz", "__bdx", "__bdy", "__bdz",
                  *self.launch_params, *self.lowered.params]
        w.line(decorator)
        with w.indent(f"def {name}({', '.join(params)}):"):
            w.line("__nt = __bdx * __bdy * __bdz")
            if self.grid:
                w.line("__nb = __gdx * __gdy * __gdz")
                w.line("__NT = __nt * __nb")
                self._chunk_prologue(w)
                # one pass over the grid, written as a loop so that the code has the shape of
                # cube mode's: Numba then accepts the replicas' first assignment inside a branch
                with w.indent("for __pass in range(min(__nb, 1)):"):
                    self._load_replicas(w)
                    self._items(w, self.plan)
                w.line()
                return
            w.line(f"__nb = {self.work}")
            self._chunk_prologue(w)
            with w.indent("for __bid in range(__c * __nb // __nchunks, "
                          "(__c + 1) * __nb // __nchunks):"):
                w.line("__bx = __bid % __gdx")
                w.line("__by = __bid // __gdx % __gdy")
                w.line("__bz = __bid // (__gdx * __gdy)")
                if self.has_exit:
                    w.line("__exited[:] = False")
                self._load_replicas(w)
                self._items(w, self.plan)
        w.line()

    def _load_replicas(self, w: Writer) -> None:
        """Give every existing replica its variable, once per cube: a replica never changes
        once allocated, and a region that allocates one assigns the variable itself. This
        line is also the replica variable's first definition in source order, which Numba's
        bytecode analysis requires of every later use. (Reloading in every region instead cost
        the block-sum benchmark a sixth of its time: each load is a reference count update.)"""
        for name in self.replicated:
            with w.indent(f"if {name}__ok:"):
                w.line(f"{name}__r = {name}__l[0]")

    @property
    def launch_params(self) -> list[str]:
        """Run-time launch values after the geometry: the dynamic shared size, if it is used."""
        return [dynshared.SIZE_PARAM] if dynshared.uses_dynamic_shared(self.lowered) else []

    def _chunk_prologue(self, w: Writer) -> None:
        if self.launch_params:
            w.line(dynshared.buffer_line())
        for d in self.lowered.shared:
            if d.dynamic:
                w.line(dynshared.view_line(d.name, d.dtype))
                continue
            if self.grid:        # every cube keeps its own shared memory across grid syncs
                shape = d.shape if d.shape.startswith("(") else f"({d.shape},)"
                w.line(f"{d.name}__g = __np.empty((__nb,) + {shape}, {d.dtype_expr})")
                continue
            w.line(f"{d.name} = __np.empty({d.shape}, {d.dtype_expr})")
        for d in self.lowered.local:
            if d.name in self.local_replicated:
                shape = d.shape if d.shape.startswith("(") else f"({d.shape},)"
                w.line(f"{d.name}__r = __np.empty(({self.total},) + {shape}, {d.dtype_expr})")
            else:
                w.line(f"{d.name}__buf = __np.empty({d.shape}, {d.dtype_expr})")
        # a padded shuffle read also loads the source slot's flags unconditionally (and drops
        # them past the cube): those arrays get the same spare slots as its replica
        flags = self.total + (f" + {warps_emit.REPLICA_PAD}" if self.padded else "")
        if self.has_exit or self.tracks_units:
            w.line(f"__exited = __np.zeros({flags}, __np.bool_)")
        if self.tracks_units:
            w.line(f"{warps_emit.TOP_MASK} = __np.ones({self.total}, __np.int8)")
        for mask in self.masks:
            w.line(f"{mask} = __np.zeros({flags}, __np.int8)")
        for ex in self.exchanges:
            if ex.k in self.snapshots:
                w.line(f"{warps_emit.snapshot_array(ex)} = __np.zeros({flags}, __np.bool_)")
        for name in self.replicated:
            w.line(f"{name}__l = []")
            w.line(f"{name}__ok = False")

    def _items(self, w: Writer, items) -> None:
        if not items:
            w.line("pass")
        fn = self.lowered.fn
        for it in items:
            if isinstance(it, Region):
                self.printer.emit_region(w, it)
            elif isinstance(it, (Uniform, Flow)):
                w.code([it.stmt], self.lowered.fn)
            elif isinstance(it, Exchange):
                warps_emit.emit_exchange(w, it, fn, self.uniform, self.total, "__nt",
                                         it.k in self.snapshots)
            elif isinstance(it, Check):
                warps_emit.emit_check(w, it, fn, self.total, "__nt")
            elif isinstance(it, MaskedIf):
                with w.indent(f"if {self.printer.emit_bounds(w, it.mask, 1)}:"):
                    self._items(w, it.body)
                if it.orelse:
                    with w.indent(f"if {self.printer.emit_bounds(w, it.mask, 2)}:"):
                        self._items(w, it.orelse)
            elif isinstance(it, MaskedWhile):
                with w.indent(f"while {self.printer.emit_bounds(w, it.mask, 1)}:"):
                    self._items(w, it.body)
                    self.printer.emit_bounds(w, it.mask, 1)
            elif isinstance(it, Ctrl):
                node = it.node
                if isinstance(node, ast.If):
                    header = f"if {ast.unparse(node.test)}:"
                elif isinstance(node, ast.While):
                    header = f"while {ast.unparse(node.test)}:"
                else:
                    header = f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}:"
                demand = self.decisions.demand
                rounds = demand.rounds(it)
                condition = demand.before_loop(it)
                if condition is not None:
                    w.line(condition)
                if rounds is not None:      # unrolled (``demanded_lanes.DemandedLanes.rounds``)
                    for k, c in enumerate(rounds):
                        w.line(f"{ast.unparse(node.target)} = {c}")
                        self.rounds[demand.loop_number(it)] = k
                        self._items(w, it.body)
                    continue
                with w.indent(header):
                    self._items(w, it.body)
                if it.orelse:
                    with w.indent("else:"):
                        self._items(w, it.orelse)


def _refuse_in_grid_mode(lowered: Lowered, regions) -> None:
    """What grid mode (every cube's state kept across a grid sync) does not implement yet."""
    fn = lowered.fn
    for d in lowered.shared:
        if d.dynamic:
            raise fn.error("dynamic shared memory in a kernel that syncs the grid is not "
                           "supported by the CPU backend", "dynamic shared memory with grid sync",
                           d.node)
    for r in regions:
        for s in r.code:
            for n in ast.walk(s):
                if isinstance(n, ast.Name) and n.id.startswith(ACC_PREFIX):
                    raise fn.error("cuda.syncthreads_count/and/or in a kernel that syncs the grid "
                                   "is not supported by the CPU backend",
                                   "barrier reduction with grid sync", s)


def _regions_in(item) -> list[Region]:
    if isinstance(item, Region):
        return [item]
    if isinstance(item, (Ctrl, MaskedIf)):
        return [r for sub in item.body + item.orelse for r in _regions_in(sub)]
    if isinstance(item, MaskedWhile):
        return [r for sub in item.body for r in _regions_in(sub)]
    return []

