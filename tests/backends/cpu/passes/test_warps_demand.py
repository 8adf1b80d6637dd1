"""Demanded lanes (``passes/demanded_lanes.py``): shuffle rounds over a constant tuple of offsets compute only
the lanes whose value is read after them, and give bit for bit what every lane computing gives.

Each kernel is checked against an independent NumPy reference in the GPU's shuffle-tree order
(``warp_cases.py``'s), and the translation is checked for whether it took the demanded form
(``for __wb in range``: a loop over warps around a loop over the round's lanes) -- it must when
only lane-guarded reads follow, and must not when another lane's value is read later or the
offsets are not a literal tuple.
"""

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.passes import demanded_lanes as warps_demand
from numba_cube.backends.cpu.translate import build_program, translate_source
from warp_cases import (VARIANTS, block_sum_reference, cache_dir,  # noqa: F401 (fixture)
                        run, shuffle_reference)

FULL = 0xFFFFFFFF
DEMANDED = "for __wb in range("
SIZES = [256, 96, 80, 48, 16]


def rounds_reference(op, x, nt, offsets, scale=1.0):
    """``v`` of every unit after ``v = v * scale + shfl(v, off)`` for each offset (``v += ...``
    when ``scale`` is 1), cube by cube (``x`` padded with zeros to whole cubes, as ``x[i] if
    i < x.size else 0.0``)."""
    ncubes = -(-x.size // nt)
    v = np.zeros(ncubes * nt)
    v[:x.size] = x
    out = np.empty_like(v)
    live = np.ones(nt, bool)
    for c in range(ncubes):
        u = v[c * nt:(c + 1) * nt]
        for off in offsets:
            if op == "up":
                lane, src = np.arange(nt) % 32, np.arange(nt) - (off & 31)
                u = u * scale + np.where(lane >= (off & 31), u[np.maximum(src, 0)], u)
            else:
                u = u * scale + shuffle_reference(op, u, off, live)
        out[c * nt:(c + 1) * nt] = u
    return out


@cuda.jit
def demand_sum(x, out):
    sm = cuda.shared.array(32, np.float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(FULL, v, off)
    if cuda.laneid == 0:
        sm[tid // 32] = v
    cuda.syncthreads()
    if tid < 32:
        v = sm[tid] if tid < (cuda.blockDim.x + 31) // 32 else 0.0
        for off in (16, 8, 4, 2, 1):
            v += cuda.shfl_xor_sync(FULL, v, off)
        if tid == 0:
            out[cuda.blockIdx.x] = v


def test_block_sum_rounds_take_the_demanded_form():
    """Both loops of the warp block-sum (shfl_down read by lane 0, shfl_xor read by
    ``threadIdx.x == 0``) are unrolled into rounds over their demanded lanes; the shfl_xor
    rounds' bounds hold only where threadIdx.x fixes the lane, which is decided at run time."""
    text = translate_source(demand_sum.py_func)
    assert text.count(DEMANDED) >= 2
    assert "__dlo1, __dhi1 = (0, 16) if __dok1 else (0, 32)" in text       # shfl_down by 16
    assert "__dlo1, __dhi1 = (0, 1) if __dok1 else (0, 32)" in text        # shfl_down by 1
    assert "(__bdy * __bdz == 1 or __bdx % 32 == 0)" in text


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("nt", SIZES)
def test_block_sum_in_the_gpus_order(variant, nt):
    """The demanded-lane block sum gives bit for bit the GPU shuffle tree's sums, for cubes of
    whole warps, a partial last warp, less than a warp, and an input ending inside the last
    cube."""
    ncubes = 3
    x = np.random.default_rng(nt).standard_normal(ncubes * nt - 5)
    out = np.full(ncubes, np.nan)
    run(demand_sum, variant, ncubes, nt, x, out)
    np.testing.assert_array_equal(out, block_sum_reference(x, nt, ncubes, 16, 5))


def _full_rounds_program(kernel):
    """``kernel`` translated with the demanded-lane analysis switched off (today's code)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(warps_demand.DemandedLanes, "_match", lambda *a: None)
        assert DEMANDED not in translate_source(kernel.py_func)
        return build_program(kernel.py_func)


def test_benchmark_kernel_matches_the_full_rounds():
    """The benchmark's warp_sum (atomic add of each cube's sum) gives bit for bit what the full
    rounds give, serially (cubes in order), at 256 units per cube with an input that ends inside
    the last cube."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[4] / "benchmarks"))
    import bench_kernels
    kernel = bench_kernels.warp_sum
    assert DEMANDED in translate_source(kernel.py_func)
    x = np.random.default_rng(7).standard_normal(40 * 256 - 77)
    totals = []
    for program in (build_program(kernel.py_func), _full_rounds_program(kernel)):
        total = np.zeros(1)
        program.serial(40, 1, 1, 256, 1, 1, x, total)
        totals.append(total[0])
    assert totals[0] == totals[1]
    expected = 0.0
    for s in block_sum_reference(x, 256, 40, 16, 5):
        expected += s
    assert totals[0] == expected


@cuda.jit
def lane_one(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for off in (1, 2, 4, 8, 16):
        v += cuda.shfl_xor_sync(FULL, v, off)
    if cuda.laneid == 1:
        out[i // 32] = v


@cuda.jit
def scan_last_lane(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for off in (1, 2, 4, 8, 16):
        v += cuda.shfl_up_sync(FULL, v, off)
    if cuda.laneid == 31 and i < x.size:
        out[i // 32] = v


@cuda.jit
def broadcast_rounds(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for off in (3, 17, 5, 40):
        v = v * 0.5 + cuda.shfl_sync(FULL, v, off)
    if cuda.laneid == 2:
        out[i // 32] = v


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("nt", [256, 96])
@pytest.mark.parametrize("kernel,op,lane", [(lane_one, "xor", 1), (scan_last_lane, "up", 31),
                                            (broadcast_rounds, "idx", 2)])
def test_other_demanded_lanes(variant, nt, kernel, op, lane):
    """A lane other than 0 (lane 1 of a shfl_xor butterfly, lane 31 of a shfl_up scan, lane 2
    of shfl_sync broadcasts from lanes 3, 17, 5 and 40 & 31) is demanded: the rounds compute
    the lanes that lane depends on, and its value is the GPU's."""
    assert DEMANDED in translate_source(kernel.py_func)
    x = np.random.default_rng(nt + lane).standard_normal(4 * nt - 40)
    out = np.full(4 * nt // 32, np.nan)
    run(kernel, variant, 4, nt, x, out)
    offsets = (3, 17, 5, 40) if op == "idx" else (1, 2, 4, 8, 16)
    full = rounds_reference(op, x, nt, offsets, scale=0.5 if op == "idx" else 1.0)
    slots = np.arange(full.size)
    picked = (slots % nt % 32 == lane) & ((op != "up") | (slots < x.size))
    expected = np.full_like(out, np.nan)
    expected[slots[picked] // 32] = full[picked]
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def every_lane_stores(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(FULL, v, off)
    if i < x.size:
        out[i] = v


@cuda.jit
def read_after_barrier(x, out):
    sm = cuda.shared.array(32, np.float64)
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(FULL, v, off)
    if cuda.laneid == 0:
        sm[cuda.threadIdx.x // 32] = v
    cuda.syncthreads()
    if i < x.size:
        out[i] = v + sm[0]


@cuda.jit
def other_lane_reads(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(FULL, v, off)
    # each cube's warps numbered on their own: with a cube of 80 units, ``i // 32`` would give
    # a cube's partial last warp and the next cube's first the same slots (a race on a GPU)
    warp = cuda.blockIdx.x * ((cuda.blockDim.x + 31) // 32) + cuda.threadIdx.x // 32
    if cuda.laneid == 0 or cuda.laneid == 1:
        out[warp * 2 + cuda.laneid] = v


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("nt", [256, 80])
@pytest.mark.parametrize("kernel", [every_lane_stores, read_after_barrier, other_lane_reads])
def test_reads_of_other_lanes_keep_the_full_rounds(variant, nt, kernel):
    """When every lane's value is read (stored by every lane, read after a later barrier, or
    read under a condition that does not fix one lane), the rounds stay full, and every lane
    read has the GPU's value."""
    assert DEMANDED not in translate_source(kernel.py_func)
    x = np.random.default_rng(nt).standard_normal(3 * nt - 9)
    full = rounds_reference("down", x, nt, (16, 8, 4, 2, 1))[:x.size]
    if kernel is other_lane_reads:
        warps_per_cube = (nt + 31) // 32
        out = np.full(2 * 3 * warps_per_cube, np.nan)
        run(kernel, variant, 3, nt, x, out)
        slots = np.arange(x.size)
        lanes = slots % nt % 32
        warps = slots // nt * warps_per_cube + slots % nt // 32
        picked = lanes < 2
        expected = np.full_like(out, np.nan)
        expected[warps[picked] * 2 + lanes[picked]] = full[picked]
        np.testing.assert_array_equal(out, expected)
        return
    out = np.full(x.size, np.nan)
    run(kernel, variant, 3, nt, x, out)
    if kernel is read_after_barrier:
        first = full[np.arange(x.size) // nt * nt]
        full = full + first
    np.testing.assert_array_equal(out, full)


@cuda.jit
def runtime_offsets(x, offsets, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for k in range(offsets.size):
        v += cuda.shfl_down_sync(FULL, v, offsets[k])
    if cuda.laneid == 0:
        out[i // 32] = v


@cuda.jit
def tuple_argument(x, offsets, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    for off in offsets:
        v += cuda.shfl_down_sync(FULL, v, off)
    if cuda.laneid == 0:
        out[i // 32] = v


@pytest.mark.parametrize("variant", VARIANTS)
def test_offsets_given_at_run_time_keep_the_full_rounds(variant):
    """Offsets read from an array or passed as a tuple argument are not known when translating:
    the rounds stay full, and lane 0 has the GPU's value."""
    x = np.random.default_rng(3).standard_normal(2 * 96 - 7)
    full = rounds_reference("down", x, 96, (16, 8, 4, 2, 1))
    expected = full[::32][:x.size // 32 + 1]
    for kernel, offsets in ((runtime_offsets, np.array([16, 8, 4, 2, 1])),
                            (tuple_argument, (16, 8, 4, 2, 1))):
        try:
            text = translate_source(kernel.py_func)
        except Exception:       # a tuple argument may be refused at a cube-level loop
            continue
        assert DEMANDED not in text
        out = np.full(expected.size, np.nan)
        run(kernel, variant, 2, 96, x, offsets, out)
        np.testing.assert_array_equal(out, expected)


@cuda.jit
def thread_x_zero(x, out):
    i = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    n = cuda.blockDim.x * cuda.blockDim.y
    g = cuda.blockIdx.x * n + i
    v = x[g] if g < x.size else 0.0
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_xor_sync(FULL, v, off)
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y] = v


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bx,by", [(64, 2), (48, 2), (40, 3), (96, 1)])
def test_thread_x_guard_in_two_dimensional_cubes(variant, bx, by):
    """``threadIdx.x == 0`` fixes the lane only in one-row cubes or rows of whole warps; in
    (48, 2) and (40, 3) cubes the units with ``threadIdx.x == 0`` sit in lanes 0, 16 and 8 of
    their warps, which the rounds must compute too (the run-time condition gives every lane)."""
    nt, ncubes = bx * by, 3
    x = np.random.default_rng(bx * by).standard_normal(ncubes * nt - 11)
    program = build_program(thread_x_zero.py_func)
    out = np.full(ncubes * by, np.nan)
    getattr(program, variant)(ncubes, 1, 1, bx, by, 1, x, out)
    full = rounds_reference("xor", x, nt, (16, 8, 4, 2, 1))
    np.testing.assert_array_equal(out, full[::bx])


@cuda.jit
def array_values(x, out):
    i = cuda.grid(1)
    v = x[i:i + 2]
    for off in (16, 8, 4, 2, 1):
        v = v + cuda.shfl_down_sync(FULL, v, off)
    if cuda.laneid == 0:
        out[i // 32] = v[0]


@pytest.mark.parametrize("variant", VARIANTS)
def test_array_values_run_every_lane(variant):
    """A shuffled array (which the CPU backend allows, CUDA does not) may raise in a lane whose
    value is dead (arrays of different shapes do not add): the skip is decided by Numba's types
    (``support.scalar_replicas``), so every lane runs, and the results and the error are those of
    the full rounds."""
    assert "__scalar_replicas((v__l, ))" in translate_source(array_values.py_func)
    x = np.random.default_rng(5).standard_normal(2 * 64 + 1)
    outs = []
    for program in (build_program(array_values.py_func), _full_rounds_program(array_values)):
        out = np.full(4, np.nan)
        getattr(program, variant)(2, 1, 1, 64, 1, 1, x, out)
        outs.append(out)
        with pytest.raises(ValueError):
            getattr(program, variant)(1, 1, 1, 96, 1, 1, x[:70], out)
    np.testing.assert_array_equal(outs[0], outs[1])
