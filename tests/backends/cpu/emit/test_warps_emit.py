"""The fast forms ``emit/warps.py`` prints for warp exchanges match CUDA's semantics (NumPy
references).

Shuffles with a uniform lane operand (``shfl_down_sync``, ``shfl_xor_sync``, ``shfl_sync``) read
their source from a padded replica and select; masked blocks with a full-mask shuffle decide its
agreement once (``mask_span``'s whole flag) and drop the per-unit mask test when the span is
dense. Each kernel here runs those forms where they can go wrong: partial warps, lanes that
exited before the shuffle or inside the masked block, spans with holes, offsets past 31 or
negative, and warps split by the condition (which must still raise ``DivergenceError``).
"""

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.translate import translate_source
from numba_cube.errors import DivergenceError

from warp_cases import (VARIANTS, block_sum_reference, cache_dir,  # noqa: F401 (fixture)
                        run, shuffle_reference)


@cuda.jit
def shuffles_after_exit(x, keep, d, down, xor, idx):
    i = cuda.threadIdx.x
    if keep[i] == 0:
        return
    v = x[i] + cuda.blockIdx.x
    a = cuda.shfl_down_sync(0xFFFFFFFF, v, d)
    b = cuda.shfl_xor_sync(0xFFFFFFFF, v, d)
    c = cuda.shfl_sync(0xFFFFFFFF, v, d)
    down[cuda.grid(1)] = a
    xor[cuda.grid(1)] = b
    idx[cuda.grid(1)] = c


def test_uniform_offset_shuffles_use_the_padded_read():
    """The fast form is what the translator prints for a scalar offset (a select, no branch)."""
    text = translate_source(shuffles_after_exit.py_func)
    assert all(f"__xs{k} if __in{k} else __xo{k}" in text for k in (1, 2, 3))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("d", [1, 5, 16, 31, 33, -1])
def test_uniform_offset_shuffles_with_exits_and_partial_warp(variant, d,
                                                             rng=np.random.default_rng(11)):
    """down/xor/idx by a scalar lane operand in a 48-unit cube (warps of 32 and 16 lanes) where
    some lanes returned first: each live lane gets its source's value, or its own where the
    source is past the warp, the cube, or exited; the lane operand is taken modulo 32."""
    nt, ncubes = 48, 2
    keep = (rng.random(nt) < 0.75).astype(np.int32)
    x = rng.random(nt)
    down = np.full(nt * ncubes, -7.0)
    xor = np.full(nt * ncubes, -7.0)
    idx = np.full(nt * ncubes, -7.0)
    run(shuffles_after_exit, variant, ncubes, nt, x, keep, d, down, xor, idx)
    live = keep.astype(bool)
    for out, op in ((down, "down"), (xor, "xor"), (idx, "idx")):
        expected = [np.where(live, shuffle_reference(op, x + cube, d, live), -7.0)
                    for cube in range(ncubes)]
        np.testing.assert_array_equal(out, np.concatenate(expected))


