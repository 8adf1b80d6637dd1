"""Nopython helpers behind warp exchanges and run-time uniformity checks in generated kernels.

A kernel's units run one region at a time (``emit/cube_kernel.py``); a warp intrinsic ends a region, so
when the helper here runs, every unit of the cube that reaches the intrinsic has stored its
operands in a ``[slots]`` array. A *slot* is a unit's index in those arrays: its linear thread id
``__tid`` in the cube (``slot = cube * units + tid`` when a grid sync keeps every cube's state,
``emit/cube_kernel.py``'s grid mode). Warps are CUDA's: 32 consecutive linear thread ids of one cube, the
last warp of a cube partial when its size is not a multiple of 32 (its missing lanes count as
exited).

A unit *executes* an exchange when it is active in the innermost run-time mask around it
(``act[slot] == sel``) and has not exited. Each helper returns 0, or 1 when the units that must
agree do not (then the generated code raises ``DivergenceError`` naming the line: on a GPU the
kernel would hang or be undefined). The rules are CUDA's for ``*_sync`` intrinsics: each
executing lane's mask names that lane, and every lane named in it that has not exited executes the
same intrinsic with the same mask.

What CUDA leaves undefined is defined here, never raised: a shuffle whose source lane does not
execute the shuffle (exited, missing from a partial warp, on another branch) returns the reading
lane's own value. Programs that are correct on a GPU never consume such a value (reduction lanes
past the live ones), and refusing them would refuse correct programs.

Shuffle source lanes follow PTX's ``shfl.sync`` with numba-cuda's constants (width 32: clamp 31
for idx/down/xor, 0 for up): the lane operand is taken modulo 32 (its low five bits); ``up``
past lane 0 and ``down`` past lane 31 read the lane's own value. The shuffle's read itself is
written into the generated code (``warps.shuffle_read``); here is only its agreement check
(``syncwarp``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from numba_cube.backends.cpu.cache.helpers import sign_helpers
from numba_cube.errors import DivergenceError

__all__ = ["DivergenceError", "mask_bounds", "mask_span", "mask_edge", "snapshot", "check_cube", "vote",
           "match_any", "match_all", "activemask", "syncwarp"]

WARP = 32
_FULL = 0xFFFFFFFF

#: vote modes, PTX's numbering
VOTE_ALL, VOTE_ANY, VOTE_EQ, VOTE_BALLOT = 0, 1, 2, 3


# DivergenceError lives in the exception tree (numba_cube.errors); the generated code imports it
# from here with the helpers.


# ---- small typed accessors -----------------------------------------------------------------


def at(x, i):
    """``x[i]`` for an array of per-unit values, ``x`` itself for a cube-uniform scalar."""
    raise NotImplementedError("nopython only")


@overload(at)
def _at_impl(x, i):
    if isinstance(x, types.Array):
        return lambda x, i: x[i]
    return lambda x, i: x


def is_array(x):
    """Is ``x`` an array (per-unit operands) rather than a scalar (a uniform one)?"""
    raise NotImplementedError("nopython only")


@overload(is_array)
def _is_array_impl(x):
    flag = isinstance(x, types.Array)
    return lambda x: flag


def bits(x):
    """The bit pattern of a number as an int64 (match_* compare bits, as numba-cuda does)."""
    raise NotImplementedError("nopython only")


@overload(bits)
def _bits_impl(x):
    if isinstance(x, types.Float):
        ity = np.int32 if x.bitwidth == 32 else np.int64

        def impl(x):
            return np.int64(np.array([x]).view(ity)[0])
        return impl
    if isinstance(x, (types.Integer, types.Boolean)):
        return lambda x: np.int64(x)
    return None


# ---- masks ------------------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def mask_bounds(act, sel, exited, total):
    """``(lo, hi)``: the slots ``[lo, hi)`` span every unit that has not exited and has
    ``act == sel`` (``lo >= hi`` when there is none). The regions under the mask loop over that
    span only (``if tid < 32:`` in a cube of 256 runs 32 iterations, not 256)."""
    lo = total
    hi = 0
    for s in range(total):
        # branch-free min/max reductions, which LLVM vectorizes (measured: 1.45x faster)
        chosen = np.int64((act[s] == sel) & (not exited[s]))
        lo = min(lo, s + (1 - chosen) * total)
        hi = max(hi, (s + 1) * chosen)
    return lo, hi


@njit(nogil=True, cache=True)
def mask_span(act, sel, exited, total, group):
    """``(lo, hi, whole, dense)``: ``mask_bounds``'s span; whether in every warp (of every
    group of ``group`` slots, a cube) the units with ``act == sel`` are none or all of the live
    ones; and whether every slot of the span has ``act == sel``.

    The generated code calls this where the mask was just evaluated, for a block under it with
    a shuffle or ``syncwarp``. ``whole`` decides, once for the block, that an intrinsic with a
    uniform mask naming all 32 lanes agrees (``syncwarp`` would return 0); ``dense`` lets the
    block's unit loops drop their per-unit mask test. Both stay true until the mask is
    evaluated again: only the mask's own evaluation writes it, and a unit that exits in between
    leaves both the executing and the live set."""
    lo, hi = mask_bounds(act, sel, exited, total)
    whole = True
    dense = True
    # only the warps that overlap the span can have executing units; they are few (one for
    # `if tid < 32:`), so this costs far less than the span's own pass over the cube
    wbase = lo // group * group + (lo % group) // WARP * WARP      # the warp of slot lo
    while wbase < hi:
        end = min(wbase + WARP, (wbase // group + 1) * group)    # a cube's last warp may be partial
        executing = 0
        alive = 0
        for s in range(wbase, end):
            live = np.int64(not exited[s])
            selected = np.int64(act[s] == sel)
            alive += live
            executing += live & selected
            if lo <= s < hi and not selected:
                dense = False
        if executing != 0 and executing != alive:
            whole = False
        wbase = end
    return lo, hi, whole, dense


@njit(nogil=True, cache=True)
def mask_edge(act, total, prefix):
    """The boundary slot of a mask whose ones are a prefix of the cube (``prefix``: the first
    slot without a one) or a suffix (the first slot with one), by binary search
    (``passes/spans.py`` says when a mask has that shape)."""
    lo = 0
    hi = total
    while lo < hi:
        mid = (lo + hi) // 2
        if (act[mid] == 1) == prefix:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(nogil=True, cache=True)
def snapshot(out, act, sel, exited, total):
    """``out[slot]``: does the unit execute the exchange now? The region that reads a shuffle's
    result updates masks and exit flags as it goes, so its reads look here instead."""
    for s in range(total):
        out[s] = act[s] == sel and not exited[s]


@njit(nogil=True, cache=True)
def check_cube(act, sel, exited, total, group):
    """1 when some group of ``group`` slots (a cube, or the whole grid for a grid sync) has both
    units that reach the barrier and live units that do not; else 0."""
    for base in range(0, total, group):
        reached = 0
        alive = 0
        for s in range(base, base + group):
            if not exited[s]:
                alive += 1
                if act[s] == sel:
                    reached += 1
        if reached != 0 and reached != alive:
            return 1
    return 0


@njit(nogil=True, cache=True, inline="always")
def _warp_state(act, sel, exited, base, nlanes):
    """``(executing, alive)`` lane bit sets of the warp whose lane 0 is slot ``base``."""
    executing = 0
    alive = 0
    for lane in range(nlanes):
        # branch-free: the flags are data, and a mispredicted branch per lane costs more
        # than the loop's work
        live = np.int64(not exited[base + lane])
        alive |= live << lane
        executing |= (live & np.int64(act[base + lane] == sel)) << lane
    return executing, alive


@njit(nogil=True, cache=True, inline="always")
def _masks_agree(masks, base, nlanes, executing, alive):
    """CUDA's rule for one warp: every executing lane is named in its mask, and every live lane
    its mask names executes with the same mask. Returns (ok, the common mask or -1)."""
    common = -1
    same = True
    for lane in range(nlanes):
        if (executing >> lane) & 1:
            m = np.int64(at(masks, base + lane)) & _FULL
            if common == -1:
                common = m
            elif m != common:
                same = False
    if common == -1:
        return True, common
    if same:
        named = common & alive
        return (executing & ~common) == 0 and (named & ~executing) == 0, common
    for lane in range(nlanes):                       # different masks: lane by lane
        if (executing >> lane) & 1:
            m = np.int64(at(masks, base + lane)) & _FULL
            if not (m >> lane) & 1:
                return False, -1
            named = m & alive
            if named & ~executing:
                return False, -1
            for other in range(nlanes):
                if (named >> other) & 1 and (np.int64(at(masks, base + other)) & _FULL) != m:
                    return False, -1
    return True, -1


@njit(nogil=True, cache=True)
def syncwarp(masks, act, sel, exited, total, group, top, lo, hi):
    """The agreement check of ``cuda.syncwarp(mask)`` and of the shuffles (whose values the
    generated code reads in place, ``warps.shuffle_read``). ``top``: no run-time mask is in
    force, so every live unit executes; a uniform mask naming all 32 lanes then agrees without
    looking at the lanes.
    Only warps with slots in ``[lo, hi)`` can execute (``mask_bounds``)."""
    if top and not is_array(masks) and (np.int64(at(masks, 0)) & _FULL) == _FULL:
        return 0
    for cube in range(0, total, group):
        if cube + group <= lo or cube >= hi:
            continue
        for wbase in range(cube, cube + group, WARP):
            nlanes = min(WARP, cube + group - wbase)
            if wbase + nlanes <= lo or wbase >= hi:
                continue
            executing, alive = _warp_state(act, sel, exited, wbase, nlanes)
            if executing and not _masks_agree(masks, wbase, nlanes, executing, alive)[0]:
                return 1
    return 0


@njit(nogil=True, cache=True)
def vote(mode, out, preds, masks, act, sel, exited, total, group):
    """``all_sync`` / ``any_sync`` / ``eq_sync`` (bool results) and ``ballot_sync`` (int32)."""
    # a uniform mask naming all 32 lanes agrees exactly when the warp's executing lanes are all
    # its live ones (``_masks_agree``'s rule), which saves a pass over the lanes per warp
    full = not is_array(masks) and (np.int64(at(masks, 0)) & _FULL) == _FULL
    for cube in range(0, total, group):
        for wbase in range(cube, cube + group, WARP):
            nlanes = min(WARP, cube + group - wbase)
            executing, alive = _warp_state(act, sel, exited, wbase, nlanes)
            if not executing:
                continue
            if full:
                if executing != alive:
                    return 1
            elif not _masks_agree(masks, wbase, nlanes, executing, alive)[0]:
                return 1
            true = 0
            for lane in range(nlanes):       # branch-free (predicates are data: measured 1.8x)
                true |= np.int64(at(preds, wbase + lane) != 0) << lane
            true &= executing
            for lane in range(nlanes):
                if not (executing >> lane) & 1:
                    continue
                named = np.int64(at(masks, wbase + lane)) & _FULL & executing
                if mode == VOTE_ALL:
                    r = (named & ~true) == 0
                elif mode == VOTE_ANY:
                    r = (named & true) != 0
                elif mode == VOTE_EQ:
                    r = (named & true) == 0 or (named & ~true) == 0
                else:
                    r = named & true
                out[wbase + lane] = r
    return 0


@njit(nogil=True, cache=True)
def match_any(out, values, masks, act, sel, exited, total, group):
    """``match_any_sync``: for each lane, the named lanes holding the same bits (int32)."""
    for cube in range(0, total, group):
        for wbase in range(cube, cube + group, WARP):
            nlanes = min(WARP, cube + group - wbase)
            executing, alive = _warp_state(act, sel, exited, wbase, nlanes)
            if not executing:
                continue
            if not _masks_agree(masks, wbase, nlanes, executing, alive)[0]:
                return 1
            for lane in range(nlanes):
                if not (executing >> lane) & 1:
                    continue
                named = np.int64(at(masks, wbase + lane)) & _FULL & executing
                mine = bits(at(values, wbase + lane))
                same = 0
                for other in range(nlanes):
                    if (named >> other) & 1 and bits(at(values, wbase + other)) == mine:
                        same |= 1 << other
                out[wbase + lane] = same
    return 0


@njit(nogil=True, cache=True)
def match_all(out, pred, values, masks, act, sel, exited, total, group):
    """``match_all_sync``: (the named lanes, True) when they all hold the same bits, else
    (0, False)."""
    for cube in range(0, total, group):
        for wbase in range(cube, cube + group, WARP):
            nlanes = min(WARP, cube + group - wbase)
            executing, alive = _warp_state(act, sel, exited, wbase, nlanes)
            if not executing:
                continue
            if not _masks_agree(masks, wbase, nlanes, executing, alive)[0]:
                return 1
            for lane in range(nlanes):
                if not (executing >> lane) & 1:
                    continue
                named = np.int64(at(masks, wbase + lane)) & _FULL & executing
                mine = bits(at(values, wbase + lane))
                equal = True
                for other in range(nlanes):
                    if (named >> other) & 1 and bits(at(values, wbase + other)) != mine:
                        equal = False
                out[wbase + lane] = named if equal else 0
                pred[wbase + lane] = equal
    return 0


@njit(nogil=True, cache=True)
def activemask(out, act, sel, exited, total, group):
    """``activemask()``: the executing lanes of each lane's warp (uint32)."""
    for cube in range(0, total, group):
        for wbase in range(cube, cube + group, WARP):
            nlanes = min(WARP, cube + group - wbase)
            executing, _ = _warp_state(act, sel, exited, wbase, nlanes)
            for lane in range(nlanes):
                if (executing >> lane) & 1:
                    out[wbase + lane] = executing
    return 0


# Last: Numba's unsigned cache of these helpers is never read (cache/helpers.py says why).
sign_helpers(globals())
