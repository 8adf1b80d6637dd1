"""Dataflow facts about lowered function bodies: uniformity, liveness, purity.

These answer the three questions loop fission needs:

**Is a value cube-uniform?** A name is uniform when every assignment to it sits at *cube level*
(directly in the kernel body or in the body of cube-level control flow, never under a
unit-dependent condition) and assigns an expression built from constants, kernel parameters, block
ids/dims, array shapes/sizes, other uniform names and pure calls -- and no memory reads
(subscripts), except of ``.shape``/``.strides``. Uniform values are computed once per cube; they are
the only ones a barrier's enclosing ``if``/``while``/``for`` may test. This is stricter than CUDA
(which only needs all threads to arrive) and the same rule KernelAbstractions and PoCL use.
Shared and local arrays reach the rule through names that are not uniform (one is declared outside
the lowered body, the other per unit), so their constant shapes are folded in first where that
makes cube-level code uniform (``passes/const_shapes.py``: ``range(round(math.log2(sm.size)))``).

With split points under conditions the rule cannot prove uniform (``analyze/plan.py``'s run-time masks),
``uniform_with_masks`` iterates the rule to a fixpoint, leaving the masked bodies out.

**Which per-unit values live across a region boundary?** A classic backward liveness over the
structured AST (loops iterated to a fixpoint; ``break``/``continue`` jump to the loop's exit/head;
``return`` ends the unit). Only values live across a boundary are saved per unit.

**Which per-unit values can be recomputed instead of saved?** A name with a single assignment whose
right-hand side is a pure function of invariant names (hidden ids, parameters never reassigned,
single-assignment uniform names, other such names) is *rematerialised* at the start of a region
instead of being stored in a ``[units]`` array (``tid = cuda.threadIdx.x``, ``i = cuda.grid(1)``).
"""

from __future__ import annotations

import ast
import builtins
import types as pytypes
from collections import Counter

import numpy as np

from numba_cube.backends.cpu.lower.hidden import DOUBLING_END, HIDDEN_IDS, NONNEG, contains_barrier
from numba_cube.backends.cpu.lower.warps import is_operand

#: builtins without side effects that uniform/rematerialised expressions may call
PURE_BUILTINS = frozenset({"min", "max", "abs", "int", "float", "bool", "len", "round", "divmod",
                           "pow", "complex", "range"})
#: attributes of an array that do not read its memory
SHAPE_ATTRS = frozenset({"shape", "strides", "size", "ndim", "dtype", "itemsize", "nbytes"})


def loads(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def stores(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}


def store_counts(stmts) -> Counter:
    """How many syntactic assignments each name has in ``stmts`` (nested bodies included)."""
    c = Counter()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                c[n.id] += 1
    return c


def crossing_flow(stmt: ast.stmt) -> bool:
    """Does ``stmt`` contain a break/continue that leaves it (not bound by a loop inside it)?"""
    def walk(node, in_loop):
        if isinstance(node, (ast.Break, ast.Continue)):
            return not in_loop
        if isinstance(node, (ast.For, ast.While)):
            return (any(walk(c, True) for c in node.body)
                    or any(walk(c, in_loop) for c in node.orelse))
        return any(walk(c, in_loop) for c in ast.iter_child_nodes(node)
                   if isinstance(c, ast.stmt))
    return walk(stmt, False)


# ---- purity -------------------------------------------------------------------------------


class Purity:
    """Decides whether an expression is a side-effect-free function of a given set of names.

    ``module_objects`` maps module-level names of the generated module (imports, ``__np``) to the
    objects they denote, so ``math.sqrt(x)`` and ``__np.float32(x)`` can be recognised as pure.
    """

    def __init__(self, local_names: set[str], module_objects: dict[str, object]):
        self.local_names = set(local_names) | set(HIDDEN_IDS)
        self.module_objects = module_objects

    def declare(self, names) -> None:
        """Names that generated code binds as local variables (``analyze/plan.py``'s loop bounds)."""
        self.local_names |= set(names)

    def _pure_callee(self, func: ast.expr) -> bool:
        if isinstance(func, ast.Name):
            if func.id in (NONNEG, DOUBLING_END) or (func.id in PURE_BUILTINS and func.id not in self.local_names):
                return True
            obj = self.module_objects.get(func.id)
            return obj is not None and _pure_object(obj)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            mod = self.module_objects.get(func.value.id)
            if func.value.id == "__np":
                mod = np
            if isinstance(mod, pytypes.ModuleType) and func.value.id not in self.local_names:
                return _pure_object(getattr(mod, func.attr, None))
        return False

    def expr(self, e: ast.expr, names: set[str]) -> bool:
        """True if ``e`` reads no memory, has no side effects, and only reads ``names``
        (plus module-level names)."""
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.Name):
            return e.id in names or e.id not in self.local_names
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id not in self.local_names:
                return True                                  # module attribute
            return e.attr in SHAPE_ATTRS and self.expr(e.value, names)
        if isinstance(e, ast.Subscript):
            # only x.shape[k] / x.strides[k]: a tuple, not memory
            return (isinstance(e.value, ast.Attribute) and e.value.attr in ("shape", "strides")
                    and self.expr(e.value, names) and self.expr(e.slice, names))
        if isinstance(e, ast.Call):
            return (self._pure_callee(e.func) and not e.keywords
                    and all(self.expr(a, names) for a in e.args))
        if isinstance(e, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
                          ast.Tuple)):
            return all(self.expr(c, names) for c in ast.iter_child_nodes(e)
                       if isinstance(c, ast.expr))
        return False


