"""Printing one region of a fissioned kernel as loops over the cube's units.

``cube_kernel.CubeKernel`` walks the kernel's plan and hands each region to ``RegionPrinter``, which
prints it in this shape (cube mode; grid mode indexes per-unit arrays by ``__slot``)::

    # region <k>
    for __tid in range(__nt):                   # the loops' shape: ``emit/unit_loops.py``
        if __exited[__tid] or __m1[__tid] != 1: # a unit that exited, or that the mask leaves out
            continue
        <names recomputed; shuffle results read; local slices and replicas loaded>
        <the region's code>
        <replicas stored>

A name that is a pure function of thread/block ids is recomputed where the region reads it
(``emit_remat``, dependencies first), a shuffle's result is read in place from the exchange's
arrays (``warps.shuffle_read``), and a local array that outlives a region is the unit's
slice ``x__r[__tid]``. ``x__ok`` says whether a replica exists yet; regions that run after a
top-level region storing ``x`` skip that test (``emit/cube_kernel.py`` knows which), and a region that would
still test it is printed twice: a loop with the tests and first-store allocations until every
replica exists, and a loop without them from then on.

A region under a run-time mask loops over the span of units the mask selects and skips the
others. Where the block's bounds also say that its selected slots fill the span
(``warps.dense_flag``) or that every warp is whole under it (``whole_flag``), the loop is
printed once more without the tests that fact makes useless. Other variants of the loops:

- a region that is one ``if`` bounding ``threadIdx.x``, equating it to a geometry value or
  fixing the lane (``cuda.laneid == c``) loops over the units it admits (``guards``); under a
  mask, over those within the mask's span, still testing the mask where the copy did;
- a region that reads a padded shuffle loops over the cube's full warps, then its partial last
  warp (``emit/warps.py``'s padded read);
- a region whose grid-stride loop runs row by row across the units is printed by
  ``stride_interchange``;
- a region in a round of a demanded-lane loop runs only the lanes still demanded in its copy
  that allocates nothing (``passes/demanded_lanes.py``);
- a region that only evaluates a mask that is a bound on ``threadIdx.x`` fills it with two
  slices in a 1-D cube, and loops as above in others (``spans``' closed form).
"""

from __future__ import annotations

import ast

from numba_cube.backends.cpu.emit import interchanged_region, mask_spans
from numba_cube.backends.cpu.emit import warps as warps_emit
from numba_cube.backends.cpu.lower.hidden import SLOT
from numba_cube.backends.cpu.lower.unit_statements import (
    RET_FLAG, lower_returns, replace_local_markers,
)
from numba_cube.backends.cpu.analyze.plan_items import Region
from numba_cube.backends.cpu.emit.unit_code import Writer, parse_stmts
from numba_cube.backends.cpu.emit.unit_loops import unit_loops

#: the end of the cube's full warps (a region reading a padded shuffle loops over them first)
_FULL_WARPS_END = "__nfull"


def mentioned_names(code) -> set[str]:
    """Every name that the statements ``code`` mention."""
    return {n.id for s in code for n in ast.walk(s) if isinstance(n, ast.Name)}


