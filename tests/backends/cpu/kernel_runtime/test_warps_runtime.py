"""``kernel_runtime/warps.py``'s mask helpers against NumPy references over random masks.

``mask_bounds`` gives the span of the executing slots; ``mask_span`` adds whether every warp is
whole under the mask (no warp has both executing and live non-executing lanes) and whether the
span is dense. Cubes of 48 slots have a partial second warp; several cubes in one array are grid
mode's layout (``group`` slots a cube).
"""

import numpy as np
import pytest

from numba_cube.backends.cpu.kernel_runtime.warps import mask_bounds, mask_span


def reference(act, sel, exited, group):
    chosen = (act == sel) & ~exited
    where = np.flatnonzero(chosen)
    lo, hi = (int(where[0]), int(where[-1]) + 1) if where.size else (act.size, 0)
    whole = True
    for cube in range(0, act.size, group):
        for wbase in range(cube, cube + group, 32):
            warp = slice(wbase, min(wbase + 32, cube + group))
            if chosen[warp].any() and (chosen[warp] != ~exited[warp]).any():
                whole = False
    dense = bool((act[lo:hi] == sel).all())
    return lo, hi, whole, dense


@pytest.mark.parametrize("group,cubes", [(256, 1), (48, 3), (64, 2), (7, 4)])
def test_mask_span_matches_reference(group, cubes, rng=np.random.default_rng(5)):
    """Random masks (warp-uniform ones among them), random exits: span, whole and dense flags
    are the reference's whenever some slot is chosen."""
    total = group * cubes
    for trial in range(200):
        if trial % 2:           # warp-uniform selections: whole is true unless exits break it
            warps = rng.integers(1, 3, size=(total + 31) // 32)
            act = np.repeat(warps, 32)[:total].astype(np.int8)
        else:
            act = rng.integers(0, 3, size=total).astype(np.int8)
        exited = rng.random(total) < (0.1 if trial % 3 else 0.0)
        expected = reference(act, 1, exited, group)
        assert mask_bounds(act, 1, exited, total) == expected[:2]
        got = mask_span(act, 1, exited, total, group)
        assert got[:2] == expected[:2]
        if expected[0] < expected[1]:
            assert (bool(got[2]), bool(got[3])) == expected[2:]
