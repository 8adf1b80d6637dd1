"""Warp-synchronous memory exchange: where units must run a region statement by statement.

**The rule** (CUDA's execution model, as the CPU backend implements it). Between two split
points (barriers, warp intrinsics, grid syncs) the CPU runs a *region* one unit after another:
unit 0's statements, then unit 1's, and so on. A GPU runs the 32 lanes of a warp together,
statement by statement, and within one statement every lane loads before any lane stores. The
two orders give the same answer unless, inside one region, a unit reads (or overwrites) a
memory location that another unit of the cube writes in that region. Code that relies on the
warp's order does exactly that -- the unrolled last warp of a reduction::

    if tid < 32:
        sdata[tid] += sdata[tid + 32]      # no barrier between the steps: the lanes of the
        sdata[tid] += sdata[tid + 16]      # warp read what the others wrote one line before
        ...

So before the kernel is split into regions, this pass looks at every stretch of code between
split points (a *segment*) and, for each array a unit of the cube can see another unit's
elements of (shared arrays and the kernel's array parameters; not local arrays), asks whether
two of its accesses in the segment can touch one location from two units in an order that the
sequential run would change. Where they can, the statements that access that array run in
**lockstep**: a split point without a barrier's agreement check (``__lockstep__()``) goes before
and after each of them, so every unit of the cube finishes one such statement before any unit
starts the next (all warps in lockstep is one of the schedules a GPU may run: code that is
right on a GPU is right in it). A statement that stores into such an array and reads one whose
order within the statement matters is cut in two, loads first::

    sdata[tid] += sdata[tid - 1]   ->   __lsv1 = sdata[tid] + sdata[tid - 1]
                                        __lockstep__()
                                        sdata[tid] = __lsv1

A pair of accesses needs nothing when it is proven harmless:

- both are atomics (``cuda.atomic.*`` commute);
- both use the same index expression, whose names do not change within the segment (each
  unit then touches its own element; units that share an element there race on a GPU too);
- they are a store and a load *of one statement* (outside loops of the segment) whose indices
  are ``X + a`` and ``X + b`` for an index ``X`` that grows with the unit's position
  (``threadIdx.x``, the linear id, ``cuda.grid(1)``, names assigned once from them) and
  ``b - a >= 0`` provably (literals, non-negative names such as ``s = blockDim.x // 2`` halved
  in a loop, or a name bounded below by ``X`` in an enclosing ``if X < s``). The reading unit
  then comes before the writing one, and reads the old value, as the GPU's lanes do. This is
  the tree step ``if tid < s: sdata[tid] += sdata[tid + s]``: its code is unchanged.

Anything the pass cannot see into counts as an access of unknown index (an array reaching a
device function that was not inlined, a view of the array kept in a name), so it errs towards
lockstep: slower, never a different answer. Device functions that store into a shared array
passed to them and read it at another index are inlined (``lower/inline/inliner.py``), so their statements
are seen here. What is left to the user: units of *different* warps have no order on a GPU
either; a program whose answer depends on it has a race there too, and the CPU picks one order.

Where lockstep cannot be kept (the exchange sits in a loop that units leave at different rounds,
or under a unit-dependent exit), the plan refuses it (``refuses_lockstep``). For shared arrays
that refusal stands. For array parameters (global memory) ``translate.translate`` translates the
kernel again without them: a GPU gives global memory no lockstep there either (the warps of other
cubes; independent thread scheduling within a warp), and units one after another is a schedule a
GPU may run. stumpy's ``gpu_stump`` is such a kernel (a grid-stride loop in which every unit
writes ``QT_out[0]``, which unit 0 reads back).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from numba_cube.backends.cpu.passes.lockstep.index import (
    GEOMETRY, READ_ONLY, SHAPE_ONLY, UnitFacts, components, nonneg_call,
)
from numba_cube.backends.cpu.passes.lockstep.segments import (
    Segments, Step, container_of, exclusive, load_of, lockstep_point, stored_names,
)

__all__ = ["insert_lockstep_points", "written_parameters", "refuses_lockstep",
           "LOCKSTEP_REFUSAL"]

#: the start of the ``construct`` of every refusal of lockstep (``analyze/plan.py``)
LOCKSTEP_REFUSAL = "warp-synchronous memory exchange"


def refuses_lockstep(exc) -> bool:
    """Whether ``exc`` is the plan's refusal of a lockstep it cannot keep."""
    return str(getattr(exc, "construct", None) or "").startswith(LOCKSTEP_REFUSAL)