class RegionPrinter:
    """Prints the regions of one kernel; ``kernel`` is its ``cube_kernel.CubeKernel``, whose
    analyses (replicas, masks, shuffles, remat, ...) and passes' decisions (``decisions``:
    ``passes/shape_passes.py``) say what each region's loops do."""

    def __init__(self, kernel):
        self.k = kernel

    def emit_region(self, w: Writer, region: Region) -> None:
        """Print ``region`` (the module docstring's shape and its variants)."""
        slot = self.k.slot
        code = replace_local_markers(region.code, self.k.local_replicated, slot)
        on_exit = parse_stmts(f"__exited[{slot}] = True") if self.k.has_exit else []
        code, uses_flag = lower_returns(code, on_exit)
        decided = self.k.decisions
        w.line(f"# region {region.index}")
        if region.index in decided.interchanged:
            interchanged_region.emit(self, w, decided.interchanged[region.index])
            return
        lanes = decided.demand.region_lanes(region, self.k.rounds)
        if lanes is not None:                   # demanded lanes: this round's bounds
            lanes, statement = lanes
            w.line(statement)
        skip = [f"__exited[{slot}]"] if self.k.has_exit else []
        if region.index in decided.closed:
            # a monotone mask's evaluation: two slices in a 1-D cube (``spans``)
            mask_spans.emit_closed_fill(w, *decided.closed[region.index], self.k.total)
            with w.indent("else:"):
                self._allocating_loops(w, region, code, skip, uses_flag, lanes=lanes)
            return
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
            guarded = None if tx_range is not None or lanes is not None or uses_flag \
                else decided.interior.get(region.index)
            if guarded is not None:
                flag, check, unguarded = guarded
                w.line("# every unit of an interior cube passes the guards (passes/interior.py)")
                w.line(f"{flag} = {check}")
            self._allocating_loops(w, region, code, skip, uses_flag, tx_range, lanes=lanes,
                                   interior=guarded)
            return
        mask, sel = region.ctx
        skip_unselected = skip + [f"{mask}[{slot}] != {sel}"]
        # the guard narrows the mask's span; the copies below keep the mask's test where they
        # had it (a unit in the span may still be unselected)
        code, tx_range = self._guard_range(region, code)
        if not self._knows_density(region.ctx):
            self._allocating_loops(w, region, code, skip_unselected, uses_flag, tx_range,
                                   lanes=lanes)
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
                    self._allocating_loops(w, region, code, skip, uses_flag, tx_range,
                                           whole=True, lanes=lanes)
                with w.indent("else:"):
                    self._allocating_loops(w, region, code, skip, uses_flag, tx_range,
                                           lanes=lanes)
            else:
                self._allocating_loops(w, region, code, skip, uses_flag, tx_range,
                                       lanes=lanes)
        with w.indent("else:"):
            self._allocating_loops(w, region, code, skip_unselected, uses_flag, tx_range,
                                   lanes=lanes)

    def emit_bounds(self, w: Writer, mask: str, sel: int) -> str:
        """Print the span of the masked block ``mask == sel`` (and its flags,
        ``_knows_density``); returns the test 'some unit is selected'. ``emit/cube_kernel.py`` prints the
        block itself (``MaskedIf``, ``MaskedWhile``)."""
        group = "__nt" if self._knows_density((mask, sel)) else None
        monotone = self.k.decisions.monotone
        if mask in monotone:
            closed = any(c[0] == mask for c in self.k.decisions.closed.values())
            return mask_spans.emit_bounds(w, mask, sel, monotone[mask], self.k.total, closed)
        return warps_emit.emit_bounds(w, mask, sel, self.k.total, group)

    def emit_remat(self, w: Writer, live_in: set[str], mentioned: set[str]) -> None:
        """Recompute live-in rematerialisable names (dependencies first)."""
        done: set[str] = set()

        def emit(name):
            if name in done:
                return
            done.add(name)
            expr = self.k.remat[name]
            for dep in sorted(n.id for n in ast.walk(expr) if isinstance(n, ast.Name)):
                if dep in self.k.remat:
                    emit(dep)
            w.line(f"{name} = {ast.unparse(expr)}")

        for name in sorted(live_in & set(self.k.remat) & mentioned):
            emit(name)

    def _reads_padded_shuffle(self, region: Region) -> bool:
        """Does ``region`` (cube mode) read a shuffle through ``emit/warps.py``'s padded read?"""
        return not self.k.grid and any(warps_emit.is_padded(ex, self.k.uniform)
                                       for name, ex in self.k.shuffles.items()
                                       if name in region.live_in
                                       and name in mentioned_names(region.code))

    def _reads_shuffle_in_block(self, region: Region) -> bool:
        """Does ``region`` read a shuffle executed under its own mask, whose mask has not changed
        since (no ``snapshot``)? Its read may then rely on the block's ``whole_flag``."""
        return any(ex.ctx == region.ctx and ex.k not in self.k.snapshots
                   for name, ex in self.k.shuffles.items()
                   if name in region.live_in and name in mentioned_names(region.code))

    def _guard_range(self, region: Region, code):
        """``(code, tx_range)``: the code inside the region's guard and the units it admits,
        where the guards pass narrowed the region's loops (``passes/guards.py``), else
        ``(code, None)``. A region under a mask keeps the mask's span and test as well (the
        caller)."""
        guarded = self.k.decisions.guards.get(region.index)
        return (code, None) if guarded is None else guarded

    def _knows_density(self, ctx) -> bool:
        """Do the bounds of block ``ctx`` compute its ``dense_flag``?"""
        return not self.k.grid and (ctx in self.k.spanned or ctx[0] in self.k.decisions.monotone)

    def _allocating_loops(self, w: Writer, region: Region, code, skip, uses_flag,
                          tx_range=None, whole: bool = False, span=None,
                          full_warp: bool = False, lanes=None, interior=None) -> None:
        """``whole``: printed where every warp is whole under the region's mask; ``span``: the
        slots to loop over instead of the mask's (``_unit_loop``); ``full_warp``: every unit
        of the loop is in a warp of 32 units; ``lanes``: the demanded lanes of each warp
        (``passes/demanded_lanes.py``), used only by the copy that allocates nothing: the first stores,
        which decide the replicas' ``__ok`` flags, still run in every lane; ``interior``: the
        interior pass's decision, ``(flag, check, code for interior cubes)``, whose code is
        printed beside the copy that allocates nothing, under the flag."""
        extra = dict(whole=whole, span=span, full_warp=full_warp)
        loads, stores_ = self.k.loads[region.index], self.k.stores[region.index]
        mentioned = mentioned_names(code)
        allocated = self.k.allocated[region.index]
        pending = sorted((set(loads) | set(stores_)) - allocated)

        def settled(known):
            # the loop that allocates nothing, and its interior twin (the copy that allocates
            # runs in a chunk's first cubes only: one copy of it is enough)
            if interior is None:
                self._unit_loop(w, region, code, mentioned, skip, uses_flag, known, tx_range,
                                lanes=lanes, **extra)
                return
            flag, _, unguarded = interior
            with w.indent(f"if {flag}:"):
                self._unit_loop(w, region, unguarded, mentioned_names(unguarded), skip,
                                uses_flag, known, tx_range, lanes=lanes, **extra)
            with w.indent("else:"):
                self._unit_loop(w, region, code, mentioned, skip, uses_flag, known, tx_range,
                                lanes=lanes, **extra)

        if not pending:
            settled(allocated)
            return
        # Two copies of the loop: the one with first-store allocations runs until every replica
        # exists (the first cube of a chunk, typically), the other from then on. Allocating
        # inside the loop reassigns the replica variables there, which costs Numba a reference
        # count update per unit (measured: 50x on a region that is one load and one store).
        with w.indent(f"if {' and '.join(f'{n}__ok' for n in pending)}:"):
            settled(allocated | set(pending))
        with w.indent("else:"):
            self._unit_loop(w, region, code, mentioned, skip, uses_flag, allocated, tx_range,
                            **extra)

    def _unit_loop(self, w: Writer, region: Region, code, mentioned, skip, uses_flag,
                   allocated: set[str], tx_range=None, whole: bool = False, span=None,
                   full_warp: bool = False, lanes=None) -> None:
        """One loop over the units running ``code``; replicas not in ``allocated`` are tested
        (loads) or allocated on first store. ``whole``, ``span``, ``full_warp``: as
        ``_allocating_loops``."""
        slot = self.k.slot
        outer, w = w, Writer()          # the body first: its text decides the loops' shape
        if skip:
            with w.indent(f"if {' or '.join(skip)}:"):
                w.line("continue")
        if uses_flag:
            w.line(f"{RET_FLAG} = False")
        self.emit_remat(w, region.live_in, mentioned)
        for name in sorted(region.live_in & set(self.k.shuffles) & mentioned):
            ex = self.k.shuffles[name]
            for line in warps_emit.shuffle_read(ex, self.k.uniform, slot, self.k.has_exit,
                                                ex.k in self.k.snapshots,
                                                whole and ex.ctx == region.ctx, full_warp):
                w.line(line)
        for name in sorted(region.live_in & self.k.local_replicated & mentioned):
            w.line(f"{name} = {name}__r[{slot}]")
        for name in self.k.loads[region.index]:
            if name in allocated:
                w.line(f"{name} = {name}__r[{slot}]")
                continue
            with w.indent(f"if {name}__ok:"):
                w.line(f"{name} = {name}__r[{slot}]")
        w.code(code, self.k.lowered.fn)
        for name in self.k.stores[region.index]:
            if name in allocated:
                w.line(f"{name}__r[{slot}] = {name}")
                continue
            with w.indent(f"if {name}__ok:"):
                w.line(f"{name}__r[{slot}] = {name}")
            with w.indent("else:"):
                size = self.k.total + (f" + {warps_emit.REPLICA_PAD}" if name in self.k.padded
                                       else "")
                w.line(f"{name}__l.append(__replica({size}, {name}))")
                w.line(f"{name}__r = {name}__l[0]")
                w.line(f"{name}__ok = True")
        if span is None and region.ctx is not None:
            span = warps_emit.bounds(*region.ctx)
        shared = [d.name for d in self.k.lowered.shared if d.name in mentioned]
        with unit_loops(outer, w.text(), grid=self.k.grid, span=span, shared=shared,
                        slot=SLOT in mentioned, tx_range=tx_range, lanes=lanes,
                        whole_warps=full_warp):
            for line in w.lines:
                outer.line(line)
