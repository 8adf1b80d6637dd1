"""numba_cube kernels on a Dask cluster (issues 16, 34), measured in one run.

1. Per-chunk overhead: many tiny chunks (axpy, 64 float64 each), ``numba_cube.dask.map_blocks``
   against plain ``dask.array.map_blocks`` of an equivalent ``njit`` function, on the same
   two-worker cluster, in one process. Both are ``compute()``d (Dask fuses each chunk's launch
   and read into one task); the difference divided by the number of chunks is what a
   numba_cube chunk costs over a plain one (the copy onto the worker's device, the output
   buffer, the launch through the worker's client, the read back to host). Issue 34's target:
   at most +0.2 ms a chunk.
2. A fused chain: three kernels per chunk (axpy, square, halve) against the same chain of
   ``njit`` functions through ``dask.array.map_blocks``: the tasks per chunk after Dask's
   optimizer (one for both when the chain fuses) and the times.
3. Scaling: a compute-bound kernel (2000 flops-ish per element) over 8 chunks, on one worker
   against two (worker processes, one Dask thread each, and ``NUMBA_NUM_THREADS=1`` so a
   worker's CPU backend does not already use every core). On 2 cores the ceiling is 2x.

Run: ``python benchmarks/bench_dask.py [--quick]``. Absolute times on a shared machine mean
little; the ratios are the result.
"""

from __future__ import annotations

import logging
import sys

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster
from numba import cuda, njit

from common import fmt_time, median_time

import numba_cube as cube
import numba_cube.dask as cubed


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@njit(cache=False)
def axpy_njit(a, x, y):
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = a * x[i] + y[i]
    return out


@cube.kernel
def powers(x, out):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        v = x[i]
        for k in range(2000):
            acc += (v * 0.999) ** 2 / (k + 1.0)
        out[i] = acc


def _cluster(n_workers: int, env: dict | None = None):
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=":0",
                           silence_logs=logging.ERROR, env=env or {})
    client = Client(cluster)
    cubed.setup(client, device="cpu")
    return cluster, client


@cube.kernel
def square(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * x[i]


@cube.kernel
def halve(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 0.5 * x[i]


@njit(cache=False)
def square_njit(x):
    return x * x


@njit(cache=False)
def halve_njit(x):
    return 0.5 * x


def tasks_per_chunk(array) -> float:
    """Tasks (not Dask's aliases) in the optimized graph of ``array``, per chunk."""
    import dask

    (optimized,) = dask.optimize(array)
    graph = dict(optimized.__dask_graph__())
    return sum(type(v).__name__ != "Alias" for v in graph.values()) / array.npartitions


def per_task_overhead(repeats: int) -> None:
    n_chunks, chunk = 256, 64
    host = np.random.default_rng(0).random(n_chunks * chunk)
    cluster, client = _cluster(2)
    try:
        x = da.from_array(host, chunks=chunk).persist()
        ours = cubed.map_blocks(axpy, 2.0, x, x, dim=64)
        plain = da.map_blocks(lambda b: axpy_njit(2.0, b, b), x, dtype=x.dtype)
        assert np.array_equal(ours.compute(), plain.compute())       # warm: compiles, imports
        t_ours = median_time(ours.compute, repeats=repeats)
        t_plain = median_time(plain.compute, repeats=repeats)
        task_ours = median_task_time(client, ours, repeats)
        task_plain = median_task_time(client, plain, repeats)
    finally:
        client.close()
        cluster.close()
    print(f"1. per-chunk overhead, {n_chunks} chunks of {chunk} float64, 2 workers:")
    for label, t, task in (("numba_cube.dask.map_blocks  ", t_ours, task_ours),
                           ("dask.array.map_blocks + njit", t_plain, task_plain)):
        print(f"     {label} {fmt_time(t)}  ({fmt_time(t / n_chunks)} a chunk; "
              f"a chunk's task computes in {fmt_time(task)}, median)")
    print(f"     ratio {t_ours / t_plain:.2f}; numba_cube adds "
          f"{fmt_time(max(t_ours - t_plain, 0.0) / n_chunks)} a chunk (wall), "
          f"{fmt_time(task_ours - task_plain)} a chunk (task compute, medians)")


def median_task_time(client, array, repeats: int) -> float:
    """The median time a chunk's task spends computing on its worker, from the scheduler's task
    stream over ``repeats`` computes: the per-chunk cost without the scheduling around it,
    which on a loaded machine varies more than the difference measured."""
    from distributed import get_task_stream

    durations = []
    for _ in range(repeats):
        with get_task_stream(client) as stream:
            array.compute()
        durations += [s["stop"] - s["start"] for record in stream.data
                      if not str(record["key"]).startswith("('finalize")
                      for s in record["startstops"] if s["action"] == "compute"]
    return float(np.median(durations))


def fused_chain(repeats: int) -> None:
    n_chunks, chunk = 64, 1 << 12
    host = np.random.default_rng(2).random(n_chunks * chunk)
    cluster, client = _cluster(2)
    try:
        x = da.from_array(host, chunks=chunk).persist()
        ours = cubed.map_blocks(halve, cubed.map_blocks(square, cubed.map_blocks(
            axpy, 2.0, x, x, dim=256), dim=256), dim=256)
        plain = da.map_blocks(halve_njit, da.map_blocks(square_njit, da.map_blocks(
            lambda b: axpy_njit(2.0, b, b), x, dtype=x.dtype), dtype=x.dtype), dtype=x.dtype)
        assert np.array_equal(ours.compute(), plain.compute())       # warm
        t_ours = median_time(ours.compute, repeats=repeats)
        t_plain = median_time(plain.compute, repeats=repeats)
        per_chunk = (tasks_per_chunk(ours), tasks_per_chunk(plain))
    finally:
        client.close()
        cluster.close()
    print(f"\n2. a chain of 3 kernels, {n_chunks} chunks of {chunk:,} float64, 2 workers:")
    print(f"     numba_cube.dask  {fmt_time(t_ours)}, {per_chunk[0]:g} task(s) a chunk")
    print(f"     dask + njit      {fmt_time(t_plain)}, {per_chunk[1]:g} task(s) a chunk")
    print(f"     ratio {t_ours / t_plain:.2f}; numba_cube adds "
          f"{fmt_time(max(t_ours - t_plain, 0.0) / n_chunks)} a chunk (3 launches)")


def scaling(repeats: int, size: int) -> None:
    host = np.random.default_rng(1).random(size)
    times = {}
    for n_workers in (1, 2):
        cluster, client = _cluster(n_workers, env={"NUMBA_NUM_THREADS": "1"})
        try:
            # not persisted: persisted chunks may all sit on one worker, and their tasks with them
            x = da.from_array(host, chunks=size // 8)
            y = cubed.map_blocks(powers, x, dim=256)
            y.compute()                                              # warm: compile on workers
            times[n_workers] = median_time(y.compute, repeats=repeats)
        finally:
            client.close()
            cluster.close()
    print(f"\n3. compute-bound kernel, {size:,} float64 in 8 chunks "
          "(NUMBA_NUM_THREADS=1 a worker):")
    print(f"     1 worker {fmt_time(times[1])}, 2 workers {fmt_time(times[2])}: "
          f"speed-up {times[1] / times[2]:.2f}x (ceiling on 2 cores: 2x)")


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    per_task_overhead(repeats=3 if quick else 7)
    fused_chain(repeats=3 if quick else 7)
    scaling(repeats=3 if quick else 5, size=1 << 15 if quick else 1 << 17)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
