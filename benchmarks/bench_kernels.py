"""The classic-kernel suite of issue 15: numba.cuda kernels on the CPU backend against the
``njit(parallel=True)`` + ``prange`` code a user would write instead.

Kernels (each in the numba.cuda dialect, as a numba.cuda user writes it):

 1. axpy, ``out[i] = a * x[i] + y[i]``;
 2. block reduction: a shared-memory tree per cube (``sm[tid] += sm[tid + s]``), one
    ``cuda.atomic.add`` of each cube's sum into the total;
 3. histogram, 256 bins, one global ``cuda.atomic.add`` per element;
 4. histogram, 256 bins, privatized in shared memory per cube (grid-stride loop, shared atomics,
    one global atomic per bin and cube);
 5. 2-D stencil (9-point smoothing) written as numba's docs and blogs write it: a plain
    ``cuda.jit`` dispatcher, ``i, j = cuda.grid(2)``, ``out[i, j] = ...``, 16x16 cubes, wrapped with
    ``cube.kernel(dispatcher)``; the row index comes from ``threadIdx.x``, so consecutive units
    are a row apart in memory (the information table times the same stencil with
    ``j, i = cuda.grid(2)``);
 6. tiled matmul through shared memory (numba's docs' ``fast_matmul``, 16x16 tiles);
 7. inclusive scan: Hillis-Steele per cube in shared memory, the cube sums scanned by one cube,
    then each cube's offset added (three launches);
 8. transpose through a shared 32x33 tile (padded against bank conflicts, as CUDA code does);
 9. row softmax: one cube per row, shared-memory max and sum trees;
10. warp-shuffle reduction: ``shfl_down_sync`` within each warp, the warp sums through shared
    memory, ``shfl_xor_sync`` in warp 0, one atomic per cube.

Section 1 (goal of issue 15: geometric mean <= 1.25x, no kernel above 2x): each kernel, launched
with ``client.launch`` + ``client.sync_buffers`` (the runtime's whole path is in the time), vs its
hand-written ``njit(parallel=True)`` reference, compiled before it is timed. Where the algorithm
is the point the reference uses the same one (the histogram privatized per thread chunk, the scan
as a scan per chunk, a scan of the chunk sums and a pass adding them); otherwise it is the natural
loop (both reductions as a ``prange`` reduction, the stencil, transpose and softmax as a
``prange`` over rows, the matmul as a ``prange`` over rows in i-k-j order). The two sides are
timed in alternating rounds (median of each), so that the drift of a shared 2-core machine hits
both alike. For information: NumPy where it has the operation, a cache-blocked ``njit``
transpose, and the stencil with ``j, i = cuda.grid(2)``.

Section 2 (goal: >= 1e4x): the same kernels at a small size on the CPU backend vs numba-cuda's
CUDA simulator. The simulator runs in this process: ``numba.cuda.simulator.kernel.FakeCUDAKernel``
interprets a kernel whether or not ``NUMBA_ENABLE_CUDASIM`` is set (numba_cube's own ``cudasim``
backend relies on that), given a copy of the function over a private copy of its globals (it
swaps ``cuda`` for its fake module in the function's globals while it runs). The simulator has
no warp intrinsics (no ``shfl_*_sync``), so kernel 10 has no row there. Sizes are chosen so that a
simulator run takes about 1-2 s (it runs one Python thread per unit: about 0.1 ms a unit without
barriers, 1 ms with them); at such sizes numba_cube's time is mostly its fixed cost per launch
(60-300 us on the shared VM), so the speedup grows with the size and moves with the load.

Section 3 (``--boundscheck``, only it): what bounds checking (the CPU default, issue 30) costs:
each kernel on a ``boundscheck=True`` and a ``boundscheck=False`` client and the reference, the
ratios of wall and CPU time per kernel and their geometric means (``section_boundscheck``).

Every result, on both sides and in all sections, is checked against NumPy before anything is
timed. Run: ``python benchmarks/bench_kernels.py [--quick]`` (``--quick``: smaller sizes, fewer
repeats, simulator rows at a quarter of the size: a smoke test that runs in under a minute, not a
measurement; without it about 2 minutes on 2 cores once the kernels are compiled). ``--only TEXT``
runs only the kernels whose name contains TEXT (e.g. ``--only histogram``). ``--boundscheck``
runs section 3 alone (about 1.5-3 minutes on the 2-core VM).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
import types

import numpy as np
import numba
from numba import cuda, get_num_threads, njit, prange

from common import Table, fmt_time, loop_peak, median_time, report_peaks

import numba_cube as cube

TPB = 256           # units per cube of the 1-D kernels
NBINS = 256         # histogram bins (== TPB: one unit per bin when a cube flushes its bins)
HIST_CUBES = 256    # cubes of the grid-stride shared-memory histogram
MM_TILE = 16        # numba's docs' fast_matmul uses 16x16 tiles
TT = 32             # transpose tile
ST = 16             # stencil cube (16x16, as numba's examples launch it)
FULL = 0xFFFFFFFF

# --------------------------------------------------------------------------------------------
# The kernels, numba.cuda dialect
# --------------------------------------------------------------------------------------------


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cube.kernel
def block_sum(x, total):
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
        cuda.atomic.add(total, 0, sm[0])


@cube.kernel
def hist_global(data, hist):
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(hist, data[i], 1)


@cube.kernel
def hist_shared(data, hist):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    cuda.atomic.add(hist, tid, local[tid])


def smooth_gpu(x, out):
    # numba's docs / the Numba+Dask stencil post: i is the first (row) index, from threadIdx.x.
    i, j = cuda.grid(2)
    n, m = x.shape
    if 1 <= i < n - 1 and 1 <= j < m - 1:
        out[i, j] = (x[i - 1, j - 1] + x[i - 1, j] + x[i - 1, j + 1] +
                     x[i, j - 1] + x[i, j] + x[i, j + 1] +
                     x[i + 1, j - 1] + x[i + 1, j] + x[i + 1, j + 1]) / 9


# a plain numba-cuda dispatcher, as an existing code base has it; numba_cube takes it as it is
smooth = cube.kernel(cuda.jit(smooth_gpu))


@cube.kernel
def smooth_ji(x, out):
    # for information only: the same stencil with the column index from threadIdx.x (the order
    # a GPU wants for coalescing, and a CPU for unit-stride loops)
    j, i = cuda.grid(2)
    n, m = x.shape
    if 1 <= i < n - 1 and 1 <= j < m - 1:
        out[i, j] = (x[i - 1, j - 1] + x[i - 1, j] + x[i - 1, j + 1] +
                     x[i, j - 1] + x[i, j] + x[i, j + 1] +
                     x[i + 1, j - 1] + x[i + 1, j] + x[i + 1, j + 1]) / 9


@cube.kernel
def fast_matmul(A, B, C):
    # numba's docs' shared-memory matmul, float64
    sA = cuda.shared.array(shape=(MM_TILE, MM_TILE), dtype=np.float64)
    sB = cuda.shared.array(shape=(MM_TILE, MM_TILE), dtype=np.float64)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bpg = cuda.gridDim.x
    tmp = 0.0
    for i in range(bpg):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * MM_TILE) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * MM_TILE]
        if x < B.shape[1] and (ty + i * MM_TILE) < B.shape[0]:
            sB[ty, tx] = B[ty + i * MM_TILE, x]
        cuda.syncthreads()
        for j in range(MM_TILE):
            tmp += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


@cube.kernel
def scan_blocks(x, out, block_sums):
    sm = cuda.shared.array(TPB, np.int64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i] if i < x.size else 0
    cuda.syncthreads()
    off = 1
    while off < TPB:
        t = sm[tid - off] if tid >= off else 0
        cuda.syncthreads()
        sm[tid] += t
        cuda.syncthreads()
        off *= 2
    if i < x.size:
        out[i] = sm[tid]
    if tid == TPB - 1:
        block_sums[cuda.blockIdx.x] = sm[tid]


@cube.kernel
def scan_sums(block_sums):
    # one cube: exclusive scan of the cube sums in place, TPB at a time, with a running carry
    sm = cuda.shared.array(TPB, np.int64)
    tid = cuda.threadIdx.x
    carry = 0
    for base in range(0, block_sums.size, TPB):
        i = base + tid
        v = block_sums[i] if i < block_sums.size else 0
        sm[tid] = v
        cuda.syncthreads()
        off = 1
        while off < TPB:
            t = sm[tid - off] if tid >= off else 0
            cuda.syncthreads()
            sm[tid] += t
            cuda.syncthreads()
            off *= 2
        if i < block_sums.size:
            block_sums[i] = carry + sm[tid] - v
        carry += sm[TPB - 1]
        cuda.syncthreads()          # everyone has read sm[TPB - 1] before the next chunk


@cube.kernel
def scan_add(out, offsets):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += offsets[cuda.blockIdx.x]


@cube.kernel
def transpose_tiled(a, out):
    tile = cuda.shared.array((TT, TT + 1), np.float64)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    x = cuda.blockIdx.x * TT + tx           # column of a
    y = cuda.blockIdx.y * TT + ty           # row of a
    if y < a.shape[0] and x < a.shape[1]:
        tile[ty, tx] = a[y, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TT + tx           # column of out
    y = cuda.blockIdx.x * TT + ty           # row of out
    if y < out.shape[0] and x < out.shape[1]:
        out[y, x] = tile[tx, ty]


@cube.kernel
def softmax_rows(x, out):
    sm = cuda.shared.array(TPB, np.float64)
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    ncol = x.shape[1]
    m = -math.inf
    for j in range(tid, ncol, TPB):
        m = max(m, x[row, j])
    sm[tid] = m
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if tid < s:
            sm[tid] = max(sm[tid], sm[tid + s])
        cuda.syncthreads()
        s //= 2
    m = sm[0]
    cuda.syncthreads()              # all have read the max before sm is reused for the sums
    acc = 0.0
    for j in range(tid, ncol, TPB):
        e = math.exp(x[row, j] - m)
        out[row, j] = e
        acc += e
    sm[tid] = acc
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if tid < s:
            sm[tid] += sm[tid + s]
        cuda.syncthreads()
        s //= 2
    inv = 1.0 / sm[0]
    for j in range(tid, ncol, TPB):     # a unit rescales the elements it wrote itself
        out[row, j] *= inv


@cube.kernel
def warp_sum(x, total):
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
            cuda.atomic.add(total, 0, v)


# --------------------------------------------------------------------------------------------
# The hand-written references
# --------------------------------------------------------------------------------------------

REF = dict(parallel=True, nogil=True, cache=True)
# get_num_threads() is a call through a pointer of the threading layer: Numba cannot cache a
# function that makes it, so the chunked references compile in each process
REF_CHUNKED = dict(parallel=True, nogil=True)


@njit(**REF)
def axpy_ref(a, x, y, out):
    for i in prange(out.size):
        out[i] = a * x[i] + y[i]


@njit(**REF)
def sum_ref(x, total):
    s = 0.0
    for i in prange(x.size):
        s += x[i]
    total[0] = s


@njit(**REF_CHUNKED)
def hist_ref(data, hist):
    # privatized per thread chunk: one private histogram per chunk, then summed per bin
    n = data.size
    nchunks = get_num_threads()
    chunk = (n + nchunks - 1) // nchunks
    local = np.zeros((nchunks, NBINS), np.int64)
    for c in prange(nchunks):
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            local[c, data[i]] += 1
    for b in range(NBINS):
        s = 0
        for c in range(nchunks):
            s += local[c, b]
        hist[b] = s


@njit(**REF)
def smooth_ref(x, out):
    n, m = x.shape
    for i in prange(1, n - 1):
        for j in range(1, m - 1):
            out[i, j] = (x[i - 1, j - 1] + x[i - 1, j] + x[i - 1, j + 1] +
                         x[i, j - 1] + x[i, j] + x[i, j + 1] +
                         x[i + 1, j - 1] + x[i + 1, j] + x[i + 1, j + 1]) / 9


@njit(**REF)
def matmul_ref(a, b, c):
    n, kk = a.shape
    m = b.shape[1]
    for i in prange(n):
        for j in range(m):
            c[i, j] = 0.0
        for k in range(kk):
            aik = a[i, k]
            for j in range(m):          # i-k-j: the inner loop runs along rows, and vectorizes
                c[i, j] += aik * b[k, j]


@njit(**REF_CHUNKED)
def scan_ref(x, out):
    # the same algorithm as the kernels: scan each chunk, scan the chunk sums, add the offsets
    n = x.size
    nchunks = get_num_threads()
    chunk = (n + nchunks - 1) // nchunks
    sums = np.zeros(nchunks, np.int64)
    for c in prange(nchunks):
        s = 0
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            s += x[i]
            out[i] = s
        sums[c] = s
    carry = 0
    for c in range(nchunks):
        s = sums[c]
        sums[c] = carry
        carry += s
    for c in prange(1, nchunks):
        off = sums[c]
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            out[i] += off


@njit(**REF)
def transpose_ref(a, out):
    n, m = out.shape
    for i in prange(n):
        for j in range(m):
            out[i, j] = a[j, i]


@njit(**REF)
def transpose_blocked_ref(a, out):
    # the cache-blocked loop a user tuning for the CPU would write
    n, m = out.shape
    for bi in prange((n + TT - 1) // TT):
        for bj in range(0, m, TT):
            for i in range(bi * TT, min(n, bi * TT + TT)):
                for j in range(bj, min(m, bj + TT)):
                    out[i, j] = a[j, i]


@njit(**REF)
def softmax_ref(x, out):
    rows, cols = x.shape
    for r in prange(rows):
        m = -np.inf
        for j in range(cols):
            m = max(m, x[r, j])
        s = 0.0
        for j in range(cols):
            e = math.exp(x[r, j] - m)
            out[r, j] = e
            s += e
        inv = 1.0 / s
        for j in range(cols):
            out[r, j] *= inv


# --------------------------------------------------------------------------------------------
# Programs: buffers + launches, run on a numba_cube client or on numba-cuda's simulator
# --------------------------------------------------------------------------------------------


class Buf:
    """A buffer argument of a launch, by name."""

    def __init__(self, name):
        self.name = name


class Program:
    """A kernel program: named buffers (initial contents), a list of launches
    ``(kernel, count, dim, args)`` with ``Buf`` for buffers, the buffers it resets before each run
    (accumulators such as a histogram: part of the work, on both sides) and its outputs."""

    def __init__(self, buffers, launches, outputs, reset=()):
        self.buffers, self.launches, self.outputs, self.reset = buffers, launches, outputs, reset

    def on_client(self, client):
        h = {name: client.create(value) for name, value in self.buffers.items()}
        resets = [(h[name], self.buffers[name]) for name in self.reset]
        launches = [(k, count, dim, tuple(h[a.name] if isinstance(a, Buf) else a for a in args))
                    for k, count, dim, args in self.launches]
        outs = [h[name] for name in self.outputs]

        def run():
            for handle, value in resets:
                client.write(handle, value)
            for k, count, dim, args in launches:
                client.launch(k, count, dim, *args)
            failures = client.sync_buffers(*outs)
            assert not any(failures), failures

        return run, lambda: [client.read(o) for o in outs]

    def on_simulator(self):
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        arrays = {name: value.copy() for name, value in self.buffers.items()}
        fakes = {}
        for k, _, _, _ in self.launches:
            fn = k.py_func
            while hasattr(fn, "py_func"):           # a cuda.jit dispatcher inside a cube.kernel
                fn = fn.py_func
            # The simulator swaps ``cuda`` in the function's globals while it runs: give it a copy
            # of the function over a private copy of them, this module's stay as they are.
            private = types.FunctionType(fn.__code__, dict(fn.__globals__), fn.__name__,
                                         fn.__defaults__, fn.__closure__)
            fakes[id(k)] = FakeCUDAKernel(private, device=False, fastmath=False)
        launches = [(fakes[id(k)], count, dim, args) for k, count, dim, args in self.launches]

        def run():
            for name in self.reset:
                arrays[name][...] = self.buffers[name]
            for fake, count, dim, args in launches:
                fake[count, dim, 0, 0](*(arrays[a.name] if isinstance(a, Buf) else a for a in args))

        return run, lambda: [arrays[o] for o in self.outputs]


def grid1(n, tpb=TPB):
    return (n + tpb - 1) // tpb


def p_axpy(n, rng):
    b = dict(x=rng.standard_normal(n), y=rng.standard_normal(n), out=np.zeros(n))
    return Program(b, [(axpy, grid1(n), TPB, (2.0, Buf("x"), Buf("y"), Buf("out")))], ["out"])


def p_block_sum(n, rng):
    b = dict(x=rng.standard_normal(n), total=np.zeros(1))
    return Program(b, [(block_sum, grid1(n), TPB, (Buf("x"), Buf("total")))], ["total"], reset=["total"])


def p_warp_sum(n, rng):
    b = dict(x=rng.standard_normal(n), total=np.zeros(1))
    return Program(b, [(warp_sum, grid1(n), TPB, (Buf("x"), Buf("total")))], ["total"], reset=["total"])


def p_hist_global(n, rng):
    b = dict(data=rng.integers(0, NBINS, n).astype(np.int32), hist=np.zeros(NBINS, np.int64))
    return Program(b, [(hist_global, grid1(n), TPB, (Buf("data"), Buf("hist")))], ["hist"], reset=["hist"])


def p_hist_shared(n, rng):
    b = dict(data=rng.integers(0, NBINS, n).astype(np.int32), hist=np.zeros(NBINS, np.int64))
    cubes = min(HIST_CUBES, grid1(n))
    return Program(b, [(hist_shared, cubes, NBINS, (Buf("data"), Buf("hist")))], ["hist"], reset=["hist"])


def p_smooth(shape, rng):
    n = shape[0]
    b = dict(x=rng.standard_normal((n, n)), out=np.zeros((n, n)))
    count = (grid1(n, ST), grid1(n, ST))
    return Program(b, [(smooth, count, (ST, ST), (Buf("x"), Buf("out")))], ["out"])


def p_matmul(shape, rng):
    n = shape[0]
    b = dict(A=rng.standard_normal((n, n)), B=rng.standard_normal((n, n)), C=np.zeros((n, n)))
    count = (grid1(n, MM_TILE), grid1(n, MM_TILE))
    return Program(b, [(fast_matmul, count, (MM_TILE, MM_TILE), (Buf("A"), Buf("B"), Buf("C")))], ["C"])


def p_scan(n, rng):
    cubes = grid1(n)
    b = dict(x=rng.integers(0, 100, n).astype(np.int64), out=np.zeros(n, np.int64),
             sums=np.zeros(cubes, np.int64))
    return Program(b, [(scan_blocks, cubes, TPB, (Buf("x"), Buf("out"), Buf("sums"))),
                       (scan_sums, 1, TPB, (Buf("sums"),)),
                       (scan_add, cubes, TPB, (Buf("out"), Buf("sums")))], ["out"])


def p_transpose(shape, rng):
    n = shape[0]
    b = dict(a=rng.standard_normal((n, n)), out=np.zeros((n, n)))
    count = (grid1(n, TT), grid1(n, TT))
    return Program(b, [(transpose_tiled, count, (TT, TT), (Buf("a"), Buf("out")))], ["out"])


def p_softmax(shape, rng):
    rows, cols = shape
    b = dict(x=rng.standard_normal((rows, cols)) * 4, out=np.zeros((rows, cols)))
    return Program(b, [(softmax_rows, rows, TPB, (Buf("x"), Buf("out")))], ["out"])


def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_smooth(x):
    out = np.zeros_like(x)
    out[1:-1, 1:-1] = sum(x[1 + di:x.shape[0] - 1 + di, 1 + dj:x.shape[1] - 1 + dj]
                          for di in (-1, 0, 1) for dj in (-1, 0, 1)) / 9
    return out


def np_hist(data):
    return np.bincount(data, minlength=NBINS).astype(np.int64)


#: name, program, expected (NumPy) from the buffers, reference (fn, args from buffers, output
#: index), NumPy's own version (timed for information) or None, tolerance, sizes
#: (full, quick, simulator)
CASES = [
    ("axpy", p_axpy,
     lambda b: 2.0 * b["x"] + b["y"],
     (axpy_ref, lambda b: (2.0, b["x"], b["y"], np.empty_like(b["out"])), 3),
     lambda b: 2.0 * b["x"] + b["y"], 0.0, (1 << 24, 1 << 20, 1 << 13)),
    ("block reduction (shared tree + atomic)", p_block_sum,
     lambda b: np.array([b["x"].sum()]),
     (sum_ref, lambda b: (b["x"], np.zeros(1)), 1),
     lambda b: b["x"].sum(), 1e-9, (1 << 24, 1 << 20, 1 << 10)),
    ("histogram, global atomics", p_hist_global,
     lambda b: np_hist(b["data"]),
     (hist_ref, lambda b: (b["data"], np.zeros(NBINS, np.int64)), 1),
     lambda b: np.bincount(b["data"], minlength=NBINS), 0.0, (1 << 24, 1 << 20, 1 << 13)),
    ("histogram, shared-privatized", p_hist_shared,
     lambda b: np_hist(b["data"]),
     (hist_ref, lambda b: (b["data"], np.zeros(NBINS, np.int64)), 1),
     lambda b: np.bincount(b["data"], minlength=NBINS), 0.0, (1 << 24, 1 << 20, 1 << 11)),
    ("2-D stencil, 9-point (docs style)", p_smooth,
     lambda b: np_smooth(b["x"]),
     (smooth_ref, lambda b: (b["x"], np.zeros_like(b["out"])), 1),
     lambda b: np_smooth(b["x"]), 1e-12, ((2048, 2048), (1024, 1024), (64, 64))),
    ("tiled matmul, shared memory", p_matmul,
     lambda b: b["A"] @ b["B"],
     (matmul_ref, lambda b: (b["A"], b["B"], np.empty_like(b["C"])), 2),
     lambda b: b["A"] @ b["B"], 1e-9, ((1024, 1024), (512, 512), (32, 32))),
    ("inclusive scan (3 launches)", p_scan,
     lambda b: np.cumsum(b["x"]),
     (scan_ref, lambda b: (b["x"], np.empty_like(b["out"])), 1),
     lambda b: np.cumsum(b["x"]), 0.0, (1 << 24, 1 << 20, 1 << 9)),
    ("transpose, shared 32x33 tile", p_transpose,
     lambda b: b["a"].T.copy(),
     (transpose_ref, lambda b: (b["a"], np.empty_like(b["out"])), 1),
     lambda b: np.ascontiguousarray(b["a"].T), 0.0, ((4096, 4096), (1024, 1024), (32, 32))),
    ("row softmax (cube per row)", p_softmax,
     lambda b: np_softmax(b["x"]),
     (softmax_ref, lambda b: (b["x"], np.empty_like(b["out"])), 1),
     lambda b: np_softmax(b["x"]), 1e-12, ((8192, 2048), (2048, 512), (2, 256))),
    ("warp-shuffle reduction", p_warp_sum,
     lambda b: np.array([b["x"].sum()]),
     (sum_ref, lambda b: (b["x"], np.zeros(1)), 1),
     lambda b: b["x"].sum(), 1e-9, (1 << 24, 1 << 20, 1 << 14)),
]

def selected():
    """The CASES whose name contains ``--only``'s text (all of them without ``--only``)."""
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    return [case for case in CASES if only in case[0]]


