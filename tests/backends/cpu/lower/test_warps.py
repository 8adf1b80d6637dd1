"""Warp intrinsics on the CPU backend match CUDA's semantics (hand-computed NumPy references).

The kernels of numba-cuda's ``test_warp_ops.py`` are ported here (numba-cuda's simulator skips
them, so the conformance harness cannot count them), plus partial warps (a cube of 48 units has
a second warp of 16 lanes), lanes that exited before the exchange, warp-uniform conditions around
shuffles, several cubes, barrier values inside expressions, and the typed error for a warp
intrinsic whose mask names lanes that do not execute it. Each kernel runs through
``build_program``'s serial and parallel variants.
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


# ---- numba-cuda's test_warp_ops.py kernels ------------------------------------------------------

@cuda.jit
def useful_syncwarp(ary):
    i = cuda.grid(1)
    if i == 0:
        ary[0] = 42
    cuda.syncwarp(0xFFFFFFFF)
    ary[i] = ary[0]


@cuda.jit
def use_shfl_sync_idx(ary, idx):
    i = cuda.grid(1)
    val = cuda.shfl_sync(0xFFFFFFFF, i, idx)
    ary[i] = val


@cuda.jit
def use_shfl_sync_up(ary, delta):
    i = cuda.grid(1)
    val = cuda.shfl_up_sync(0xFFFFFFFF, i, delta)
    ary[i] = val


@cuda.jit
def use_shfl_sync_down(ary, delta):
    i = cuda.grid(1)
    val = cuda.shfl_down_sync(0xFFFFFFFF, i, delta)
    ary[i] = val


@cuda.jit
def use_shfl_sync_xor(ary, xor):
    i = cuda.grid(1)
    val = cuda.shfl_xor_sync(0xFFFFFFFF, i, xor)
    ary[i] = val


@cuda.jit
def use_shfl_sync_with_val(ary, into):
    i = cuda.grid(1)
    val = cuda.shfl_sync(0xFFFFFFFF, into, 0)
    ary[i] = val


@cuda.jit
def use_vote_sync_all(ary_in, ary_out):
    i = cuda.grid(1)
    pred = cuda.all_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = pred


@cuda.jit
def use_vote_sync_any(ary_in, ary_out):
    i = cuda.grid(1)
    pred = cuda.any_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = pred


@cuda.jit
def use_vote_sync_eq(ary_in, ary_out):
    i = cuda.grid(1)
    pred = cuda.eq_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = pred


@cuda.jit
def use_vote_sync_ballot(ary):
    i = cuda.threadIdx.x
    ballot = cuda.ballot_sync(0xFFFFFFFF, True)
    ary[i] = ballot


@cuda.jit
def use_match_any_sync(ary_in, ary_out):
    i = cuda.grid(1)
    ballot = cuda.match_any_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = ballot


@cuda.jit
def use_match_all_sync(ary_in, ary_out):
    i = cuda.grid(1)
    ballot, pred = cuda.match_all_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = ballot if pred else 0


@cuda.jit
def use_independent_scheduling(arr):
    i = cuda.threadIdx.x
    if i % 4 == 0:
        ballot = cuda.ballot_sync(0x11111111, True)
    elif i % 4 == 1:
        ballot = cuda.ballot_sync(0x22222222, True)
    elif i % 4 == 2:
        ballot = cuda.ballot_sync(0x44444444, True)
    elif i % 4 == 3:
        ballot = cuda.ballot_sync(0x88888888, True)
    arr[i] = ballot


@cuda.jit
def use_activemask(x):
    i = cuda.grid(1)
    if (i % 2) == 0:
        x[i] = cuda.activemask()
    else:
        x[i] = cuda.activemask()


@cuda.jit
def use_lanemask_lt(x):
    i = cuda.grid(1)
    x[i] = cuda.lanemask_lt()


@pytest.mark.parametrize("variant", VARIANTS)
def test_useful_syncwarp(variant):
    """syncwarp orders lane 0's write before every lane's read of it."""
    ary = np.empty(32, np.int32)
    run(useful_syncwarp, variant, 1, 32, ary)
    assert np.all(ary == 42)


@pytest.mark.parametrize("variant", VARIANTS)
def test_shuffles(variant):
    """shfl_sync/up/down/xor read lane idx, lane-delta, lane+delta, lane^xor; up past lane 0
    and down past lane 31 return the lane's own value (numba-cuda's test expectations)."""
    lanes = np.arange(32, dtype=np.int32)
    ary = np.empty(32, np.int32)
    run(use_shfl_sync_idx, variant, 1, 32, ary, np.int32(4))
    np.testing.assert_array_equal(ary, np.full(32, 4))
    run(use_shfl_sync_up, variant, 1, 32, ary, np.int32(4))
    np.testing.assert_array_equal(ary, np.where(lanes >= 4, lanes - 4, lanes))
    run(use_shfl_sync_down, variant, 1, 32, ary, np.int32(4))
    np.testing.assert_array_equal(ary, np.where(lanes < 28, lanes + 4, lanes))
    run(use_shfl_sync_xor, variant, 1, 32, ary, np.int32(16))
    np.testing.assert_array_equal(ary, lanes ^ 16)


def test_shuffle_lane_operand_is_taken_modulo_32():
    """PTX uses the low five bits of the source lane: shfl_sync(.., 36) reads lane 4."""
    ary = np.empty(32, np.int32)
    run(use_shfl_sync_idx, "serial", 1, 32, ary, np.int32(36))
    np.testing.assert_array_equal(ary, np.full(32, 4))


@pytest.mark.parametrize("value", [np.int32(-1), np.int64(1 << 42), np.float32(np.pi),
                                   np.float64(np.pi)], ids=lambda v: type(v).__name__)
def test_shfl_sync_types(value):
    """Shuffles carry int32, int64, float32 and float64 values unchanged."""
    ary = np.empty(32, dtype=value.dtype)
    run(use_shfl_sync_with_val, "serial", 1, 32, ary, value)
    assert np.all(ary == value)


@pytest.mark.parametrize("variant", VARIANTS)
def test_votes(variant):
    """all_sync/any_sync/eq_sync over the warp (numba-cuda's test_vote_sync_* cases)."""
    ary_in = np.ones(32, np.int32)
    out = np.empty(32, np.int32)
    run(use_vote_sync_all, variant, 1, 32, ary_in, out)
    assert np.all(out == 1)
    ary_in[-1] = 0
    run(use_vote_sync_all, variant, 1, 32, ary_in, out)
    assert np.all(out == 0)
    ary_in[:] = 0
    run(use_vote_sync_any, variant, 1, 32, ary_in, out)
    assert np.all(out == 0)
    ary_in[[2, 5]] = 1
    run(use_vote_sync_any, variant, 1, 32, ary_in, out)
    assert np.all(out == 1)
    ary_in[:] = 0
    run(use_vote_sync_eq, variant, 1, 32, ary_in, out)
    assert np.all(out == 1)
    ary_in[1] = 1
    run(use_vote_sync_eq, variant, 1, 32, ary_in, out)
    assert np.all(out == 0)
    ary_in[:] = 1
    run(use_vote_sync_eq, variant, 1, 32, ary_in, out)
    assert np.all(out == 1)


def test_ballot():
    """ballot_sync(full mask, True) is every lane of a full warp."""
    ary = np.empty(32, np.uint32)
    run(use_vote_sync_ballot, "serial", 1, 32, ary)
    assert np.all(ary == np.uint32(0xFFFFFFFF))


def test_match_any_and_all_with_ten_lanes():
    """match_any_sync groups lanes by value; match_all_sync is the lanes when all agree, else 0;
    the 22 missing lanes of a 10-unit cube take no part (numba-cuda's expectations)."""
    ary_in = np.arange(10, dtype=np.int32) % 2
    out = np.empty(10, np.int32)
    run(use_match_any_sync, "serial", 1, 10, ary_in, out)
    np.testing.assert_array_equal(out, np.tile((0b0101010101, 0b1010101010), 5))
    ary_in = np.zeros(10, np.int32)
    run(use_match_all_sync, "serial", 1, 10, ary_in, out)
    assert np.all(out == 0b1111111111)
    ary_in[1] = 4
    run(use_match_all_sync, "serial", 1, 10, ary_in, out)
    assert np.all(out == 0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_independent_scheduling(variant):
    """Four branches, each a ballot over exactly the lanes that take it."""
    arr = np.empty(32, np.uint32)
    run(use_independent_scheduling, variant, 1, 32, arr)
    np.testing.assert_array_equal(arr, np.tile((0x11111111, 0x22222222, 0x44444444,
                                                0x88888888), 8).astype(np.uint32))


def test_activemask_and_lanemask_lt():
    """activemask is the lanes on the same branch; lanemask_lt the lanes below this one."""
    out = np.zeros(32, np.uint32)
    run(use_activemask, "serial", 1, 32, out)
    np.testing.assert_array_equal(out, np.tile((0x55555555, 0xAAAAAAAA), 16).astype(np.uint32))
    run(use_lanemask_lt, "serial", 1, 32, out)
    np.testing.assert_array_equal(out, np.array([(1 << i) - 1 for i in range(32)], np.uint32))


# ---- partial warps, exited lanes, warp-uniform conditions, several cubes ----------------------

@cuda.jit
def ballot_after_exit(out, keep):
    i = cuda.threadIdx.x
    if keep[i] == 0:
        return
    out[cuda.blockIdx.x * cuda.blockDim.x + i] = cuda.ballot_sync(0xFFFFFFFF, i % 3 != 0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_partial_warp_and_exited_lanes(variant, rng=np.random.default_rng(7)):
    """A cube of 48 has warps of 32 and 16 lanes; lanes that returned take no part: a ballot
    has exactly the live lanes of its warp whose predicate holds."""
    nt, ncubes = 48, 3
    keep = (rng.random(nt) < 0.7).astype(np.int32)
    out = np.full(nt * ncubes, 7, np.uint32)
    run(ballot_after_exit, variant, ncubes, nt, out, keep)
    expected = np.full(nt, 7, np.uint32)
    for i in range(nt):
        if keep[i]:
            base = i // 32 * 32
            bits = sum(1 << (j - base) for j in range(base, min(base + 32, nt))
                       if keep[j] and j % 3 != 0)
            expected[i] = bits
    np.testing.assert_array_equal(out, np.tile(expected, ncubes))


@cuda.jit
def block_sum_warps(x, out):
    """Warp-shuffle block reduction: each warp reduces, warp 0 reduces the warp sums."""
    sm = cuda.shared.array(32, np.float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
    if cuda.laneid == 0:
        sm[tid // cuda.warpsize] = v
    cuda.syncthreads()
    if tid < 32:                    # warp-uniform, not cube-uniform
        nwarps = (cuda.blockDim.x + 31) // 32
        v = sm[tid] if tid < nwarps else 0.0
        offset = 16
        while offset > 0:
            v += cuda.shfl_xor_sync(0xFFFFFFFF, v, offset)
            offset //= 2
        if tid == 0:
            out[cuda.blockIdx.x] = v


@pytest.mark.parametrize("variant", VARIANTS)
def test_warp_shuffle_block_reduction(variant):
    """Shuffles under `if tid < 32:` (warp-uniform) and in loops reduce each cube correctly."""
    x = np.random.default_rng(3).random(1000)
    out = np.zeros(4)
    run(block_sum_warps, variant, 4, 256, x, out)
    np.testing.assert_allclose(out, [x[k * 256:(k + 1) * 256].sum() for k in range(4)])


@cuda.jit
def shfl_partial(out):
    i = cuda.threadIdx.x
    out[i] = cuda.shfl_down_sync(0xFFFFFFFF, i * 10, 1)


def test_shuffle_from_a_missing_lane_returns_own_value():
    """In a 48-unit cube, lane 15 of the second warp reads the missing lane 16: CUDA leaves the
    value undefined; the CPU backend returns the lane's own value."""
    out = np.empty(48, np.int64)
    run(shfl_partial, "serial", 1, 48, out)
    expected = np.arange(48) * 10 + 10
    expected[31] = 310
    expected[47] = 470
    np.testing.assert_array_equal(out, expected)


# ---- barrier values inside expressions ---------------------------------------------------------

@cuda.jit
def barrier_values(a, out):
    i = cuda.grid(1)
    out[i] = cuda.syncthreads_count(a[i])
    if cuda.syncthreads_or(a[i] > 1):
        out[i] += 100
    out[i] += 1000 * (1 + cuda.syncthreads_and(a[i]))


@pytest.mark.parametrize("variant", VARIANTS)
def test_barrier_values_inside_expressions(variant):
    """syncthreads_count/or/and as an expression, an `if` test and inside arithmetic."""
    a = np.ones(72, np.int16)
    a[[31, 42]] = 0
    out = np.zeros(72, np.int32)
    run(barrier_values, variant, 1, 72, a, out)
    assert np.all(out == 70 + 1000)
    a[:] = 2
    run(barrier_values, variant, 1, 72, a, out)
    assert np.all(out == 72 + 100 + 2000)


@cuda.jit
def while_barrier_value(a):
    tid = cuda.threadIdx.x
    while cuda.syncthreads_or(a[tid] > 0):
        if a[tid] > 0:
            a[tid] -= 1


def test_barrier_value_as_loop_condition():
    """`while cuda.syncthreads_or(p):` re-evaluates the reduction every iteration."""
    a = np.random.default_rng(5).integers(0, 9, 64).astype(np.int64)
    run(while_barrier_value, "serial", 1, 64, a)
    assert np.all(a == 0)


# ---- divergence ---------------------------------------------------------------------------

@cuda.jit
def divergent_syncwarp(a):
    i = cuda.threadIdx.x
    if a[i] > 0:
        cuda.syncwarp(0xFFFFFFFF)
    a[i] = 5


@pytest.mark.parametrize("variant", VARIANTS)
def test_mask_naming_inactive_lanes_is_a_typed_error(variant):
    """A warp intrinsic whose mask names live lanes that do not execute it raises
    DivergenceError naming the line; when every named lane executes it, the kernel runs."""
    a = np.ones(32, np.int64)
    run(divergent_syncwarp, variant, 1, 32, a)
    assert np.all(a == 5)
    a = np.ones(32, np.int64)
    a[3] = 0
    with pytest.raises(DivergenceError) as info:
        run(divergent_syncwarp, variant, 1, 32, a)
    assert "divergent warp intrinsic cuda.syncwarp at line" in str(info.value)
    assert info.value.lineno == divergent_syncwarp.py_func.__code__.co_firstlineno + 4


@cuda.jit
def half_warp_ballot(out, mask):
    i = cuda.threadIdx.x
    if i % 32 < 16:
        out[i] = cuda.ballot_sync(mask, i % 2 == 0)


def test_mask_must_name_exactly_the_executing_lanes():
    """Under `if lane < 16:` a ballot with mask 0xFFFF runs (the lanes it names are the ones
    executing); with the full mask it names lanes 16-31, which do not execute: DivergenceError.
    A mask that leaves out an executing lane (0xFF) is divergent too."""
    out = np.zeros(64, np.int64)
    run(half_warp_ballot, "serial", 1, 64, out, 0xFFFF)
    expected = np.where(np.arange(64) % 32 < 16, 0x5555, 0)
    np.testing.assert_array_equal(out, expected)
    for mask in (0xFFFFFFFF, 0xFF):
        with pytest.raises(DivergenceError):
            run(half_warp_ballot, "serial", 1, 64, out, mask)


@cuda.jit
def per_warp_loops(counts, out):
    """Each warp loops as often as its count (read from memory), shuffling in every iteration:
    warp-uniform trip counts, different between the warps of a cube."""
    tid = cuda.threadIdx.x
    v = tid
    k = 0
    while k < counts[tid // 32]:
        v = cuda.shfl_sync(0xFFFFFFFF, v, (cuda.laneid + 1) % 32)
        k += 1
    out[tid] = v


@pytest.mark.parametrize("variant", VARIANTS)
def test_warp_uniform_loop_with_shuffles(variant):
    """A `while` whose trip count differs between warps but not within one: each warp rotates
    its values by its own count."""
    counts = np.array([0, 3, 31, 5], np.int64)
    out = np.zeros(128, np.int64)
    run(per_warp_loops, variant, 1, 128, counts, out)
    tid = np.arange(128)
    base, lane = tid // 32 * 32, tid % 32
    np.testing.assert_array_equal(out, base + (lane + counts[tid // 32]) % 32)


def test_divergence_error_pickles():
    """A DivergenceError crosses process boundaries (a Dask worker, say) with its class, message
    and line."""
    import pickle
    err = DivergenceError("divergent barrier at line 7", 7, "k.py")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is DivergenceError
    assert (str(back), back.lineno, back.filename) == (str(err), 7, "k.py")
