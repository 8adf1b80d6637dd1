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
passed to them and read it at another index are inlined (``inline.py``), so their statements
are seen here. What is left to the user: units of *different* warps have no order on a GPU
either; a program whose answer depends on it has a race there too, and the CPU picks one order.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass, field

from numba_cube.backends.cpu.analysis import assignment_sources, store_counts
from numba_cube.backends.cpu.hidden import (BLOCK_DIMS, BLOCK_IDS, GRID_DIMS, LINEAR_TID,
                                           LOCKSTEP, NONNEG, THREAD_IDS, is_split)

__all__ = ["insert_lockstep_points", "written_parameters"]

#: calls of the generated atomics helpers (``cudacalls._atomic``): commuting read-modify-writes
_ATOMIC_PREFIXES = ("__atomic_", "__plain_")
#: builtins that take an array without touching its elements
_SHAPE_ONLY = frozenset({"len"})
_PURE_BUILTINS = frozenset({"range", "len", "min", "max", "abs", "int", "float", "round",
                            "bool"})
#: ids that increase with the unit's position in the sequential order (x fastest)
_INCREASING_IDS = frozenset({"__tx", LINEAR_TID})
_GEOMETRY = frozenset(BLOCK_DIMS + GRID_DIMS + BLOCK_IDS + THREAD_IDS + (LINEAR_TID,))


@dataclass
class _Access:
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


@dataclass
class _Step:
    """One statement (or the test of a compound statement) of a segment."""

    node: ast.AST
    container: list                  # the statement list that holds it (None for tests)
    stmt: ast.stmt
    in_loop: bool
    bounds: frozenset
    accesses: list = field(default_factory=list)
    #: the test of a ``while`` around split points, evaluated again at the end of its body
    trailing: bool = False
    #: ``(id(if), arm)`` of the enclosing ifs whose test is the same for every unit
    branches: frozenset = frozenset()


