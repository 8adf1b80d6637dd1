"""Python statements for one basic block of Numba's untyped IR (kernels without source).

``frontend/decompiler/function.py`` rebuilds a Python ``def`` from the bytecode of a kernel that has no source (made
by ``exec``, typed into a REPL). Numba's bytecode frontend gives its untyped IR: basic blocks of
``target = expression`` over single-use temporaries (``$16load_attr.1``). This module turns one
block back into Python statements, ``frontend/decompiler/flow.py`` arranges the blocks into ``if``/``for``/
``while``.

Temporaries are folded back into the expressions they came from, so that the existing
translator sees ``cuda.threadIdx.x``, ``cuda.atomic.max(res, 0, v)`` and ``np.sin(a0, a1)`` as the
attribute chains and calls it understands:

- a temporary bound once to a global, a free variable, a constant or an attribute chain on one
  of those is *substituted at every use* (such values cannot change while the kernel runs);
- any other temporary defined once and used once, later in the same block, is *inlined* into
  its use when everything evaluated in between is inlined into the same statement (which is how
  CPython compiles one expression); otherwise it is kept as a variable, so evaluation order is
  exactly the bytecode's;
- the rest keep their own names (user variables) or get a fresh one.

Every statement carries the line of its bytecode (``loc``), so the translator's errors name the
user's line. Expressions Numba's IR has but a kernel cannot mean (``make_function``, ...) raise
``CompileError`` naming them.
"""

from __future__ import annotations

import ast
import operator

from numba.core import ir

from numba_cube.backends.cpu.frontend.decompiler.exprs import (
    BINOPS, COMPARE, INPLACE, REFUSED_EXPRS, UNARY, as_slices, builtin_or_global, constant_node,
)
from numba_cube.errors import CompileError


