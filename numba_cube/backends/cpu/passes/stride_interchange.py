"""Run a region's grid-stride loop row by row across the cube's units (loop interchange).

Why this exists: fission prints a region as "for each unit of the cube: the unit's code", so a
grid-stride loop in a region (``for i in range(cuda.grid(1), n, cuda.gridsize(1))``) walks one
unit's whole range before the next unit starts. Its reads stride by the grid's size: a new page
on every access, nothing for the prefetcher. The shared-memory histogram of
``benchmarks/bench_kernels.py`` spent 4.5x the time of a hand-written ``prange`` loop there
(1.6-1.8x with this pass, on a shared two-core host; what is left is mostly the bounds test of
every shared atomic, ``atomics.element_pointer``, and a cube's rows being a grid apart). This
pass decides which regions run as "for each stride step ``k``: for each unit: iteration ``k``"
(``emit/interchanged_region.py`` prints them), so the units of a cube read neighbouring elements
one after another::

    __si1_stop = <stop>; __si1_step = <step>              # the same for every unit
    for units: __si1_lo/__si1_hi = min/max of len(range(<start>, __si1_stop, __si1_step))
    for __si1_k in range(__si1_lo):                       # full rows: every unit has a k-th item
        for units: i = __range_item(__si1_k, (<start>, __si1_stop, __si1_step)); <body>
    for __si1_k in range(__si1_lo, __si1_hi):             # the ragged end: test per unit
        for units: if __si1_k < len(range(...)): i = __range_item(...); <body>

Why it is exact. The units of a barrier-free region run concurrently on a GPU, so any
interleaving of their statements that keeps each unit's own program order is an execution the
kernel must accept. The interchanged order is such an interleaving: every unit still runs its
iterations in order, with the same values of ``i`` (``support.range_item`` gives the k-th item of
the same ``range``, typed as Numba types that range's loop variable). Interleaving can only
change a result where units communicate, and the rules below leave them one channel: integer
``add``/``sub`` atomics on shared memory, whose results are unused. Wrapping integer addition is
associative and commutative, so the final memory is *bit for bit* what today's unit-by-unit order
gives, not merely another legal execution. Float atomics are left out on purpose: a reordered
float sum is also a legal GPU execution, but it changes bits that today's translation fixes, and
the pass should be invisible in results. Global atomics are left out too: their dtype is not
known when the module is printed (the launch's array decides it), so integer-ness cannot be
proved here. Other integer atomics (max, min, and, or, xor) commute only with themselves; no
kernel needs them yet.

Legality, all checked on the lowered region (``plan``); anything else prints today's code:

- the kernel is in cube mode (no grid sync), no unit exits (``return``), and the region has no
  run-time mask, loads or stores no per-unit replica and reads no shuffle result;
- the region is ``<prefix> for NAME in range(args): <body>`` with no ``else``, and the kernel
  names no variable ``range``, ``len``, ``min`` or ``max`` (the printed loops call them). Each
  prefix statement assigns a plain name the rest of the region does not, from a pure expression (``dataflow.Purity``: no memory
  read, no side effect) of names that stay fixed while the region runs: hidden ids,
  rematerialised names whose definitions read nothing the region assigns, uniform names and
  never-reassigned parameters the region does not assign, earlier prefix names. ``start`` (if
  given) is such an expression; ``stop`` and ``step`` are pure expressions of the uniform ones
  alone, so they are evaluated once per cube. The step's sign is not needed: trip counts and
  items come from ``range`` itself; a zero step raises the same ``ValueError`` as before;
- the body is made of ``pass``, plain-name assignments and augmented assignments, ``if``/``else``
  and ``__plain_add``/``__plain_sub`` statements (results unused) on a static shared array of an
  integer dtype that the kernel never rebinds. No loop, ``break``, ``continue``, ``return``,
  ``raise``, subscript or attribute store, device-function call or other call with side effects;
- every name the body assigns is assigned before it is read in each iteration (``Liveness``),
  and neither those names nor the loop variable are live after the region: no value is carried
  from one iteration to the next, nor out of the loop (such a value would be another unit's);
- the body reads memory only where no unit of the region writes: it never names an array that
  could be shared or local memory (a shared or local array, or any name the kernel assigns from
  an expression that mentions one, to a fixpoint: ``_suspects``), except to index a *static*
  shared array the region does not update (and the updated arrays as the atomics' first
  argument). Parameters cannot alias shared memory, and the region writes no global memory.

An index error or other exception raised by some iteration is still raised (the same iterations
run), though another failing iteration may be the one to report it; the launch fails either way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from numba_cube.backends.cpu.passes import enabled
from numba_cube.backends.cpu.analyze.dataflow import (
    SHAPE_ATTRS, Liveness, loads, store_counts, stores,
)
from numba_cube.backends.cpu.kernel_runtime.atomics import function_name
from numba_cube.backends.cpu.lower.hidden import HIDDEN_IDS, UNIFORM_IDS
from numba_cube.backends.cpu.analyze.plan_items import Region

#: shared-memory atomics whose updates of an integer array commute exactly
COMMUTING = frozenset("__" + function_name(op, atomic=False) for op in ("add", "sub"))
#: callees that never keep a reference to their arguments (``_suspects``)
_ATOMIC_PREFIXES = ("__plain_", "__atomic_", "__private_")
#: the builtins the printed loops call: refused where the kernel names a variable so
_BUILTINS = frozenset({"range", "len", "min", "max"})


@dataclass
class Interchange:
    """A region whose loop runs interchanged: ``prefix``, then ``loop`` over ``range(*args)``;
    ``cube_args`` of ``args`` (stop and step) are evaluated once per cube."""

    region: Region
    prefix: list[ast.stmt]
    loop: ast.For
    unit_args: list[ast.expr]
    cube_args: list[ast.expr]


def plan(kernel) -> dict[int, Interchange]:
    """Region index -> its ``Interchange``, for the regions of ``kernel`` (a ``CubeKernel``)
    that satisfy every rule of the module docstring."""
    if kernel.grid or kernel.has_exit or not enabled("stride_interchange"):
        return {}
    body = kernel.lowered.body
    counts = store_counts(body)
    static = {d.name for d in kernel.lowered.shared if not d.dynamic and not counts[d.name]}
    facts = _Facts(kernel, counts, static, _suspects(kernel, body))
    out = {}
    for region in kernel.regions:
        found = facts.legal(region)
        if found is not None:
            out[region.index] = found
    return out


class _Facts:
    """What every region's check needs, computed once per kernel."""

    def __init__(self, kernel, counts, static: set[str], suspects: set[str]):
        self.kernel = kernel
        self.purity = kernel.purity
        self.static = static
        #: static shared arrays whose atomics commute exactly (integer dtypes)
        self.targets = {d.name for d in kernel.lowered.shared
                        if d.name in static and _is_integer(d.dtype)}
        self.suspects = suspects
        self.reassigned_params = {p for p in kernel.lowered.params if counts[p]}

    def legal(self, region: Region) -> Interchange | None:
        k = self.kernel
        if region.ctx is not None or k.loads[region.index] or k.stores[region.index]:
            return None
        code = region.code
        if not code or not isinstance(code[-1], ast.For):
            return None
        loop, prefix = code[-1], code[:-1]
        mentioned = {n.id for s in code for n in ast.walk(s) if isinstance(n, ast.Name)}
        if mentioned & (set(k.shuffles) | k.local_replicated):
            return None
        if not (isinstance(loop.target, ast.Name) and not loop.orelse and _is_range(loop.iter)
                and not _BUILTINS & self.purity.local_names):
            return None
        assigned = set().union(*(stores(s) for s in code))
        # fixed while the region runs: the same value for every unit at every row
        invariant = ((set(UNIFORM_IDS) | k.uniform) - assigned) - self.reassigned_params
        args = loop.iter.args
        unit_args, cube_args = (args[:1], args[1:]) if len(args) > 1 else ([], args)
        if not all(self.purity.expr(e, invariant) for e in cube_args):
            return None
        known = invariant | set(HIDDEN_IDS) | {n for n in k.remat if n not in assigned
                                                and self._stable(n, assigned)}
        region_counts = store_counts(code)
        body_assigned = set().union(*(stores(s) for s in loop.body))
        for s in prefix:            # each prefix name: one pure assignment, recomputed per row
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Name)):
                return None
            name = s.targets[0].id
            if region_counts[name] != 1 or name in body_assigned \
                    or not self.purity.expr(s.value, known):
                return None
            known.add(name)
        if not all(self.purity.expr(e, known) for e in unit_args):
            return None
        target = loop.target.id
        if target in body_assigned or ({target} | body_assigned) & region.live_out:
            return None
        # loop-local: nothing the body assigns is read before the body assigns it
        if Liveness().stmts(loop.body, set()) & body_assigned:
            return None
        updated: set[str] = set()
        if not self._body(loop.body, updated) or not updated:
            return None
        return Interchange(region, prefix, loop, unit_args, cube_args)

    def _stable(self, name: str, assigned: set[str]) -> bool:
        """Does recomputing rematerialised ``name`` read only what the region leaves alone?"""
        seen, todo = set(), [name]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            reads = loads(self.kernel.remat[n])
            if reads & (assigned | self.reassigned_params):
                return False
            todo += [r for r in reads if r in self.kernel.remat]
        return True

    def _body(self, stmts: list[ast.stmt], updated: set[str]) -> bool:
        """Are ``stmts`` legal loop-body statements? Collects the updated arrays in ``updated``;
        reads are checked against them afterwards (``_reads``)."""
        reads: list[ast.expr] = []
        if not self._statements(stmts, updated, reads):
            return False
        return all(self._reads(e, updated) for e in reads)

    def _statements(self, stmts, updated: set[str], reads: list[ast.expr]) -> bool:
        for s in stmts:
            if isinstance(s, ast.Pass):
                continue
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
                call = s.value
                if not (isinstance(call.func, ast.Name) and call.func.id in COMMUTING
                        and len(call.args) == 3 and not call.keywords
                        and isinstance(call.args[0], ast.Name)
                        and call.args[0].id in self.targets):
                    return False
                updated.add(call.args[0].id)
                reads += call.args[1:]
            elif isinstance(s, ast.Assign):
                if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
                    return False
                reads.append(s.value)
            elif isinstance(s, ast.AugAssign):
                if not isinstance(s.target, ast.Name):
                    return False
                reads.append(s.value)
            elif isinstance(s, ast.If):
                reads.append(s.test)
                if not (self._statements(s.body, updated, reads)
                        and self._statements(s.orelse, updated, reads)):
                    return False
            else:
                return False
        return True

    def _reads(self, e: ast.expr, updated: set[str]) -> bool:
        """Is ``e`` side-effect free, reading memory only where the region writes none?"""
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.Name):
            return e.id not in self.suspects
        if isinstance(e, ast.Attribute):
            if not isinstance(e.value, ast.Name):
                return False
            # metadata of any array, or a module's attribute (``__np.int32``)
            return e.attr in SHAPE_ATTRS or e.value.id not in self.purity.local_names
        if isinstance(e, ast.Subscript):
            base = e.value
            if not isinstance(base, ast.Name):
                return False
            readable = base.id not in self.suspects or (base.id in self.static
                                                         and base.id not in updated)
            return readable and self._reads(e.slice, updated)
        if isinstance(e, ast.Call):
            # the callee's purity alone (its arguments are checked here, memory reads allowed)
            pure = self.purity.expr(ast.Call(e.func, [], []), set())
            return pure and not e.keywords and all(self._reads(a, updated) for a in e.args)
        if isinstance(e, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
                          ast.Tuple)):
            return all(self._reads(c, updated) for c in ast.iter_child_nodes(e)
                       if isinstance(c, ast.expr))
        return False


