"""Shared by the warp-exchange tests (``emit/test_warps_emit.py``, ``passes/test_warps_demand.py``):
the two twins to run, a private cache directory, a runner, and NumPy references for shuffles and
for a block's shuffle-tree sum in a GPU's float order."""

import numpy as np
import pytest

from numba_cube.backends.cpu.translate import build_program

VARIANTS = ["serial", "parallel"]


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


_programs: dict = {}


def run(kernel, variant, grid, block, *args):
    if kernel not in _programs:
        _programs[kernel] = build_program(kernel.py_func)
    getattr(_programs[kernel], variant)(grid, 1, 1, block, 1, 1, *args)


def shuffle_reference(op, v, d, executes):
    """CUDA's shuffle over one cube (``v`` per unit), with the CPU backend's definition of what
    CUDA leaves undefined: a source lane outside the warp's live executing lanes gives the
    reader's own value."""
    nt = v.size
    out = v.copy()
    for t in range(nt):
        lane = t % 32
        src_lane = {"down": lane + (d & 31), "xor": lane ^ (d & 31), "idx": d & 31}[op]
        src = t - lane + src_lane
        if src_lane < 32 and src < nt and executes[src]:
            out[t] = v[src]
    return out


def block_sum_reference(x, nt, ncubes, base, rounds):
    """Per cube, the float order of a GPU's shuffle tree, written directly in NumPy: shfl_down
    by 16, 8, 4, 2, 1 in every warp (a source past the warp or the cube gives the lane's own
    value), lane 0 of each warp into ``sm``, then in warp 0 ``rounds`` shfl_xor rounds by
    ``base >> k`` (taken modulo 32; a source past the cube gives the lane's own value)."""
    out = np.empty(ncubes)
    lane = np.arange(nt) % 32
    for c in range(ncubes):
        v = np.zeros(nt)
        stop = min(x.size, (c + 1) * nt)
        v[:stop - c * nt] = x[c * nt:stop]
        for off in (16, 8, 4, 2, 1):
            src = np.arange(nt) + off
            ok = (lane + off < 32) & (src < nt)
            v = v + np.where(ok, v[np.minimum(src, nt - 1)], v)
        sm = v[::32]
        w = np.arange(min(nt, 32))
        u = np.where(w < sm.size, sm[np.minimum(w, sm.size - 1)], 0.0)
        for k in range(rounds):
            src = w ^ ((base >> k) & 31)
            ok = src < w.size
            u = u + np.where(ok, u[np.minimum(src, w.size - 1)], u)
        out[c] = u[0]
    return out