class _Facts:
    """What the pass knows of the kernel's names: single definitions, unit dependence, signs."""

    def __init__(self, body: list[ast.stmt], params: set[str]):
        self.counts = store_counts(body)
        self.defs: dict[str, list[ast.expr]] = {}
        for node in ast.walk(ast.Module(body=list(body), type_ignores=[])):
            if isinstance(node, ast.stmt):
                for name, e in assignment_sources(node) or ():
                    self.defs.setdefault(name, []).append(e)
                if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                    self.defs.setdefault(node.target.id, []).append(node.iter)
        self.params = params
        # a name stored in a way assignment_sources cannot read (a tuple from a call, a
        # subscript target) may hold anything: unit-dependent
        self.opaque = {n for n, c in self.counts.items() if c != len(self.defs.get(n, []))}
        self.unit_dependent = self._fixpoint(self._depends_on_unit, grow=True)
        self.nonneg = self._fixpoint(self._nonneg_def, grow=False)

    def _fixpoint(self, test, grow: bool) -> set[str]:
        """Names whose every definition passes ``test`` (``grow=False``: start from all and
        drop) or some definition does (``grow=True``: start from none and add)."""
        names = set(self.opaque) if grow else set(self.defs)
        changed = True
        while changed:
            changed = False
            for name, exprs in self.defs.items():
                if self.counts[name] != len(exprs) and not grow:
                    ok = False                  # stored in ways assignment_sources cannot read
                else:
                    ok = (any if grow else all)(test(e, names) for e in exprs)
                if grow and ok and name not in names:
                    names.add(name)
                    changed = True
                elif not grow and not ok and name in names:
                    names.discard(name)
                    changed = True
        return names

    @staticmethod
    def _depends_on_unit(e: ast.expr, dependent: set[str]) -> bool:
        for n in ast.walk(e):
            if isinstance(n, ast.Name) and (n.id in THREAD_IDS or n.id == LINEAR_TID
                                            or n.id in dependent):
                return True
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) \
                    and n.value.attr == "shape":
                continue                # a shape is the same for every unit
            if isinstance(n, ast.Subscript) or (isinstance(n, ast.Call)
                                                and not _nonneg_call(n) and not _pure_call(n)):
                return True             # memory, or a call: may differ between units
        return False

    def _nonneg_def(self, e: ast.expr, names: set[str]) -> bool:
        return self.is_nonneg(e, names)

    def is_nonneg(self, e: ast.expr, names: set[str] | None = None, bounds=frozenset()) -> bool:
        names = self.nonneg if names is None else names
        if isinstance(e, ast.Constant):
            return type(e.value) is int and e.value >= 0
        if isinstance(e, ast.Name):
            return e.id in _GEOMETRY or e.id in names or e.id in bounds
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Mult, ast.FloorDiv,
                                                          ast.RShift, ast.Mod, ast.LShift)):
            return self.is_nonneg(e.left, names, bounds) and self.is_nonneg(e.right, names, bounds)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            if e.func.id == NONNEG or e.func.id in _SHAPE_ONLY:
                return True
            if e.func.id == "max":
                return any(self.is_nonneg(a, names, bounds) for a in e.args)
            if e.func.id == "min":
                return bool(e.args) and all(self.is_nonneg(a, names, bounds) for a in e.args)
        if isinstance(e, ast.Attribute):
            return e.attr == "size"
        if isinstance(e, ast.Subscript):
            return isinstance(e.value, ast.Attribute) and e.value.attr == "shape"
        return False

    def increasing(self, e: ast.expr, depth: int = 0) -> bool:
        """Does ``e`` grow with the unit's position, by exactly one unit-varying term?"""
        if depth > 8:
            return False
        if isinstance(e, ast.Name):
            if e.id in _INCREASING_IDS:
                return True
            exprs = self.defs.get(e.id, [])
            return (self.counts[e.id] == 1 and len(exprs) == 1
                    and self.increasing(exprs[0], depth + 1))
        varying = [(sign, t) for sign, t in _terms(e) if self._varies(t)]
        return (len(varying) == 1 and varying[0][0] == 1
                and not isinstance(varying[0][1], ast.BinOp)
                and self.increasing(varying[0][1], depth + 1))

    def _varies(self, e: ast.expr) -> bool:
        return self._depends_on_unit(e, self.unit_dependent)


def _pure_call(n: ast.Call) -> bool:
    """A builtin or ``math``/NumPy function: the same for every unit given the same args."""
    f = n.func
    if isinstance(f, ast.Name):
        return f.id in _PURE_BUILTINS
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
        and f.value.id in ("math", "__np")


def _nonneg_call(n: ast.AST) -> bool:
    """``__nn(...)`` wraps geometry arithmetic (``hidden.NonNegWrapper``): not a real call."""
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == NONNEG


