"""The CPU backend against hand-written Numba, in one process (issue 2).

1. Elementwise (axpy) at 2^24 float64: numba_cube's fission output vs ``njit(parallel=True)`` +
   ``prange`` written by hand (goal: ratio <= 1.25, aim 1.0).
2. Shared-memory tiled matmul (two barriers in a loop) vs a naive ``prange`` matmul.
3. Launch overhead of a tiny kernel (one cube of 32 units, asynchronous launches then one sync)
   vs a bare call of an ``njit`` function doing the same work.
4. What bounds checking costs: axpy and the tiled matmul on a ``boundscheck=True`` client vs a
   ``boundscheck=False`` one (``bench_kernels.py --boundscheck`` measures every kernel of the
   suite: the data behind ``NUMBA_CUBE_BOUNDSCHECK``'s default, on since issue 30).

Kernel times are measured as launch + wait (``client.sync_buffers``) so they include the runtime's
whole path. Run: ``python benchmarks/bench_cpu.py [--quick] [--boundscheck]`` (``--boundscheck``:
section 4 only).
"""

from __future__ import annotations

import statistics
import sys

import numpy as np
from numba import cuda, njit, prange

from common import PeakMemory, Table, median_time, report_memory

import numba_cube as cube

TILE = 16


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@njit(parallel=True, nogil=True, cache=True)
def axpy_ref(a, x, y, out):
    for i in prange(out.size):
        out[i] = a * x[i] + y[i]


@cube.kernel
def matmul_tiled(a, b, c):
    sa = cuda.shared.array((TILE, TILE), np.float64)
    sb = cuda.shared.array((TILE, TILE), np.float64)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    n = a.shape[0]
    acc = 0.0
    for t in range((n + TILE - 1) // TILE):
        sa[ty, tx] = a[row, t * TILE + tx] if row < n and t * TILE + tx < n else 0.0
        sb[ty, tx] = b[t * TILE + ty, col] if col < n and t * TILE + ty < n else 0.0
        cuda.syncthreads()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
        cuda.syncthreads()
    if row < n and col < n:
        c[row, col] = acc


@njit(parallel=True, nogil=True, cache=True)
def matmul_naive(a, b, c):
    n = a.shape[0]
    for i in prange(n):
        for j in range(n):
            acc = 0.0
            for k in range(n):
                acc += a[i, k] * b[k, j]
            c[i, j] = acc


@njit(nogil=True, cache=True)
def tiny_ref(a, x, y, out):
    for i in range(out.size):
        out[i] = a * x[i] + y[i]


def main(quick: bool = False):
    client = cube.client("cpu")
    rng = np.random.default_rng(0)

    t = Table("CPU backend vs hand-written Numba")
    n = 1 << (20 if quick else 24)
    xh, yh = rng.standard_normal(n), rng.standard_normal(n)
    x, y, out = client.create(xh), client.create(yh), client.empty(n, np.float64)
    ref_out = np.empty(n)

    def ours():
        client.launch(axpy, n // 256, 256, 2.0, x, y, out)
        client.sync_buffers(out)

    with PeakMemory() as mem:
        t_ours = median_time(ours, repeats=9, warmup=2)
    t_ref = median_time(lambda: axpy_ref(2.0, xh, yh, ref_out), repeats=9, warmup=2)
    np.testing.assert_allclose(client.read(out), ref_out)
    t.row(f"axpy, 2^{n.bit_length() - 1} float64", t_ours, t_ref, "njit(parallel) + prange", goal=1.25)
    report_memory("axpy (pool + staging)", mem.peak + client.server.pool.held_bytes, 3 * n * 8)

    m = 256 if quick else 512
    ah, bh = rng.standard_normal((m, m)), rng.standard_normal((m, m))
    a, b, c = client.create(ah), client.create(bh), client.empty((m, m), np.float64)
    ref_c = np.empty((m, m))

    def ours_mm():
        client.launch(matmul_tiled, (m // TILE, m // TILE), (TILE, TILE), a, b, c)
        client.sync_buffers(c)

    t_mm = median_time(ours_mm, repeats=5, warmup=1)
    t_naive = median_time(lambda: matmul_naive(ah, bh, ref_c), repeats=5, warmup=1)
    np.testing.assert_allclose(client.read(c), ah @ bh, rtol=1e-9, atol=1e-9)
    t.row(f"tiled matmul {m}x{m} (2 barriers in a loop)", t_mm, t_naive, "naive njit prange matmul")

    tx, ty, tout = client.create(np.ones(32)), client.create(np.ones(32)), client.empty(32, np.float64)
    hx, hy, hout = np.ones(32), np.ones(32), np.empty(32)
    reps = 2000 if quick else 20000

    def launches():
        for _ in range(reps):
            client.launch(axpy, 1, 32, 2.0, tx, ty, tout)
        client.sync()

    def calls():
        for _ in range(reps):
            tiny_ref(2.0, hx, hy, hout)

    t_launch = median_time(launches, repeats=3) / reps
    t_call = median_time(calls, repeats=3) / reps
    t.row("tiny kernel: launch (async) + share of a sync", t_launch, t_call, "bare njit call")

    boundscheck_rows(quick)


def boundscheck_rows(quick: bool = False):
    """Checked vs unchecked clients, same kernels and data. The two are measured in alternating
    rounds (median of each), so that drift of a shared machine hits both alike."""
    checked, unchecked = cube.client("cpu", boundscheck=True), cube.client("cpu", boundscheck=False)
    rng = np.random.default_rng(1)
    t = Table("bounds checking: boundscheck=True vs boundscheck=False")
    n = 1 << (20 if quick else 24)
    m = 256 if quick else 512
    xh, yh = rng.standard_normal(n), rng.standard_normal(n)
    ah, bh = rng.standard_normal((m, m)), rng.standard_normal((m, m))

    def setup(client):
        x, y, out = client.create(xh), client.create(yh), client.empty(n, np.float64)
        a, b, c = client.create(ah), client.create(bh), client.empty((m, m), np.float64)

        def run_axpy():
            client.launch(axpy, n // 256, 256, 2.0, x, y, out)
            client.sync_buffers(out)

        def run_mm():
            client.launch(matmul_tiled, (m // TILE, m // TILE), (TILE, TILE), a, b, c)
            client.sync_buffers(c)

        return run_axpy, run_mm, out, c

    on_axpy, on_mm, on_out, on_c = setup(checked)
    off_axpy, off_mm, off_out, off_c = setup(unchecked)
    for case, on, off, repeats in ((f"axpy, 2^{n.bit_length() - 1} float64", on_axpy, off_axpy, 9),
                                   (f"tiled matmul {m}x{m}", on_mm, off_mm, 5)):
        on(), off()                                  # compile both outside the measurement
        samples_on, samples_off = [], []
        for _ in range(repeats):
            samples_on.append(median_time(on, repeats=1, warmup=0))
            samples_off.append(median_time(off, repeats=1, warmup=0))
        t.row(case, statistics.median(samples_on), statistics.median(samples_off),
              "same kernel, boundscheck=False")
    np.testing.assert_allclose(checked.read(on_out), 2.0 * xh + yh)
    np.testing.assert_allclose(unchecked.read(off_out), 2.0 * xh + yh)
    np.testing.assert_allclose(checked.read(on_c), ah @ bh, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(unchecked.read(off_c), ah @ bh, rtol=1e-9, atol=1e-9)


if __name__ == "__main__":
    if "--boundscheck" in sys.argv:                  # only section 4
        boundscheck_rows(quick="--quick" in sys.argv)
    else:
        main(quick="--quick" in sys.argv)
