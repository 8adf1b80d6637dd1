"""The fission plan of a kernel with split points: which code runs once per cube, which per unit.

``split`` walks the lowered kernel body and cuts it at every *split point* -- a barrier, a warp
exchange (``lower/warps.py``), a grid sync, or a lockstep point (``passes/lockstep/schedule.py``: where units exchange
values through memory; it splits like a barrier but, under a mask, checks no agreement) -- into
*regions*: maximal split-free runs of statements that
the generated code executes as ``for unit in cube: <region>``. What is left between regions runs
once per cube:

- ``Uniform``: an assignment to a cube-uniform name (``s = cuda.blockDim.x // 2``, ``s //= 2``).
  Computing it once per cube is what lets a ``while s > 0`` around a barrier be tested at cube
  level. When nothing earlier in the current region touches the name, the assignment is hoisted
  in front of the region instead of cutting it in two (each cut costs a unit loop and may force
  values to be saved per unit).
- ``Ctrl``: an ``if``/``while``/``for`` that contains a split point (deep fission: its body is split
  recursively), or an ``if`` whose ``break``/``continue`` leaves a cube-level loop, when its test
  or iterable is provably uniform.
- ``MaskedIf`` / ``MaskedWhile``: the same for an ``if``/``while`` whose test the static rule cannot
  prove uniform (it reads memory, or depends on the unit: ``if tid < 32:`` around shuffles).
  The test is evaluated per unit into a run-time mask ``__m<k>`` (1: take the body, 2: the
  ``else``, 0: not here), and the regions inside skip the units the mask leaves out. Whether the
  units that must agree did agree is then checked at run time (``Check``, ``Exchange``): all
  live units of the cube for a barrier, of the grid for a grid sync, the lanes named in the mask
  for a warp intrinsic (``kernel_runtime/warps.py``). A ``for t in range(...)`` over a range that is not
  provably uniform becomes such a ``while`` where that is the same program (``analyze/warp_loops.py``);
  other such ``for`` loops stay refused.
- A ``break``/``continue`` under a run-time mask (``if failed[0]: break``, a flag in shared
  memory every unit reads after a barrier) that leaves a cube-level loop is a ``Check`` of kind
  ``"flow"`` followed by the ``Flow``, when the loop contains a barrier: the loop is left at
  cube level when every live unit takes it, and the launch fails with ``DivergenceError``
  naming the line when only some do (on a GPU the others would wait at the loop's next
  barrier). Leaving a masked ``while``, a loop of warp intrinsics or lockstep points only
  (which a GPU's warps may leave at different times), or any loop in grid mode (where it runs
  once for the whole grid) this way stays refused.
- ``Exchange``: a warp intrinsic, between the region that stores its operands and the one that
  reads its result.
- ``Check``: a barrier or grid sync under a run-time mask.
- ``Flow``: a ``break``/``continue`` of a cube-level loop.

Uniformity with masks is a fixpoint (``analysis.uniform_with_masks``): names assigned inside a
masked body are not uniform (only the units of the mask assign them), which can make more tests
non-uniform.

``PlanLiveness`` then computes, for each region, the per-unit names live on entry and on exit;
``emit/cube_kernel.py`` turns those into loads and stores of ``[units]`` arrays. The plan's item
types are ``analyze/plan_items.py``'s.
"""

from __future__ import annotations

import ast

from numba_cube.backends.cpu.analyze.dataflow import (
    Liveness, Purity, assignment_sources, is_cube_control, loads, stores, uniform_with_masks,
)
from numba_cube.backends.cpu.frontend.source import SourceFunction
from numba_cube.backends.cpu.lower.hidden import (
    ACC_PREFIX, SLOT, contains_barrier, exchange_of, is_barrier, is_grid_sync, is_lockstep,
    is_split,
)
from numba_cube.backends.cpu.lower.warps import WARP_OPS, temp
from numba_cube.backends.cpu.analyze.warp_loops import RangeLoops
from numba_cube.backends.cpu.analyze.plan_items import (
    Check, CubePlan, Ctrl, Exchange, Flow, MaskedIf, MaskedWhile, Region, Uniform,
)

