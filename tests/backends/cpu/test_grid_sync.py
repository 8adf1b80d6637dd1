"""Grid-wide sync on the CPU backend: every cube reaches phase k before any cube starts phase k+1.

``cuda.cg.this_grid().sync()`` (and ``g = cuda.cg.this_grid(); g.sync()``) splits the grid into
phases; cube-local state -- shared arrays, per-unit live values -- survives across the split.
Kernels run through ``build_program``'s serial and parallel variants on grids of several cubes
and are checked against NumPy.
"""

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.translate import build_program
from numba_cube.errors import DivergenceError

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


@cuda.jit
def sequential_rows(M):
    """numba-cuda's test_cooperative_groups kernel: each row reads the previous row's
    'opposite' column, written by another cube."""
    col = cuda.grid(1)
    g = cuda.cg.this_grid()
    rows = M.shape[0]
    cols = M.shape[1]
    for row in range(1, rows):
        opposite = cols - col - 1
        M[row, col] = M[row - 1, opposite] + 1
        g.sync()


@pytest.mark.parametrize("variant", VARIANTS)
def test_sequential_rows_across_cubes(variant):
    """Rows written one grid phase at a time across 8 cubes give numba-cuda's reference."""
    A = np.zeros((48, 64), np.int32)
    run(sequential_rows, variant, 8, 8, A)
    np.testing.assert_array_equal(A, np.tile(np.arange(48), (64, 1)).T)


@cuda.jit
def shift_through_phases(x, out, tmp):
    """Shared memory and a per-unit value computed before the grid sync are used after it;
    after the sync each unit reads a value another cube wrote."""
    sm = cuda.shared.array(16, np.float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    mine = x[i] * 2.0                       # per-unit value, live across the sync
    sm[tid] = x[i] + cuda.blockIdx.x        # cube-local state, live across the sync
    tmp[i] = x[i]
    cuda.cg.this_grid().sync()
    n = tmp.size
    out[i] = tmp[(i + 16) % n] + mine + sm[cuda.blockDim.x - 1 - tid]


@pytest.mark.parametrize("variant", VARIANTS)
def test_cube_state_survives_grid_sync(variant):
    """Per-unit values and shared arrays keep their cube's contents across a grid sync, and
    global writes of every cube before the sync are visible to every cube after it."""
    ncubes, nt = 5, 16
    x = np.random.default_rng(11).random(ncubes * nt)
    out = np.zeros_like(x)
    tmp = np.zeros_like(x)
    run(shift_through_phases, variant, ncubes, nt, x, out, tmp)
    i = np.arange(x.size)
    cube, tid = i // nt, i % nt
    sm = x.reshape(ncubes, nt) + np.arange(ncubes)[:, None]
    expected = x[(i + 16) % x.size] + 2 * x + sm[cube, nt - 1 - tid]
    np.testing.assert_allclose(out, expected)


@cuda.jit
def grid_sync_under_flag(flag, a):
    g = cuda.cg.this_grid()
    i = cuda.grid(1)
    if flag[i] > 0:
        g.sync()
    a[i] = 1


def test_grid_sync_under_a_run_time_condition():
    """A grid sync under a condition read from memory runs when the whole grid agrees, and is
    a DivergenceError when only some units reach it."""
    a = np.zeros(64, np.int64)
    run(grid_sync_under_flag, "serial", 4, 16, np.ones(64, np.int32), a)
    assert np.all(a == 1)
    flag = np.ones(64, np.int32)
    flag[40:] = 0                 # whole cubes, but not the whole grid
    with pytest.raises(DivergenceError) as info:
        run(grid_sync_under_flag, "serial", 4, 16, flag, a)
    assert "divergent grid sync at line" in str(info.value)
