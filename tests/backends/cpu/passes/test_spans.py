"""Masked blocks whose test is monotone in threadIdx.x find their span by search
(``passes/spans.py``).

The classification is pinned on lowered tests (only ``<``/``<=``/``>``/``>=`` of threadIdx.x plus
a cube-level offset against a bound shared by every unit qualify), and kernels with such blocks
run through ``build_program``'s serial and parallel variants against NumPy: prefixes and
suffixes, the ``else`` part, bounds that are floats, NaN, past the cube or not a warp boundary,
a cube whose last warp is partial, ``if i < n`` in the grid's last cube, and a 2-D cube (where
threadIdx.x is not the slot, so the general pass runs). Where the fast span says a full mask
does not cover whole warps, the intrinsic still fails with ``DivergenceError``. Where the
region before the block only evaluates the mask (after a barrier), it is filled in closed form
from the clamped bound in 1-D cubes: those kernels run against NumPy too (prefix and suffix,
bounds of every kind, a partial warp, a 2-D cube, a mask refilled in a loop), and a region that
does other work keeps the per-unit evaluation.
"""

import ast

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.passes import spans
from numba_cube.backends.cpu.analyze.dataflow import Purity
from numba_cube.backends.cpu.translate import build_program
from numba_cube.errors import DivergenceError

VARIANTS = ["serial", "parallel"]
FULL = 0xFFFFFFFF


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


# ---- classification -------------------------------------------------------------------------

REMAT = {"tid": ast.parse("__tx", mode="eval").body,
         "i": ast.parse("__nn(__bx * __bdx + __tx)", mode="eval").body,
         "lane": ast.parse("__tx % 32", mode="eval").body}
PURITY = Purity({"tid", "i", "lane", "n", "x", "v"}, {})


def kind_of(test: str) -> str | None:
    return spans.test_kind(ast.parse(test, mode="eval").body, REMAT, {"n", "x"}, PURITY)


@pytest.mark.parametrize("test, kind", [
    ("tid < 32", spans.PREFIX), ("tid <= n", spans.PREFIX), ("32 > tid", spans.PREFIX),
    ("n >= tid + 1", spans.PREFIX), ("i < n", spans.PREFIX), ("i < x.shape[0]", spans.PREFIX),
    ("tid >= 8", spans.SUFFIX), ("tid - __bdx > n", spans.SUFFIX), ("n < i", spans.SUFFIX),
    ("tid < 2.5", spans.PREFIX),
])
def test_monotone_tests_are_classified(test, kind):
    """A comparison of threadIdx.x (plus block ids and sizes) with a shared bound is a prefix
    (``<``, ``<=``) or a suffix (``>``, ``>=``), mirrored when threadIdx.x is on the right."""
    assert kind_of(test) == kind


@pytest.mark.parametrize("test", [
    "tid == 0", "tid != 3", "lane < 4", "tid < x[0]", "tid < v", "tid * 2 < n", "n - tid > 3",
    "tid < i", "0 <= tid < 32", "tid < n and tid > 2", "tid + 4611686018427387904 < n",
])
def test_other_tests_take_the_general_pass(test):
    """Equality, non-monotone per-unit sides, bounds read from memory or from per-unit names,
    chained or combined tests and huge offsets are not classified."""
    assert kind_of(test) is None


# ---- kernels --------------------------------------------------------------------------------

@cuda.jit
def pair_sums_below(x, bound, out):
    """Units with threadIdx.x below ``bound`` add their xor-1 partner (the lanes that execute
    are the active mask); the others negate."""
    tid = cuda.threadIdx.x
    lin = cuda.threadIdx.y * cuda.blockDim.x + tid
    i = cuda.blockIdx.x * cuda.blockDim.x * cuda.blockDim.y + lin
    v = x[i]
    if tid < bound:
        v += cuda.shfl_xor_sync(cuda.activemask(), v, 1)
        out[i] = v
    else:
        out[i] = -v


@cuda.jit
def pair_sums_from(x, bound, out):
    """The suffix form, written with threadIdx.x on the right: units with ``bound <=
    threadIdx.x`` add their partner."""
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    v = x[i]
    if bound <= tid:
        v += cuda.shfl_xor_sync(cuda.activemask(), v, 1)
        out[i] = v
    else:
        out[i] = -v


@cuda.jit
def full_mask_below(x, bound, out):
    """A full-mask shuffle under ``tid < bound``: valid only where whole warps execute it."""
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    v = x[i]
    if tid < bound:
        v += cuda.shfl_down_sync(FULL, v, 1)
    out[i] = v


@cuda.jit
def tail_pairs(x, n, out):
    i = cuda.grid(1)
    if i < n:
        v = x[i]
        v += cuda.shfl_xor_sync(cuda.activemask(), v, 1)
        out[i] = v


_programs: dict = {}