#: calls of the generated atomics helpers (``cuda_calls._atomic``): commuting read-modify-writes
_ATOMIC_PREFIXES = ("__atomic_", "__plain_")
#: array methods that read it and write nothing (any other method may write: ``a.fill(0)``)
READ_ONLY_METHODS = frozenset({"sum", "prod", "min", "max", "mean", "any", "all", "argmin",
                               "argmax", "copy", "astype", "item", "view", "reshape", "ravel",
                               "flatten", "transpose", "nonzero", "dot", "std", "var", "cumsum",
                               "cumprod", "conj", "conjugate"})
#: NumPy functions that write into an array argument
NUMPY_WRITERS = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal"})


@dataclass
class _Access:
    """One access of an array that units can share, in one step of a segment."""

    array: str
    kind: str                        # "load", "store" or "atomic"
    key: str | None                  # ast.dump of the index; None: unknown
    index: ast.expr | None
    step: int
    in_loop: bool
    names: frozenset = frozenset()   # names the index reads
    bounds: frozenset = frozenset()  # names bounded below by a unit index in enclosing ifs
    #: the location is the same for every unit (an index, and a view, that no unit changes)
    uniform: bool = False
    branches: frozenset = frozenset()


def _is_view(n: ast.Subscript) -> bool:
    """``a[1:]``, ``a[i, :]``: taking a view reads no element."""
    return isinstance(n.ctx, ast.Load) and any(
        isinstance(c, ast.Slice) for c in components(n.slice))