class Splitter:
    """Builds the plan; raises CompileError for what cannot run as loops over units."""

    def __init__(self, fn: SourceFunction, uniform: set[str], purity: Purity,
                 masked: frozenset = frozenset(), grid: bool = False):
        self.fn = fn
        #: grid mode (``emit/cube_kernel.py``): cube-level loops run once for the whole grid, so a loop
        #: exit under a run-time mask would need every cube to agree, which CUDA does not ask
        self.grid = grid
        self.uniform = uniform
        self.purity = purity
        self.masked = masked
        self.regions: list[Region] = []
        self.masks: list[str] = []
        self.exchanges: list[Exchange] = []
        self.checks: list[Check] = []
        self._loop_ctx: list = []          # the mask each enclosing cube-level loop runs under
        self._loops: list = []             # the enclosing cube-level loops themselves
        #: the context each masked ``if``'s branches are entered from: ``(mask, sel) -> ctx``
        self._mask_parents: dict = {}

    def _uniform_stmt(self, s) -> bool:
        src = assignment_sources(s)
        if not src:
            return False
        for name, e in src:
            if name not in self.uniform:
                return False
            if name.startswith(ACC_PREFIX) and name in loads(e):
                return False        # a syncthreads_count/and/or counter counting units
        return True

    def _check_uniform(self, stmt, expr, what):
        if self.purity.expr(expr, self.uniform):
            return
        barrier = next((n for n in ast.walk(stmt) if isinstance(n, ast.stmt) and is_barrier(n)),
                       None)
        cond_line = self.fn.user_line(stmt)
        if only_lockstep_points(stmt):
            raise self.fn.error(
                f"units of a cube exchange values through memory without a barrier inside a "
                f"{what} (line {cond_line}) that is not cube-uniform: the CPU backend runs such "
                "code statement by statement across the cube, as a warp does, and cannot here; "
                "put cuda.syncwarp() or cuda.syncthreads() between the statements that write and "
                f"read, or make the {what} cube-uniform",
                "warp-synchronous memory exchange under a unit-dependent " + what, stmt)
        if barrier is not None or contains_barrier(stmt):
            raise self.fn.error(
                f"cuda.syncthreads() under a unit-dependent {what}: the {what} on line "
                f"{cond_line} is not cube-uniform (it must be built from constants, scalar "
                "arguments, blockIdx/blockDim/gridDim, array shapes and other uniform names, "
                "without memory reads); only if/while conditions are checked at run time",
                "cuda.syncthreads() under a unit-dependent condition",
                barrier if barrier is not None else stmt)
        self._refuse_flow(next(n for n in ast.walk(stmt) if isinstance(n, (ast.Break,
                                                                        ast.Continue))),
                          self._loops[-1] if self._loops else None)

    def _refuse_flow(self, flow, loop=None):
        kw = type(flow).__name__.lower()
        if loop is not None and only_lockstep_points(loop):
            raise self.fn.error(
                f"'{kw}' under a unit-dependent condition in a loop where units of a cube "
                "exchange values through memory without a barrier: the CPU backend runs such "
                "code statement by statement across the cube, as a warp does, and cannot when "
                "units leave the loop at different times; put cuda.syncwarp() or "
                "cuda.syncthreads() between the statements that write and read, or make the "
                "condition cube-uniform",
                "warp-synchronous memory exchange in a loop with a unit-dependent exit", flow)
        raise self.fn.error(
            f"'{kw}' under a unit-dependent condition would leave a loop that contains a barrier "
            "or warp intrinsic (its condition is not cube-uniform)",
            f"'{kw}' crossing a barrier region", flow)

    def split(self, stmts: list[ast.stmt], ctx=None) -> list:
        out: list = []
        cur: list[ast.stmt] = []
        hoisted: list[ast.stmt] = []

        def flush():
            out.extend(Uniform(h) for h in hoisted)
            hoisted.clear()
            if cur:
                region = Region(list(cur), len(self.regions), ctx)
                self.regions.append(region)
                out.append(region)
                cur.clear()

        for s in stmts:
            exchange = exchange_of(s)
            if is_barrier(s) or is_grid_sync(s):
                flush()
                if ctx is not None:
                    check = Check("barrier" if is_barrier(s) else "grid", ctx, s)
                    self.checks.append(check)
                    out.append(check)
            elif is_lockstep(s):          # (passes/lockstep/schedule.py) no agreement to check: a unit that
                flush()                   # skips it only skips the statements around it
            elif exchange is not None:
                flush()
                out.append(self._exchange(*exchange, ctx, s))
            elif isinstance(s, (ast.Break, ast.Continue)):
                checked = self._flow_check(s, ctx)
                flush()
                if checked is not None:
                    self.checks.append(checked)
                    out.append(checked)
                out.append(Flow(s))
            elif is_cube_control(s) and id(s) in self.masked:
                mask = f"__m{len(self.masks) + 1}"
                self.masks.append(mask)
                other = 2 if isinstance(s, ast.If) else 0
                hoisted.append(_stmt(f"{mask}[:] = 0"))
                cur.append(_mask_eval(mask, s.test, other, s))
                flush()
                out.append(self._masked(mask, s, ctx))
            elif is_cube_control(s):
                flush()
                out.append(self._control(s, ctx))
            elif self._uniform_stmt(s):
                touched = set().union(*(loads(c) | stores(c) for c in cur)) if cur else set()
                if not cur:
                    out.append(Uniform(s))
                elif not (stores(s) & touched):
                    hoisted.append(s)          # safe: nothing earlier in the region sees it
                else:
                    flush()
                    out.append(Uniform(s))
            else:
                cur.append(s)
        flush()
        return out

    def _exchange(self, op, k, operands, ctx, node) -> Exchange:
        _, results = WARP_OPS[op]
        ex = Exchange(op, k, ctx, node, list(operands), [temp(r, k) for r in results])
        self.exchanges.append(ex)
        return ex

    def _flow_check(self, flow, ctx) -> Check | None:
        """None for a ``break``/``continue`` in the context of its cube-level loop; the run-time
        agreement check for one under masked ``if``s inside that loop; else refused."""
        if self._loop_ctx and self._loop_ctx[-1] == ctx:
            return None
        if self.grid and self._loop_ctx and self._loop_ctx[-1] != "masked":
            kw = type(flow).__name__.lower()
            raise self.fn.error(
                f"'{kw}' under a unit-dependent condition leaving a loop in a kernel that syncs "
                "the grid: the CPU backend runs such a loop once for the whole grid, so cubes "
                "cannot leave it at different rounds; make the condition cube-uniform",
                f"'{kw}' under a run-time condition in grid mode", flow)
        # Only a barrier makes every unit of the cube agree: a loop of warp intrinsics or
        # lockstep points alone may be left by some warps or units and not others on a GPU.
        if self._loop_ctx and self._loop_ctx[-1] != "masked" and any(
                isinstance(n, ast.stmt) and (is_barrier(n) or is_grid_sync(n))
                for n in ast.walk(self._loops[-1])):
            outer = ctx
            while outer in self._mask_parents:          # out through the enclosing masked ifs
                outer = self._mask_parents[outer]
                if outer == self._loop_ctx[-1]:
                    return Check("flow", ctx, flow)
        self._refuse_flow(flow, self._loops[-1] if self._loops else None)
        return None                                     # pragma: no cover - refused above

    def _masked(self, mask, s, ctx=None):
        if isinstance(s, ast.If):
            self._mask_parents[(mask, 1)] = self._mask_parents[(mask, 2)] = ctx
            return MaskedIf(mask, s, self.split(s.body, (mask, 1)),
                            self.split(s.orelse, (mask, 2)))
        if s.orelse:
            raise self.fn.error("a 'while' loop with an 'else' clause around a barrier or warp "
                                "intrinsic needs a cube-uniform condition on the CPU backend",
                                "while/else under a run-time condition", s)
        self._loop_ctx.append("masked")     # no break/continue may leave a masked loop
        self._loops.append(s)
        try:
            body = self.split(s.body + [_mask_eval(mask, s.test, 0, s)], (mask, 1))
        finally:
            self._loop_ctx.pop()
            self._loops.pop()
        return MaskedWhile(mask, s, body)

    def _control(self, s, ctx):
        if isinstance(s, ast.If):
            self._check_uniform(s, s.test, "condition")
            return Ctrl(s, self.split(s.body, ctx), self.split(s.orelse, ctx))
        if isinstance(s, ast.While):
            self._check_uniform(s, s.test, "loop condition")
        else:
            self._check_uniform(s, s.iter, "loop range")
            if not (stores(s.target) <= self.uniform):
                raise self.fn.error("the target of a loop that contains a barrier must be a "
                                    "plain name that is not assigned elsewhere in the kernel",
                                    "loop variable of a cube-level loop", s)
        self._loop_ctx.append(ctx)
        self._loops.append(s)
        try:
            return Ctrl(s, self.split(s.body, ctx), self.split(s.orelse, ctx))
        finally:
            self._loop_ctx.pop()
            self._loops.pop()


