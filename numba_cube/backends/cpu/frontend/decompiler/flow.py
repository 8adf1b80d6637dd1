"""Structured control flow from Numba's untyped IR: basic blocks -> ``if``/``for``/``while``.

The blocks of a function CPython compiled from structured source (``frontend/decompiler/function.py`` rebuilds
kernels without source) form a reducible graph, which is re-nested here:

- a **branch** becomes ``if c: <then> else: <else>``, both arms running up to the block's
  immediate post-dominator (the join), after which emission continues; when the join lies
  outside the enclosing loop or region, the arms end with their own ``break``/``continue``/
  ``return``;
- a loop whose header is ``iternext`` over a ``getiter`` becomes ``for <target> in <iterable>:``;
  any other loop becomes ``while True:`` with ``continue``/``break`` (a ``while c:`` loop arrives
  rotated, so it reads ``if c: while True: ...; if not c: break``);
- a jump to the enclosing loop's header is ``continue``, to its exit ``break``.

Blocks reached along one path only are emitted where they are reached; a block several paths
reach without a join (an early ``return`` copy, say) may be emitted more than once, which does
not change what runs. What cannot be nested this way (a ``break`` out of an outer loop, a loop
with several exits that continue, an irreducible graph) raises ``CompileError``.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from numba.core import ir
from numba.core.analysis import compute_cfg_from_blocks

from numba_cube.backends.cpu.frontend.decompiler.block import BlockRenderer

#: emitted blocks per IR block before the emission is deemed to explode (duplicated joins)
_DUPLICATION_LIMIT = 8


@dataclass
class _Loop:
    header: int
    exit: int | None          # None: the loop is left only by return/raise
    body: set[int]


class Structurer:
    """Re-nests the blocks of one function; ``emit()`` gives the body statements."""

    def __init__(self, renderer: BlockRenderer):
        self.r = renderer
        self.blocks = renderer.blocks
        self.cfg = compute_cfg_from_blocks(self.blocks)
        self.pdoms = self.cfg.post_dominators()
        self.loops = self.cfg.loops()
        self._budget = _DUPLICATION_LIMIT * len(self.blocks) + 64
        self._stack: list[_Loop] = []

    def emit(self) -> list[ast.stmt]:
        return self._region(self.cfg.entry_point(), None)

    # ---- helpers ---------------------------------------------------------------------------

    def _loc(self, label: int):
        return self.blocks[label].loc

    def _ipdom(self, label: int) -> int | None:
        """The nearest block that every path from ``label`` to a return passes through."""
        strict = self.pdoms[label] - {label}
        for cand in strict:
            if all(other == cand or other in self.pdoms[cand] for other in strict):
                return cand
        return None

    def _reach(self, label: int, avoid: set[int]) -> set[int]:
        """Blocks reachable from ``label`` without entering ``avoid``."""
        seen, todo = set(), [label]
        while todo:
            n = todo.pop()
            if n in seen or n in avoid:
                continue
            seen.add(n)
            todo.extend(s for s, _ in self.cfg.successors(n))
        return seen

    def _join(self, label: int, stop: int | None) -> int | None:
        """Where the arms of the branch ending ``label`` meet again inside the current region
        and loop; None when they do not (each arm then leaves by itself)."""
        join = self._ipdom(label)
        if join is None:
            return None
        loop = self._stack[-1] if self._stack else None
        if loop is not None and join not in loop.body:
            return None                      # the arms leave the loop themselves
        if stop is not None and join != stop and join in self.pdoms[stop]:
            return stop                      # the join is beyond this region's end
        return join

    # ---- regions ---------------------------------------------------------------------------

    def _region(self, label: int | None, stop: int | None, entering: bool = False):
        out: list[ast.stmt] = []
        while label is not None:
            self._budget -= 1
            if self._budget < 0:
                raise self.r.refuse("control flow too tangled to re-nest", self._loc(label))
            if label == stop and not entering:
                return out
            loop = self._stack[-1] if self._stack else None
            if not entering and loop is not None and label == loop.header:
                out.append(ast.Continue())
                return out
            if loop is not None and label == loop.exit:
                out.append(ast.Break())
                return out
            if not entering and any(label in (o.header, o.exit) for o in self._stack[:-1]):
                raise self.r.refuse("a break or continue of an outer loop", self._loc(label))
            if label in self.loops and not entering:
                label = self._loop(label, out)
                continue
            entering = False
            stmts, term = self.r.render(label)
            out.extend(stmts)
            if isinstance(term, ir.Jump):
                label = term.target
            elif isinstance(term, ir.Return):
                value = self.r.terminator_expr(term.value)
                if isinstance(value, ast.Constant) and value.value is None:
                    value = None
                out.append(_at(ast.Return(value), term.loc))
                return out
            elif isinstance(term, ir.Raise):
                if term.exception is None:
                    raise self.r.refuse("a bare 'raise' (re-raise)", term.loc)
                out.append(_at(ast.Raise(self.r.terminator_expr(term.exception), None),
                               term.loc))
                return out
            elif isinstance(term, ir.Branch):
                cond = self._condition(term.cond)
                join = self._join(label, stop)
                # without a join the arms still end where this region ends
                then = self._region(term.truebr, stop if join is None else join)
                orelse = self._region(term.falsebr, stop if join is None else join)
                out.append(_at(ast.If(cond, then or [ast.Pass()], orelse), term.loc))
                if join is None:
                    return out
                label = join
            else:
                raise self.r.refuse(f"the IR terminator {type(term).__name__}", term.loc)
        return out

    def _condition(self, var: ir.Var) -> ast.expr:
        """The branch test, without the ``bool(...)`` Numba wraps around it (``if`` itself
        takes the truth value)."""
        cond = self.r.terminator_expr(var)
        if (isinstance(cond, ast.Call) and isinstance(cond.func, ast.Name)
                and cond.func.id == "bool" and len(cond.args) == 1 and not cond.keywords
                and not isinstance(cond.args[0], ast.Starred)):
            return cond.args[0]
        return cond

    # ---- loops -----------------------------------------------------------------------------

    def _loop(self, header: int, out: list[ast.stmt]) -> int | None:
        """Emit the loop at ``header`` into ``out``; the label emission continues at."""
        info = self.loops[header]
        body = set(info.body)
        if self._stack and not body <= self._stack[-1].body:
            raise self.r.refuse("loops that overlap without nesting", self._loc(header))
        shape = self._for_shape(header)
        natural_exit = shape[4] if shape else None
        exit_ = self._pick_exit(header, body, set(info.exits), natural_exit)
        loop = _Loop(header, exit_, body)
        self._stack.append(loop)
        try:
            if shape is not None:
                iterable, target, skip_first, body_label, _ = shape
                if skip_first is not None:
                    self.r.skip.add(id(skip_first))
                stmts = self._region(body_label, header)
                # a copy: a loop emitted twice must not share nodes, which lowering rewrites
                node = ast.For(target, copy.deepcopy(iterable), stmts or [ast.Pass()], [])
            else:
                stmts = self._region(header, None, entering=True)
                if stmts and isinstance(stmts[-1], ast.Continue):
                    stmts.pop()
                node = ast.While(ast.Constant(True), stmts or [ast.Pass()], [])
        finally:
            self._stack.pop()
        out.append(_at(node, self.blocks[header].loc))
        return exit_

    def _pick_exit(self, header, body, exits, natural) -> int | None:
        """The one exit the loop continues at. Every other exit must either only return or
        raise, or lead to the chosen one (a ``break`` block): emitted where it is taken, it
        then ends in ``break``."""
        continuing = []
        for e in sorted(exits):
            reach = self._reach(e, body)
            rest = set()
            for other in exits - {e}:
                rest |= self._reach(other, body)
            if e == natural or reach & rest or any(self._reenters(n, body) for n in reach):
                continuing.append(e)
        if natural is None and not continuing:
            # left only by return/raise (each emitted where it is taken), or by one exit
            return next(iter(exits)) if len(exits) == 1 else None
        if natural is None:
            natural = next((c for c in continuing
                            if all(c in self.pdoms[o] for o in continuing)), None)
        if natural is None or any(natural not in self.pdoms[c] for c in continuing):
            raise self.r.refuse("a loop with several exits that continue (a 'for ... else' "
                                "with 'break'?)", self._loc(header))
        return natural

    def _reenters(self, label: int, body: set[int]) -> bool:
        """Does block ``label`` (outside the loop) jump back into the loop's ``body``?"""
        return any(s in body for s, _ in self.cfg.successors(label))

    def _for_shape(self, header: int):
        """``(iterable, target, skipped stmt, body label, exit label)`` for a for-loop header."""
        stmts = self.blocks[header].body
        if len(stmts) < 4 or not isinstance(stmts[-1], ir.Branch):
            return None
        first, pfirst, psecond = stmts[:3]
        phis, term = stmts[3:-1], stmts[-1]
        if not (_is_op(first, "iternext") and _is_op(pfirst, "pair_first", first.target)
                and _is_op(psecond, "pair_second", first.target)
                and term.cond.name == psecond.target.name):
            return None
        iterable = self.r.iterables.get(first.value.value.name)
        if iterable is None:
            raise self.r.refuse("a loop over an iterator made outside the loop's own "
                                "'for' statement", first.loc)
        if not all(isinstance(p, ir.Assign) and isinstance(p.value, ir.Var)
                   and p.value.name == pfirst.target.name for p in phis) or len(phis) > 1:
            return None
        uses = self.r.use_sites
        if (len(uses.get(first.target.name, [])) != 2
                or len(uses.get(psecond.target.name, [])) != 1
                or (phis and len(uses.get(pfirst.target.name, [])) != 1)):
            return None                      # the iterator's parts are used elsewhere
        loop_var = phis[0].target if phis else pfirst.target
        body_label = term.truebr
        skip = None
        entry = self.blocks[body_label].body
        sites = self.r.use_sites.get(loop_var.name, [])
        if (entry and isinstance(entry[0], ir.Assign) and isinstance(entry[0].value, ir.Var)
                and entry[0].value.name == loop_var.name and sites == [(body_label, 0)]
                and entry[0].target.name.isidentifier()):
            skip = entry[0]          # ``for j in ...``, not ``for _t in ...: j = _t``
            target = entry[0].target.name
        else:
            target = self.r.name(loop_var.name)
        self.r.locals_used.add(target)
        for s in (first, pfirst, psecond, *phis):
            self.r.skip.add(id(s))
        return (iterable, _at(ast.Name(target, ast.Store()), first.loc), skip, body_label,
                term.falsebr)


def _is_op(stmt, op: str, of: ir.Var | None = None) -> bool:
    return (isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Expr)
            and stmt.value.op == op
            and (of is None or stmt.value.value.name == of.name))


def _at(node, loc):
    line = getattr(loc, "line", None) or 1
    for n in ast.walk(node):
        if isinstance(n, (ast.stmt, ast.expr)) and not hasattr(n, "lineno"):
            n.lineno = n.end_lineno = line
            n.col_offset = n.end_col_offset = 0
    return node