class BlockRenderer:
    """Renders blocks of one function's IR; shared state is the naming and iterator tables."""

    def __init__(self, py_func, func_ir, describe: str, taken_names: set[str]):
        self.py_func = py_func
        self.blocks = func_ir.blocks
        self.filename = func_ir.loc.filename
        self.describe = describe                  # "kernel 'fn'", for error messages
        self.defs: dict[str, list[ir.Assign]] = {}
        self.use_sites: dict[str, list[tuple[int, int]]] = {}
        for label, block in self.blocks.items():
            for k, stmt in enumerate(block.body):
                if isinstance(stmt, ir.Assign):
                    self.defs.setdefault(stmt.target.name, []).append(stmt)
                    used = [stmt.value] if isinstance(stmt.value, ir.Var) else \
                        stmt.value.list_vars() if isinstance(stmt.value, ir.Expr) else []
                else:
                    used = stmt.list_vars()
                for var in used:
                    self.use_sites.setdefault(var.name, []).append((label, k))
        self._names: dict[str, str] = {}
        self._taken = set(taken_names)
        self.iterables: dict[str, ast.expr] = {}  # iterator variable -> what it iterates
        self.skip: set[int] = set()               # ids of statements a loop header consumed
        self.locals_used: set[str] = set()        # every variable name the output assigns
        self.globals_used: set[str] = set()       # global and free names the output reads

    # ---- errors and names ------------------------------------------------------------------

    def refuse(self, construct: str, loc, advice: str = "") -> CompileError:
        advice = advice or "define it in a file, where the CPU translator can read its source"
        return CompileError(
            f"{self.describe} has no source (defined by exec or in a REPL) and uses {construct}, "
            f"which the CPU backend cannot rebuild from bytecode; {advice}",
            construct=f"{construct} without source",
            lineno=getattr(loc, "line", None), filename=self.filename)

    def name(self, var_name: str) -> str:
        """The Python identifier for an IR variable: its own name, or a fresh temporary."""
        if var_name.isidentifier():
            return var_name
        if var_name not in self._names:
            k = len(self._names)
            while f"_t{k}" in self._taken:
                k += 1
            self._names[var_name] = f"_t{k}"
            self._taken.add(f"_t{k}")
        return self._names[var_name]

    def single_def(self, var_name: str):
        defs = self.defs.get(var_name, [])
        return defs[0] if len(defs) == 1 else None

    def is_constant_like(self, var_name: str) -> bool:
        """Bound once to a global, free variable, constant or attribute chain on those."""
        if not var_name.startswith("$"):
            return False
        d = self.single_def(var_name)
        if d is None:
            return False
        v = d.value
        if isinstance(v, (ir.Global, ir.FreeVar, ir.Const)):
            return True
        return isinstance(v, ir.Expr) and v.op == "getattr" and self.is_constant_like(
            v.value.name)

    def inlinable(self, var_name: str, label: int, index: int) -> bool:
        """A temporary defined once (at ``index`` of ``label``) and used once, later there."""
        sites = self.use_sites.get(var_name, [])
        return (var_name.startswith("$") and len(self.defs.get(var_name, [])) == 1
                and len(sites) == 1 and sites[0][0] == label and sites[0][1] > index)

    # ---- one block -------------------------------------------------------------------------

    def render(self, label: int) -> tuple[list[ast.stmt], ir.Stmt]:
        """The statements of block ``label`` (terminator excluded) and its terminator; the
        terminator's condition/value is rendered by ``terminator_expr`` right after."""
        block = self.blocks[label]
        # inlinable temporaries not yet used, in definition order, with their locations
        self._pending: dict[str, tuple[ast.expr, object]] = {}
        self._out: list[ast.stmt] = []
        self._label = label
        for k, stmt in enumerate(block.body[:-1]):
            if id(stmt) not in self.skip:
                self._statement(k, stmt)
        return self._out, block.body[-1]

    def terminator_expr(self, var: ir.Var) -> ast.expr:
        """Render the branch condition / return value of the block just rendered."""
        uses = {var.name}
        self._flush_unused(uses)
        return self.expr(var)

    def _emit(self, stmt: ast.stmt, loc) -> None:
        line = getattr(loc, "line", None) or 1
        for node in ast.walk(stmt):
            if isinstance(node, (ast.stmt, ast.expr)):
                node.lineno = node.end_lineno = line
                node.col_offset = node.end_col_offset = 0
        self._out.append(stmt)

    def _flush_unused(self, used: set[str]) -> None:
        """Materialise pending temporaries the next statement does not use (and every one
        pending before them), so they are evaluated where the bytecode evaluates them."""
        names = list(self._pending)
        unused = [i for i, n in enumerate(names) if n not in used]
        if not unused:
            return
        for n in names[:unused[-1] + 1]:
            value, loc = self._pending.pop(n)
            self.locals_used.add(self.name(n))
            self._emit(ast.Assign([ast.Name(self.name(n), ast.Store())], value), loc)

    def _statement(self, index: int, stmt: ir.Stmt) -> None:
        if isinstance(stmt, ir.Assign) and (
                (isinstance(stmt.value, ir.Arg) and stmt.value.name == stmt.target.name)
                or self.is_constant_like(stmt.target.name)):
            return      # the parameter itself; a constant substituted at every use
        used = {v.name for v in (([stmt.value] if isinstance(stmt.value, ir.Var) else
                                  stmt.value.list_vars() if isinstance(stmt.value, ir.Expr)
                                  else []) if isinstance(stmt, ir.Assign)
                                 else stmt.list_vars())}
        self._flush_unused(used)
        loc = stmt.loc
        if isinstance(stmt, ir.Assign):
            self._assignment(index, stmt)
        elif isinstance(stmt, ir.SetItem):
            target = ast.Subscript(self.expr(stmt.target), self.index(stmt.index), ast.Store())
            self._emit(ast.Assign([target], self.expr(stmt.value)), loc)
        elif isinstance(stmt, ir.StaticSetItem):
            index = self.index(stmt.index_var) if stmt.index_var is not None else \
                self.constant(stmt.index, loc)
            target = ast.Subscript(self.expr(stmt.target), index, ast.Store())
            self._emit(ast.Assign([target], self.expr(stmt.value)), loc)
        elif isinstance(stmt, ir.SetAttr):
            target = ast.Attribute(self.expr(stmt.target), stmt.attr, ast.Store())
            self._emit(ast.Assign([target], self.expr(stmt.value)), loc)
        elif isinstance(stmt, ir.DelItem):
            target = ast.Subscript(self.expr(stmt.target), self.index(stmt.index), ast.Del())
            self._emit(ast.Delete([target]), loc)
        elif isinstance(stmt, ir.Print):
            self._emit(ast.Expr(ast.Call(ast.Name("print", ast.Load()),
                                         [self.expr(a) for a in stmt.args], [])), loc)
        elif isinstance(stmt, ir.Del):
            pass
        elif isinstance(stmt, (ir.EnterWith, ir.PopBlock)):
            raise self.refuse("a 'with' statement", loc)
        else:
            raise self.refuse(f"the IR statement {type(stmt).__name__}", loc)

    def _assignment(self, index: int, stmt: ir.Assign) -> None:
        target, value, loc = stmt.target.name, stmt.value, stmt.loc
        if isinstance(value, ir.Expr) and value.op == "getiter":
            self.iterables[target] = self.expr(value.value)
            return                                   # the for statement evaluates it
        if isinstance(value, ir.Var) and value.name in self.iterables:
            self.iterables[target] = self.iterables[value.name]
            return
        if isinstance(value, ir.Expr) and value.op == "inplace_binop":
            lhs = self._named(value.lhs)
            self._emit(ast.AugAssign(ast.Name(lhs, ast.Store()), INPLACE[value.fn](),
                                     self.expr(value.rhs)), loc)
            self.locals_used.add(lhs)
            rendered = ast.Name(lhs, ast.Load())
        elif isinstance(value, ir.Expr) and value.op == "exhaust_iter":
            # ``a, b = t``: Python's own unpacking (it raises on a length mismatch, as
            # numba-cuda does), then the tuple of the parts for the static_getitems after it
            parts = [self.name(f"{target}#{i}") for i in range(value.count)]
            self.locals_used.update(parts)
            self._emit(ast.Assign([ast.Tuple([ast.Name(p, ast.Store()) for p in parts],
                                             ast.Store())], self.expr(value.value)), loc)
            rendered = ast.Tuple([ast.Name(p, ast.Load()) for p in parts], ast.Load())
        else:
            rendered = self.expr(value)
        if self.inlinable(target, self._label, index):
            self._pending[target] = (rendered, loc)
            return
        if target.startswith("$") and not self.use_sites.get(target) \
                and len(self.defs[target]) == 1:
            self._emit(ast.Expr(rendered), loc)      # an expression statement
            return
        name = self.name(target)
        if isinstance(rendered, ast.Name) and rendered.id == name:
            return                                   # ``x = x`` (after an in-place operator)
        self.locals_used.add(name)
        self._emit(ast.Assign([ast.Name(name, ast.Store())], rendered), loc)

    def _named(self, var: ir.Var) -> str:
        """A variable name for ``var`` (materialising a pending temporary): the target of an
        in-place operator must be a name."""
        if var.name in self._pending:
            value, loc = self._pending.pop(var.name)
            self.locals_used.add(self.name(var.name))
            self._emit(ast.Assign([ast.Name(self.name(var.name), ast.Store())], value), loc)
        elif self.is_constant_like(var.name):
            raise self.refuse("an in-place operator on a global", var.loc)
        return self.name(var.name)

    # ---- expressions -----------------------------------------------------------------------

    def expr(self, value) -> ast.expr:
        if isinstance(value, ir.Var):
            name = value.name
            if name in self._pending:
                return self._pending.pop(name)[0]
            if name in self.iterables:
                raise self.refuse("an iterator used other than by a for loop", value.loc)
            if self.is_constant_like(name):
                return self.expr(self.single_def(name).value)
            return ast.Name(self.name(name), ast.Load())
        if isinstance(value, ir.Const):
            return self.constant(value.value, value.loc)
        if isinstance(value, ir.Global):
            if value.name in ("mark_try_block", "end_try_block", "exception_match"):
                raise self.refuse("a 'try' statement", value.loc,    # Numba's own markers
                                  "the CPU backend does not support 'try' in kernels")
            found, obj = builtin_or_global(self.py_func, value.name)
            if not found or obj is not value.value:
                raise self.refuse(f"the global {value.name!r}, which its module no longer "
                                  "binds to the object the bytecode read", value.loc)
            self.globals_used.add(value.name)
            return ast.Name(value.name, ast.Load())
        if isinstance(value, ir.FreeVar):
            self.globals_used.add(value.name)
            return ast.Name(value.name, ast.Load())
        if isinstance(value, ir.Arg):
            return ast.Name(value.name, ast.Load())
        if isinstance(value, ir.Expr):
            return self._expression(value)
        raise self.refuse(f"the IR value {type(value).__name__}", getattr(value, "loc", None))

    def _expression(self, e: ir.Expr) -> ast.expr:
        op = e.op
        if op == "binop":
            if e.fn is operator.contains:            # ``x in c`` is contains(c, x)
                return ast.Compare(self.expr(e.rhs), [ast.In()], [self.expr(e.lhs)])
            if e.fn in COMPARE:
                return ast.Compare(self.expr(e.lhs), [COMPARE[e.fn]()], [self.expr(e.rhs)])
            if e.fn in BINOPS:
                return ast.BinOp(self.expr(e.lhs), BINOPS[e.fn](), self.expr(e.rhs))
            raise self.refuse(f"the operator {getattr(e.fn, '__name__', e.fn)}", e.loc)
        if op == "unary":
            if e.fn not in UNARY:
                raise self.refuse(f"the unary operator {getattr(e.fn, '__name__', e.fn)}",
                                  e.loc)
            return ast.UnaryOp(UNARY[e.fn](), self.expr(e.value))
        if op == "call":
            if e.varkwarg is not None:
                raise self.refuse("a call with **kwargs", e.loc)
            func = self.expr(e.func)
            args = [self.expr(a) for a in e.args]
            if e.vararg is not None:
                args.append(ast.Starred(self.expr(e.vararg), ast.Load()))
            kws = [ast.keyword(k, self.expr(v)) for k, v in e.kws]
            return ast.Call(func, args, kws)
        if op == "getattr":
            return ast.Attribute(self.expr(e.value), e.attr, ast.Load())
        if op == "getitem":
            return ast.Subscript(self.expr(e.value), self.index(e.index), ast.Load())
        if op == "static_getitem":
            index = self.index(e.index_var) if e.index_var is not None else \
                self.constant(e.index, e.loc)
            return ast.Subscript(self.expr(e.value), index, ast.Load())
        if op == "build_tuple":
            return ast.Tuple([self.expr(v) for v in e.items], ast.Load())
        if op == "build_list":
            return ast.List([self.expr(v) for v in e.items], ast.Load())
        if op == "cast":
            return self.expr(e.value)
        if op in ("iternext", "pair_first", "pair_second", "exhaust_iter", "inplace_binop",
                  "getiter"):
            raise self.refuse(f"the IR expression {op} outside the statement shape a for "
                              "loop or an assignment gives it", e.loc)
        raise self.refuse(REFUSED_EXPRS.get(op, f"the IR expression {op!r}"), e.loc)

    def index(self, var: ir.Var) -> ast.expr:
        """A subscript: ``slice(a, b)`` calls (how the IR spells ``a:b``) become slices."""
        node = self.expr(var)
        return as_slices(node)

    def constant(self, value, loc) -> ast.expr:
        node = constant_node(value)
        if node is None:
            raise self.refuse(f"a constant of type {type(value).__name__}", loc)
        return node