def only_lockstep_points(node: ast.AST) -> bool:
    """Are the split points inside ``node`` all lockstep points (``passes/lockstep/schedule.py``), no barrier,
    warp intrinsic or grid sync the user wrote?"""
    splits = [n for n in ast.walk(node) if isinstance(n, ast.stmt) and is_split(n)]
    return bool(splits) and all(is_lockstep(n) for n in splits)


def _stmt(src: str) -> ast.stmt:
    return ast.parse(src).body[0]


def _mask_eval(mask: str, test: ast.expr, other: int, node) -> ast.stmt:
    """``mask[slot] = 1 if test else other``, placed at ``node``'s line."""
    stmt = ast.Assign([ast.Subscript(ast.Name(mask, ast.Load()), ast.Name(SLOT, ast.Load()),
                                     ast.Store())],
                      ast.IfExp(test, ast.Constant(1), ast.Constant(other)))
    return ast.fix_missing_locations(ast.copy_location(stmt, node))


class PlanLiveness(Liveness):
    """Liveness over plan items; records ``live_in``/``live_out`` on every region."""

    def item(self, s, out, brk, cont):
        if isinstance(s, Region):
            s.live_out = set(out)
            s.live_in = self.stmts(s.code, out)
            return s.live_in
        if isinstance(s, (Uniform, Flow)):
            return super().item(s.stmt, out, brk, cont)
        if isinstance(s, Exchange):
            return (set(out) - set(s.outputs)) | set(s.inputs)
        if isinstance(s, Check):
            return set(out)
        if isinstance(s, MaskedIf):
            return self.stmts(s.body, out, brk, cont) | self.stmts(s.orelse, out, brk, cont)
        if isinstance(s, MaskedWhile):
            return self.loop(lambda head: set(out) | self.stmts(s.body, head | set(out)))
        if isinstance(s, Ctrl):
            node = s.node
            if isinstance(node, ast.If):
                return loads(node.test) | self.stmts(s.body, out, brk, cont) | self.stmts(
                    s.orelse, out, brk, cont)
            if isinstance(node, ast.While):
                return self.loop(lambda head: loads(node.test) | self.stmts(s.body, head, out, head)
                                 | self.stmts(s.orelse, out, brk, cont))
            targets = stores(node.target)
            head = self.loop(lambda head: self.stmts(s.orelse, out, brk, cont) | (
                self.stmts(s.body, head, out, head) - targets))
            return loads(node.iter) | head
        return super().item(s, out, brk, cont)


def build_plan(fn: SourceFunction, body, uniform, purity, masked=frozenset(), grid=False):
    """Split ``body`` into a plan and annotate each region with its live sets."""
    splitter = Splitter(fn, uniform, purity, masked, grid)
    plan = splitter.split(body)
    PlanLiveness().stmts(plan, set())
    return plan, splitter


def build_cube_plan(fn: SourceFunction, body, seed: set[str], purity: Purity,
                    grid: bool) -> CubePlan:
    """The plan of a kernel with split points; ``seed`` are the names uniform by construction
    (without block ids in ``grid`` mode, where "uniform" means the same for the whole grid)."""
    uniform, masked = uniform_with_masks(body, seed, purity)
    loops = RangeLoops(fn, body, uniform, purity)
    rewritten = loops.rewrite(body)
    if loops.count:          # (the rewrite copies compound statements: masks are by identity)
        body = rewritten
        uniform, masked = uniform_with_masks(body, seed, purity)
    items, splitter = build_plan(fn, body, uniform, purity, masked, grid)
    return CubePlan(items, splitter.regions, uniform, splitter.masks, splitter.exchanges,
                    splitter.checks, grid)
