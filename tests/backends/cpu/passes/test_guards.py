"""A barrier region that is one guarded ``if`` loops over the units the guard admits
(``passes/guards.py``).

The classification is pinned on parsed regions (bounds on ``threadIdx.x`` hoisted, other tests
kept), and kernels whose regions are narrowed run through ``build_program``'s serial and parallel
variants against NumPy: the shared-memory tree of a block reduction (``if tid < s``), a
Hillis-Steele scan (``if tid >= off``), a 2-D cube whose guard bounds only ``x``, float bounds,
and regions that must not be narrowed (a guard on ``threadIdx.y``, a region that stores a value
every unit keeps). Lane guards (``cuda.laneid == c``, residues of threadIdx.x) and equalities
(``tid == 0``) narrow the loop too: in 1-D, 2-D and 3-D cubes (where the lane is the linear id's),
behind lower bounds, and under a run-time mask, whose test stays; a lane guard with an ``else``
or storing a kept value is printed in full.
"""

import ast

import numpy as np
import pytest
from numba import cuda, float64

from numba_cube.backends.cpu.passes import guards
from numba_cube.backends.cpu.analyze.dataflow import Purity
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
    body = ast.unparse(ast.Module(out.body, []))
    return (body, out.lo, out.hi) if out.stride is None else (body, out.lo, out.hi, out.stride)


def test_a_bound_on_the_thread_index_becomes_the_range():
    """``if tid < s:`` is the range's upper bound and leaves the body; ``tid >= s`` a lower."""
    assert hoisted("if tid < s:\n    sm[tid] += sm[tid + s]") == (
        "sm[tid] += sm[tid + s]", [], ["__bound_lt(s)"])
    assert hoisted("if tid >= s:\n    sm[tid] = 1") == ("sm[tid] = 1", ["__bound_ge(s)"], [])


@pytest.mark.parametrize("src", [
    "if ty < s:\n    sm[tid] = 1",                 # another coordinate: stays a test
    "if tid % s == 0:\n    sm[tid] = 1",           # not a bound, nor a literal step
    "if tid < s:\n    sm[tid] = 1\nelse:\n    sm[tid] = 2",
    "sm[tid] = 1\nif tid < s:\n    sm[tid] = 2",   # more than the guarded statement
    "if tid < v:\n    sm[tid] = 1",                # a bound not every unit shares
])
def test_other_regions_are_left_alone(src):
    """Tests on other coordinates, non-bounds, ``else`` parts, more statements and bounds
    that are not shared are not hoisted."""
    assert hoisted(src) is None


@pytest.mark.parametrize("src, expected", [
    ("if __tid % 32 == 0:\n    sm[tid] = 1",
     ("sm[tid] = 1", [], [], guards.Stride("__tid", 32, 0))),
    ("if 3 == tid % 8:\n    sm[tid] = 1", ("sm[tid] = 1", [], [], guards.Stride("__tx", 8, 3))),
    ("if (__tid & 31) == 5 and tid < s:\n    sm[tid] = 1",
     ("sm[tid] = 1", [], ["__bound_lt(s)"], guards.Stride("__tid", 32, 5))),
    ("if tid % 32 == 0 and tid % 16 == 0:\n    sm[tid] = 1",       # one stride; the other stays
     ("if __tx % 16 == 0:\n    sm[tid] = 1", [], [], guards.Stride("__tx", 32, 0))),
    ("if tid == 0:\n    sm[tid] = 1", ("sm[tid] = 1", ["0"], ["0 + 1"])),
    ("if tid + 1 == __bdx:\n    sm[tid] = 1",
     ("sm[tid] = 1", ["(__bdx) - (1)"], ["(__bdx) - (1) + 1"])),
    ("if __tid == 3:\n    sm[tid] = 1", ("sm[tid] = 1", ["(3) - (__tbase)"], ["(3) - (__tbase) + 1"])),
])
def test_lane_residues_and_geometry_equalities_become_the_range(src, expected):
    """``L % m == c`` (``L & (m - 1) == c``) with ``L`` the linear id or ``threadIdx.x`` and int
    literals ``0 <= c < m`` is a stride (one per guard); ``threadIdx.x`` (or the linear id
    ``__tbase + __tx``) plus an offset equal to launch geometry is the range ``[b, b + 1)``."""
    assert hoisted(src) == expected


