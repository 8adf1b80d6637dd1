"""Lowerer mixin: what inlining (``lower/inline/inliner.py``) needs from the traversal.

An inlined device function's statements are *hoisted*: they run before the statement that
calls it, whose call becomes the result variable. That is exact only where the call would have
run exactly once, at that point of the statement. ``InlineHooks`` gives each statement a
``Hoisted`` frame and tracks expressions evaluated lazily or repeatedly (the right operands of
``and``/``or``, the branches of ``x if c else y``, later operands of a chained comparison, a
``while`` condition, comprehensions), where ``check_hoistable`` refuses an inlined call.
"""

from __future__ import annotations

import ast
from contextlib import contextmanager

#: prefixes of the atomics' helper names in generated code (cudacalls._atomic)
_ATOMIC_HELPERS = ("__atomic_", "__plain_")
#: in the names of translated device functions (codegen: ``<name>__dev``, ``<name>__dev2``)
_DEVICE_ALIAS = "__dev"

#: expressions whose parts run repeatedly (comprehensions); and/or, ``x if c else y`` and chained
#: comparisons have visitors of their own
LAZY = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class Hoisted:
    """The inlined bodies hoisted out of one statement, in evaluation order."""

    def __init__(self, statement: ast.stmt | None = None):
        self.stmts: list[ast.stmt] = []
        self.first: tuple[int, int] | None = None     # where the first inlined call is
        self.writes = False                           # do the hoisted bodies write memory?
        #: the call whose value the statement discards (the statement ``f(...)``)
        self.discarded = statement.value if isinstance(statement, ast.Expr) else None

    def add(self, stmts: list[ast.stmt], call: ast.Call) -> None:
        if self.first is None:
            self.first = (call.lineno, call.col_offset)
        self.stmts += stmts
        self.writes = self.writes or any(_writes_memory(n) for s in stmts for n in ast.walk(s))

    def before(self, new, lowerer) -> list[ast.stmt] | ast.stmt | None:
        """The statement(s) ``new`` preceded by the hoisted bodies. A device-function or atomic
        call that stays in the statement and came first in the source would now run after the
        inlined body: refused rather than reordered."""
        if not self.stmts:
            return new
        tail = new if isinstance(new, list) else [] if new is None else [new]
        tail = [s for s in tail if not (isinstance(s, ast.Expr) and isinstance(
            s.value, ast.Constant) and s.value.value is None)]   # what `f(...)` left
        device = {id(n) for n, _ in lowerer.out.device_calls}
        for n in (n for s in tail for n in ast.walk(s)):
            earlier = (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)) < self.first
            if isinstance(n, ast.Call) and earlier and (id(n) in device or (
                    isinstance(n.func, ast.Name) and n.func.id.startswith(_ATOMIC_HELPERS))):
                raise lowerer.fn.error(
                    "a call of a device function that the CPU backend inlines comes after "
                    "another device-function or atomic call in the same expression; inlining "
                    "would change their order: compute them in separate statements",
                    "inlined call after another call in one statement", n)
            # an array element read before the call would be read after the inlined body,
            # which writes memory: it could see the body's writes
            read_first = (isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load)
                          and earlier) or (isinstance(n, ast.AugAssign)
                                           and not isinstance(n.target, ast.Name))
            if read_first and self.writes:
                raise lowerer.fn.error(
                    "an array element is read before a call of a device function that the CPU "
                    "backend inlines and that writes memory; inlining would read it after the "
                    "call: assign the call's result to a variable in a statement of its own",
                    "array read before an inlined call in one statement", n)
        return self.stmts + tail


def _writes_memory(node: ast.AST) -> bool:
    """Does ``node`` (lowered code) store into an array, or call something that may?"""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and (node.func.id.startswith(_ATOMIC_HELPERS) or _DEVICE_ALIAS in node.func.id))


class InlineHooks:
    """Mixin of ``lowering.Lowerer`` (needs ``visit``, ``_err``, ``_hoisted`` and ``_lazy``)."""

    @contextmanager
    def lazily(self):
        """Mark expressions that run conditionally or repeatedly: no inlined call there."""
        self._lazy += 1
        try:
            yield
        finally:
            self._lazy -= 1

    def hoist(self, stmts: list[ast.stmt], call: ast.Call) -> None:
        self._hoisted.add(stmts, call)

    def result_discarded(self, call: ast.Call) -> bool:
        """Is ``call`` a statement of its own (its value unused)?"""
        return self._hoisted is not None and self._hoisted.discarded is call

    def check_hoistable(self, call: ast.Call, what: str) -> None:
        if self._lazy or self._hoisted is None:
            raise self._err(f"a call of {what} is evaluated conditionally or repeatedly here "
                            "(after and/or, in a branch of 'x if c else y', a chained "
                            "comparison, a 'while' condition or a comprehension); assign its "
                            "result to a variable in a statement of its own",
                            "inlined device function call in a lazily evaluated expression",
                            call)

    def visit_BoolOp(self, node):
        node.values[0] = self.visit(node.values[0])
        with self.lazily():
            node.values[1:] = [self.visit(v) for v in node.values[1:]]
        return node

    def visit_IfExp(self, node):
        node.test = self.visit(node.test)
        with self.lazily():
            node.body, node.orelse = self.visit(node.body), self.visit(node.orelse)
        return node

    def visit_Compare(self, node):
        node.left = self.visit(node.left)
        node.comparators[0] = self.visit(node.comparators[0])
        with self.lazily():            # a < b < c evaluates c only when a < b
            node.comparators[1:] = [self.visit(c) for c in node.comparators[1:]]
        return node

    def visit_While(self, node):
        with self.lazily():
            node.test = self.visit(node.test)
        node.body = self._visit_block(node.body)
        node.orelse = self._visit_block(node.orelse)
        return node

    def _visit_block(self, stmts):
        out = []
        for s in stmts:
            new = self.visit(s)
            out.extend(new if isinstance(new, list) else [] if new is None else [new])
        return out