def _is_range(e: ast.expr) -> bool:
    return (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "range"
            and 1 <= len(e.args) <= 3 and not e.keywords
            and not any(isinstance(a, ast.Starred) for a in e.args))


def _is_integer(dtype: str) -> bool:
    try:
        return np.issubdtype(np.dtype(dtype), np.integer)
    except TypeError:           # a module-level name (float16, records: ``lower/dtypes.py``)
        return False


def _suspects(kernel, body: list[ast.stmt]) -> set[str]:
    """Names that may refer to shared or local memory: those arrays, and every name the kernel
    binds from an expression mentioning a suspect (assignment, loop target, ``with``), or passes
    with one to a call that could keep it (a method, a device function), to a fixpoint."""
    suspects = {d.name for d in kernel.lowered.shared + kernel.lowered.local}
    flows: list[tuple[set[str], set[str]]] = []        # (names bound, names read)
    for node in (n for s in body for n in ast.walk(s)):
        if isinstance(node, ast.Assign):
            flows.append((_names(*node.targets), _names(node.value)))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            flows.append((_names(node.target), _names(node.value)))
        elif isinstance(node, (ast.For, ast.comprehension)):
            flows.append((_names(node.target), _names(node.iter)))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            flows.append((_names(node.optional_vars), _names(node.context_expr)))
        elif isinstance(node, ast.Call) and not _keeps_nothing(kernel.purity, node.func):
            mentioned = _names(node)
            flows.append((mentioned, mentioned))
    changed = True
    while changed:
        changed = False
        for bound, read in flows:
            if read & suspects and not bound <= suspects:
                suspects |= bound
                changed = True
    return suspects


def _keeps_nothing(purity, func: ast.expr) -> bool:
    """Does calling ``func`` certainly keep no reference to its arguments?"""
    if isinstance(func, ast.Name) and func.id.startswith(_ATOMIC_PREFIXES):
        return True
    return purity.expr(ast.Call(func, [], []), set())


def _names(*nodes: ast.AST) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}