def run(kernel, variant, grid, block, *args):
    if kernel not in _programs:
        _programs[kernel] = build_program(kernel.py_func)
    bdx, bdy = block if isinstance(block, tuple) else (block, 1)
    getattr(_programs[kernel], variant)(grid, 1, 1, bdx, bdy, 1, *args)


def pair_reference(x, cubes, bdx, bdy, selected):
    """``x + x[partner]`` where ``selected(threadIdx.x)``, else ``-x`` (the partner is lane^1,
    in the same row of the cube and selected too for the bounds used here)."""
    nt = bdx * bdy
    out = np.empty_like(x)
    for b in range(cubes):
        for lin in range(nt):
            i = b * nt + lin
            out[i] = x[i] + x[b * nt + (lin ^ 1)] if selected(lin % bdx) else -x[i]
    return out


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bound", [0, 8, 32, 40, 64, 100, 7.5, -3])
def test_prefix_block_matches_numpy(variant, bound):
    """``if tid < bound:`` with the executing lanes as the mask: every bound, inside the cube or
    past it, a warp boundary or not, an integer or a float, gives NumPy's numbers in both
    parts of the ``if``."""
    x = np.arange(1.0, 3 * 64 + 1)
    out = np.zeros_like(x)
    run(pair_sums_below, variant, 3, 64, x, bound, out)
    np.testing.assert_array_equal(out, pair_reference(x, 3, 64, 1, lambda t: t < bound))


@pytest.mark.parametrize("variant", VARIANTS)
def test_nan_bound_selects_no_unit(variant):
    """``tid < nan`` is false for every unit: all of them take the ``else``."""
    x = np.arange(1.0, 65)
    out = np.zeros_like(x)
    run(pair_sums_below, variant, 1, 64, x, float("nan"), out)
    np.testing.assert_array_equal(out, -x)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bound", [0, 6, 32, 48, 64])
def test_suffix_block_matches_numpy(variant, bound):
    """``if bound <= tid:`` selects a suffix of the cube; its span starts at the boundary."""
    x = np.arange(1.0, 2 * 64 + 1)
    out = np.zeros_like(x)
    run(pair_sums_from, variant, 2, 64, x, bound, out)
    np.testing.assert_array_equal(out, pair_reference(x, 2, 64, 1, lambda t: t >= bound))


@pytest.mark.parametrize("variant", VARIANTS)
def test_partial_last_warp(variant):
    """A cube of 40 units (a last warp of 8 lanes): a prefix that ends at the cube's end covers
    whole warps, so a full-mask shuffle there agrees, with CUDA's values past the warp."""
    x = np.arange(1.0, 81)
    out = np.zeros_like(x)
    run(full_mask_below, variant, 2, 40, x, 40, out)
    expected = np.empty_like(x)
    for b in range(2):
        for lin in range(40):
            src = lin + 1 if lin % 32 < 31 and lin + 1 < 40 else lin    # own value past the warp
            expected[b * 40 + lin] = x[b * 40 + lin] + x[b * 40 + src]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_full_mask_over_a_partial_span_is_divergent(variant):
    """``if tid < 16:`` around a full-mask shuffle names lanes 16-31, which do not execute it:
    the fast span reports the warp as not whole, and the check raises as on a GPU (hang)."""
    x = np.arange(64.0)
    with pytest.raises(DivergenceError):
        run(full_mask_below, variant, 1, 64, x, 16, np.zeros_like(x))
    out = np.zeros_like(x)
    run(full_mask_below, variant, 1, 64, x, 32, out)         # whole warps: agrees
    assert out[0] == x[0] + x[1] and out[40] == x[40]


@pytest.mark.parametrize("variant", VARIANTS)
def test_grid_tail_prefix(variant):
    """``if i < n:`` in the grid's last cube selects a prefix of it that is not a warp
    boundary (36 of 64 units)."""
    n = 100
    x = np.arange(1.0, 129)
    out = np.full_like(x, 7.0)
    run(tail_pairs, variant, 2, 64, x, n, out)
    expected = np.full_like(x, 7.0)
    idx = np.arange(n)
    expected[:n] = x[:n] + x[idx ^ 1]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bound", [0, 8, 16, 20])
def test_two_dimensional_cube_takes_the_general_pass(variant, bound):
    """In a 16 x 4 cube threadIdx.x is not the slot (``tid < 8`` selects eight units of every
    row): the general pass computes the span, and the numbers are still NumPy's."""
    x = np.arange(1.0, 2 * 64 + 1)
    out = np.zeros_like(x)
    run(pair_sums_below, variant, 2, (16, 4), x, bound, out)
    np.testing.assert_array_equal(out, pair_reference(x, 2, 16, 4, lambda t: t < bound))


# ---- closed form ----------------------------------------------------------------------------

