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

Those three are decided by the pipeline's ``shape_passes`` stage (``passes/shape_passes.py``)
into the kernel's ``FlatDecisions``, which this module prints.
"""

from __future__ import annotations

from numba_cube.backends.cpu.analyze.dataflow import Purity
from numba_cube.backends.cpu.lower.lowering import Lowered
from numba_cube.backends.cpu.lower.unit_statements import RET_FLAG
from numba_cube.backends.cpu.passes.loop_order import GLOBAL_INNER
from numba_cube.backends.cpu.emit.unit_code import Writer


class FlatKernel:
    """Everything needed to print one barrier-free kernel (both variants): the lowered kernel,
    and the decisions of the passes about its loops (``decisions``: ``passes/shape_passes.py``,
    filled by the pipeline's ``shape_passes`` stage before anything is printed)."""

    kind = "flat"

    def __init__(self, lowered: Lowered, purity: Purity, needs_tid: bool):
        self.lowered = lowered
        self.purity = purity
        self.needs_tid = needs_tid
        self.decisions = None

    #: number of work items the launcher splits into chunks (see ``emit/module.py``)
    work = "__gdx * __bdx * __gdy * __bdy * __gdz * __bdz"

    def emit_chunk(self, w: Writer, name: str, decorator: str) -> None:
        """``name(__c, __nchunks, <geometry>, <params>)``: run chunk ``__c`` of all units."""
        chosen = self.decisions
        geometry = (["__gdy", "__gdx", "__gdz", "__bdy", "__bdx", "__bdz"] if chosen.swapped
                    else ["__gdx", "__gdy", "__gdz", "__bdx", "__bdy", "__bdz"])
        params = ["__c", "__nchunks", *geometry, *self.lowered.params]
        if chosen.swapped:
            w.line("# x and y names exchanged: the inner unit loop walks y (passes/loop_order.py)")
        w.line(decorator)
        with w.indent(f"def {name}({', '.join(params)}):"):
            w.line("__X = __gdx * __bdx")
            w.line("__Y = __gdy * __bdy")
            w.line("__total = __X * __Y * (__gdz * __bdz)")
            for d in self.lowered.local:
                w.line(f"{d.name}__buf = __np.empty({d.shape}, {d.dtype_expr})")
            if chosen.prologue:
                w.code(chosen.prologue, self.lowered.fn)
            w.line("__g = __c * __total // __nchunks")
            w.line("__gend = (__c + 1) * __total // __nchunks")
            with w.indent("while __g < __gend:"):
                w.line("__row = __g // __X")
                w.line("__x0 = __g - __row * __X")
                w.line("__x1 = min(__X, __x0 + (__gend - __g))")
                w.line("__g += __x1 - __x0")
                w.line("__by, __ty = divmod(__row % __Y, __bdy)")
                w.line("__bz, __tz = divmod(__row // __Y, __bdz)")
                if self.needs_tid and not chosen.swapped:
                    w.line("__tbase = (__tz * __bdy + __ty) * __bdx")
                if chosen.rows:
                    # one loop over the chunk's whole stretch of the row (passes/loop_order.py)
                    self._segment(w, "__x0", "__x1", GLOBAL_INNER)
                else:
                    with w.indent("for __bx in range(__x0 // __bdx, (__x1 - 1) // __bdx + 1):"):
                        self._segment(w, "max(__x0 - __bx * __bdx, 0)",
                                      "min(__x1 - __bx * __bdx, __bdx)", "__tx")
        w.line()

    def _segment(self, w: Writer, lo: str, hi: str, var: str) -> None:
        """The units ``[lo, hi)`` of one row segment: hoisted guards, then the unit loop over
        ``var`` (``continue`` skips the segment: in rows mode the row, whose units are done)."""
        chosen = self.decisions
        w.line(f"__lo = {lo}")
        w.line(f"__hi = {hi}")
        if chosen.conds:
            with w.indent(f"if not ({' and '.join(chosen.conds)}):"):
                w.line("continue")
        for b in chosen.lo:
            w.line(f"__lo = max(__lo, {b})")
        for b in chosen.hi:
            w.line(f"__hi = min(__hi, {b})")
        with w.indent(f"for {var} in range(__lo, __hi):"):
            if self.needs_tid:
                # the linear id of the real coordinates, (tz * bdy + ty) * bdx + tx, in the
                # swapped names where x and y are exchanged
                w.line("__tid = (__tz * __bdx + __tx) * __bdy + __ty" if chosen.swapped
                       else "__tid = __tbase + __tx")
            if chosen.uses_flag:
                w.line(f"{RET_FLAG} = False")
            w.code(chosen.body, self.lowered.fn)


__all__ = ["FlatKernel"]
