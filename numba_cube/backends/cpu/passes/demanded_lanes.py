"""Demanded lanes: shuffle rounds that compute only the lanes whose result is read afterwards.

A warp reduction is written as rounds over a constant tuple of offsets::

    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(FULL, v, off)
    if cuda.laneid == 0:
        sm[tid // 32] = v

Each round updates every lane of every warp, but after the loop only lane 0's ``v`` is read, so
most of that work is dead. Working backwards from the lanes read after the loop: a round that
must deliver lanes ``N`` computes ``N`` and reads ``S = N | partners(N)`` (shfl_down: ``l + d``,
shfl_up: ``l - d``, shfl_xor: ``l ^ d``, shfl_sync: ``d``; a lane whose source is not there reads
its own value, which is in ``N``); the round before must deliver ``S``. For the tuple above that
is lanes 0-15, 0-7, 0-3, 0-1, 0: 31 lane updates per warp instead of 160. The lane sets are
known at translation time; the region loops of round ``k`` loop over ``[lo_k, hi_k)`` of each
warp (``emit/unit_loops.py``), the convex hull of the set (computing more lanes than demanded is
harmless: their values are never read).

**Why it is exact.** The loop is recognised only in this shape (``DemandedLanes._match``), and
today's code is printed for anything else:

- a cube-level ``for t in (c0, c1, ...)`` over int literals, no ``else``, whose body is
  uniform statements, optionally a region ``P`` that is one assignment ``__xv = <expr>`` of the
  exchange's value operand, one shuffle exchange with lane operand ``__xb`` assigned once in the
  body from ``t`` (so round ``k``'s offset is ``c_k & 31``) and ``t`` assigned nowhere in it, and a
  region ``R`` that assigns only ``v`` (the value operand itself when there is no ``P``);
- ``P`` and ``R`` are side-effect free and cannot raise: assignments to a name built from
  ``+ - * & | ^``, comparisons, ``not``/unary minus, conditional expressions, ``min``/``max``,
  constants and names that are ``v``, the round's own shuffle result, ``P``'s temporary or
  block ids and sizes -- no subscripts, no other calls -- over scalars: ``v`` and ``P``'s
  temporary are numbers or booleans, which Numba's types decide when compiling
  (``support.scalar_replicas``; arrays of different shapes would raise when added, and the
  CPU backend does shuffle arrays). Skipping a lane then skips nothing but a dead value;
- the item right after the loop is a region ``R2`` after which ``v`` is dead for every unit
  (``v`` not in its ``live_out``: no later region, exchange, iteration of an enclosing loop or
  cube reads it), that reads no result or operand of the loop's exchange, and in which every
  read of ``v`` is inside the body of an ``if`` whose test (or a conjunct of it) fixes the lane:
  ``cuda.laneid == c`` (``__tid % 32 == c``), ``__tid == c``, or ``threadIdx.x == c`` (lane
  ``c % 32`` only when ``blockDim.y * blockDim.z == 1`` or ``blockDim.x % 32 == 0``: checked at
  run time, all lanes otherwise);
- no unit exits (``return``), not in grid mode, no shuffle snapshot; the lane bounds are
  chosen per cube, the demanded ones where the run-time conditions above hold and all 32
  otherwise (literals after Numba folds the type test); and the restricted loop
  is only the copy printed once every replica of the region exists (``emit/regions.py``'s
  allocating copy runs every lane), so the first store that allocates a replica -- and with it the
  ``x__ok`` flags that decide whether the exchange's divergence check runs -- happens exactly
  as before. The exchange's check itself runs at cube level, untouched.

Lanes outside a round's set keep a stale value in the replica; by the backward induction no
lane read by a demanded computation is stale, and no stale lane is read after the loop.

Measured (the benchmark's ``warp_sum`` at 2^24, serial, thread time, min of 21): the five
shfl_down rounds 6.2 -> 4.7 ms, the shfl_xor rounds in warp 0 about 1.5 ms less. What is left
of the rounds is the cost of entering a loop per warp and round, not the lanes' work.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from numba_cube.backends.cpu.passes import enabled
from numba_cube.backends.cpu.analyze.dataflow import loads, stores
from numba_cube.backends.cpu.lower.hidden import LINEAR_TID, UNIFORM_IDS
from numba_cube.backends.cpu.analyze.plan_items import (
    Ctrl, Exchange, MaskedIf, MaskedWhile, Region, Uniform,
)
from numba_cube.backends.cpu.lower.warps import temp

_SAFE_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)
_SAFE_CMPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
#: where ``threadIdx.x`` determines the lane (``linear id % 32 == threadIdx.x % 32``)
_TX_IS_LANE = "(__bdy * __bdz == 1 or __bdx % 32 == 0)"
#: the import the generated module needs when a plan has demanded-lane loops
IMPORT = "from numba_cube.backends.cpu.kernel_runtime.support import scalar_replicas as __scalar_replicas"


def _partners(op: str, need: int, d: int) -> int:
    """The lanes the lanes ``need`` (a bit set) read in a round of ``op`` with offset ``d``."""
    out = 0
    for lane in range(32):
        if need >> lane & 1:
            src = {"shfl_down_sync": lane + d, "shfl_up_sync": lane - d,
                   "shfl_xor_sync": lane ^ d, "shfl_sync": d}[op]
            if 0 <= src < 32:
                out |= 1 << src
    return out


def _hull(lanes: int) -> tuple[int, int]:
    if not lanes:
        return 0, 0
    return (lanes & -lanes).bit_length() - 1, lanes.bit_length()


@dataclass
class _Loop:
    n: int                                   # numbers the loop's names (``__dok<n>``)
    cond: str                                # run-time condition for the lane sets to hold


class DemandedLanes:
    """The demanded-lane loops of one cube plan: the decision (``passes/shape_passes.py``) that
    ``cube_kernel.CubeKernel`` and its ``regions.RegionPrinter`` read while printing.
    ``kernel`` is the ``CubeKernel`` (its plan, uniform names, remat, snapshots)."""

    def __init__(self, kernel):
        self.k = kernel
        self.loops: dict[int, _Loop] = {}
        #: region index -> (loop, lower bounds per round, upper bounds per round)
        self.regions: dict[int, tuple[_Loop, tuple, tuple]] = {}
        if not (kernel.grid or kernel.has_exit) and enabled("demanded_lanes"):
            self._walk(kernel.plan)

    # ---- what the emitters ask while printing -------------------------------------------------

    def rounds(self, ctrl) -> list[int] | None:
        """The offsets of ``ctrl``'s rounds when it is a demanded-lane loop, else None.
        ``emit/cube_kernel.py`` then prints the loop unrolled, ``t = c_k`` before round ``k``'s copy of the
        body (the same program: the body has no ``break``/``continue`` and leaves ``t`` alone),
        so that each round's offset and lane bounds are constants LLVM can fold: a loop over
        16, 8, ... lanes with a trip count and offset read from a tuple cost more to enter than
        it saved (measured: the warp block-sum benchmark slower than with every lane)."""
        loop = self.loops.get(id(ctrl))
        return None if loop is None else [e.value for e in ctrl.node.iter.elts]

    def before_loop(self, ctrl) -> str | None:
        """The statement to print before ``ctrl`` when it is a demanded-lane loop (whether its
        lane sets hold, decided at run time), else None."""
        loop = self.loops.get(id(ctrl))
        return None if loop is None else f"__dok{loop.n} = {loop.cond}"

    def loop_number(self, ctrl) -> int:
        """The number of ``ctrl``'s demanded-lane loop (what ``region_lanes``' ``rounds`` is
        keyed by)."""
        return self.loops[id(ctrl)].n

    def region_lanes(self, region: Region, rounds: dict[int, int]
                     ) -> tuple[tuple[str, str], str] | None:
        """The lane bounds of ``region`` in the round being printed (``rounds``: loop number ->
        round, the emitter's): their names and the statement that sets them (decided at run
        time), for the emitter to print; or None."""
        entry = self.regions.get(region.index)
        if entry is None:
            return None
        loop, los, his = entry
        lo, hi = los[rounds.get(loop.n, 0)], his[rounds.get(loop.n, 0)]
        if (lo, hi) == (0, 32):
            return None                      # every lane: the plain loop
        names = f"__dlo{region.index}", f"__dhi{region.index}"
        return names, f"{names[0]}, {names[1]} = ({lo}, {hi}) if __dok{loop.n} else (0, 32)"

    # ---- analysis ---------------------------------------------------------------------------

    def _walk(self, items) -> None:
        for j, it in enumerate(items):
            if isinstance(it, (Ctrl, MaskedIf)):
                self._walk(it.body)
                self._walk(it.orelse)
            elif isinstance(it, MaskedWhile):
                self._walk(it.body)
            if isinstance(it, Ctrl) and j + 1 < len(items):
                self._match(it, items[j + 1])

    def _match(self, ctrl: Ctrl, after) -> None:
        node = ctrl.node
        if not (isinstance(node, ast.For) and isinstance(node.target, ast.Name)
                and isinstance(node.iter, ast.Tuple) and node.iter.elts
                and all(isinstance(e, ast.Constant) and type(e.value) is int
                        for e in node.iter.elts)
                and not node.orelse and not ctrl.orelse and isinstance(after, Region)):
            return
        body = list(ctrl.body)
        uniforms = []
        while body and isinstance(body[0], Uniform):
            uniforms.append(body.pop(0).stmt)
        pre = body.pop(0) if body and isinstance(body[0], Region) else None
        if not (len(body) == 2 and isinstance(body[0], Exchange)
                and isinstance(body[1], Region)):
            return
        ex, reg = body
        if ex.op not in ("shfl_down_sync", "shfl_up_sync", "shfl_xor_sync", "shfl_sync") \
                or ex.k in self.k.snapshots or reg.ctx != ex.ctx:
            return
        _, value, lane = ex.inputs
        t = node.target.id
        assigned = [s for s in uniforms if lane in stores(s)]
        if not (lane in self.k.uniform and len(assigned) == 1
                and isinstance(assigned[0], ast.Assign) and len(assigned[0].targets) == 1
                and isinstance(assigned[0].value, ast.Name) and assigned[0].value.id == t
                and not any(t in stores(s) for s in uniforms)):
            return
        names = set(stores(ast.Module(reg.code, [])))
        if len(names) != 1:
            return
        v = names.pop()
        outputs = {o for e in self.k.exchanges for o in e.outputs}
        if v in self.k.uniform or any(v in stores(s) for s in uniforms):
            return
        result = ex.outputs[0]
        if pre is None:
            if value != v:
                return
        elif not (pre.ctx == ex.ctx and value == temp("v", ex.k) and len(pre.code) == 1
                  and isinstance(pre.code[0], ast.Assign)
                  and [ast.unparse(x) for x in pre.code[0].targets] == [value]
                  and self._safe(pre.code[0].value, {v})):
            return
        if not all(self._safe_stmt(s, v, {v, result, value}) for s in reg.code):
            return
        reads = set().union(*(loads(s) for s in reg.code)) | (
            loads(pre.code[0]) if pre is not None else set())
        if reads & outputs - {result}:
            return                           # another exchange's result, read in place
        if v in after.live_out or after.live_in & {result, value} - {v}:
            return
        demand = self._lanes_read(after.code, v)
        if demand is None:
            return
        need, cond = demand
        replicas = [v] + ([value] if pre is not None else [])
        if not set(replicas) <= set(self.k.replicated):
            return
        # a shuffled value is a scalar in CUDA, but not always here: the rounds skip lanes only
        # where Numba's types say so (``support.scalar_replicas``, folded when compiling)
        scalars = f"__scalar_replicas(({''.join(f'{n}__l, ' for n in replicas)}))"
        loop = _Loop(len(self.loops) + 1, scalars + (f" and {cond}" if cond else ""))
        rounds_r, rounds_p = [], []
        for c in reversed([e.value for e in node.iter.elts]):
            read = need | _partners(ex.op, need, c & 31)
            rounds_r.append(_hull(need))
            rounds_p.append(_hull(read))
            need = read
        self.loops[id(ctrl)] = loop
        for region, rounds in ((reg, rounds_r), (pre, rounds_p)):
            if region is not None:
                rounds = rounds[::-1]
                self.regions[region.index] = (loop, tuple(r[0] for r in rounds),
                                              tuple(r[1] for r in rounds))

    def _safe_stmt(self, s, v: str, names: set[str]) -> bool:
        target = s.target if isinstance(s, ast.AugAssign) else (
            s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else None)
        if isinstance(s, ast.AugAssign) and not isinstance(s.op, _SAFE_BINOPS):
            return False
        return (isinstance(target, ast.Name) and target.id == v
                and self._safe(s.value, names))

    def _safe(self, e: ast.expr, names: set[str]) -> bool:
        """Can ``e`` neither raise nor have an effect, given that ``names`` are scalars? (Any
        other local or parameter may be an array or a tuple.)"""
        ok_names = names | UNIFORM_IDS
        for n in ast.walk(e):
            if isinstance(n, ast.Name):
                if n.id not in ok_names and not (n.id in ("min", "max") and
                                                 n.id not in self.k.lowered.fn.local_names):
                    return False
            elif isinstance(n, ast.Constant):
                if type(n.value) not in (int, float, bool):
                    return False
            elif isinstance(n, ast.BinOp):
                if not isinstance(n.op, _SAFE_BINOPS):
                    return False
            elif isinstance(n, ast.Compare):
                if not all(isinstance(op, _SAFE_CMPS) for op in n.ops):
                    return False
            elif isinstance(n, ast.Call):
                if not (isinstance(n.func, ast.Name) and n.func.id in ("min", "max")
                        and len(n.args) >= 2 and not n.keywords):
                    return False
            elif not isinstance(n, (ast.UnaryOp, ast.IfExp, ast.BoolOp, ast.Load, ast.unaryop,
                                    ast.operator, ast.cmpop, ast.boolop)):
                return False
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Invert):
                return False                 # ~ of a bool is a deprecation warning in Python
        return True

    def _lanes_read(self, code, v: str):
        """``(lanes, cond)``: every read of ``v`` in ``code`` happens in a lane of ``lanes`` (a
        bit set), given run-time condition ``cond``; None if some read is not lane-guarded."""
        found = {"lanes": 0, "conds": set()}

        def visit(node, guard) -> bool:
            if isinstance(node, ast.Name) and node.id == v and isinstance(node.ctx, ast.Load):
                if guard is None:
                    return False
                found["lanes"] |= 1 << guard[0]
                if guard[1] is not None:
                    found["conds"].add(guard[1])
                return True
            if isinstance(node, ast.If):
                inner = self._lane_test(node.test) or guard
                return (visit(node.test, guard) and all(visit(s, inner) for s in node.body)
                        and all(visit(s, guard) for s in node.orelse))
            return all(visit(c, guard) for c in ast.iter_child_nodes(node))

        if not all(visit(s, None) for s in code):
            return None
        conds = sorted(found["conds"])
        return found["lanes"], (" and ".join(conds) if conds else None)

    def _lane_test(self, test):
        """``(lane, cond)`` when ``test`` true implies the unit's lane is ``lane`` (given
        run-time condition ``cond``, or always if None); else None."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return next(filter(None, map(self._lane_test, test.values)), None)
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq)):
            return None
        a, b = test.left, test.comparators[0]
        if isinstance(a, ast.Constant):
            a, b = b, a
        if not (isinstance(b, ast.Constant) and type(b.value) is int and b.value >= 0):
            return None
        c = b.value
        if isinstance(a, ast.Name) and a.id in self.k.remat:
            a = self.k.remat[a.id]           # e.g. ``tid`` = ``threadIdx.x``, assigned once
        if isinstance(a, ast.Name) and a.id == LINEAR_TID:
            return c % 32, None
        if isinstance(a, ast.Name) and a.id == "__tx":
            return c % 32, _TX_IS_LANE
        if (isinstance(a, ast.BinOp) and isinstance(a.left, ast.Name)
                and a.left.id == LINEAR_TID and isinstance(a.right, ast.Constant)
                and ((isinstance(a.op, ast.Mod) and a.right.value == 32)
                     or (isinstance(a.op, ast.BitAnd) and a.right.value == 31))):
            return (c, None) if c < 32 else None
        return None
