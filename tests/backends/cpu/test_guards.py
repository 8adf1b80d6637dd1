"""A barrier region that is one guarded ``if`` loops over the units the guard admits (``guards.py``).

The classification is pinned on parsed regions (bounds on ``threadIdx.x`` hoisted, other tests
kept), and kernels whose regions are narrowed run through ``build_program``'s serial and parallel
variants against NumPy: the shared-memory tree of a block reduction (``if tid < s``), a
Hillis-Steele scan (``if tid >= off``), a 2-D cube whose guard bounds only ``x``, float bounds,
and regions that must not be narrowed (a guard on ``threadIdx.y``, a region that stores a value
every unit keeps).
"""

import ast

import numpy as np
import pytest
from numba import cuda, float64

from numba_cube.backends.cpu import guards
from numba_cube.backends.cpu.analysis import Purity
from numba_cube.backends.cpu.translate import Unit, build_program

VARIANTS = ["serial", "parallel"]
REMAT = {"tid": ast.parse("__tx", mode="eval").body, "ty": ast.parse("__ty", mode="eval").body}
PURITY = Purity({"tid", "ty", "s", "sm", "v"}, {})


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


def hoisted(src: str):
    out = guards.hoisted_guard(ast.parse(src).body, REMAT, {"s"}, PURITY)
    if out is None:
        return None
    body, lo, hi = out
    return ast.unparse(ast.Module(body, [])), lo, hi


def test_a_bound_on_the_thread_index_becomes_the_range():
    """``if tid < s:`` is the range's upper bound and leaves the body; ``tid >= s`` a lower."""
    assert hoisted("if tid < s:\n    sm[tid] += sm[tid + s]") == (
        "sm[tid] += sm[tid + s]", [], ["__bound_lt(s)"])
    assert hoisted("if tid >= s:\n    sm[tid] = 1") == ("sm[tid] = 1", ["__bound_ge(s)"], [])


@pytest.mark.parametrize("src", [
    "if ty < s:\n    sm[tid] = 1",                 # another coordinate: stays a test
    "if tid % 2 == 0:\n    sm[tid] = 1",           # not a bound
    "if tid < s:\n    sm[tid] = 1\nelse:\n    sm[tid] = 2",
    "sm[tid] = 1\nif tid < s:\n    sm[tid] = 2",   # more than the guarded statement
    "if tid < v:\n    sm[tid] = 1",                # a bound not every unit shares
])
def test_other_regions_are_left_alone(src):
    """Tests on other coordinates, non-bounds, ``else`` parts, more statements and bounds
    that are not shared are not hoisted."""
    assert hoisted(src) is None


@cuda.jit
def tree_sum(x, out):
    sm = cuda.shared.array(128, float64)
    tid = cuda.threadIdx.x
    sm[tid] = x[cuda.grid(1)]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sm[tid] += sm[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = sm[0]


@cuda.jit
def scan(x, out):
    """Hillis-Steele inclusive scan per cube: ``if tid >= off`` is a lower bound."""
    sm = cuda.shared.array(128, float64)
    tmp = cuda.shared.array(128, float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i]
    cuda.syncthreads()
    off = 1
    while off < cuda.blockDim.x:
        tmp[tid] = sm[tid]
        cuda.syncthreads()
        if tid >= off:
            sm[tid] += tmp[tid - off]
        cuda.syncthreads()
        off *= 2
    out[i] = sm[tid]


@cuda.jit
def rows_below(x, bound, out):
    """A 2-D cube; the guard bounds x by a float; each row of units copies its first ones."""
    sm = cuda.shared.array((4, 16), float64)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    sm[ty, tx] = -1.0
    cuda.syncthreads()
    if tx < bound:
        sm[ty, tx] = x[ty, tx]
    cuda.syncthreads()
    out[ty, tx] = sm[ty, tx]


@cuda.jit
def per_unit_value(x, s, out):
    """The guarded region assigns ``v``, which every unit keeps across the barrier: not
    narrowed (units past ``s`` keep their own ``v``)."""
    tid = cuda.threadIdx.x
    v = x[tid]
    cuda.syncthreads()
    if tid < s:
        v = v * 2.0
    cuda.syncthreads()
    out[tid] = v


_programs: dict = {}


def run(kernel, variant, grid, block, *args):
    if kernel not in _programs:
        _programs[kernel] = build_program(kernel.py_func)
    bdx, bdy = block if isinstance(block, tuple) else (block, 1)
    getattr(_programs[kernel], variant)(grid, 1, 1, bdx, bdy, 1, *args)


def test_the_tree_step_loops_over_its_units_only():
    """The generated tree step is a loop over ``[0, s)`` without the test."""
    src = Unit(tree_sum.py_func, False, False, "numpy").generate()
    assert "for __tx in range(0, min(__bdx, __bound_lt(s))):" in src
    assert "if tid < s:" not in src


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("block", [128, 96, 1])
def test_tree_sum_matches_numpy(variant, block):
    """Cube sums of a shared-memory tree, for cube sizes that are and are not powers of two."""
    x = np.random.default_rng(2).random(4 * block)
    out = np.zeros(4)
    run(tree_sum, variant, 4, block, x, out)
    expected = x.reshape(4, block)
    if block & (block - 1) == 0:
        np.testing.assert_allclose(out, expected.sum(axis=1))
    else:            # the classic tree drops elements when the size is not a power of two
        ref = expected.copy()
        s = block // 2
        while s > 0:
            ref[:, :s] += ref[:, s:2 * s]
            s //= 2
        np.testing.assert_allclose(out, ref[:, 0])


@pytest.mark.parametrize("variant", VARIANTS)
def test_scan_matches_numpy(variant):
    """The lower-bound form: each cube's inclusive prefix sums."""
    x = np.random.default_rng(3).random(3 * 128)
    out = np.zeros_like(x)
    run(scan, variant, 3, 128, x, out)
    np.testing.assert_allclose(out, np.cumsum(x.reshape(3, 128), axis=1).ravel())
    assert "range(max(0, __bound_ge(off)), __bdx)" in Unit(scan.py_func, False, False,
                                                           "numpy").generate()


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bound", [0, 5, 5.5, 16, 40, -2.0, float("nan")])
def test_two_dimensional_cube_with_a_float_bound(variant, bound):
    """Every row of a 16 x 4 cube copies the units with ``tx < bound`` (NaN: none)."""
    x = np.arange(64.0).reshape(4, 16)
    out = np.zeros((4, 16))
    run(rows_below, variant, 1, (16, 4), x, bound, out)
    expected = np.where(np.arange(16)[None, :] < bound, x, -1.0)
    np.testing.assert_array_equal(out, expected)
    assert "min(__bdx, __bound_lt(bound))" in Unit(rows_below.py_func, False, False,
                                                    "numpy").generate()


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_region_storing_a_kept_value_is_not_narrowed(variant):
    """Units past ``s`` keep their own value of ``v`` (the region is printed in full)."""
    x = np.arange(32.0)
    out = np.zeros(32)
    run(per_unit_value, variant, 1, 32, x, 10, out)
    np.testing.assert_array_equal(out, np.where(np.arange(32) < 10, 2 * x, x))
    src = Unit(per_unit_value.py_func, False, False, "numpy").generate()
    assert "if tid < s:" in src