@pytest.mark.parametrize("src", [
    "if __tid % 32 == 32:\n    sm[tid] = 1",       # a residue that never occurs
    "if __tid % 32 == 0.0:\n    sm[tid] = 1",      # not an int literal
    "if __tid % 32 == 0:\n    sm[tid] = 1\nelse:\n    sm[tid] = 2",
    "if tid == s:\n    sm[tid] = 1",               # a shared value of unknown type
    "if ty == 0:\n    sm[tid] = 1",                # another coordinate
    "if v > 0 and __tid % 32 == 0:\n    sm[tid] = 1",   # the lane test is not leading
    "if tid & 6 == 0:\n    sm[tid] = 1",           # not a residue
    "if tid // 32 == 0:\n    sm[tid] = 1",         # not affine
])
def test_near_misses_of_lanes_and_equalities_are_left_alone(src):
    """Residues out of range or of a float, ``else`` parts, equalities with values that may be
    floats or complex, other coordinates, lane tests after a per-unit conjunct, and tests that
    are neither residues nor affine are not hoisted."""
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
    bdx, bdy, bdz = (tuple(block) + (1, 1))[:3] if isinstance(block, tuple) else (block, 1, 1)
    getattr(_programs[kernel], variant)(grid, 1, 1, bdx, bdy, bdz, *args)


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