def _terms(e: ast.expr, sign: int = 1) -> list[tuple[int, ast.expr]]:
    """The signed summands of ``e`` (``a + b - c`` -> ``[(1, a), (1, b), (-1, c)]``)."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        right = -sign if isinstance(e.op, ast.Sub) else sign
        return _terms(e.left, sign) + _terms(e.right, right)
    if _nonneg_call(e) and len(e.args) == 1:
        return _terms(e.args[0], sign)
    return [(sign, e)]


def _is_view(n: ast.Subscript) -> bool:
    """``a[1:]``, ``a[i, :]``: taking a view reads no element."""
    return isinstance(n.ctx, ast.Load) and any(
        isinstance(c, ast.Slice) for c in _components(n.slice))


def _exclusive(a: frozenset, b: frozenset) -> bool:
    """Do two accesses sit in different arms of one ``if`` with a uniform test?"""
    arms = dict(a)
    return any(k in arms and arms[k] != arm for k, arm in b)


def _components(index: ast.expr) -> list[ast.expr]:
    return list(index.elts) if isinstance(index, ast.Tuple) else [index]


class _Segments:
    """Cuts a body into segments: the statements between split points, with their steps."""

    def __init__(self, uniform_test):
        self.segments: list[list[_Step]] = []
        self.uniform_test = uniform_test

    def walk(self, stmts: list[ast.stmt], trailing: ast.expr | None = None,
             trailing_stmt: ast.stmt | None = None) -> None:
        current: list[_Step] = []
        for s in stmts:
            if is_split(s):
                self._close(current)
                current = []
            elif _contains_split(s):
                if isinstance(s, (ast.If, ast.While)):       # its test runs per unit, here
                    current.append(_Step(s.test, None, s, False, frozenset()))
                self._close(current)
                current = []
                if isinstance(s, ast.While):                 # and again at the body's end
                    self.walk(s.body, s.test, s)
                else:
                    self.walk(s.body)
                self.walk(s.orelse)
            else:
                self._steps(s, stmts, current, False, frozenset())
        if trailing is not None:
            current.append(_Step(trailing, None, trailing_stmt, False, frozenset(),
                                 trailing=True))
        self._close(current)

    def _close(self, steps: list[_Step]) -> None:
        if steps:
            self.segments.append(steps)

    def _steps(self, s: ast.stmt, container: list, out: list[_Step], in_loop: bool,
               bounds: frozenset, branches: frozenset = frozenset()) -> None:
        if isinstance(s, ast.If):
            out.append(_Step(s.test, None, s, in_loop, bounds, branches=branches))
            inner = bounds | _lower_bounded(s.test)
            uniform = self.uniform_test(s.test)
            for arm, stmts in ((0, s.body), (1, s.orelse)):
                arms = branches | {(id(s), arm)} if uniform else branches
                for t in stmts:
                    self._steps(t, stmts, out, in_loop, inner if arm == 0 else bounds, arms)
        elif isinstance(s, (ast.For, ast.While)):
            head = s.iter if isinstance(s, ast.For) else s.test
            out.append(_Step(head, None, s, True, bounds, branches=branches))
            for stmts in (s.body, s.orelse):
                for t in stmts:
                    self._steps(t, stmts, out, True, bounds, branches)
        else:
            out.append(_Step(s, container, s, in_loop, bounds, branches=branches))


def _contains_split(s: ast.stmt) -> bool:
    return any(isinstance(n, ast.stmt) and is_split(n) for n in ast.walk(s))


def _lower_bounded(test: ast.expr) -> frozenset:
    """Names ``n`` that a conjunct ``x < n`` (``x <= n``, ``n > x``, ``n >= x``) of ``test``
    bounds from below by a unit index ``x``: positive wherever the body runs (``x >= 0``)."""
    conjuncts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) \
        else [test]
    out = set()
    for c in conjuncts:
        if not (isinstance(c, ast.Compare) and len(c.ops) == 1):
            continue
        left, right, op = c.left, c.comparators[0], c.ops[0]
        if isinstance(op, (ast.Gt, ast.GtE)):
            left, right = right, left
        elif not isinstance(op, (ast.Lt, ast.LtE)):
            continue
        if isinstance(right, ast.Name) and isinstance(left, ast.Name):
            out.add((left.id, right.id))
    return frozenset(out)


class _Lockstep:
    def __init__(self, body: list[ast.stmt], arrays: set[str],
                 device_writes: dict[str, set[int]]):
        self.facts = _Facts(body, arrays)
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
        """Views every unit takes at the same place (``gaps = dyn[1:3]``), assigned once."""
        out = set()
        for node in ast.walk(ast.Module(body=list(body), type_ignores=[])):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name) \
                    and node.targets[0].id in self.aliases \
                    and self.facts.counts[node.targets[0].id] == 1 \
                    and isinstance(node.value, ast.Subscript) \
                    and isinstance(node.value.value, ast.Name) \
                    and not self.facts._varies(node.value.slice):
                out.add(node.targets[0].id)
        return out

    def arrays_of(self, name: str, aliases=None) -> str | None:
        aliases = self.aliases if aliases is None else aliases
        return name if name in self.arrays else aliases.get(name)

    # ---- accesses -------------------------------------------------------------------------

    def accesses(self, step: _Step, k: int) -> list[_Access]:
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
            uniform = index is not None and not self.facts._varies(index) and (
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
                func = n.func.id if isinstance(n.func, ast.Name) else None
                for i, a in enumerate(n.args):
                    if not isinstance(a, ast.Name) or self.arrays_of(a.id) is None:
                        continue
                    if func is not None and func.startswith(_ATOMIC_PREFIXES) and i == 0:
                        add(a.id, "atomic", n.args[1] if len(n.args) > 1 else None)
                    elif func in _SHAPE_ONLY:
                        continue
                    elif func in self.device_writes and i not in self.device_writes[func]:
                        add(a.id, "load", None)      # a device function that only reads it
                    else:                    # a callee we do not look into: any element
                        add(a.id, "store", None)
                        add(a.id, "load", None)
        return out

    # ---- the decision ---------------------------------------------------------------------

    def _stable(self, acc: _Access, stored: set[str]) -> bool:
        return all(n in _GEOMETRY or self.facts.counts[n] <= 1 or n not in stored
                   for n in acc.names)

    def _ordered(self, first: _Access, then: _Access) -> bool:
        """Two accesses that the GPU's lockstep runs in this order (``first`` in an earlier
        statement, or the load of one statement whose store is ``then``): does the sequential
        order of the units keep that order wherever they meet one location from two units?"""
        if first.key == then.key:
            return True
        if first.index is None or then.index is None:
            return False
        a_parts, b_parts = _components(first.index), _components(then.index)
        if len(a_parts) != len(b_parts):
            return False
        differing = [(a, b) for a, b in zip(a_parts, b_parts) if ast.dump(a) != ast.dump(b)]
        if any(self._disjoint(a, b) for a, b in differing):
            return True              # never one location (out[k, 0] and out[k, 1])
        if len(differing) != 1:
            return False
        a, b = differing[0]
        # A unit meets another's location only at X(u) + p == X(v) + q; the sequential run
        # has u before v exactly when that offset difference puts u first.
        return self._distance_nonneg(b, a, first.bounds | then.bounds)

    def _disjoint(self, a: ast.expr, b: ast.expr) -> bool:
        """``B + p`` and ``B + q`` with ``B`` the same for every unit and constants
        ``p != q`` (``row`` and ``row - 1``): no two units meet there."""
        a_terms = [(sign, ast.dump(t), t) for sign, t in _terms(a)]
        b_terms = [(sign, ast.dump(t), t) for sign, t in _terms(b)]
        common = Counter((s, d) for s, d, _ in a_terms) & Counter((s, d) for s, d, _ in b_terms)
        if any(self.facts._varies(t) for s, d, t in a_terms if (s, d) in common):
            return False
        rest_a = Counter((s, d) for s, d, _ in a_terms) - common
        rest_b = Counter((s, d) for s, d, _ in b_terms) - common
        constants = [(s, t) for s, d, t in a_terms if (s, d) in rest_a] + \
                    [(-s, t) for s, d, t in b_terms if (s, d) in rest_b]
        if not all(isinstance(t, ast.Constant) and type(t.value) is int for _, t in constants):
            return False
        return sum(s * t.value for s, t in constants) != 0

    def _distance_nonneg(self, stored: ast.expr, loaded: ast.expr, bounds) -> bool:
        """Is ``loaded - stored`` >= 0, the same for every unit, over an index that grows with
        the unit's position? (Then the unit that reads ``loaded`` runs first.)"""
        s_terms = [(sign, ast.dump(t), t) for sign, t in _terms(stored)]
        l_terms = [(sign, ast.dump(t), t) for sign, t in _terms(loaded)]
        common = Counter((s, d) for s, d, _ in s_terms) & Counter((s, d) for s, d, _ in l_terms)
        base = [t for s, d, t in s_terms if (s, d) in common and s == 1]
        if not any(self.facts.increasing(t) for t in base):
            return False
        left = Counter((s, d) for s, d, _ in s_terms) - common
        right = Counter((s, d) for s, d, _ in l_terms) - common
        extra = [(s, t) for s, d, t in l_terms if (s, d) in right] + \
                [(-s, t) for s, d, t in s_terms if (s, d) in left]
        # distance = (loaded - stored) = sum of extra terms: each must be >= 0 and the same
        # for every unit (else the reader/writer order could flip between units)
        return all(sign == 1 and self.facts.is_nonneg(t, bounds=bounds)
                   and not self.facts._varies(t) for sign, t in extra)

    def flagged(self, steps: list[_Step]) -> set[str]:
        """The arrays of a segment whose accesses must run in lockstep."""
        stored = {n for st in steps if st.container is not None
                  for n in _stored_names(st.stmt)}
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
        if _exclusive(w.branches, a.branches):
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
        segments = _Segments(lambda test: not self.facts._varies(test))
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
                    st.stmt.body.append(_marker(st.stmt))
                    continue
                if st.container is None:     # a test: its statement starts a new stretch
                    container, target = _container_of(body, st.stmt), st.stmt
                    if container is not None:
                        edits.setdefault(id(container), (container, []))[1].append(
                            (target, [_marker(target), target]))
                    continue
                new = self._split_statement(st, touched, flagged)
                edits.setdefault(id(st.container), (st.container, []))[1].append(
                    (st.stmt, [_marker(st.stmt), *new, _marker(st.stmt)]))
        for container, changes in edits.values():
            for target, replacement in changes:
                i = next(j for j, s in enumerate(container) if s is target)
                container[i:i + 1] = replacement
        return changed

    def _split_statement(self, st: _Step, touched: list[_Access], flagged: set[str]):
        """The statement, cut into load and store halves where its own order matters."""
        s = st.stmt
        stores = [a for a in touched if a.kind == "store"]
        loads = [a for a in touched if a.kind == "load"]
        in_order = all(self._ordered(r, w) for w in stores for r in loads) and not st.in_loop
        if in_order or not stores or not loads:
            return [s]
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Subscript):
            target, value = s.target, ast.BinOp(_load(s.target), s.op, s.value)
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Subscript):
            target, value = s.targets[0], s.value
        else:
            return [s]           # a call or a multiple target: ordered with its neighbours
        self.count += 1
        temp = f"__lsv{self.count}"
        first = [ast.Assign([ast.Name(temp, ast.Store())], value)]
        index = target.slice
        if any(isinstance(n, (ast.Subscript, ast.Call)) and not _nonneg_call(n)
               for n in ast.walk(index)):
            first.append(ast.Assign([ast.Name(f"{temp}i", ast.Store())], index))
            index = ast.Name(f"{temp}i", ast.Load())
        store = ast.Assign([ast.Subscript(target.value, index, ast.Store())],
                           ast.Name(temp, ast.Load()))
        out = [*first, _marker(s), store]
        return [ast.fix_missing_locations(ast.copy_location(n, s)) for n in out]


def _load(target: ast.Subscript) -> ast.Subscript:
    return ast.Subscript(target.value, target.slice, ast.Load())


def _stored_names(s: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _marker(at: ast.AST) -> ast.stmt:
    stmt = ast.Expr(ast.Call(ast.Name(LOCKSTEP, ast.Load()), [], []))
    return ast.fix_missing_locations(ast.copy_location(stmt, at))


def _container_of(body: list[ast.stmt], target: ast.stmt) -> list | None:
    """The statement list that holds ``target`` (by identity)."""
    if any(s is target for s in body):
        return body
    for s in body:
        for field_name in ("body", "orelse"):
            inner = getattr(s, field_name, None)
            if isinstance(inner, list):
                found = _container_of(inner, target)
                if found is not None:
                    return found
    return None


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
                                                 and node.func.id in _SHAPE_ONLY):
            written |= {views[a.id] for a in node.args
                        if isinstance(a, ast.Name) and a.id in views}
    return {i for i, p in enumerate(params) if p in written}
