"""The fission plan of a kernel with barriers: which code runs once per cube, which per unit.

``split`` walks the lowered kernel body and cuts it at every barrier into *regions* -- maximal
barrier-free runs of statements that the generated code executes as ``for unit in cube: <region>``.
What is left between regions runs once per cube:

- ``Uniform``: an assignment to a cube-uniform name (``s = cuda.blockDim.x // 2``, ``s //= 2``).
  Computing it once per cube is what lets a ``while s > 0`` around a barrier be tested at cube
  level. When nothing earlier in the current region touches the name, the assignment is hoisted
  in front of the region instead of cutting it in two (each cut costs a unit loop and may force
  values to be saved per unit).
- ``Ctrl``: an ``if``/``while``/``for`` that contains a barrier (deep fission: its body is split
  recursively), or an ``if`` whose ``break``/``continue`` leaves a cube-level loop. Its test or
  iterable must be uniform, otherwise the kernel is refused: a barrier that only some units of a
  cube reach cannot be expressed as loops over all units.
- ``Flow``: a ``break``/``continue`` of a cube-level loop.

``PlanLiveness`` then computes, for each region, the per-unit names live on entry and on exit;
``fission.py`` turns those into loads and stores of ``[units]`` arrays.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from numba_cube.backends.cpu.analysis import (Liveness, Purity, assignment_sources,
                                              crossing_flow, loads, stores)
from numba_cube.backends.cpu.frontend import SourceFunction
from numba_cube.backends.cpu.hidden import ACC_PREFIX, contains_barrier, is_barrier


@dataclass
class Region:
    """Barrier-free per-unit code; executed for every unit of the cube in turn."""

    code: list[ast.stmt]
    index: int
    live_in: set[str] = field(default_factory=set)
    live_out: set[str] = field(default_factory=set)


@dataclass
class Uniform:
    stmt: ast.stmt


@dataclass
class Ctrl:
    node: ast.If | ast.While | ast.For       # test / iter / target come from here
    body: list
    orelse: list


@dataclass
class Flow:
    stmt: ast.Break | ast.Continue


def is_cube_control(stmt: ast.stmt) -> bool:
    """Must this compound statement run at cube level (barrier inside, or a break/continue that
    leaves it)?"""
    if isinstance(stmt, (ast.If, ast.While, ast.For)):
        return contains_barrier(stmt) or (isinstance(stmt, ast.If) and crossing_flow(stmt))
    return False


def cube_level_lists(body: list[ast.stmt]) -> list[list[ast.stmt]]:
    """The statement lists that execute at cube level (see ``uniform_names``)."""
    out = [body]
    for s in body:
        if is_cube_control(s):
            out += cube_level_lists(s.body) + cube_level_lists(s.orelse)
    return out


class Splitter:
    """Builds the plan; raises CompileError for barriers under unit-dependent control flow."""

    def __init__(self, fn: SourceFunction, uniform: set[str], purity: Purity):
        self.fn = fn
        self.uniform = uniform
        self.purity = purity
        self.regions: list[Region] = []

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
        if barrier is not None:
            raise self.fn.error(
                f"cuda.syncthreads() under a unit-dependent condition: the {what} on line "
                f"{cond_line} is not cube-uniform (it must be built from constants, scalar "
                "arguments, blockIdx/blockDim/gridDim, array shapes and other uniform names, "
                "without memory reads)", "cuda.syncthreads() under a unit-dependent condition",
                barrier)
        flow = next(n for n in ast.walk(stmt) if isinstance(n, (ast.Break, ast.Continue)))
        kw = type(flow).__name__.lower()
        raise self.fn.error(
            f"'{kw}' under a unit-dependent condition would leave a loop that contains a barrier "
            f"(the {what} on line {cond_line} is not cube-uniform)",
            f"'{kw}' crossing a barrier region", flow)

    def split(self, stmts: list[ast.stmt]) -> list:
        out: list = []
        cur: list[ast.stmt] = []
        hoisted: list[ast.stmt] = []

        def flush():
            out.extend(Uniform(h) for h in hoisted)
            hoisted.clear()
            if cur:
                region = Region(list(cur), len(self.regions))
                self.regions.append(region)
                out.append(region)
                cur.clear()

        for s in stmts:
            if is_barrier(s):
                flush()
            elif isinstance(s, (ast.Break, ast.Continue)):
                flush()
                out.append(Flow(s))
            elif is_cube_control(s):
                flush()
                out.append(self._control(s))
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

    def _control(self, s):
        if isinstance(s, ast.If):
            self._check_uniform(s, s.test, "condition")
        elif isinstance(s, ast.While):
            self._check_uniform(s, s.test, "loop condition")
        else:
            self._check_uniform(s, s.iter, "loop range")
            if not (stores(s.target) <= self.uniform):
                raise self.fn.error("the target of a loop that contains a barrier must be a "
                                    "plain name that is not assigned elsewhere in the kernel",
                                    "loop variable of a cube-level loop", s)
        return Ctrl(s, self.split(s.body), self.split(s.orelse))


class PlanLiveness(Liveness):
    """Liveness over plan items; records ``live_in``/``live_out`` on every region."""

    def item(self, s, out, brk, cont):
        if isinstance(s, Region):
            s.live_out = set(out)
            s.live_in = self.stmts(s.code, out)
            return s.live_in
        if isinstance(s, Uniform):
            return super().item(s.stmt, out, brk, cont)
        if isinstance(s, Flow):
            return super().item(s.stmt, out, brk, cont)
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


def build_plan(fn: SourceFunction, body, uniform, purity) -> tuple[list, list[Region]]:
    """Split ``body`` into a plan and annotate each region with its live sets."""
    splitter = Splitter(fn, uniform, purity)
    plan = splitter.split(body)
    PlanLiveness().stmts(plan, set())
    return plan, splitter.regions
