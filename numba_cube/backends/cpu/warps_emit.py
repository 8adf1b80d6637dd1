"""Printing the cube-level items of warp exchanges and run-time masks (``fission.py`` calls these).

Each function writes the code that runs *between* regions, once per cube (or once per grid in
grid mode), for one plan item:

- ``MaskedIf`` / ``MaskedWhile``: ``__m3lo1, __m3hi1 = __mask_bounds(__m3, 1, __exited, <slots>)``
  and ``if __m3lo1 < __m3hi1:`` -- the body's regions loop over that span of slots only and skip
  the units whose mask entry is not the selector;
- ``Check``: a barrier or grid sync under a mask; raises ``DivergenceError`` when a cube (the grid)
  has units that reach it and live units that do not;
- ``Exchange``: loads the operand arrays the previous region stored, allocates the result arrays
  once per chunk (the fixed result type of numba-cuda's intrinsic) and calls the
  ``warps_runtime`` helper. A shuffle only checks that the lanes agree: its result is read in
  place, by the region that uses it, from the operand array of the source lane
  (``shuffle_read``), which saves a pass over the cube and a result array per shuffle.

The helper names are imported under ``IMPORTS`` aliases.
"""

from __future__ import annotations

import ast

from numba_cube.backends.cpu.plan import Check, Exchange
from numba_cube.backends.cpu.unitcode import Writer

_RUNTIME = "numba_cube.backends.cpu.warps_runtime"
IMPORTS = [f"from {_RUNTIME} import mask_bounds as __mask_bounds, check_cube as __check_cube, "
           "vote as __vote, match_any as __match_any, match_all as __match_all, "
           "activemask as __activemask, syncwarp as __syncwarp, snapshot as __snapshot, "
           "DivergenceError as __DivergenceError"]

#: the per-unit array of the top level (no run-time mask): every unit is selected
TOP_MASK = "__mtop"

#: shuffles are read in place by the region that uses the result (``shuffle_read``)
SHUFFLES = frozenset({"shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync"})
_VOTE_MODE = {"all_sync": 0, "any_sync": 1, "eq_sync": 2, "ballot_sync": 3}
#: result dtypes of numba-cuda's intrinsics (cudadecl.py / intrinsics.py)
_RESULT_DTYPE = {"all_sync": "bool_", "any_sync": "bool_", "eq_sync": "bool_",
                 "ballot_sync": "int32", "match_any_sync": "int32", "activemask": "uint32"}


def active(ctx) -> str:
    """``"<mask array>, <selector>"`` of a region or item context."""
    mask, sel = ctx if ctx is not None else (TOP_MASK, 1)
    return f"{mask}, {sel}"


def bounds(mask: str, sel: int) -> tuple[str, str]:
    """Names of the slot span ``[lo, hi)`` of the units a mask selects (``mask_bounds``)."""
    return f"{mask}lo{sel}", f"{mask}hi{sel}"


def emit_bounds(w: Writer, mask: str, sel: int, total: str) -> str:
    """Compute the span of ``mask == sel``; returns the test 'some unit is selected'."""
    lo, hi = bounds(mask, sel)
    w.line(f"{lo}, {hi} = __mask_bounds({mask}, {sel}, __exited, {total})")
    return f"{lo} < {hi}"


def _raise(w: Writer, fn, node, what: str, detail: str) -> None:
    line = fn.user_line(node)
    message = f"divergent {what} at line {line} [in {fn.name!r}]: {detail}"
    w.line(f"raise __DivergenceError({message!r}, {line!r}, {fn.filename!r})")


def emit_check(w: Writer, check: Check, fn, total: str, group: str) -> None:
    """A barrier or grid sync under a run-time mask: all live units of the cube (grid) or none."""
    scope = group if check.kind == "barrier" else total
    with w.indent(f"if __check_cube({active(check.ctx)}, __exited, {total}, {scope}):"):
        if check.kind == "barrier":
            _raise(w, fn, check.node, "barrier", "cuda.syncthreads() is reached by some units "
                   "of a cube but not by all of them (a GPU would hang or be undefined)")
        else:
            _raise(w, fn, check.node, "grid sync", "this_grid().sync() is reached by some "
                   "units of the grid but not by all of them (a GPU would hang)")


def snapshot_array(ex: Exchange) -> str:
    return f"__xa{ex.k}"


def emit_exchange(w: Writer, ex: Exchange, fn, uniform: set[str], total: str,
                  group: str, snapshot: bool) -> None:
    """The helper call of one warp intrinsic (see the module docstring). ``snapshot``: record
    which units execute a shuffle, for a reading region that changes masks or exits while it
    runs (``warps_runtime.snapshot``)."""
    w.line(f"# exchange {ex.k}: cuda.{ex.op} (line {fn.user_line(ex.node)})")
    per_unit = [n for n in ex.inputs if n not in uniform]
    args = {n: n if n in uniform else f"{n}__r" for n in ex.inputs}
    if per_unit:
        with w.indent(f"if {per_unit[0]}__ok:"):
            _exchange_body(w, ex, fn, per_unit, args, total, group)
    else:
        _exchange_body(w, ex, fn, per_unit, args, total, group)
    if snapshot:
        w.line(f"__snapshot({snapshot_array(ex)}, {active(ex.ctx)}, __exited, {total})")