class _Lockstep:
    """The pass over one kernel body: find the segments, judge their accesses, insert points."""

    def __init__(self, body: list[ast.stmt], arrays: set[str],
                 device_writes: dict[str, set[int]]):
        self.facts = UnitFacts(body, arrays)
        self.arrays = arrays
        self.device_writes = device_writes
        self.aliases = self._aliases(body)
        self.uniform_views = self._uniform_views(body)
        self.count = 0

    def _aliases(self, body) -> dict[str, str]:
        """Names bound to an array or a view of one (``row = sdata[ty]``, ``s = sdata``), when
        something indexes them: their accesses reach the array at an unknown index."""
        out: dict[str, str] = {}
        changed = True
        while changed:
            changed = False
            for node in ast.walk(ast.Module(body=list(body), type_ignores=[])):
                if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name)):
                    continue
                base = node.value
                while isinstance(base, ast.Subscript):
                    base = base.value
                if isinstance(base, ast.Name):
                    target = self.arrays_of(base.id, out)
                    name = node.targets[0].id
                    if target is not None and name not in out and name not in self.arrays:
                        out[name] = target
                        changed = True
        # a scalar loaded from an array is never indexed: only names that are, are views
        indexed = {n.value.id for n in ast.walk(ast.Module(body=list(body), type_ignores=[]))
                   if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)}
        return {name: array for name, array in out.items() if name in indexed}

    def _uniform_views(self, body) -> set[str]:
        """Views every unit takes at the same place (``gaps = dyn[1:3]``, ``v0 = data[0]`` in
        either arm of an ``if``): every assignment of the name takes one that way."""
        defs: dict[str, list[ast.expr]] = {}
        for node in ast.walk(ast.Module(body=list(body), type_ignores=[])):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name) \
                    and node.targets[0].id in self.aliases:
                defs.setdefault(node.targets[0].id, []).append(node.value)
        return {name for name, values in defs.items()
                if self.facts.counts[name] == len(values) and all(
                    isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name)
                    and not self.facts.varies(v.slice) for v in values)}

    def arrays_of(self, name: str, aliases=None) -> str | None:
        aliases = self.aliases if aliases is None else aliases
        return name if name in self.arrays else aliases.get(name)

    # ---- accesses -------------------------------------------------------------------------

    def accesses(self, step: Step, k: int) -> list[_Access]:
        node = step.node
        out: list[_Access] = []
        bounds = frozenset(n for x, n in step.bounds
                           if self.facts.is_nonneg(ast.Name(x, ast.Load())))

        def add(array_name, kind, index):
            array = self.arrays_of(array_name)
            if array is None:
                return
            known = array_name == array and index is not None
            names = frozenset(n.id for n in ast.walk(index)
                              if isinstance(n, ast.Name)) if known else frozenset()
            uniform = index is not None and not self.facts.varies(index) and (
                array_name == array or array_name in self.uniform_views)
            out.append(_Access(array, kind, ast.dump(index) if known else None,
                               index if known else None, k, step.in_loop, names, bounds,
                               uniform, step.branches))

        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) \
                and isinstance(node.target.value, ast.Name):
            add(node.target.value.id, "load", node.target.slice)
        for n in ast.walk(node):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) \
                    and not _is_view(n):
                kind = "store" if isinstance(n.ctx, ast.Store) else "load"
                add(n.value.id, kind, n.slice)
            elif isinstance(n, ast.Call):
                self._call_accesses(n, add)
        return out

    def _call_accesses(self, n: ast.Call, add) -> None:
        """What a call does to the arrays it is given (or called on, ``a.fill(0)``)."""
        func = n.func.id if isinstance(n.func, ast.Name) else None
        if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name):
            owner, attr = n.func.value.id, n.func.attr
            if self.arrays_of(owner) is not None:               # a method of the array
                add(owner, "load", None)
                if attr not in READ_ONLY_METHODS:
                    add(owner, "store", None)
            elif owner in ("math", "cmath", "__np"):
                func = "__np." + attr if attr in NUMPY_WRITERS else "__pure"
        for i, a in enumerate(n.args):
            if not isinstance(a, ast.Name) or self.arrays_of(a.id) is None:
                continue
            if func is not None and func.startswith(_ATOMIC_PREFIXES) and i == 0:
                add(a.id, "atomic", n.args[1] if len(n.args) > 1 else None)
            elif func in SHAPE_ONLY:
                continue
            elif func in READ_ONLY or func == "__pure" or (
                    func is not None and func.startswith("__") and func not in self.device_writes
                    and not func.startswith("__np.")):
                add(a.id, "load", None)     # builtins, math, NumPy readers, the helpers
            elif func in self.device_writes and i not in self.device_writes[func]:
                add(a.id, "load", None)     # a device function that only reads it
            else:                           # a callee we do not look into: any element
                add(a.id, "store", None)
                add(a.id, "load", None)

    # ---- the decision ---------------------------------------------------------------------

    def _stable(self, acc: _Access, stored: set[str]) -> bool:
        return all(n in GEOMETRY or self.facts.counts[n] <= 1 or n not in stored
                   for n in acc.names)

    def _ordered(self, first: _Access, then: _Access) -> bool:
        """Two accesses that the GPU's lockstep runs in this order (``first`` in an earlier
        statement, or the load of one statement whose store is ``then``): does the sequential
        order of the units keep that order wherever they meet one location from two units?"""
        if first.key == then.key:
            return True
        if first.index is None or then.index is None:
            return False
        a_parts, b_parts = components(first.index), components(then.index)
        if len(a_parts) != len(b_parts):
            return False
        differing = [(a, b) for a, b in zip(a_parts, b_parts) if ast.dump(a) != ast.dump(b)]
        if any(self.facts.disjoint(a, b) for a, b in differing):
            return True              # never one location (out[k, 0] and out[k, 1])
        if len(differing) != 1:
            return False
        a, b = differing[0]
        # A unit meets another's location only at X(u) + p == X(v) + q; the sequential run
        # has u before v exactly when that offset difference puts u first.
        return self.facts.distance_nonneg(b, a, first.bounds | then.bounds)

    def flagged(self, steps: list[Step]) -> set[str]:
        """The arrays of a segment whose accesses must run in lockstep."""
        stored = {n for st in steps if st.container is not None
                  for n in stored_names(st.stmt)}
        by_array: dict[str, list[_Access]] = {}
        for st in steps:
            for acc in st.accesses:
                by_array.setdefault(acc.array, []).append(acc)
        out = set()
        for array, accs in by_array.items():
            writers = [a for a in accs if a.kind != "load"]
            if any(self._conflict(w, a, stored) for w in writers for a in accs if a is not w):
                out.add(array)
        return out

    def _conflict(self, w: _Access, a: _Access, stored: set[str]) -> bool:
        if "atomic" in (w.kind, a.kind):
            return False        # atomics commute; a plain access beside them races on a GPU
        stable = self._stable(w, stored) and self._stable(a, stored)
        if w.uniform and a.uniform:
            return False        # every unit touches the same elements: a race on a GPU too
        if exclusive(w.branches, a.branches):
            return False        # the two arms of an if every unit takes the same way
        if w.key is not None and w.key == a.key and stable:
            return False
        if w.step == a.step and w.key is None and a.key is None and not w.in_loop:
            return False        # one opaque call: what it does inside is not reordered
        if w.key is None or a.key is None or w.in_loop or a.in_loop or not stable:
            return True         # unknown, or met again in the next round of a loop
        if w.step != a.step:
            first, then = (w, a) if w.step < a.step else (a, w)
        elif {w.kind, a.kind} == {"load", "store"}:
            first, then = (w, a) if w.kind == "load" else (a, w)
        else:
            return True
        return not self._ordered(first, then)

    # ---- the rewrite ----------------------------------------------------------------------

    def run(self, body: list[ast.stmt]) -> bool:
        segments = Segments(lambda test: not self.facts.varies(test))
        segments.walk(body)
        edits: dict[int, tuple[list, list]] = {}          # id(list) -> (list, [(index, new)])
        changed = False
        for steps in segments.segments:
            for k, st in enumerate(steps):
                st.accesses = self.accesses(st, k)
            flagged = self.flagged(steps)
            if not flagged:
                continue
            changed = True
            for st in steps:
                touched = [a for a in st.accesses if a.array in flagged]
                if not touched:
                    continue
                if st.trailing:              # a while's test, again after its body
                    st.stmt.body.append(lockstep_point(st.stmt))
                    continue
                if st.container is None:     # a test: its statement starts a new stretch
                    container, target = container_of(body, st.stmt), st.stmt
                    if container is not None:
                        edits.setdefault(id(container), (container, []))[1].append(
                            (target, [lockstep_point(target), target]))
                    continue
                new = self._split_statement(st, touched, flagged)
                edits.setdefault(id(st.container), (st.container, []))[1].append(
                    (st.stmt, [lockstep_point(st.stmt), *new, lockstep_point(st.stmt)]))
        for container, changes in edits.values():
            for target, replacement in changes:
                i = next(j for j, s in enumerate(container) if s is target)
                container[i:i + 1] = replacement
        return changed

    def _split_statement(self, st: Step, touched: list[_Access], flagged: set[str]):
        """The statement, cut into load and store halves where its own order matters."""
        s = st.stmt
        stores = [a for a in touched if a.kind == "store"]
        loads = [a for a in touched if a.kind == "load"]
        in_order = all(self._ordered(r, w) for w in stores for r in loads) and not st.in_loop
        if in_order or not stores or not loads:
            return [s]
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Subscript):
            target, value = s.target, ast.BinOp(load_of(s.target), s.op, s.value)
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Subscript):
            target, value = s.targets[0], s.value
        else:
            return [s]           # a call or a multiple target: ordered with its neighbours
        self.count += 1
        temp = f"__lsv{self.count}"
        first = [ast.Assign([ast.Name(temp, ast.Store())], value)]
        index = target.slice
        if any(isinstance(n, (ast.Subscript, ast.Call)) and not nonneg_call(n)
               for n in ast.walk(index)):
            first.append(ast.Assign([ast.Name(f"{temp}i", ast.Store())], index))
            index = ast.Name(f"{temp}i", ast.Load())
        store = ast.Assign([ast.Subscript(target.value, index, ast.Store())],
                           ast.Name(temp, ast.Load()))
        out = [*first, lockstep_point(s), store]
        return [ast.fix_missing_locations(ast.copy_location(n, s)) for n in out]


