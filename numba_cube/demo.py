"""``python -m numba_cube demo``: a small real pipeline, explained as it runs.

Three numba.cuda kernels, unchanged CUDA dialect, run on the chosen device:

1. ``saxpy``      y = a*x + y                         (elementwise, cuda.grid)
2. ``block_sum``  per-cube partial sums                (shared memory, syncthreads in a loop;
                                                        its block size autotuned at the end)
3. ``histogram``  value histogram                      (cuda.atomic.add across cubes)

Then the runtime's own features: a dry run that compiles without running, a failure recorded on
buffers and inherited downstream (and repaired), two threads on two streams ordered by the
buffers they share, and a grid size computed on the device (a dynamic cube count). Every result is
checked against NumPy.

``--dask`` runs the Dask demo instead (``numba_cube/dask/demo.py``, the ``dask`` extra).
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
from numba import cuda

from . import CubeCount, autotune, dry_run, errors, kernel, pow2_bucket
from numba_cube.runtime.registry import client as get_client

TPB = 256
MAX_TPB = 1024
BINS = 16


@kernel
def saxpy(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + y[i]


@kernel
def block_sum(x, partial):
    # Shared memory sized for the largest cube, so the same kernel serves every block size a
    # tuner tries (any power of two up to 1024).
    tile = cuda.shared.array(MAX_TPB, np.float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[tid] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if tid < step:
            tile[tid] += tile[tid + step]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = tile[0]


@kernel
def histogram(x, lo, width, counts):
    i = cuda.grid(1)
    if i < x.size:
        b = int((x[i] - lo) / width)
        b = min(max(b, 0), counts.size - 1)
        cuda.atomic.add(counts, b, 1)


@kernel
def gather(idx, src, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = src[idx[i]]


@kernel
def count_above(x, threshold, counter):
    i = cuda.grid(1)
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(counter, 0, 1)


@kernel
def grid_for(counter, tpb, count):
    # Device work that writes the next launch's grid: three uint32 (x, y, z).
    if cuda.grid(1) == 0:
        count[0] = (counter[0] + tpb - 1) // tpb
        count[1] = 1
        count[2] = 1


@kernel
def iota_below(counter, out):
    i = cuda.grid(1)
    if i < counter[0] and i < out.size:
        out[i] = i


@kernel
def sum_first(partial, n, out):
    if cuda.grid(1) == 0:
        acc = 0.0
        for i in range(n):
            acc += partial[i]
        out[0] = acc


@autotune(key=lambda x, partial, out: pow2_bucket(x.size),
          candidates=[{"tpb": t} for t in (32, 64, 128, 256, 512, 1024)], samples=3)
def tuned_sum(client, x, partial, out, *, tpb):
    """out[0] = sum(x): a block reduction whose block size is tuned per (power-of-two) size."""
    cubes = (x.size + tpb - 1) // tpb
    client.launch(block_sum, cubes, tpb, x, partial)
    client.launch(sum_first, 1, 1, partial, cubes, out)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f} ms"


def run_demo(device: str = "cpu", n: int = 1 << 22) -> int:
    rng = np.random.default_rng(0)
    c = get_client(device)
    print(f"numba_cube demo on {c.device}: {n:,} float64 elements, three numba.cuda kernels\n")
    x_host = rng.standard_normal(n)
    y_host = rng.standard_normal(n)
    x, y = c.create(x_host), c.create(y_host)
    cubes = math.ceil(n / TPB)
    partial = c.empty(cubes, np.float64)
    counts = c.create(np.zeros(BINS, np.int64))

    # 1. Dry run: compile everything, run nothing.
    t0 = time.perf_counter()
    with dry_run():
        c.launch(saxpy, cubes, TPB, 2.0, x, y)
        c.launch(block_sum, cubes, TPB, y, partial)
        c.launch(histogram, cubes, TPB, y, -8.0, 1.0, counts)
    c.sync()
    t_compile = time.perf_counter() - t0
    assert np.array_equal(c.read(y), y_host), "a dry run must not touch memory"
    print(f"  dry run: compiled 3 kernels, ran none         {_ms(t_compile)}  (cached on disk for next time)")

    # 2. The real pipeline, timed warm.
    t0 = time.perf_counter()
    c.launch(saxpy, cubes, TPB, 2.0, x, y)
    c.launch(block_sum, cubes, TPB, y, partial)
    c.launch(histogram, cubes, TPB, y, -8.0, 1.0, counts)
    total = c.read(partial).sum()
    hist = c.read(counts)
    t_run = time.perf_counter() - t0
    ref_y = 2.0 * x_host + y_host
    ref_hist = np.bincount(np.clip(((ref_y + 8.0) / 1.0).astype(np.int64), 0, BINS - 1), minlength=BINS)
    ok = np.isclose(total, ref_y.sum()) and np.array_equal(hist, ref_hist)
    print(f"  saxpy -> block_sum -> histogram               {_ms(t_run)}  matches NumPy: {ok}")

    # 3. A failure lives on the buffers it should have written, and travels downstream. On the
    # CPU: an out-of-bounds index under bounds checking; on a GPU: a launch the driver refuses
    # (a cube of 2048 units, past CUDA's limit of 1024).
    on_cpu = device.startswith("cpu")
    checked = get_client(device, boundscheck=True) if on_cpu else c
    bad_dim = 32 if on_cpu else 2048
    src = checked.create(np.arange(8.0))
    bad_idx = checked.create(np.array([0, 1, 2, 99 if on_cpu else 3], np.int64))
    out1, out2 = checked.empty(4, np.float64), checked.empty(4, np.float64)
    checked.launch(gather, 1, bad_dim, bad_idx, src, out1)            # fails
    checked.launch(gather, 1, 32, bad_idx[:2], out1, out2[:2])        # reads out1: skipped
    try:
        checked.read(out2[:2])
        failure = "none"
    except errors.LaunchFailure as exc:
        failure = f"{type(exc.root).__name__} from {exc.kernel_id.split('-')[0]}, via {len(exc.chain)} launches"
    checked.write(bad_idx, np.array([0, 1, 2, 3], np.int64))
    checked.launch(gather, 1, 32, bad_idx, src, out1)                 # relaunch repairs out1
    repaired = np.array_equal(checked.read(out1), [0.0, 1.0, 2.0, 3.0]) and failure != "none"
    print(f"  failure recorded on buffers: read raised {failure}; relaunch repaired it: {repaired}")

    # 4. Two threads, two streams, one shared buffer: ordered without a single event.
    shared = c.create(np.zeros(n))

    def producer():
        c.launch(saxpy, cubes, TPB, 1.0, x, shared)                    # shared += x

    th = threading.Thread(target=producer)
    th.start()
    th.join()
    c.launch(block_sum, cubes, TPB, shared, partial)                  # another stream reads it
    ordered = np.isclose(c.read(partial).sum(), x_host.sum())
    print(f"  two threads on two streams, inferred ordering   correct: {ordered}")

    # 5. A dynamic cube count: the grid size is computed on the device by earlier work.
    counter = c.create(np.zeros(1, np.uint32))
    count = c.create(np.zeros(3, np.uint32))
    selected = c.create(np.full(n, -1.0))
    c.launch(count_above, cubes, TPB, x, 1.5, counter)
    c.launch(grid_for, 1, 1, counter, TPB, count)
    c.launch(iota_below, CubeCount.dynamic(count), TPB, counter, selected)
    k = int((x_host > 1.5).sum())
    got = c.read(selected)
    dyn_ok = np.array_equal(got[:k], np.arange(k)) and np.all(got[k:] == -1.0)
    print(f"  dynamic cube count: {int(c.read(count)[0]):,} cubes for {k:,} selected   correct: {dyn_ok}")

    # 6. Autotune: the block size of a reduction, measured once per size bucket, cached on disk.
    partial_any = c.empty(n, np.float64)
    total_out = c.empty(1, np.float64)
    t0 = time.perf_counter()
    tuned_sum(c, x, partial_any, total_out)
    t_tune = time.perf_counter() - t0
    result = tuned_sum.result(c, x, partial_any, total_out)
    tuned_ok = bool(np.isclose(c.read(total_out)[0], x_host.sum()))
    if result.timings:
        worst = max(result.timings, key=result.timings.get)
        speedup = result.timings[worst] / result.timings[result.best]
        source = "from the on-disk cache" if result.from_cache else f"tuned in {t_tune:.1f} s"
        print(f"  autotune: block size {result.best.split('=')[1]} chosen of {len(result.timings)} "
              f"({source}), {speedup:.1f}x faster than the worst ({worst})   correct: {tuned_ok}")

    # 7. Launch overhead, warm.
    tiny = c.create(np.zeros(32))
    c.launch(saxpy, 1, 32, 1.0, tiny, tiny)
    c.sync()
    reps = 2000
    t0 = time.perf_counter()
    for _ in range(reps):
        c.launch(saxpy, 1, 32, 1.0, tiny, tiny)
    c.sync()
    per = (time.perf_counter() - t0) / reps
    print(f"  tiny-kernel launch, warm                        {per * 1e6:8.1f} us per launch")
    stats = c.server.stats
    print(f"\nserver stats: {stats['launched']} launches, {stats['compiles']} compiles, "
          f"{stats['cache_hits']} cache hits, {stats['skipped']} skipped by the dry run")
    return 0 if ok and repaired and ordered and dyn_ok and tuned_ok else 1


def run_dask_demo(device: str = "cpu") -> int:
    """``demo --dask``: the pipeline on a two-worker local Dask cluster (``numba_cube/dask/``);
    without the ``dask`` extra it says what to install and returns 2."""
    try:
        import distributed  # noqa: F401 - only to tell a missing extra from a broken demo
    except ImportError:
        print("demo --dask needs Dask: pip install 'numba_cube[dask]'")
        return 2
    from .dask.demo import run_dask_demo as run

    return run(device)
