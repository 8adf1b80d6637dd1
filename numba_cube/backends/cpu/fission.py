"""Emit a kernel that has barriers (or shared memory) as loops over cubes and units.

Shape of the generated chunk function, which
``codegen`` calls once per ``prange`` iteration (parallel variant) or once (serial variant)::

    def <kernel>__chunk(__c, __nchunks, <geometry>, <params>):
        <shared arrays, local buffers, per-unit replica arrays, exit mask: allocated per chunk>
        for __bid in <cubes of chunk __c>:
            __bx, __by, __bz = <decompose __bid>
            <plan: regions as unit loops; uniform statements and cube-level control in between>

Allocating per *chunk* (a few per worker) instead of per cube saves an NRT allocation per cube;
shared memory is uninitialised in CUDA anyway, so reusing it across the chunk's cubes is fine.

A per-unit name live across a region boundary is kept in a ``[units]`` replica ``x__r``. Its type
is not known before Numba's type inference, so the first store of a chunk allocates it with
``support.replica(__nt, x)`` (typed from the value: ``np.full`` for numbers, a list for arrays and
tuples) and parks it in a list ``x__l``. That list is created empty at chunk level: Numba refines
an empty list's type from its first ``append``, and a name defined at chunk level is defined for
every later use in source order, which Numba's bytecode analysis requires. Each cube starts by
loading ``x__r = x__l[0]`` for the replicas that exist (once per cube, not per region: each load
is a reference count update). ``x__ok`` says whether the replica exists yet; regions that run
after a top-level region storing ``x`` skip that test, and a region that would still test it is
printed twice: a loop with the tests and first-store allocations until every replica exists,
and a loop without them from then on.
Names that are pure functions of thread/block ids are recomputed instead
(``analysis.remat_definitions``), and local arrays that outlive a region get one slice per unit
(``x__r[__tid]``).

Warp exchanges, run-time masks and their checks are printed by ``warps_emit``; a region under a
run-time mask loops over the span of units the mask selects and skips the others. Shuffle rounds
over a literal tuple of offsets whose result only some lanes read afterwards are printed
unrolled, each round's regions over the lanes still demanded (``warps_demand``).

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

from numba_cube.backends.cpu import (dynshared, guards, spans, stride_interchange,
                                    warps_demand, warps_emit)
from numba_cube.backends.cpu.analysis import Purity, stores
from numba_cube.backends.cpu.hidden import ACC_PREFIX, HIDDEN_IDS, LINEAR_TID, SLOT
from numba_cube.backends.cpu.lowering import Lowered
from numba_cube.backends.cpu.plan import (Check, CubePlan, Ctrl, Exchange, Flow, MaskedIf,
                                          MaskedWhile, Region, Uniform)
from numba_cube.backends.cpu.unitcode import (RET_FLAG, Writer, lower_returns, parse_stmts,
                                              replace_local_markers)
from numba_cube.backends.cpu.unitloops import unit_loops


#: the end of the cube's full warps (a region reading a padded shuffle loops over them first)
_FULL_WARPS_END = "__nfull"


class CubeKernel:
    """Everything needed to print one kernel with split points (both its variants)."""

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
        self.loads = {r.index: sorted(r.live_in & set(self.replicated) & _mentioned(r.code))
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
        self.imports = list(warps_emit.IMPORTS) if self.tracks_units else []
        #: masked blocks that decide a full mask's agreement once (``spanned_contexts``), and
        #: replicas that shuffles read up to 31 slots past the end (``REPLICA_PAD``)
        self.spanned = warps_emit.spanned_contexts(self.exchanges, self.uniform)
        self.padded = warps_emit.padded_values(self.exchanges, self.uniform)
        #: masks whose ones are a prefix or suffix of the cube, found by search (``spans``)
        self.monotone = ({} if self.grid or self.has_exit else
                         spans.monotone_masks(self.plan, self.remat, self.uniform, purity))
        if self.monotone:
            self.imports.append(spans.IMPORT)
        if self.spanned or self.monotone:
            self.imports.append(warps_emit.SPAN_IMPORT)
        # a unit's index in per-unit arrays: its id in the cube, or in the grid (grid mode)
        self.slot = SLOT if self.grid else LINEAR_TID
        self.total = "__NT" if self.grid else "__nt"
        #: number of work items the launcher splits into chunks (see ``codegen``); in grid
        #: mode one chunk runs every cube, region by region
        self.work = "min(__gdx * __gdy * __gdz, 1)" if self.grid else "__gdx * __gdy * __gdz"
        self.allocated = self._certainly_allocated(self.plan)
        # a region that reads a shuffle's result and changes masks or exit flags as it goes
        # needs the shuffle to record who executed it
        self.snapshots = {ex.k for name, ex in self.shuffles.items()
                          if any(name in r.live_in
                                 and warps_emit.changes_activity(r.code, self.masks)
                                 for r in regions)}
        #: regions whose grid-stride loop runs row by row across the units (stride_interchange)
        self.interchanged = stride_interchange.plan(self)
        if self.interchanged:
            self.imports.append(stride_interchange.IMPORT)
        #: shuffle rounds that compute only the lanes read after them (``warps_demand``)
        self.demand = warps_demand.DemandedLanes(self)
        if self.demand.loops:
            self.imports.append(warps_demand.IMPORT)

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
                self._region(w, it)
            elif isinstance(it, (Uniform, Flow)):
                w.code([it.stmt], self.lowered.fn)
            elif isinstance(it, Exchange):
                warps_emit.emit_exchange(w, it, fn, self.uniform, self.total, "__nt",
                                         it.k in self.snapshots)
            elif isinstance(it, Check):
                warps_emit.emit_check(w, it, fn, self.total, "__nt")
            elif isinstance(it, MaskedIf):
                with w.indent(f"if {self._bounds(w, it.mask, 1)}:"):
                    self._items(w, it.body)
                if it.orelse:
                    with w.indent(f"if {self._bounds(w, it.mask, 2)}:"):
                        self._items(w, it.orelse)
            elif isinstance(it, MaskedWhile):
                with w.indent(f"while {self._bounds(w, it.mask, 1)}:"):
                    self._items(w, it.body)
                    self._bounds(w, it.mask, 1)
            elif isinstance(it, Ctrl):
                node = it.node
                if isinstance(node, ast.If):
                    header = f"if {ast.unparse(node.test)}:"
                elif isinstance(node, ast.While):
                    header = f"while {ast.unparse(node.test)}:"
                else:
                    header = f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}:"
                rounds = self.demand.rounds(it)
                self.demand.before_loop(w, it)
                if rounds is not None:      # unrolled (``warps_demand.DemandedLanes.rounds``)
                    for k, c in enumerate(rounds):
                        w.line(f"{ast.unparse(node.target)} = {c}")
                        self.demand.round_start(it, k)
                        self._items(w, it.body)
                    continue
                with w.indent(header):
                    self._items(w, it.body)
                if it.orelse:
                    with w.indent("else:"):
                        self._items(w, it.orelse)

    def _bounds(self, w: Writer, mask: str, sel: int) -> str:
        """Print the span of block ``mask == sel`` (and its flags, ``_knows_density``); returns
        the test 'some unit is selected'."""
        group = "__nt" if self._knows_density((mask, sel)) else None
        if mask in self.monotone:
            return spans.emit_bounds(w, mask, sel, self.monotone[mask], self.total)
        return warps_emit.emit_bounds(w, mask, sel, self.total, group)

    def _region(self, w: Writer, region: Region) -> None:
        slot = self.slot
        code = replace_local_markers(region.code, self.local_replicated, slot)
        on_exit = parse_stmts(f"__exited[{slot}] = True") if self.has_exit else []
        code, uses_flag = lower_returns(code, on_exit)
        w.line(f"# region {region.index}")
        if region.index in self.interchanged:
            stride_interchange.emit(self, w, self.interchanged[region.index])
            return
        lanes = self.demand.region_lanes(w, region)
        skip = [f"__exited[{slot}]"] if self.has_exit else []
        if region.ctx is None:
            code, tx_range = self._guard_range(region, code)
            if tx_range is None and self._reads_padded_shuffle(region):
                # the cube's full warps first, then its partial last warp (the units' order is
                # unchanged): a padded read in a full warp skips its test against the cube's
                # end (measured: a tenth of the warp block-sum benchmark)
                w.line(f"{_FULL_WARPS_END} = __nt - __nt % 32")
                self._allocating_loops(w, region, code, skip, uses_flag, lanes=lanes,
                                       span=("0", _FULL_WARPS_END), full_warp=True)
                self._allocating_loops(w, region, code, skip, uses_flag, lanes=lanes,
                                       span=(_FULL_WARPS_END, "__nt"))
                return
            self._allocating_loops(w, region, code, skip, uses_flag, tx_range, lanes=lanes)
            return
        mask, sel = region.ctx
        skip_unselected = skip + [f"{mask}[{slot}] != {sel}"]
        if not self._knows_density(region.ctx):
            self._allocating_loops(w, region, code, skip_unselected, uses_flag, lanes=lanes)
            return
        # A mask whose selected slots fill their span (``dense_flag``, decided once per block)
        # needs no per-unit test. The loop is printed with and without it rather than leaving
        # the choice to LLVM, which does not always unswitch it (measured: a tenth of the warp
        # block-sum benchmark).
        with w.indent(f"if {warps_emit.dense_flag(mask, sel)}:"):
            if self._reads_shuffle_in_block(region):
                # every warp whole under the mask (``whole_flag``): a selected unit's partner
                # in its warp is selected too, so the read skips loading the partner's mask
                # (measured: a sixth of the warp block-sum benchmark)
                with w.indent(f"if {warps_emit.whole_flag(mask, sel)}:"):
                    self._allocating_loops(w, region, code, skip, uses_flag, whole=True,
                                           lanes=lanes)
                with w.indent("else:"):
                    self._allocating_loops(w, region, code, skip, uses_flag, lanes=lanes)
            else:
                self._allocating_loops(w, region, code, skip, uses_flag, lanes=lanes)
        with w.indent("else:"):
            self._allocating_loops(w, region, code, skip_unselected, uses_flag, lanes=lanes)

    def _reads_padded_shuffle(self, region: Region) -> bool:
        """Does ``region`` (cube mode) read a shuffle through ``warps_emit``'s padded read?"""
        return not self.grid and any(warps_emit.is_padded(ex, self.uniform)
                                     for name, ex in self.shuffles.items()
                                     if name in region.live_in and name in _mentioned(region.code))

    def _reads_shuffle_in_block(self, region: Region) -> bool:
        """Does ``region`` read a shuffle executed under its own mask, whose mask has not changed
        since (no ``snapshot``)? Its read may then rely on the block's ``whole_flag``."""
        return any(ex.ctx == region.ctx and ex.k not in self.snapshots
                   for name, ex in self.shuffles.items()
                   if name in region.live_in and name in _mentioned(region.code))

    def _guard_range(self, region: Region, code):
        """``(code, tx_range)``: a region that is one ``if`` bounding ``threadIdx.x`` loops over
        the units it admits (``guards.py``), when skipping the others changes nothing: it
        stores no per-unit value and reads no shuffle result, and no unit exits."""
        if self.grid or self.has_exit or self.stores[region.index] \
                or region.live_in & set(self.shuffles):
            return code, None
        # a bound may read what every unit shares, unless this region assigns it
        names = (self.uniform - set().union(*(stores(s) for s in code))) | set(self.lowered.params)
        guarded = guards.hoisted_guard(code, self.remat, names, self.purity)
        if guarded is None:
            return code, None
        body, lo, hi = guarded
        return body, (lo, hi)

    def _knows_density(self, ctx) -> bool:
        """Do the bounds of block ``ctx`` compute its ``dense_flag``?"""
        return not self.grid and (ctx in self.spanned or ctx[0] in self.monotone)

    def _allocating_loops(self, w: Writer, region: Region, code, skip, uses_flag,
                          tx_range=None, whole: bool = False, span=None,
                          full_warp: bool = False, lanes=None) -> None:
        """``whole``: printed where every warp is whole under the region's mask; ``span``: the
        slots to loop over instead of the mask's (``_unit_loop``); ``full_warp``: every unit
        of the loop is in a warp of 32 units; ``lanes``: the demanded lanes of each warp
        (``warps_demand``), used only by the copy that allocates nothing: the first stores,
        which decide the replicas' ``__ok`` flags, still run in every lane."""
        extra = dict(whole=whole, span=span, full_warp=full_warp)
        loads, stores_ = self.loads[region.index], self.stores[region.index]
        mentioned = _mentioned(code)
        allocated = self.allocated[region.index]
        pending = sorted((set(loads) | set(stores_)) - allocated)
        if not pending:
            self._unit_loop(w, region, code, mentioned, skip, uses_flag, allocated, tx_range,
                            lanes=lanes, **extra)
            return
        # Two copies of the loop: the one with first-store allocations runs until every replica
        # exists (the first cube of a chunk, typically), the other from then on. Allocating
        # inside the loop reassigns the replica variables there, which costs Numba a reference
        # count update per unit (measured: 50x on a region that is one load and one store).
        with w.indent(f"if {' and '.join(f'{n}__ok' for n in pending)}:"):
            self._unit_loop(w, region, code, mentioned, skip, uses_flag,
                            allocated | set(pending), tx_range, lanes=lanes, **extra)
        with w.indent("else:"):
            self._unit_loop(w, region, code, mentioned, skip, uses_flag, allocated, tx_range,
                            **extra)

    def _unit_loop(self, w: Writer, region: Region, code, mentioned, skip, uses_flag,
                   allocated: set[str], tx_range=None, whole: bool = False, span=None,
                   full_warp: bool = False, lanes=None) -> None:
        """One loop over the units running ``code``; replicas not in ``allocated`` are tested
        (loads) or allocated on first store. ``whole``, ``span``, ``full_warp``: as
        ``_allocating_loops``."""
        slot = self.slot
        outer, w = w, Writer()          # the body first: its text decides the loops' shape
        if skip:
            with w.indent(f"if {' or '.join(skip)}:"):
                w.line("continue")
        if uses_flag:
            w.line(f"{RET_FLAG} = False")
        self._remat(w, region.live_in, mentioned)
        for name in sorted(region.live_in & set(self.shuffles) & mentioned):
            ex = self.shuffles[name]
            for line in warps_emit.shuffle_read(ex, self.uniform, slot, self.has_exit,
                                                ex.k in self.snapshots,
                                                whole and ex.ctx == region.ctx, full_warp):
                w.line(line)
        for name in sorted(region.live_in & self.local_replicated & mentioned):
            w.line(f"{name} = {name}__r[{slot}]")
        for name in self.loads[region.index]:
            if name in allocated:
                w.line(f"{name} = {name}__r[{slot}]")
                continue
            with w.indent(f"if {name}__ok:"):
                w.line(f"{name} = {name}__r[{slot}]")
        w.code(code, self.lowered.fn)
        for name in self.stores[region.index]:
            if name in allocated:
                w.line(f"{name}__r[{slot}] = {name}")
                continue
            with w.indent(f"if {name}__ok:"):
                w.line(f"{name}__r[{slot}] = {name}")
            with w.indent("else:"):
                size = self.total + (f" + {warps_emit.REPLICA_PAD}" if name in self.padded
                                     else "")
                w.line(f"{name}__l.append(__replica({size}, {name}))")
                w.line(f"{name}__r = {name}__l[0]")
                w.line(f"{name}__ok = True")
        if span is None and region.ctx is not None:
            span = warps_emit.bounds(*region.ctx)
        shared = [d.name for d in self.lowered.shared if d.name in mentioned]
        with unit_loops(outer, w.text(), grid=self.grid, span=span, shared=shared,
                        slot=SLOT in mentioned, tx_range=tx_range, lanes=lanes,
                        whole_warps=full_warp):
            for line in w.lines:
                outer.line(line)

    def _remat(self, w: Writer, live_in: set[str], mentioned: set[str]) -> None:
        """Recompute live-in rematerialisable names (dependencies first)."""
        done: set[str] = set()

        def emit(name):
            if name in done:
                return
            done.add(name)
            expr = self.remat[name]
            for dep in sorted(n.id for n in ast.walk(expr) if isinstance(n, ast.Name)):
                if dep in self.remat:
                    emit(dep)
            w.line(f"{name} = {ast.unparse(expr)}")

        for name in sorted(live_in & set(self.remat) & mentioned):
            emit(name)


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


def _mentioned(code) -> set[str]:
    return {n.id for s in code for n in ast.walk(s) if isinstance(n, ast.Name)}