NO_SIMULATOR = {"warp-shuffle reduction": "the simulator has no shfl_*_sync"}


def size_label(size):
    if isinstance(size, tuple):
        return "x".join(map(str, size))
    return f"2^{size.bit_length() - 1}" if size & (size - 1) == 0 else str(size)


def check(got, expected, tol, what):
    for g, e in zip(got, expected):
        if tol:
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol, err_msg=what)
        else:
            np.testing.assert_array_equal(g, e, err_msg=what)


def paired(ours, ref, repeats):
    """Medians of ``repeats`` alternating rounds (both already warm)."""
    a, b = [], []
    for _ in range(repeats):
        a.append(median_time(ours, repeats=1, warmup=0))
        b.append(median_time(ref, repeats=1, warmup=0))
    return statistics.median(a), statistics.median(b)


def section_njit(client, quick):
    rng = np.random.default_rng(0)
    t = Table("classic kernels: CPU backend vs hand-written njit(parallel=True) + prange")
    info = []
    ratios = {}
    times = {}                                       # name -> (ours, reference), for --json
    peaks = {}                                       # memory column (issue 15), see loop_peak
    repeats = 2 if quick else 9
    for name, make, expected, (ref_fn, ref_args, ref_out), np_fn, tol, sizes in selected():
        size = sizes[1] if quick else sizes[0]
        prog = make(size, rng)
        exp = [expected(prog.buffers)]
        run, read = prog.on_client(client)
        run()                                        # compile, then check before timing
        check(read(), exp, tol, f"numba_cube {name}")
        run()                                        # a second run: resets work too
        check(read(), exp, tol, f"numba_cube {name}, second run")
        peaks[name] = loop_peak(run, sum(b.nbytes for b in prog.buffers.values()),
                                client.server.pool)
        args = ref_args(prog.buffers)
        ref_fn(*args)                                # compile the reference
        check([args[ref_out]], exp, tol, f"reference {name}")
        t_ours, t_ref = paired(run, lambda: ref_fn(*args), repeats)
        label = f"{name}, {size_label(size)}"
        t.row(label, t_ours, t_ref, "njit(parallel) + prange", goal=2.0)
        ratios[name] = t_ours / t_ref
        times[name] = (t_ours, t_ref)
        if name.startswith("2-D stencil"):
            # for information: what the docs' index order costs (same data, j from threadIdx.x)
            n = size[0]
            variant = Program(prog.buffers, [(smooth_ji, (grid1(n, ST), grid1(n, ST)), (ST, ST),
                                              (Buf("x"), Buf("out")))], ["out"])
            vrun, vread = variant.on_client(client)
            vrun()
            check(vread(), exp, tol, "stencil, j from threadIdx.x")
            v_ours, v_ref = paired(vrun, lambda: ref_fn(*args), repeats)
            info.append((f"2-D stencil, j, i = cuda.grid(2), {size_label(size)}", v_ours, v_ref,
                         "njit(parallel) + prange"))
        if name.startswith("transpose"):
            # for information: the cache-blocked loop, a stronger CPU reference
            blocked = np.empty_like(prog.buffers["out"])
            transpose_blocked_ref(prog.buffers["a"], blocked)
            check([blocked], exp, tol, "blocked transpose")
            t_blocked = median_time(lambda: transpose_blocked_ref(prog.buffers["a"], blocked), repeats=repeats)
            info.append((label, t_ours, t_blocked, "njit blocked transpose (32x32)"))
        if np_fn is not None:
            t_np = median_time(lambda: np_fn(prog.buffers), repeats=repeats)
            info.append((label, t_ours, t_np, "NumPy"))
        del prog, run, read, args
    geo = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
    worst = max(ratios, key=ratios.get)
    over = [n for n, r in ratios.items() if r > 2.0]
    verdict = "met" if geo <= 1.25 else "NOT met"
    print(f"{'geometric mean of the ratios':46} {geo:7.3f}  (goal <= 1.25: {verdict}); "
          f"worst: {worst} {ratios[worst]:.2f}x; above 2x: {', '.join(over) or 'none'}")
    report_peaks(peaks)
    if "--json" in sys.argv:                         # benchmarks/cpu_scaling.py reads these
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump({"threads": numba.get_num_threads(), "times": times}, f)
    ti = Table("for information: NumPy, a cache-blocked transpose, the stencil's index order")
    for label, ours, theirs, what in info:
        ti.row(label, ours, theirs, what)
    return ratios, geo


