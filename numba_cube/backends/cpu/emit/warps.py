"""Printing the cube-level items of warp exchanges and run-time masks (``emit/cube_kernel.py`` calls these).

Each function writes the code that runs *between* regions, once per cube (or once per grid in
grid mode), for one plan item:

- ``MaskedIf`` / ``MaskedWhile``: ``__m3lo1, __m3hi1 = __mask_bounds(__m3, 1, __exited, <slots>)``
  and ``if __m3lo1 < __m3hi1:`` -- the body's regions loop over that span of slots only and skip
  the units whose mask entry is not the selector. When the body has a shuffle or ``syncwarp``
  with a uniform mask, ``__mask_span`` also says whether every warp is whole under the mask
  (``__m3w1``): a full mask then agrees without a call per intrinsic (``spanned_contexts``);
- ``Check``: a barrier or grid sync under a mask; raises ``DivergenceError`` when a cube (the grid)
  has units that reach it and live units that do not;
- ``Exchange``: loads the operand arrays the previous region stored, allocates the result arrays
  once per chunk (the fixed result type of numba-cuda's intrinsic) and calls the
  ``kernel_runtime/warps.py`` helper. A shuffle only checks that the lanes agree: its result is read in
  place, by the region that uses it, from the operand array of the source lane
  (``shuffle_read``), which saves a pass over the cube and a result array per shuffle. With a
  uniform lane operand, ``shfl_sync``, ``shfl_down_sync`` and ``shfl_xor_sync`` read the source
  unconditionally from a replica padded by ``REPLICA_PAD`` slots and select, which LLVM
  vectorizes.

The helper names are imported under ``IMPORTS`` aliases.
"""

from __future__ import annotations

import ast

from numba_cube.backends.cpu.analyze.plan_items import Check, Exchange
from numba_cube.backends.cpu.emit.unit_code import Writer

_RUNTIME = "numba_cube.backends.cpu.kernel_runtime.warps"
IMPORTS = [f"from {_RUNTIME} import mask_bounds as __mask_bounds, check_cube as __check_cube, "
           "vote as __vote, match_any as __match_any, match_all as __match_all, "
           "activemask as __activemask, syncwarp as __syncwarp, snapshot as __snapshot, "
           "DivergenceError as __DivergenceError"]

#: imported only by kernels that use ``emit_bounds``'s span form (other kernels keep their text)
SPAN_IMPORT = f"from {_RUNTIME} import mask_span as __mask_span"

#: the per-unit array of the top level (no run-time mask): every unit is selected
TOP_MASK = "__mtop"

#: extra slots after the replica of a value read by ``_padded_read``: its source index is at most
#: 31 past the reading slot, so the unconditional load stays inside the array
REPLICA_PAD = 32
#: shuffles read that way when their lane operand is uniform (the source slot is never below
#: the warp's first one)
_PADDED_READS = frozenset({"shfl_sync", "shfl_down_sync", "shfl_xor_sync"})
_FULL = "4294967295"

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


def whole_flag(mask: str, sel: int) -> str:
    """Name of ``mask_span``'s flag 'every warp is whole under ``mask == sel``'."""
    return f"{mask}w{sel}"


def dense_flag(mask: str, sel: int) -> str:
    """Name of ``mask_span``'s flag 'every slot of the span has ``mask == sel``'."""
    return f"{mask}d{sel}"


def emit_bounds(w: Writer, mask: str, sel: int, total: str, group: str | None = None) -> str:
    """Compute the span of ``mask == sel`` (and, given the slots of a cube ``group``, its
    ``whole_flag``); returns the test 'some unit is selected'."""
    lo, hi = bounds(mask, sel)
    if group is None:
        w.line(f"{lo}, {hi} = __mask_bounds({mask}, {sel}, __exited, {total})")
    else:
        w.line(f"{lo}, {hi}, {whole_flag(mask, sel)}, {dense_flag(mask, sel)} = __mask_span("
               f"{mask}, {sel}, __exited, {total}, {group})")
    return f"{lo} < {hi}"


def _agrees_by_span(ex: Exchange, uniform: set[str]) -> bool:
    """Is ``ex`` a shuffle or ``syncwarp`` under a run-time mask with a uniform warp mask? Then
    its agreement follows from the block's ``whole_flag`` whenever the mask names all lanes."""
    return (ex.ctx is not None and (ex.op in SHUFFLES or ex.op == "syncwarp")
            and ex.inputs[0] in uniform)