def insert_lockstep_points(body: list[ast.stmt], arrays: set[str],
                           device_writes: dict[str, set[int]] | None = None) -> bool:
    """Insert ``__lockstep__()`` split points into ``body`` (in place) where units exchange
    values through ``arrays`` inside a region (see the module docstring); True if any was.
    ``device_writes`` maps the generated device functions to the positions of the parameters
    they may write (``written_parameters``); other callees may write any array they get."""
    return _Lockstep(body, set(arrays), device_writes or {}).run(body)


def written_parameters(params: list[str], body: list[ast.stmt]) -> set[int]:
    """Positions of the parameters a device function may write through: stored into by
    subscript (directly or through a view kept in a name), or handed to any call but ``len``."""
    views: dict[str, str] = {p: p for p in params}
    for node in ast.walk(ast.Module(body=list(body), type_ignores=[])):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name) and base.id in views:
                views.setdefault(node.targets[0].id, views[base.id])
    written = set()
    for node in ast.walk(ast.Module(body=list(body), type_ignores=[])):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name) and base.id in views:
                written.add(views[base.id])
        elif isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name)
                                                 and node.func.id in SHAPE_ONLY):
            written |= {views[a.id] for a in node.args
                        if isinstance(a, ast.Name) and a.id in views}
    return {i for i, p in enumerate(params) if p in written}