def _pure_object(obj) -> bool:
    if obj is None:
        return False
    if isinstance(obj, np.ufunc):
        return True
    if isinstance(obj, type) and issubclass(obj, np.generic):
        return True                                           # scalar casts, np.float32(x)
    mod = getattr(obj, "__module__", None)
    if mod in ("math", "cmath"):
        return callable(obj)
    name = getattr(obj, "__name__", None)
    return name in PURE_BUILTINS and getattr(builtins, name, None) is obj


# ---- uniformity ---------------------------------------------------------------------------


def assignment_sources(stmt: ast.stmt):
    """``[(name, expr)]`` for a simple assignment of plain names; None for anything else.

    ``expr`` is what determines the name's value: the matching tuple element for ``a, b = x, y``,
    ``t[k]`` for ``a, b = t``, ``BinOp(name, value)`` for ``name += value``.
    """
    if isinstance(stmt, ast.Assign):
        out = []
        for t in stmt.targets:
            if isinstance(t, ast.Name):
                out.append((t.id, stmt.value))
            elif isinstance(t, ast.Tuple) and all(isinstance(e, ast.Name) for e in t.elts):
                if isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) == len(t.elts):
                    out += [(e.id, v) for e, v in zip(t.elts, stmt.value.elts)]
                else:               # n, m = a.shape  ->  n is a.shape[0], m is a.shape[1]
                    out += [(e.id, ast.Subscript(stmt.value, ast.Constant(k), ast.Load()))
                            for k, e in enumerate(t.elts)]
            else:
                return None
        return out
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return [(stmt.target.id, ast.BinOp(ast.Name(stmt.target.id, ast.Load()), stmt.op,
                                           stmt.value))]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
        return [(stmt.target.id, stmt.value)]
    return None


def uniform_names(cube_level_lists, all_stmts, seed: set[str], purity: Purity,
                  is_cube_control) -> set[str]:
    """The uniform names (``seed`` included) of a kernel; see the module docstring.

    ``cube_level_lists`` are the statement lists at cube level (the body and the bodies of cube-level
    control statements); ``is_cube_control(stmt)`` tells which compound statements are cube level
    (their ``for`` targets are candidates too).
    """
    sources: dict[str, list[ast.expr]] = {}
    for lst in cube_level_lists:
        for s in lst:
            if isinstance(s, ast.For) and is_cube_control(s):
                if isinstance(s.target, ast.Name):
                    sources.setdefault(s.target.id, []).append(s.iter)
                continue
            for name, e in assignment_sources(s) or ():
                sources.setdefault(name, []).append(e)
    counts = store_counts(all_stmts)
    uniform = set(seed) | {n for n, es in sources.items() if len(es) == counts[n]}
    changed = True
    while changed:
        changed = False
        for name in sorted(uniform - set(seed)):
            if not all(purity.expr(e, uniform) for e in sources[name]):
                uniform.discard(name)
                changed = True
    return uniform


# ---- uniformity with run-time masks ------------------------------------------------------
# (``analyze/plan.py``: an if/while around a split point whose test is not provably uniform gets a
# run-time mask; the names its body assigns are then per-unit)


def is_cube_control(stmt: ast.stmt) -> bool:
    """Must this compound statement run at cube level (split point inside, or a break/continue
    that leaves it)?"""
    if isinstance(stmt, (ast.If, ast.While, ast.For)):
        return contains_barrier(stmt) or (isinstance(stmt, ast.If) and crossing_flow(stmt))
    return False


def cube_level_lists(body: list[ast.stmt], masked: frozenset = frozenset()) -> list[list[ast.stmt]]:
    """The statement lists that execute at cube level (see ``uniform_names``), leaving out the
    bodies of the statements in ``masked`` (ids of masked ``if``/``while`` statements)."""
    out = [body]
    for s in body:
        if is_cube_control(s) and id(s) not in masked:
            out += cube_level_lists(s.body, masked) + cube_level_lists(s.orelse, masked)
    return out


def _masked_lists(body, masked, inside=False) -> list[list[ast.stmt]]:
    """The cube-level statement lists inside the bodies of masked statements."""
    out = [body] if inside else []
    for s in body:
        if is_cube_control(s):
            deeper = inside or id(s) in masked
            out += _masked_lists(s.body, masked, deeper) + _masked_lists(s.orelse, masked, deeper)
    return out