def spanned_contexts(exchanges, uniform: set[str]) -> set[tuple[str, int]]:
    """The ``(mask, selector)`` blocks whose bounds must compute their ``whole_flag``."""
    return {ex.ctx for ex in exchanges if _agrees_by_span(ex, uniform)}


def padded_values(exchanges, uniform: set[str]) -> set[str]:
    """Names whose replicas get ``REPLICA_PAD`` extra slots (values read by ``_padded_read``)."""
    return {ex.inputs[1] for ex in exchanges if _padded(ex, uniform)}


def is_padded(ex: Exchange, uniform: set[str]) -> bool:
    """Is shuffle ``ex`` read by ``_padded_read``?"""
    return _padded(ex, uniform)


def _padded(ex: Exchange, uniform: set[str]) -> bool:
    return ex.op in _PADDED_READS and ex.inputs[2] in uniform and ex.inputs[1] not in uniform


def _raise(w: Writer, fn, node, what: str, detail: str) -> None:
    line = fn.user_line(node)
    message = f"divergent {what} at line {line} [in {fn.name!r}]: {detail}"
    w.line(f"raise __DivergenceError({message!r}, {line!r}, {fn.filename!r})")


def emit_check(w: Writer, check: Check, fn, total: str, group: str) -> None:
    """A barrier or grid sync under a run-time mask: all live units of the cube (grid) or none;
    the same for a ``break``/``continue`` of a cube-level loop (kind ``"flow"``; never in grid
    mode, ``plan.Splitter._flow_check``)."""
    scope = total if check.kind == "grid" else group
    with w.indent(f"if __check_cube({active(check.ctx)}, __exited, {total}, {scope}):"):
        if check.kind == "barrier":
            _raise(w, fn, check.node, "barrier", "cuda.syncthreads() is reached by some units "
                   "of a cube but not by all of them (a GPU would hang or be undefined)")
        elif check.kind == "flow":
            kw = type(check.node).__name__.lower()
            _raise(w, fn, check.node, kw, f"'{kw}' is taken by some units of a cube but not "
                   "by all of them, in a loop that contains a barrier or warp intrinsic (its "
                   "condition must be the same for every unit, as a flag read from shared "
                   "memory after a barrier is; a GPU would hang or be undefined)")
        else:
            _raise(w, fn, check.node, "grid sync", "this_grid().sync() is reached by some "
                   "units of the grid but not by all of them (a GPU would hang)")


def snapshot_array(ex: Exchange) -> str:
    return f"__xa{ex.k}"


def emit_exchange(w: Writer, ex: Exchange, fn, uniform: set[str], total: str,
                  group: str, snapshot: bool) -> None:
    """The helper call of one warp intrinsic (see the module docstring). ``snapshot``: record
    which units execute a shuffle, for a reading region that changes masks or exits while it
    runs (``warps.snapshot``)."""
    w.line(f"# exchange {ex.k}: cuda.{ex.op} (line {fn.user_line(ex.node)})")
    per_unit = [n for n in ex.inputs if n not in uniform]
    args = {n: n if n in uniform else f"{n}__r" for n in ex.inputs}
    if per_unit:
        with w.indent(f"if {per_unit[0]}__ok:"):
            _exchange_body(w, ex, fn, uniform, per_unit, args, total, group)
    else:
        _exchange_body(w, ex, fn, uniform, per_unit, args, total, group)
    if snapshot:
        w.line(f"__snapshot({snapshot_array(ex)}, {active(ex.ctx)}, __exited, {total})")


