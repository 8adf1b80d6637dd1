"""Emit a barrier-free kernel as one flat loop over all units of the grid.

Without barriers and shared memory the cube structure carries no meaning on the CPU, so the
generated code does not loop over cubes: the launch's units, in row-major order of their global
coordinates (``x`` fastest), are cut into equal chunks and each chunk runs in one ``prange``
iteration (``emit/module.py`` writes that loop). A grid of few large cubes then still uses every core,
and consecutive units touch consecutive memory (which axis is "x" here, and whether the cube
segments merge into one loop per row, is ``passes/loop_order.py``'s choice)::

    def <kernel>__chunk(__c, __nchunks, <geometry>, <params>):    # called per prange iteration
        for <each row (global y, z) that chunk __c covers>:          # a few divisions per row
            for __bx in <cubes the row segment crosses>:
                __lo, __hi = <unit range of this cube segment>
                for __tx in range(__lo, __hi):                         # the vectorizable loop
                    <kernel body>

**The grid-uniform prologue** (``passes/uniform_prologue.py``): leading statements that give every
unit the same values (buffers picked from a parameter, sizes) run once per chunk, before the loops.

**Guard hoisting** (``analyze/guard_bounds.py``): the leading ``if i < n:`` tests become clamps of
the unit loop's range, so the loop vectorizes. Measured: an elementwise kernel went from 1.9x to
about 1.0x the time of a hand-written ``njit(parallel=True)`` loop at 2**24 elements.
"""

from __future__ import annotations

import copy

from numba_cube.backends.cpu.passes import loop_order as looporder
from numba_cube.backends.cpu.analyze.dataflow import Purity
from numba_cube.backends.cpu.analyze.guard_bounds import GuardHoist
from numba_cube.backends.cpu.lower.lowering import Lowered
from numba_cube.backends.cpu.passes.uniform_prologue import split_prologue
from numba_cube.backends.cpu.emit.unit_code import (
    RET_FLAG, Writer, lower_returns, replace_local_markers,
)


class FlatKernel:
    """Everything needed to print one barrier-free kernel (both variants)."""

    def __init__(self, lowered: Lowered, purity: Purity, needs_tid: bool):
        self.lowered = lowered
        # which coordinate the inner loop walks (passes/loop_order.py): for y, the body's x and y
        # names are exchanged and the chunk takes its geometry in swapped order, so the loop nest
        # below is the same text and its inner loop walks the real y
        self.swapped = looporder.inner_axis(lowered.body) == looporder.Y
        source = looporder.swap_xy(lowered.body) if self.swapped else lowered.body
        # one loop over the chunk's stretch of a row where the ids are only the global
        # coordinate (looporder.global_inner); the linear thread id needs the cube's ids
        rows = None if needs_tid else looporder.global_inner(source)
        self.rows = rows is not None
        source = rows if rows is not None else source
        # the grid-uniform prologue runs once per chunk (passes/uniform_prologue.py); the guards may
        # then use its names, defined before every segment
        self.prologue, source, prologue_names = split_prologue(source, lowered.params)
        hoist = GuardHoist(source, [*lowered.params, *sorted(prologue_names)], purity,
                       looporder.GLOBAL_INNER if self.rows else "__tx")
        body = hoist.run([copy.deepcopy(s) for s in source])
        self.lo, self.hi, self.conds = hoist.lo, hoist.hi, hoist.conds
        body = replace_local_markers(body, set())
        self.body, self.uses_flag = lower_returns(body, [])
        self.needs_tid = needs_tid

    #: number of work items the launcher splits into chunks (see ``emit/module.py``)
    work = "__gdx * __bdx * __gdy * __bdy * __gdz * __bdz"

    def emit_chunk(self, w: Writer, name: str, decorator: str) -> None:
        """``name(__c, __nchunks, <geometry>, <params>)``: run chunk ``__c`` of all units."""
        geometry = (["__gdy", "__gdx", "__gdz", "__bdy", "__bdx", "__bdz"] if self.swapped
                    else ["__gdx", "__gdy", "__gdz", "__bdx", "__bdy", "__bdz"])
        params = ["__c", "__nchunks", *geometry, *self.lowered.params]
        if self.swapped:
            w.line("# x and y names exchanged: the inner unit loop walks y (passes/loop_order.py)")
        w.line(decorator)
        with w.indent(f"def {name}({', '.join(params)}):"):
            w.line("__X = __gdx * __bdx")
            w.line("__Y = __gdy * __bdy")
            w.line("__total = __X * __Y * (__gdz * __bdz)")
            for d in self.lowered.local:
                w.line(f"{d.name}__buf = __np.empty({d.shape}, {d.dtype_expr})")
            if self.prologue:
                w.code(self.prologue, self.lowered.fn)
            w.line("__g = __c * __total // __nchunks")
            w.line("__gend = (__c + 1) * __total // __nchunks")
            with w.indent("while __g < __gend:"):
                w.line("__row = __g // __X")
                w.line("__x0 = __g - __row * __X")
                w.line("__x1 = min(__X, __x0 + (__gend - __g))")
                w.line("__g += __x1 - __x0")
                w.line("__by, __ty = divmod(__row % __Y, __bdy)")
                w.line("__bz, __tz = divmod(__row // __Y, __bdz)")
                if self.needs_tid and not self.swapped:
                    w.line("__tbase = (__tz * __bdy + __ty) * __bdx")
                if self.rows:
                    # one loop over the chunk's whole stretch of the row (passes/loop_order.py)
                    self._segment(w, "__x0", "__x1", looporder.GLOBAL_INNER)
                else:
                    with w.indent("for __bx in range(__x0 // __bdx, (__x1 - 1) // __bdx + 1):"):
                        self._segment(w, "max(__x0 - __bx * __bdx, 0)",
                                      "min(__x1 - __bx * __bdx, __bdx)", "__tx")
        w.line()

    def _segment(self, w: Writer, lo: str, hi: str, var: str) -> None:
        """The units ``[lo, hi)`` of one row segment: hoisted guards, then the unit loop over
        ``var`` (``continue`` skips the segment: in rows mode the row, whose units are done)."""
        w.line(f"__lo = {lo}")
        w.line(f"__hi = {hi}")
        if self.conds:
            with w.indent(f"if not ({' and '.join(self.conds)}):"):
                w.line("continue")
        for b in self.lo:
            w.line(f"__lo = max(__lo, {b})")
        for b in self.hi:
            w.line(f"__hi = min(__hi, {b})")
        with w.indent(f"for {var} in range(__lo, __hi):"):
            if self.needs_tid:
                # the linear id of the real coordinates, (tz * bdy + ty) * bdx + tx, in the
                # swapped names where x and y are exchanged
                w.line("__tid = (__tz * __bdx + __tx) * __bdy + __ty" if self.swapped
                       else "__tid = __tbase + __tx")
            if self.uses_flag:
                w.line(f"{RET_FLAG} = False")
            w.code(self.body, self.lowered.fn)


__all__ = ["FlatKernel"]