@cuda.jit
def pairs_after_barrier(x, bound, out):
    """The masked ``if`` right after a barrier: its region only evaluates the mask."""
    tid = cuda.threadIdx.x
    lin = cuda.threadIdx.y * cuda.blockDim.x + tid
    i = cuda.blockIdx.x * cuda.blockDim.x * cuda.blockDim.y + lin
    v = x[i]
    cuda.syncthreads()
    if tid < bound:
        v += cuda.shfl_xor_sync(cuda.activemask(), v, 1)
        out[i] = v
    else:
        out[i] = -v


@cuda.jit
def suffix_after_barrier(x, bound, out):
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    v = x[i]
    cuda.syncthreads()
    if bound <= tid:
        v += cuda.shfl_xor_sync(cuda.activemask(), v, 1)
        out[i] = v
    else:
        out[i] = -v


@cuda.jit
def growing_prefix(x, out):
    """The mask is refilled in every round of a cube-level loop, with a bound of the round."""
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    v = x[i]
    for k in range(4):
        cuda.syncthreads()
        if tid < 12 * k:
            v += cuda.shfl_xor_sync(cuda.activemask(), v, 1)
    out[i] = v


def _source(kernel):
    return build_program(kernel.py_func).source


def active_pair_reference(x, cubes, bdx, bdy, selected):
    """``pair_reference`` where a selected unit whose partner is not selected (outside the
    active mask) gets its own value from the shuffle, as CUDA's ``shfl_xor_sync`` does."""
    nt = bdx * bdy
    out = np.empty_like(x)
    for b in range(cubes):
        for lin in range(nt):
            i, p = b * nt + lin, lin ^ 1
            src = b * nt + p if p < nt and selected(p % bdx) and p // bdx == lin // bdx else i
            out[i] = x[i] + x[src] if selected(lin % bdx) else -x[i]
    return out


def test_a_region_that_only_evaluates_the_mask_fills_it_in_closed_form():
    """After a barrier the mask of ``tid < bound`` is two slices from its clamped bound in a
    1-D cube, whose edge the span takes instead of a search; a region that also does other
    work (``pair_sums_below``) keeps the per-unit evaluation and the search."""
    src = _source(pairs_after_barrier)
    assert "__m1c = min(max(__bound_lt(bound), 0), __nt)" in src
    assert "__m1[:__m1c] = 1" in src and "__m1[__m1c:__nt] = 2" in src
    assert "__m1e1 = __m1c" in src and "__m1e2 = __m1c" in src
    assert "__mask_edge(" not in src
    assert "__m1[:__m1c] = 2" in _source(suffix_after_barrier)
    other = _source(pair_sums_below)
    assert "__m1c" not in other and "__mask_edge(__m1, __nt, True)" in other


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bound", [0, 8, 32, 40, 64, 100, 7.5, -3, float("nan"), True])
@pytest.mark.parametrize("block", [64, 40, (16, 4)])
def test_closed_form_prefix_matches_numpy(variant, bound, block):
    """The closed-form mask gives NumPy's numbers in both parts of the ``if``, for bounds
    inside and past the cube, floats, NaN and a bool, in a cube with a partial last warp, and
    in a 2-D cube (where the loop still evaluates the mask per unit)."""
    bdx, bdy = block if isinstance(block, tuple) else (block, 1)
    x = np.arange(1.0, 3 * bdx * bdy + 1)
    out = np.zeros_like(x)
    run(pairs_after_barrier, variant, 3, block, x, bound, out)
    np.testing.assert_array_equal(out, active_pair_reference(x, 3, bdx, bdy,
                                                             lambda t: t < bound))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bound", [0, 6, 32, 48, 64, 70, -1.5])
def test_closed_form_suffix_matches_numpy(variant, bound):
    """``if bound <= tid:`` after a barrier: the suffix's slices."""
    x = np.arange(1.0, 2 * 64 + 1)
    out = np.zeros_like(x)
    run(suffix_after_barrier, variant, 2, 64, x, bound, out)
    np.testing.assert_array_equal(out, active_pair_reference(x, 2, 64, 1,
                                                             lambda t: t >= bound))


@pytest.mark.parametrize("variant", VARIANTS)
def test_closed_form_mask_refilled_in_a_loop(variant):
    """Each round of the loop fills the mask from its own bound (0, 12, 24, 36 units)."""
    x = np.random.default_rng(5).standard_normal(2 * 48)
    out = np.zeros_like(x)
    run(growing_prefix, variant, 2, 48, x, out)
    v = x.reshape(2, 48).copy()
    for k in range(4):
        e = 12 * k
        v[:, :e] = v[:, :e] + v[:, np.arange(e) ^ 1]
    np.testing.assert_array_equal(out, v.ravel())
    assert "__m1c = min(max(__bound_lt(12 * k), 0), __nt)" in _source(growing_prefix)