def _exchange_body(w, ex, fn, uniform, per_unit, args, total, group) -> None:
    # (the per-unit operands' replica variables are loaded once per cube: ``emit/cube_kernel.py``)
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
            call = f"({m} & {_FULL}) != {_FULL} and {call}"
        elif _agrees_by_span(ex, uniform):
            # under a run-time mask, a full mask agrees when every warp is whole under it,
            # which the block decided once when it computed its span (``mask_span``)
            call = f"(({m} & {_FULL}) != {_FULL} or not {whole_flag(*ex.ctx)}) and {call}"
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
                 snapshot: bool, whole: bool = False, full_warp: bool = False) -> list[str]:
    """Lines that give unit ``slot`` the result of shuffle ``ex``, in the unit loop of a region
    after it: the source lane's operand, read from the operand's ``[slots]`` array, or the unit's
    own where PTX says so or CUDA leaves it undefined (``kernel_runtime/warps.py``'s docstring). A
    uniform operand is every lane's result. ``whole``: the read runs where every warp is whole
    under the exchange's mask (``whole_flag``) and the mask has not changed since (no
    ``snapshot``): a live source lane of the reader's warp then executes the shuffle, and its
    mask entry need not be read. ``full_warp``: the reader's warp has 32 units in the cube, so
    a padded read's source lane is never past the cube's end. Written out rather than called: a call that takes
    arrays costs Numba a reference count update per unit (measured: 17x on the read)."""
    _, value, lane = ex.inputs
    result, k = ex.outputs[0], ex.k
    if value in uniform:
        return [f"{result} = {value}"]
    b = lane if lane in uniform else f"{lane}__r[{slot}]"
    src, other = f"__src{k}", f"__other{k}"
    if _padded(ex, uniform):
        return _padded_read(ex, slot, exits, snapshot, whole, full_warp)
    offset = {"shfl_sync": f"({b}) & 31", "shfl_up_sync": f"__lane - (({b}) & 31)",
              "shfl_down_sync": f"__lane + (({b}) & 31)",
              "shfl_xor_sync": f"__lane ^ (({b}) & 31)"}[ex.op]
    undefined = [f"{src} < 0", f"{src} > 31", f"__tid - __lane + {src} >= __nt"]
    if snapshot:
        undefined.append(f"not {snapshot_array(ex)}[{other}]")
    else:        # masks and exit flags are as the exchange saw them until the region ends
        if exits:
            undefined.append(f"__exited[{other}]")
        if ex.ctx is not None and not whole:
            undefined.append(f"{ex.ctx[0]}[{other}] != {ex.ctx[1]}")
    return [f"__lane = __tid & 31", f"{src} = {offset}", f"{other} = {slot} - __lane + {src}",
            f"if {' or '.join(undefined)}:", f"    {other} = {slot}",
            f"{result} = {value}__r[{other}]"]


def _executes(ex: Exchange, other: str, exits: bool, snapshot: bool,
              whole: bool) -> list[str]:
    """Conditions for the source slot ``other`` (inside the cube, in the reader's warp) to
    execute the shuffle; ``whole`` as ``shuffle_read``."""
    if snapshot:
        return [f"{snapshot_array(ex)}[{other}]"]
    # masks and exit flags are as the exchange saw them until the region ends
    return ([f"not __exited[{other}]"] if exits else []) + (
        [f"{ex.ctx[0]}[{other}] == {ex.ctx[1]}"] if ex.ctx is not None and not whole else [])


def _padded_read(ex: Exchange, slot: str, exits: bool, snapshot: bool,
                 whole: bool, full_warp: bool) -> list[str]:
    """``shuffle_read`` for a uniform lane operand ``b`` of ``shfl_down_sync`` (source slot
    ``slot + (b & 31)``, undefined past the warp or the cube), ``shfl_xor_sync`` (source lane
    ``lane ^ (b & 31)``) or ``shfl_sync`` (source lane ``b & 31``; these two always in the warp,
    undefined past the cube). Both loads are unconditional (the value's replica has
    ``REPLICA_PAD`` spare slots) and the result a select: no branch and, for ``down``, an affine
    address, so the unit loop vectorizes (measured: 4x on a 256-unit shuffle step)."""
    value, result, k = ex.inputs[1], ex.outputs[0], ex.k
    d, src, other, inside = f"__d{k}", f"__src{k}", f"__other{k}", f"__in{k}"
    lines = [f"{d} = ({ex.inputs[2]}) & 31"]
    if ex.op == "shfl_down_sync":
        lines.append(f"{other} = {slot} + {d}")
        in_cube = [f"(__tid & 31) + {d} < 32"] + ([] if full_warp else [f"__tid + {d} < __nt"])
    else:
        lines += ["__lane = __tid & 31", f"{src} = __lane ^ {d}" if ex.op == "shfl_xor_sync"
                  else f"{src} = {d}", f"{other} = {slot} - __lane + {src}"]
        in_cube = [] if full_warp else [f"__tid - __lane + {src} < __nt"]
    # no short circuit (a branch per unit): the source's mask and exit flags are loaded even
    # past the cube, from the spare slots their arrays get too (``CubeKernel._chunk_prologue``)
    terms = in_cube + _executes(ex, other, exits, snapshot, whole)
    if not terms:           # the source always executes: no select
        return lines + [f"{result} = {value}__r[{other}]"]
    lines += [f"{inside} = {' & '.join(f'({t})' for t in terms)}",
              f"__xs{k} = {value}__r[{other}]", f"__xo{k} = {value}__r[{slot}]",
              f"{result} = __xs{k} if {inside} else __xo{k}"]
    return lines


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