@cuda.jit
def masked_shuffles(x, d, first_warp, out):
    tid = cuda.threadIdx.x
    out[tid] = -1.0
    if tid // 32 == first_warp or tid >= 64:      # warp-uniform, not cube-uniform
        v = x[tid]
        for k in range(2):
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, d + k)
            v += cuda.shfl_xor_sync(0xFFFFFFFF, v, d + k)
        out[tid] = v


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("first_warp", [0, 1, 2])
def test_masked_shuffles_dense_and_sparse_spans(variant, first_warp):
    """Under a warp-uniform condition the selected slots are [0,32)+[64,80) (a span with a hole),
    [32,80) or [64,80) (dense): shuffles read only lanes that execute them, in every case."""
    nt, d = 80, 3
    x = np.random.default_rng(first_warp).random(nt)
    out = np.zeros(nt)
    run(masked_shuffles, variant, 1, nt, x, d, first_warp, out)
    tid = np.arange(nt)
    chosen = (tid // 32 == first_warp) | (tid >= 64)
    v = x.copy()
    for k in range(2):
        v = v + shuffle_reference("down", v, d + k, chosen)
        v = v + shuffle_reference("xor", v, d + k, chosen)
    np.testing.assert_allclose(out, np.where(chosen, v, -1.0), rtol=1e-15)


@cuda.jit
def cut_shuffle(x, cut, mask, out):
    tid = cuda.threadIdx.x
    if tid < cut:
        if x[tid] < 0:
            return                      # exits inside the block, after its span was taken
        out[tid] = cuda.shfl_xor_sync(mask, x[tid], 1)


@pytest.mark.parametrize("variant", VARIANTS)
def test_full_mask_under_a_condition_that_splits_a_warp_is_divergent(variant):
    """A full-mask shuffle under `if tid < cut:` runs when the cut is at a warp boundary and
    raises DivergenceError naming its line when the cut splits a warp; a mask naming exactly the
    executing lanes (0xFFFF for cut 16) runs."""
    x = np.arange(64, dtype=np.float64)
    out = np.zeros(64)
    run(cut_shuffle, variant, 1, 64, x, 32, 0xFFFFFFFF, out)
    np.testing.assert_array_equal(out, np.where(np.arange(64) < 32, x[np.arange(64) ^ 1], 0.0))
    with pytest.raises(DivergenceError) as info:
        run(cut_shuffle, variant, 1, 64, x, 16, 0xFFFFFFFF, np.zeros(64))
    assert info.value.lineno == cut_shuffle.py_func.__code__.co_firstlineno + 6
    out = np.zeros(64)
    run(cut_shuffle, variant, 1, 64, x, 16, 0xFFFF, out)
    np.testing.assert_array_equal(out, np.where(np.arange(64) < 16, x[np.arange(64) ^ 1], 0.0))


@pytest.mark.parametrize("variant", VARIANTS)
def test_lanes_exiting_inside_the_block_keep_the_full_mask_valid(variant):
    """Lanes that return inside the masked block before a full-mask shuffle are excused (CUDA's
    rule for exited lanes): no DivergenceError, and a reader whose source exited gets its own
    value."""
    x = np.arange(64, dtype=np.float64)
    x[[3, 10, 40]] = -1.0
    out = np.zeros(64)
    run(cut_shuffle, variant, 1, 64, x, 64, 0xFFFFFFFF, out)
    live = x >= 0
    expected = np.where(live, shuffle_reference("xor", x, 1, live), 0.0)
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def block_sum(x, base, rounds, out):
    sm = cuda.shared.array(32, np.float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
    if cuda.laneid == 0:
        sm[tid // 32] = v
    cuda.syncthreads()
    if tid < 32:
        v = sm[tid] if tid < (cuda.blockDim.x + 31) // 32 else 0.0
        for k in range(rounds):
            v += cuda.shfl_xor_sync(0xFFFFFFFF, v, base >> k)
        if tid == 0:
            out[cuda.blockIdx.x] = v


def test_whole_warp_blocks_read_shuffles_without_the_mask():
    """Under `if tid < 32:` the block's shuffle read is printed twice: without loading the
    partner's mask entry where every warp is whole under the mask (``whole_flag``), with it
    elsewhere."""
    text = translate_source(block_sum.py_func)
    assert "if __m1w1:" in text
    assert "__in2 = (__tid - __lane + __src2 < __nt)\n" in text
    assert "__in2 = (__tid - __lane + __src2 < __nt) & (__m1[__other2] == 1)" in text


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("nt,base,rounds", [(256, 16, 5), (80, 16, 5), (48, 20, 5),
                                            (16, 8, 4), (96, 37, 3)])
def test_block_sum_tree_in_the_gpus_order(variant, nt, base, rounds):
    """The warp block-sum (shfl_down in every warp, shfl_xor under `if tid < 32:` with run-time
    distances) gives bit for bit the sums of the GPU's shuffle tree, for cubes that are whole
    warps, end in a partial warp (80, 48, 96 units), or are smaller than one warp (16), and for
    an input that ends inside the last cube."""
    ncubes = 3
    x = np.random.default_rng(nt + base).standard_normal(ncubes * nt - 5)
    out = np.full(ncubes, np.nan)
    run(block_sum, variant, ncubes, nt, x, base, rounds, out)
    np.testing.assert_array_equal(out, block_sum_reference(x, nt, ncubes, base, rounds))


def test_top_level_shuffle_reads_split_full_warps_from_the_partial_one():
    """A region reading a padded shfl_down at the top level loops over the cube's full warps
    (no test against the cube's end) and then over its partial last warp (with it)."""
    text = translate_source(block_sum.py_func)
    assert "__nfull = __nt - __nt % 32" in text
    assert "__in1 = ((__tid & 31) + __d1 < 32)\n" in text
    assert "__in1 = ((__tid & 31) + __d1 < 32) & (__tid + __d1 < __nt)" in text