def uniform_with_masks(body, seed: set[str], purity: Purity) -> tuple[set[str], frozenset]:
    """``(uniform names, ids of the if/while statements that need a run-time mask)``.

    A loop variable of a ``for`` over a uniform iterable inside a masked body is uniform too when
    it is assigned nowhere else (``for off in (16, 8, 4, 2, 1):`` under ``if warp == 0:``): every
    unit of the mask runs the same iterations, and no other unit reads it. So is a warp operand
    (``__xm3 = 0xFFFFFFFF``) computed from uniform names: only its exchange reads it.
    """
    counts = store_counts(body)
    masked: frozenset = frozenset()
    loop_vars: set[str] = set()
    for _ in range(32):                 # each round only adds masks or loop variables
        lists = cube_level_lists(body, masked)
        uniform = uniform_names(lists, body, seed | loop_vars, purity, is_cube_control)
        new_masked = set(masked)
        for lst in lists + _masked_lists(body, masked):
            for s in lst:
                if (isinstance(s, (ast.If, ast.While)) and is_cube_control(s)
                        and not purity.expr(s.test, uniform)):
                    new_masked.add(id(s))
        inner = _masked_lists(body, frozenset(new_masked))
        new_vars = _loop_variables(body, lists + inner, counts, uniform, purity) | {
            s.targets[0].id for lst in inner for s in lst
            if isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name) and is_operand(s.targets[0].id)
            and counts[s.targets[0].id] == 1 and purity.expr(s.value, uniform)}
        if new_masked == set(masked) and new_vars <= loop_vars:
            return uniform, masked
        masked, loop_vars = frozenset(new_masked), loop_vars | new_vars
    return uniform, masked                                    # pragma: no cover


def _loop_variables(body, lists, counts, uniform, purity) -> set[str]:
    """Names assigned only as the targets of cube-level ``for`` loops over uniform iterables, and
    read only inside those loops: uniform wherever they are read, even under a run-time mask."""
    loops: dict[str, list[ast.For]] = {}
    for lst in lists:
        for s in lst:
            if isinstance(s, ast.For) and is_cube_control(s) and isinstance(s.target, ast.Name):
                loops.setdefault(s.target.id, []).append(s)
    out = set()
    for name, fors in loops.items():
        if len(fors) != counts[name] or not all(purity.expr(f.iter, uniform) for f in fors):
            continue
        inside = {id(n) for f in fors for st in f.body for n in ast.walk(st)}
        if all(id(n) in inside for n in (m for st in body for m in ast.walk(st))
               if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
            out.add(name)
    return out



# ---- rematerialisation --------------------------------------------------------------------


def remat_definitions(all_stmts, invariant_seed: set[str], purity: Purity) -> dict[str, ast.expr]:
    """Names whose only assignment is a pure function of invariant names: name -> expression."""
    counts = store_counts(all_stmts)
    defs: dict[str, ast.expr] = {}
    for s in (n for st in all_stmts for n in ast.walk(st)):
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            for name, e in assignment_sources(s) or ():
                if counts[name] == 1:
                    defs[name] = e
    invariant = set(invariant_seed) | set(defs)
    changed = True
    while changed:
        changed = False
        for name in sorted(set(defs) & invariant):
            if not purity.expr(defs[name], invariant):
                invariant.discard(name)
                changed = True
    return {n: e for n, e in defs.items() if n in invariant}


# ---- liveness -----------------------------------------------------------------------------


class Liveness:
    """Backward liveness over structured statements.

    ``stmts(body, out)`` returns the names live before ``body`` given those live after it.
    Subclasses (see ``analyze/plan.py``) extend ``item`` to cube-level plan nodes.
    """

    def stmts(self, body, out: set[str], brk=None, cont=None) -> set[str]:
        live = set(out)
        for s in reversed(body):
            live = self.item(s, live, brk, cont)
        return live

    def item(self, s, out, brk, cont) -> set[str]:
        if isinstance(s, ast.If):
            return loads(s.test) | self.stmts(s.body, out, brk, cont) | self.stmts(
                s.orelse, out, brk, cont)
        if isinstance(s, ast.While):
            return self.loop(lambda head: loads(s.test) | self.stmts(s.body, head, out, head)
                             | self.stmts(s.orelse, out, brk, cont))
        if isinstance(s, ast.For):
            targets = stores(s.target)
            head = self.loop(lambda head: self.stmts(s.orelse, out, brk, cont) | (
                self.stmts(s.body, head, out, head) - targets) | (loads(s.target)))
            return loads(s.iter) | head
        if isinstance(s, ast.Break):
            return set(brk or ())
        if isinstance(s, ast.Continue):
            return set(cont or ())
        if isinstance(s, (ast.Return, ast.Raise)):
            return loads(s)
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            kills = set().union(*(stores(t) for t in targets))
            used = loads(s.value) | set().union(*(loads(t) for t in targets))
            if isinstance(s, ast.AugAssign):
                used |= kills                      # x += v reads x
                kills = set()
            return (out - kills) | used
        return out | loads(s)

    @staticmethod
    def loop(step) -> set[str]:
        """Iterate ``head = step(head)`` from the empty set to its (least) fixpoint."""
        head: set[str] = set()
        while True:
            new = step(head)
            if new <= head:
                return head
            head |= new