def section_simulator(client, quick):
    rng = np.random.default_rng(1)
    t = Table("classic kernels, small sizes: CPU backend vs numba-cuda's simulator")
    repeats = 1 if quick else 2
    for name, make, expected, _ref, _np, tol, sizes in selected():
        size = sizes[2]
        if quick:                                   # a quarter of the simulator's time or less
            size = tuple(max(1, d // 2) for d in size) if isinstance(size, tuple) else size // 4
        if name in NO_SIMULATOR:
            print(f"{name:46} {'-':>12} {'-':>12} {'-':>7}  {NO_SIMULATOR[name]}")
            continue
        label = f"{name}, {size_label(size)}"
        prog = make(size, rng)
        exp = [expected(prog.buffers)]
        run, read = prog.on_client(client)
        run()
        check(read(), exp, tol, f"numba_cube {name} (small)")
        sim, sim_read = prog.on_simulator()
        t0 = time.perf_counter()
        sim()                                       # nothing to compile: the first run counts
        t_first = time.perf_counter() - t0
        check(sim_read(), exp, tol, f"simulator {name}")
        t_sim = t_first if repeats == 1 else statistics.median(
            [t_first] + [median_time(sim, repeats=1, warmup=0) for _ in range(repeats - 1)])
        t_ours = median_time(run, repeats=9 if quick else 25, warmup=2)
        speedup = t_sim / t_ours
        verdict = "quick run, not judged" if quick else (
            "goal >= 1e4x: " + ("met" if speedup >= 1e4 else "NOT met"))
        t.row(label, t_ours, t_sim, f"simulator; {speedup:,.0f}x faster ({verdict})")


def section_boundscheck(quick):
    """Section 3 (``--boundscheck``): what bounds checking costs, per kernel. Each kernel runs on
    a ``boundscheck=True`` client and a ``boundscheck=False`` one in this process, in
    alternating rounds with the hand-written reference (median of each), so that the drift of a
    shared machine hits all three alike; both results are checked against NumPy first. Besides
    wall time, the CPU time of the process (all its threads) is timed: on a machine that other
    work shares, a parallel run's wall time moves with whoever else has the cores, its CPU time
    much less (``OMP_WAIT_POLICY=PASSIVE``: idle workers sleep, see ``common.py``)."""
    rng = np.random.default_rng(2)
    checked = cube.client("cpu", boundscheck=True)
    unchecked = cube.client("cpu", boundscheck=False)
    print("\n== bounds checking: boundscheck=True vs boundscheck=False, each vs njit(parallel) ==")
    print(f"{'case':46} {'checked':>12} {'unchecked':>12} {'njit':>12} {'chk/unchk':>9} "
          f"{'(cpu)':>7} {'chk/njit':>8} {'unchk/njit':>10}")
    repeats = 2 if quick else 9
    cost, cost_cpu, against_ref, unchecked_ref = {}, {}, {}, {}
    for name, make, expected, (ref_fn, ref_args, ref_out), _np, tol, sizes in selected():
        size = sizes[1] if quick else sizes[0]
        prog = make(size, rng)
        exp = [expected(prog.buffers)]
        runs = []
        for client, what in ((checked, "checked"), (unchecked, "unchecked")):
            run, read = prog.on_client(client)
            run()                                    # compile, then check before timing
            check(read(), exp, tol, f"{what} {name}")
            run()
            runs.append(run)
        args = ref_args(prog.buffers)
        ref_fn(*args)
        check([args[ref_out]], exp, tol, f"reference {name}")
        wall, cpu = ([], [], []), ([], [], [])
        for _ in range(repeats):
            for fn, w, c in zip((runs[0], runs[1], lambda: ref_fn(*args)), wall, cpu):
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                w.append(time.perf_counter() - t0)
                c.append(time.process_time() - c0)
        t_on, t_off, t_ref = (statistics.median(s) for s in wall)
        c_on, c_off, _ = (statistics.median(s) for s in cpu)
        cost[name], cost_cpu[name], against_ref[name] = t_on / t_off, c_on / c_off, t_on / t_ref
        unchecked_ref[name] = t_off / t_ref
        print(f"{name + ', ' + size_label(size):46} {fmt_time(t_on):>12} {fmt_time(t_off):>12} "
              f"{fmt_time(t_ref):>12} {t_on / t_off:9.3f} {c_on / c_off:7.3f} "
              f"{t_on / t_ref:8.3f} {t_off / t_ref:10.3f}")
        sys.stdout.flush()
        del prog, runs, args

    def geo(ratios):
        return math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))

    worst = max(cost, key=cost.get)
    print(f"{'geometric mean':46} checked/unchecked {geo(cost):.3f} (cpu {geo(cost_cpu):.3f}), "
          f"checked/njit {geo(against_ref):.3f}, unchecked/njit {geo(unchecked_ref):.3f}; "
          f"worst: {worst} {cost[worst]:.2f}x")
    return cost


def main(quick=False):
    if "--boundscheck" in sys.argv:                  # section 3 only
        section_boundscheck(quick)
        return
    client = cube.client("cpu")
    t0 = time.perf_counter()
    section_njit(client, quick)
    if "--no-simulator" not in sys.argv:
        section_simulator(client, quick)
    print(f"\n(total {time.perf_counter() - t0:.1f} s; numba threads: {numba.get_num_threads()})")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
