"""Lowering of warp intrinsics, barrier values inside expressions and grid groups.

A warp intrinsic exchanges values between the lanes of a warp, so on the CPU it is an exchange
*point*, the way a barrier is a cube-level one: the region before it stores each unit's operands,
a helper (``kernel_runtime/warps.py``) computes every lane's result from all of them, and the region after
it reads the result. ``WarpLowering`` (a mixin of ``lowering.Lowerer``, through ``CudaCalls``)
turns a statement that calls one into::

    __xm3 = <mask>; __xv3 = <value>; __xb3 = <lane, delta or xor mask>    # per-unit operands
    __exchange__('shfl_xor_sync', 3, '__xm3', '__xv3', '__xb3')           # the split point
    <the statement, with the call replaced by __xr3>                      # the result

``analyze/plan.py`` cuts regions at the marker, ``emit/cube_kernel.py`` emits the helper call. The same hoisting
serves ``cuda.syncthreads_count/and/or`` inside an expression (``if cuda.syncthreads_or(p):``,
``x = 1 + cuda.syncthreads_count(p)``): the call moves into a statement of its own,
``__sv1 = cuda.syncthreads_or(p)``, which the lowering already knows. A ``while`` whose test calls
one becomes ``while True: <hoisted>; if not <test>: break; <body>``, so the test is evaluated by
every iteration as before. A call in a conditionally evaluated position (the right of
``and``/``or``, a branch of ``x if c else y``, a comprehension) is refused: hoisting it would evaluate it when
Python would not.

``cuda.cg.this_grid()`` denotes the grid group; ``g.sync()`` / ``cuda.cg.this_grid().sync()``
lower to the grid sync marker ``__gridsync__()`` (``emit/cube_kernel.py``'s grid mode).

``cuda.lanemask_lt()`` is a pure function of the lane and is lowered in place.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from numba_cube.backends.cpu.frontend.source import chain
from numba_cube.backends.cpu.lower.hidden import EXCHANGE, GRID_SYNC, LINEAR_TID

#: warp intrinsics -> (operand roles, result names); "m" mask, "v" value/predicate, "b" lane
WARP_OPS = {
    "shfl_sync": ("mvb", "r"), "shfl_up_sync": ("mvb", "r"), "shfl_down_sync": ("mvb", "r"),
    "shfl_xor_sync": ("mvb", "r"), "all_sync": ("mv", "r"), "any_sync": ("mv", "r"),
    "eq_sync": ("mv", "r"), "ballot_sync": ("mv", "r"), "match_any_sync": ("mv", "r"),
    "match_all_sync": ("mv", "rp"), "activemask": ("", "r"), "syncwarp": ("m", ""),
}
BARRIER_VALUES = frozenset({"syncthreads_count", "syncthreads_and", "syncthreads_or"})
_FULL_MASK = 0xFFFFFFFF
_CONDITIONAL = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)


def temp(role: str, k: int) -> str:
    """The per-unit name of operand/result ``role`` of exchange ``k`` (``__xv3``)."""
    return f"__x{role}{k}"


def is_operand(name: str) -> bool:
    """Is ``name`` the operand temporary of an exchange (``__xm3``, ``__xv3``, ``__xb3``)?"""
    return len(name) > 4 and name[:3] == "__x" and name[3] in "mvb" and name[4:].isdigit()


@dataclass
class _WarpState:
    exchanges: int = 0
    values: int = 0
    grid_groups: set = field(default_factory=set)
    markers: set = field(default_factory=set)        # ids of marker statements (already lowered)


class WarpLowering:
    """Mixin: statement-level expansion of warp intrinsics, barrier values and grid groups
    (needs ``fn``, ``role``, ``visit``, ``_cuda_path`` and ``_err`` from the ``Lowerer``)."""

    def _warp_state(self) -> _WarpState:
        state = self.__dict__.get("_warp_lowering")
        if state is None:
            state = self.__dict__["_warp_lowering"] = _WarpState()
        return state

    def _is_marker(self, node) -> bool:
        return id(node) in self._warp_state().markers

    def _marker(self, name: str, args, node) -> ast.stmt:
        stmt = ast.copy_location(ast.Expr(ast.Call(ast.Name(name, ast.Load()),
                                                   [ast.Constant(a) for a in args], [])), node)
        self._warp_state().markers.add(id(stmt))
        return stmt

    # ---- entry point ----------------------------------------------------------------------

    def _expand_statement(self, stmt: ast.stmt):
        """The lowered statements replacing ``stmt``, or None when ``stmt`` needs no expansion
        (then the ordinary visit lowers it)."""
        grid = self._grid_group_statement(stmt)
        if grid is not None:
            return grid
        if self._is_simple_barrier_value(stmt):
            return None                       # `x = cuda.syncthreads_or(p)`: lowering's own form
        hoister = _Hoister(self)
        if isinstance(stmt, ast.While):
            test = hoister.expression(stmt.test)
            if not hoister.prefix:
                return None
            if stmt.orelse:
                raise self._err("a 'while' loop whose condition calls a warp intrinsic or a "
                                "barrier reduction cannot have an 'else' clause on the CPU "
                                "backend", "while/else around a barrier value", stmt)
            leave = ast.If(ast.UnaryOp(ast.Not(), test), [ast.Break()], [])
            loop = ast.While(ast.Constant(True), hoister.prefix + [leave] + stmt.body, [])
            return self.visit(ast.fix_missing_locations(ast.copy_location(loop, stmt)))
        changed = False
        for name, value in ast.iter_fields(stmt):
            if isinstance(value, ast.expr):
                new = hoister.expression(value)
                changed |= new is not value
                setattr(stmt, name, new)
            elif isinstance(value, list) and value and isinstance(value[0], ast.expr):
                new = [hoister.expression(v) for v in value]
                changed |= any(a is not b for a, b in zip(new, value))
                setattr(stmt, name, new)
        if not hoister.prefix and not changed:
            return None
        out = []
        for s in hoister.prefix + [stmt]:
            if self._is_marker(s):
                out.append(s)
                continue
            new = self.visit(ast.fix_missing_locations(s))
            out.extend(new if isinstance(new, list) else [] if new is None else [new])
        return out

    def _is_simple_barrier_value(self, stmt) -> bool:
        call = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
        if not isinstance(call, ast.Call) or chain(call.func) is None:
            return False
        if isinstance(stmt, ast.Assign) and not (len(stmt.targets) == 1
                                                 and isinstance(stmt.targets[0], ast.Name)):
            return False
        return self._cuda_path(call.func) in BARRIER_VALUES and not any(
            self._exchange_path(n) for a in call.args for n in ast.walk(a)
            if isinstance(n, ast.Call))

    def _exchange_path(self, call: ast.Call) -> str | None:
        if chain(call.func) is None:
            return None
        path = self._cuda_path(call.func)
        return path if path in WARP_OPS or path in BARRIER_VALUES else None

    # ---- grid groups ----------------------------------------------------------------------

    def _grid_group_statement(self, stmt):
        state = self._warp_state()
        value = getattr(stmt, "value", None)
        if isinstance(stmt, ast.Assign) and self._is_this_grid(value):
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                raise self._err("cuda.cg.this_grid() must be assigned to a plain name",
                                "cuda.cg.this_grid()", stmt)
            state.grid_groups.add(stmt.targets[0].id)
            return []
        if isinstance(stmt, ast.Expr) and self._is_this_grid(value):
            return []
        if (isinstance(stmt, ast.Expr) and isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute) and value.func.attr == "sync"
                and not value.args and not value.keywords
                and (self._is_this_grid(value.func.value)
                     or (isinstance(value.func.value, ast.Name)
                         and value.func.value.id in state.grid_groups))):
            if self.role != "kernel":
                raise self._err("a grid sync inside a device function is not supported by the "
                                "CPU backend (call it in the kernel body)",
                                "grid sync in a device function", stmt)
            return [self._marker(GRID_SYNC, (), stmt)]
        own = [v for _, v in ast.iter_fields(stmt) if isinstance(v, ast.expr)]
        used = {n.id for e in own for n in ast.walk(e) if isinstance(n, ast.Name)}
        used &= state.grid_groups
        if used:
            raise self._err(f"the grid group {sorted(used)[0]!r} supports only .sync() on the "
                            "CPU backend", "grid group use other than sync()", stmt)
        return None

    def _is_this_grid(self, node) -> bool:
        return (isinstance(node, ast.Call) and not node.args and chain(node.func) is not None
                and self._cuda_path(node.func) == "cg.this_grid")

    # ---- one hoisted call -----------------------------------------------------------------

    def _hoist_call(self, path: str, call: ast.Call, prefix: list) -> ast.expr:
        state = self._warp_state()
        if call.keywords:
            raise self._err(f"keyword arguments to cuda.{path} are not supported",
                            f"cuda.{path}", call)
        if self.role != "kernel":
            raise self._err(f"cuda.{path}() inside a device function is not supported by the "
                            "CPU backend (warp intrinsics and barriers must be in the kernel "
                            "body)", f"cuda.{path}() in a device function", call)
        if path in BARRIER_VALUES:
            state.values += 1
            name = f"__sv{state.values}"
            self.fn.add_locals({name})
            prefix.append(ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], call), call))
            return ast.Name(name, ast.Load())
        roles, results = WARP_OPS[path]
        args = list(call.args)
        if path == "syncwarp" and not args:
            args = [ast.Constant(_FULL_MASK)]
        if len(args) != len(roles):
            extra = (" (numba-cuda's shuffles take no width argument: the width is always 32)"
                     if path.startswith("shfl") and len(args) == 4 else "")
            raise self._err(f"cuda.{path} takes {len(roles)} arguments, not {len(args)}{extra}",
                            f"cuda.{path}", call)
        state.exchanges += 1
        k = state.exchanges
        names = [temp(r, k) for r in roles] + [temp(r, k) for r in results]
        self.fn.add_locals(set(names))
        operands = []
        for role, arg in zip(roles, args):
            if (role == "v" and path == "shfl_down_sync" and isinstance(arg, ast.Name)
                    and arg.id in self.fn.local_names):
                # read in place from the variable's own per-unit array: a unit reads lanes
                # above its own, which the region using the result has not stored yet (units
                # run in increasing order), so no copy is needed (saves a pass per shuffle)
                operands.append(arg.id)
                continue
            operands.append(temp(role, k))
            prefix.append(ast.copy_location(ast.Assign([ast.Name(temp(role, k), ast.Store())],
                                                       arg), call))
        prefix.append(self._marker(EXCHANGE, (path, k, *operands), call))
        if not results:
            return ast.Constant(None)
        if len(results) == 1:
            return ast.Name(temp(results, k), ast.Load())
        return ast.Tuple([ast.Name(temp(r, k), ast.Load()) for r in results], ast.Load())

    def _lanemask_lt(self):
        """``cuda.lanemask_lt()``: the lanes below this one (uint32), computed in place."""
        return ast.parse(f"__np.uint32((1 << ({LINEAR_TID} % 32)) - 1)", mode="eval").body


class _Hoister(ast.NodeTransformer):
    """Replaces exchange calls inside one statement's expressions, innermost first, collecting
    the statements that compute them in ``prefix``."""

    def __init__(self, low: WarpLowering):
        self.low = low
        self.prefix: list[ast.stmt] = []
        self.conditional = 0

    def expression(self, e: ast.expr) -> ast.expr:
        return self.visit(e)

    def visit_Call(self, node):
        node = self.generic_visit(node)
        path = self.low._exchange_path(node)
        if path is None:
            return node
        if self.conditional:
            raise self.low._err(f"cuda.{path}() in a conditionally evaluated expression (after "
                                "and/or, in a branch of 'x if c else y', in a comprehension) "
                                "is not supported by the CPU backend; call it in a statement "
                                "of its own", f"cuda.{path}() in a conditional expression", node)
        return ast.copy_location(self.low._hoist_call(path, node, self.prefix), node)

    def visit_BoolOp(self, node):
        node.values[0] = self.visit(node.values[0])
        self.conditional += 1
        node.values[1:] = [self.visit(v) for v in node.values[1:]]
        self.conditional -= 1
        return node

    def visit_IfExp(self, node):
        node.test = self.visit(node.test)
        self.conditional += 1
        node.body, node.orelse = self.visit(node.body), self.visit(node.orelse)
        self.conditional -= 1
        return node

    def generic_visit(self, node):
        if isinstance(node, _CONDITIONAL):
            self.conditional += 1
            try:
                return super().generic_visit(node)
            finally:
                self.conditional -= 1
        return super().generic_visit(node)