def _exchange_body(w, ex, fn, per_unit, args, total, group) -> None:
    for name in per_unit:
        w.line(f"{name}__r = {name}__l[0]")
    for out in ([] if ex.op in SHUFFLES else ex.outputs):
        with w.indent(f"if not {out}__ok:"):
            w.line(f"{out}__l.append({_allocation(ex, out, args, total)})")
            w.line(f"{out}__ok = True")
        w.line(f"{out}__r = {out}__l[0]")
    where = f"{active(ex.ctx)}, __exited, {total}, {group}"
    m = args.get(ex.inputs[0]) if ex.inputs else None
    outs = [f"{o}__r" for o in ex.outputs]
    if ex.op in SHUFFLES or ex.op == "syncwarp":     # only the agreement check here
        span = "0, " + total if ex.ctx is None else ", ".join(bounds(*ex.ctx))
        call = f"__syncwarp({m}, {where}, {ex.ctx is None}, {span})"
        if ex.ctx is None and m == ex.inputs[0]:
            # no run-time mask and a uniform mask naming every lane: nothing to check, and a
            # call per cube would cost more than the shuffle itself
            call = f"({m} & 4294967295) != 4294967295 and {call}"
    elif ex.op in _VOTE_MODE:
        v = args[ex.inputs[1]]
        call = f"__vote({_VOTE_MODE[ex.op]}, {outs[0]}, {v}, {m}, {where})"
    elif ex.op == "match_any_sync":
        call = f"__match_any({outs[0]}, {args[ex.inputs[1]]}, {m}, {where})"
    elif ex.op == "match_all_sync":
        call = f"__match_all({outs[0]}, {outs[1]}, {args[ex.inputs[1]]}, {m}, {where})"
    else:
        call = f"__activemask({outs[0]}, {where})"
    with w.indent(f"if {call}:"):
        _raise(w, fn, ex.node, f"warp intrinsic cuda.{ex.op}", "the lanes named in its mask "
               "do not all execute it with the same mask, or a lane's mask does not name the "
               "lane itself (a GPU would hang or be undefined)")


def shuffle_read(ex: Exchange, uniform: set[str], slot: str, exits: bool,
                 snapshot: bool) -> list[str]:
    """Lines that give unit ``slot`` the result of shuffle ``ex``, in the unit loop of a region
    after it: the source lane's operand, read from the operand's ``[slots]`` array, or the unit's
    own where PTX says so or CUDA leaves it undefined (``warps_runtime``'s docstring). A
    uniform operand is every lane's result. Written out rather than called: a call that takes
    arrays costs Numba a reference count update per unit (measured: 17x on the read)."""
    _, value, lane = ex.inputs
    result, k = ex.outputs[0], ex.k
    if value in uniform:
        return [f"{result} = {value}"]
    b = lane if lane in uniform else f"{lane}__r[{slot}]"
    src, other = f"__src{k}", f"__other{k}"
    offset = {"shfl_sync": f"({b}) & 31", "shfl_up_sync": f"__lane - (({b}) & 31)",
              "shfl_down_sync": f"__lane + (({b}) & 31)",
              "shfl_xor_sync": f"__lane ^ (({b}) & 31)"}[ex.op]
    undefined = [f"{src} < 0", f"{src} > 31", f"__tid - __lane + {src} >= __nt"]
    if snapshot:
        undefined.append(f"not {snapshot_array(ex)}[{other}]")
    else:        # masks and exit flags are as the exchange saw them until the region ends
        if exits:
            undefined.append(f"__exited[{other}]")
        if ex.ctx is not None:
            undefined.append(f"{ex.ctx[0]}[{other}] != {ex.ctx[1]}")
    return [f"__lane = __tid & 31", f"{src} = {offset}", f"{other} = {slot} - __lane + {src}",
            f"if {' or '.join(undefined)}:", f"    {other} = {slot}",
            f"{result} = {value}__r[{other}]"]


def _allocation(ex: Exchange, out: str, args, total: str) -> str:
    if ex.op == "match_all_sync":
        dtype = "int32" if out == ex.outputs[0] else "bool_"
    else:
        dtype = _RESULT_DTYPE[ex.op]
    return f"__np.zeros({total}, __np.{dtype})"


def changes_activity(code, masks: list[str]) -> bool:
    """Does region ``code`` exit units or write a run-time mask? (Then a shuffle read in it
    needs the exchange's ``snapshot``.)"""
    return any(isinstance(n, ast.Return) or (isinstance(n, ast.Subscript)
                                             and isinstance(n.ctx, ast.Store)
                                             and isinstance(n.value, ast.Name)
                                             and n.value.id in masks)
               for s in code for n in ast.walk(s))
