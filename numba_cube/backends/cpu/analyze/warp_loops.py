"""``for t in range(...)`` loops around split points whose range is decided at run time.

A ``for`` loop around a barrier or warp intrinsic runs at cube level (``analyze/plan.py``), which needs
its range to be uniform. When the static rule cannot prove it (``range(counts[cuda.blockIdx.x])``
reads memory; ``range(n_per_warp)`` differs between warps), the loop is rewritten into the
``while`` loop it is equivalent to, and ``analyze/plan.py`` gives that ``while`` a run-time mask: the units
that must agree on the trip count are then checked at run time like any other condition.
"""

from __future__ import annotations

import ast
import copy

from numba_cube.backends.cpu.analyze.dataflow import Purity, is_cube_control, stores
from numba_cube.backends.cpu.frontend.source import SourceFunction


class RangeLoops:
    """``for t in range(a, b)`` around a split point, over a range that is not provably uniform,
    becomes ``__fs1 = b; t = a; while t < __fs1: <body>; t += 1`` -- a ``while`` whose test the
    run-time mask decides. Only where that is the same program: a positive literal step, ``t``
    assigned nowhere in the body and read nowhere after the loop, no ``continue`` of this loop,
    no ``else``."""

    def __init__(self, fn: SourceFunction, body, uniform: set[str], purity: Purity):
        self.fn, self.uniform, self.purity = fn, uniform, purity
        self.all = [n for st in body for n in ast.walk(st)]
        self.count = 0

    def rewrite(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            if isinstance(s, (ast.If, ast.While, ast.For)) and is_cube_control(s):
                s = copy.copy(s)
                s.body, s.orelse = self.rewrite(s.body), self.rewrite(s.orelse)
                if isinstance(s, ast.For) and not self.purity.expr(s.iter, self.uniform):
                    loop = self._as_while(s)
                    if loop is not None:
                        out += loop
                        continue
            out.append(s)
        return out

    def _as_while(self, s: ast.For):
        it, target = s.iter, s.target
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range" and it.func.id not in self.fn.local_names
                and 1 <= len(it.args) <= 3 and not it.keywords and not s.orelse
                and isinstance(target, ast.Name)):
            return None
        start, stop = (it.args[0], it.args[1]) if len(it.args) > 1 else (ast.Constant(0),
                                                                        it.args[0])
        step = it.args[2] if len(it.args) == 3 else ast.Constant(1)
        if not (isinstance(step, ast.Constant) and type(step.value) is int and step.value > 0):
            return None
        inside = {id(n) for n in ast.walk(s)}
        if (target.id in stores(ast.Module(s.body, [])) or _continues(s.body)
                or any(isinstance(n, ast.Name) and n.id == target.id and id(n) not in inside
                       for n in self.all)):
            return None
        self.count += 1
        bound = f"__fs{self.count}"
        self.fn.add_locals({bound})
        self.purity.declare({bound})
        t = target.id
        new = [ast.Assign([ast.Name(bound, ast.Store())], stop),
               ast.Assign([ast.Name(t, ast.Store())], start),
               ast.While(ast.Compare(ast.Name(t, ast.Load()), [ast.Lt()],
                                     [ast.Name(bound, ast.Load())]),
                         s.body + [ast.AugAssign(ast.Name(t, ast.Store()), ast.Add(), step)], [])]
        return [ast.fix_missing_locations(ast.copy_location(n, s)) for n in new]


def _continues(body) -> bool:
    """Does ``body`` contain a ``continue`` of the loop it is the body of?"""
    def walk(node):
        if isinstance(node, ast.Continue):
            return True
        if isinstance(node, (ast.For, ast.While)):
            return any(walk(c) for c in node.orelse)
        return any(walk(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))
    return any(walk(s) for s in body)