@cuda.jit
def lane_leaders(x, out):
    """Each warp's lane 0 writes its unit's value (a replica) after a barrier; warps count
    linear ids, in cubes of any shape."""
    tid = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y
                                                + cuda.blockDim.y * cuda.threadIdx.z)
    nt = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
    v = x[cuda.blockIdx.x * nt + tid] * 2.0
    cuda.syncthreads()
    if cuda.laneid == 0:
        out[cuda.blockIdx.x, tid // 32] = v


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("block", [256, 96, 40, 1, (12, 5), (8, 4, 2), (5, 3, 3)])
def test_lane_guard_loops_over_one_lane_per_warp(variant, block):
    """``if cuda.laneid == 0:`` runs lane 0 of each warp only (the ``__tx`` loop steps by 32
    from the row's first lane-0 unit) and writes what NumPy says, nothing else; in 2-D and 3-D
    cubes whose rows are not whole warps the lane is the linear id's, not threadIdx.x's."""
    nt = int(np.prod(block))
    x = np.random.default_rng(nt).standard_normal(3 * nt)
    out = np.full((3, nt // 32 + 2), np.nan)
    run(lane_leaders, variant, 3, block, x, out)
    expected = np.full_like(out, np.nan)
    expected[:, :-(-nt // 32)] = 2 * x.reshape(3, nt)[:, ::32]
    np.testing.assert_array_equal(out, expected)
    src = Unit(lane_leaders.py_func, False, False, "numpy").generate()
    assert "for __tx in range((0 - __tbase) % 32, __bdx, 32):" in src
    assert "__tid % 32 == 0" not in src


@cuda.jit
def residues_from(x, lo, out_x, out_lane, out_last):
    """A 2-D cube: a residue of threadIdx.x, a lane, each behind a lower bound, and the last
    unit of each row (``tx == blockDim.x - 1``)."""
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    v = x[ty, tx] + 1.0
    cuda.syncthreads()
    if tx >= lo and tx % 4 == 1:
        out_x[ty, tx] = v
    cuda.syncthreads()
    if tx >= lo and cuda.laneid == 3:
        out_lane[ty, tx] = v
    cuda.syncthreads()
    if tx == cuda.blockDim.x - 1:
        out_last[ty] = v


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("block", [(12, 5), (40, 3), (7, 9), (32, 2)])
@pytest.mark.parametrize("lo", [0, 2, 5.5, 13, -3, float("nan")])
def test_residues_behind_a_lower_bound_in_a_two_dimensional_cube(variant, block, lo):
    """The strided loop starts at the first admitted ``tx >= lo`` of each row: ``tx % 4 == 1``
    is a residue of threadIdx.x, ``laneid == 3`` one of the linear id ``ty * bdx + tx``; the
    equality admits each row's last unit."""
    bdx, bdy = block
    x = np.random.default_rng(bdx * bdy).standard_normal((bdy, bdx))
    outs = [np.full((bdy, bdx), np.nan), np.full((bdy, bdx), np.nan), np.full(bdy, np.nan)]
    run(residues_from, variant, 1, block, x, lo, *outs)
    tx = np.arange(bdx)[None, :]
    linear = np.arange(bdy)[:, None] * bdx + tx
    np.testing.assert_array_equal(outs[0], np.where((tx >= lo) & (tx % 4 == 1), x + 1, np.nan))
    np.testing.assert_array_equal(outs[1], np.where((tx >= lo) & (linear % 32 == 3), x + 1,
                                                    np.nan))
    np.testing.assert_array_equal(outs[2], x[:, -1] + 1)
    src = Unit(residues_from.py_func, False, False, "numpy").generate()
    assert "for __tx in range(__txlo + (1 - __txlo) % 4, __bdx, 4):" in src
    assert "for __tx in range(__txlo + (3 - __tbase - __txlo) % 32, __bdx, 32):" in src
    assert "for __tx in range(max(0, __bdx - 1), min(__bdx, __bdx - 1 + 1)):" in src


@cuda.jit
def masked_lane(x, out):
    """Under a run-time mask (``v > 0``, holes anywhere), lane 0 of each warp writes the warp's
    active mask if it is itself active."""
    tid = cuda.threadIdx.x
    v = x[cuda.grid(1)]
    if v > 0:
        m = cuda.activemask()
        for k in range(2):
            cuda.syncwarp(m)
        if cuda.laneid == 0:
            out[cuda.blockIdx.x, tid // 32] = m


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("nt", [256, 80, 20])
def test_masked_lane_guard_keeps_the_mask_test(variant, nt):
    """The lane loop is intersected with the mask's span and still tests the mask: a warp
    whose lane 0 is inactive writes nothing."""
    rng = np.random.default_rng(nt)
    x = rng.standard_normal(4 * nt)
    x[::32] = np.where(np.arange(x[::32].size) % 3 == 0, -1.0, 1.0)    # some lane 0s inactive
    out = np.full((4, nt // 32 + 2), -1, np.int64)
    run(masked_lane, variant, 4, nt, x, out)
    expected = np.full_like(out, -1)
    for b in range(4):
        for w in range(-(-nt // 32)):
            lanes = x[b * nt + 32 * w:b * nt + min(32 * w + 32, nt)] > 0
            if lanes[0]:
                expected[b, w] = int(np.sum(lanes.astype(np.int64) << np.arange(lanes.size)))
    np.testing.assert_array_equal(out, expected)
    src = Unit(masked_lane.py_func, False, False, "numpy").generate()
    assert "__txlo = max(0, __m1lo1 - __tbase)" in src
    assert "__tid % 32 == 0" not in src and "if __m1[__tid] != 1:" in src


@cuda.jit
def lane_else(x, out):
    """A lane guard with an ``else``: every unit does something."""
    tid = cuda.threadIdx.x
    v = x[tid] + 1.0
    cuda.syncthreads()
    if cuda.laneid == 0:
        out[tid] = v
    else:
        out[tid] = -v


@cuda.jit
def lane_keeps(x, out):
    """The lane-guarded region assigns ``v``, which every unit keeps across the barrier."""
    tid = cuda.threadIdx.x
    v = x[tid]
    cuda.syncthreads()
    if cuda.laneid == 0:
        v = v * 2.0
    cuda.syncthreads()
    out[tid] = v


@pytest.mark.parametrize("variant", VARIANTS)
def test_lane_guards_that_are_not_narrowed(variant):
    """A lane guard with an ``else`` and one whose region stores a kept value are printed in
    full (today's code), with NumPy's results."""
    x = np.arange(80.0)
    lane0 = np.arange(80) % 32 == 0
    out = np.zeros(80)
    run(lane_else, variant, 1, 80, x, out)
    np.testing.assert_array_equal(out, np.where(lane0, x + 1, -(x + 1)))
    run(lane_keeps, variant, 1, 80, x, out)
    np.testing.assert_array_equal(out, np.where(lane0, 2 * x, x))
    for kernel in (lane_else, lane_keeps):
        src = Unit(kernel.py_func, False, False, "numpy").generate()
        assert "if __tid % 32 == 0:" in src and ", 32):" not in src
