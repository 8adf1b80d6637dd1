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
every later use in source order, which Numba's bytecode analysis requires. ``x__ok`` says whether
the replica exists yet; regions that run after a top-level region storing ``x`` skip that test.
Names that are pure functions of thread/block ids are recomputed instead
(``analysis.remat_definitions``), and local arrays that outlive a region get one slice per unit
(``x__r[__tid]``).
"""

from __future__ import annotations

import ast

from numba_cube.backends.cpu.analysis import stores
from numba_cube.backends.cpu.hidden import HIDDEN_IDS
from numba_cube.backends.cpu.lowering import Lowered
from numba_cube.backends.cpu.plan import Ctrl, Flow, Region, Uniform
from numba_cube.backends.cpu.unitcode import (RET_FLAG, Writer, lower_returns, parse_stmts,
                                              replace_local_markers)


class CubeKernel:
    """Everything needed to print one kernel with barriers (both its variants)."""

    def __init__(self, lowered: Lowered, plan, regions: list[Region], uniform: set[str],
                 remat: dict[str, ast.expr]):
        self.lowered = lowered
        self.plan = plan
        self.regions = regions
        fn = lowered.fn
        shared = {d.name for d in lowered.shared}
        local = {d.name for d in lowered.local}
        per_unit = set().union(*(stores(s) for r in regions for s in r.code)) - uniform \
            - set(HIDDEN_IDS) - shared
        self.remat = {n: e for n, e in remat.items() if n in per_unit and n not in local}
        # local arrays whose contents must survive a barrier get per-unit slices
        self.local_replicated = {n for r in regions for n in r.live_in & local}
        crossing = set()
        for r in regions:
            crossing |= r.live_in | (r.live_out & set().union(*(stores(s) for s in r.code)))
        self.replicated = sorted((crossing & per_unit) - set(self.remat) - local)
        # a region that never mentions a saved name need not load it: its replica is unchanged
        self.loads = {r.index: sorted(r.live_in & set(self.replicated) & _mentioned(r.code))
                      for r in regions}
        self.stores = {r.index: sorted(r.live_out & set(self.replicated)
                                       & set().union(*(stores(s) for s in r.code)))
                       for r in regions}
        stored_anywhere = set().union(*self.stores.values()) if self.stores else set()
        for name in self.replicated:
            if name not in stored_anywhere:
                node = next((n for r in regions for s in r.code for n in ast.walk(s)
                             if isinstance(n, ast.Name) and n.id == name), None)
                raise fn.error(f"{name!r} is read after a barrier but never assigned before one "
                               "(it may be used before assignment)",
                               f"use of {name!r} before assignment across a barrier", node)
        self.has_exit = any(isinstance(n, ast.Return) for r in regions for s in r.code
                            for n in ast.walk(s))
        self.allocated = self._certainly_allocated(plan)

    def _certainly_allocated(self, plan) -> dict[int, set[str]]:
        """Region index -> replica arrays certainly allocated before that region runs.

        A region at the top of the plan runs for every cube, and its unit loop stores each of its
        saved names for every unit that has not exited; so every region after it may load and
        store those names without the ``x__ok`` test (if all units exited, no later unit runs).
        Dropping the test from the hot loop matters: the allocation path in it keeps LLVM from
        treating the replica's data pointer as loop-invariant.
        """
        out: dict[int, set[str]] = {}
        certain: set[str] = set()
        for item in plan:
            for r in _regions_in(item):
                out[r.index] = set(certain)
            if isinstance(item, Region):
                certain |= set(self.stores[item.index])
        return out

    # ---- printing ---------------------------------------------------------------------------

    #: number of work items the launcher splits into chunks (see ``codegen``)
    work = "__gdx * __gdy * __gdz"

    def emit_chunk(self, w: Writer, name: str, decorator: str) -> None:
        """``name(__c, __nchunks, <geometry>, <params>)``: run chunk ``__c`` of the cubes."""
        params = ["__c", "__nchunks", "__gdx", "__gdy", "__gdz", "__bdx", "__bdy", "__bdz",
                  *self.lowered.params]
        w.line(decorator)
        with w.indent(f"def {name}({', '.join(params)}):"):
            w.line("__nt = __bdx * __bdy * __bdz")
            w.line(f"__nb = {self.work}")
            self._chunk_prologue(w)
            with w.indent("for __bid in range(__c * __nb // __nchunks, "
                          "(__c + 1) * __nb // __nchunks):"):
                w.line("__bx = __bid % __gdx")
                w.line("__by = __bid // __gdx % __gdy")
                w.line("__bz = __bid // (__gdx * __gdy)")
                if self.has_exit:
                    w.line("__exited[:] = False")
                self._items(w, self.plan)
        w.line()

    def _chunk_prologue(self, w: Writer) -> None:
        for d in self.lowered.shared:
            w.line(f"{d.name} = __np.empty({d.shape}, __np.{d.dtype})")
        for d in self.lowered.local:
            if d.name in self.local_replicated:
                shape = d.shape if d.shape.startswith("(") else f"({d.shape},)"
                w.line(f"{d.name}__r = __np.empty((__nt,) + {shape}, __np.{d.dtype})")
            else:
                w.line(f"{d.name}__buf = __np.empty({d.shape}, __np.{d.dtype})")
        if self.has_exit:
            w.line("__exited = __np.zeros(__nt, __np.bool_)")
        for name in self.replicated:
            w.line(f"{name}__l = []")
            w.line(f"{name}__ok = False")

    def _items(self, w: Writer, items) -> None:
        if not items:
            w.line("pass")
        for it in items:
            if isinstance(it, Region):
                self._region(w, it)
            elif isinstance(it, (Uniform, Flow)):
                w.code([it.stmt])
            elif isinstance(it, Ctrl):
                node = it.node
                if isinstance(node, ast.If):
                    header = f"if {ast.unparse(node.test)}:"
                elif isinstance(node, ast.While):
                    header = f"while {ast.unparse(node.test)}:"
                else:
                    header = f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}:"
                with w.indent(header):
                    self._items(w, it.body)
                if it.orelse:
                    with w.indent("else:"):
                        self._items(w, it.orelse)

    def _region(self, w: Writer, region: Region) -> None:
        loads, stores_ = self.loads[region.index], self.stores[region.index]
        code = replace_local_markers(region.code, self.local_replicated)
        on_exit = parse_stmts("__exited[__tid] = True") if self.has_exit else []
        code, uses_flag = lower_returns(code, on_exit)
        w.line(f"# region {region.index}")
        for name in sorted(set(loads) | set(stores_)):
            with w.indent(f"if {name}__ok:"):
                w.line(f"{name}__r = {name}__l[0]")
        with w.indent("for __tz in range(__bdz):"):
            with w.indent("for __ty in range(__bdy):"):
                w.line("__tbase = (__tz * __bdy + __ty) * __bdx")
                with w.indent("for __tx in range(__bdx):"):
                    w.line("__tid = __tbase + __tx")
                    if self.has_exit:
                        with w.indent("if __exited[__tid]:"):
                            w.line("continue")
                    if uses_flag:
                        w.line(f"{RET_FLAG} = False")
                    self._remat(w, region.live_in, _mentioned(code))
                    for name in sorted(region.live_in & self.local_replicated & _mentioned(code)):
                        w.line(f"{name} = {name}__r[__tid]")
                    allocated = self.allocated[region.index]
                    for name in loads:
                        if name in allocated:
                            w.line(f"{name} = {name}__r[__tid]")
                            continue
                        with w.indent(f"if {name}__ok:"):
                            w.line(f"{name} = {name}__r[__tid]")
                    w.code(code)
                    for name in stores_:
                        if name in allocated:
                            w.line(f"{name}__r[__tid] = {name}")
                            continue
                        with w.indent(f"if {name}__ok:"):
                            w.line(f"{name}__r[__tid] = {name}")
                        with w.indent("else:"):
                            w.line(f"{name}__l.append(__replica(__nt, {name}))")
                            w.line(f"{name}__r = {name}__l[0]")
                            w.line(f"{name}__ok = True")

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


def _regions_in(item) -> list[Region]:
    if isinstance(item, Region):
        return [item]
    if isinstance(item, Ctrl):
        return [r for sub in item.body + item.orelse for r in _regions_in(sub)]
    return []


def _mentioned(code) -> set[str]:
    return {n.id for s in code for n in ast.walk(s) if isinstance(n, ast.Name)}
