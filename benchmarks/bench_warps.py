"""Warp intrinsics on the CPU backend against the same algorithms written with shared memory.

1. Block reduction, 2^22 float64, 256 units a cube: five ``shfl_down_sync`` steps per warp, the
   warp sums through shared memory, then five ``shfl_xor_sync`` steps in warp 0 (under
   ``if tid < 32:``, a warp-uniform condition checked at run time) vs the same two-level tree
   with every shuffle step a shared-memory step between barriers (goal: ratio <= 2), and, for
   information, vs the classic shared-memory tree (``sm[tid] += sm[tid + s]``, 8 steps).
2. Stream compaction, 2^22 float64, keep ``x > 0.5``: each warp's ``ballot_sync`` + ``popc`` and
   ``lanemask_lt`` give every kept value its slot, lane 0 claims the warp's range with one atomic
   and ``shfl_sync`` broadcasts it, vs a per-cube Hillis-Steele scan of flags in shared memory
   with one atomic per cube. Goal: ratio <= 2.

Both sides run on the same CPU client, launch + wait, and are checked against NumPy (the
compaction's order across warps depends on the atomics, so it is compared sorted).
Run: ``python benchmarks/bench_warps.py [--quick]``.
"""

from __future__ import annotations

import sys

import numpy as np
from numba import cuda, int32, int64

from common import Table, median_time

import numba_cube as cube

TPB = 256
FULL = 0xFFFFFFFF


@cube.kernel
def sum_warps(x, out):
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
        v = sm[tid] if tid < TPB // 32 else 0.0
        for off in (16, 8, 4, 2, 1):
            v += cuda.shfl_xor_sync(FULL, v, off)
        if tid == 0:
            out[cuda.blockIdx.x] = v


@cube.kernel
def sum_shared_warp_tree(x, out):
    """The same algorithm as sum_warps, each shuffle step a shared-memory step between
    barriers."""
    sm = cuda.shared.array(TPB, np.float64)
    ws = cuda.shared.array(32, np.float64)
    tid = cuda.threadIdx.x
    lane = tid % 32
    i = cuda.grid(1)
    sm[tid] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    for off in (16, 8, 4, 2, 1):
        if lane < off:
            sm[tid] += sm[tid + off]
        cuda.syncthreads()
    if lane == 0:
        ws[tid // 32] = sm[tid]
    if tid < 32 and tid >= TPB // 32:
        ws[tid] = 0.0
    cuda.syncthreads()
    for off in (16, 8, 4, 2, 1):
        if tid < off:
            ws[tid] += ws[tid + off]
        cuda.syncthreads()
    if tid == 0:
        out[cuda.blockIdx.x] = ws[0]


@cube.kernel
def sum_shared(x, out):
    sm = cuda.shared.array(TPB, np.float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if tid < s:
            sm[tid] += sm[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = sm[0]


@cube.kernel
def compact_warps(x, thresh, out, count):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    keep = i < x.size and v > thresh
    ballot = cuda.ballot_sync(FULL, keep)
    base = 0
    if cuda.laneid == 0:
        base = cuda.atomic.add(count, 0, cuda.popc(ballot))
    base = cuda.shfl_sync(FULL, base, 0)
    if keep:
        out[base + cuda.popc(ballot & cuda.lanemask_lt())] = v


@cube.kernel
def compact_shared(x, thresh, out, count):
    flags = cuda.shared.array(TPB, int32)
    start = cuda.shared.array(1, int64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    keep = 1 if i < x.size and v > thresh else 0
    flags[tid] = keep
    cuda.syncthreads()
    off = 1
    while off < TPB:
        t = flags[tid - off] if tid >= off else 0
        cuda.syncthreads()
        flags[tid] += t
        cuda.syncthreads()
        off *= 2
    if tid == 0:
        start[0] = cuda.atomic.add(count, 0, flags[TPB - 1])
    cuda.syncthreads()
    if keep:
        out[start[0] + flags[tid] - 1] = v


def main(quick: bool = False):
    client = cube.client("cpu")
    rng = np.random.default_rng(0)
    n = 1 << (18 if quick else 22)
    xh = rng.random(n)
    x = client.create(xh)
    cubes = n // TPB
    t = Table("warp intrinsics vs shared memory + barriers (CPU backend)")

    sums = {k: client.empty(cubes, np.float64) for k in ("warps", "same", "shared")}

    def reduce_with(kernel, key):
        def go():
            client.launch(kernel, cubes, TPB, x, sums[key])
            client.sync_buffers(sums[key])
        return go

    t_w = median_time(reduce_with(sum_warps, "warps"), repeats=7, warmup=2)
    t_same = median_time(reduce_with(sum_shared_warp_tree, "same"), repeats=7, warmup=2)
    t_s = median_time(reduce_with(sum_shared, "shared"), repeats=7, warmup=2)
    expected = xh.reshape(cubes, TPB).sum(axis=1)
    for key in sums:
        np.testing.assert_allclose(client.read(sums[key]), expected, rtol=1e-12)
    t.row(f"block sum 2^{n.bit_length() - 1} float64, {TPB}/cube", t_w, t_same,
          "same warp tree, shared memory", goal=2.0)
    t.row(f"block sum 2^{n.bit_length() - 1} float64, {TPB}/cube", t_w, t_s,
          "classic shared-memory tree")

    outs = {k: client.empty(n, np.float64) for k in ("warps", "shared")}
    counts = {k: client.empty(1, np.int64) for k in ("warps", "shared")}

    def compact_with(kernel, key):
        def go():
            client.write(counts[key], np.zeros(1, np.int64))
            client.launch(kernel, cubes, TPB, x, 0.5, outs[key], counts[key])
            client.sync_buffers(outs[key], counts[key])
        return go

    t_w = median_time(compact_with(compact_warps, "warps"), repeats=7, warmup=2)
    t_s = median_time(compact_with(compact_shared, "shared"), repeats=7, warmup=2)
    kept = np.sort(xh[xh > 0.5])
    for key in outs:
        count = int(client.read(counts[key])[0])
        assert count == kept.size, (key, count, kept.size)
        np.testing.assert_array_equal(np.sort(client.read(outs[key])[:count]), kept)
    t.row(f"stream compaction 2^{n.bit_length() - 1} float64", t_w, t_s,
          "shared-memory scan per cube", goal=2.0)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
