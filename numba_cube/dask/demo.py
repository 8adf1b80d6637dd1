"""``python -m numba_cube demo --dask``: a small pipeline on a two-worker local Dask cluster.

It shows, in order: one numba_cube client per worker (``setup``), a precompile of the kernels on
every worker, two kernels chained over a chunked array (which worker each chunk ran on; the
chunks between the kernels stay handles there), the result checked against NumPy, and a
failure injected into one chunk surfacing at ``compute()`` with its root cause.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from numba import cuda

import numba_cube as cube

from .blocks import map_blocks
from .plugin import setup
from .precompile import precompile

CHUNK = 1 << 16


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cube.kernel
def square(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * x[i]


@cube.kernel
def checked_sqrt(x, out):
    i = cuda.grid(1)
    if i < out.size:
        if x[i] < 0.0:
            raise ValueError("a negative input reached checked_sqrt")
        out[i] = x[i] ** 0.5


def run_dask_demo(device: str = "cpu", n_chunks: int = 8) -> int:
    import dask.array as da
    from dask.distributed import Client, LocalCluster, wait

    print(f"numba_cube on Dask: 2 worker processes, {n_chunks} chunks of {CHUNK:,} float64\n")
    # silence_logs: the injected failure would otherwise be logged by every worker it reaches;
    # step 5 prints it once, with its root cause
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                      silence_logs=logging.CRITICAL) as cluster, Client(cluster) as client:
        devices = setup(client, device=device)
        print("1. one numba_cube client per worker (a worker plugin):")
        for address, name in sorted(devices.items()):
            print(f"     {address} -> {name}")
        example = np.zeros(1)
        t0 = time.perf_counter()
        reports = precompile(client, [(axpy, 2.0, example, example, example),
                                                 (square, example, example),
                                                 (checked_sqrt, example, example)])
        print(f"\n2. precompile (a dry run on every worker, {time.perf_counter() - t0:.2f} s):")
        for address, report in sorted(reports.items()):
            print(f"     {address}: compiled {len(report.compiled)}, failed {len(report.failed)}")

        host = np.random.default_rng(0).random(n_chunks * CHUNK)
        x = da.from_array(host, chunks=CHUNK)
        z = map_blocks(square, map_blocks(axpy, 2.0, x, x, dim=256), dim=256)
        persisted = client.persist(z)
        wait(persisted)
        where = client.who_has(persisted)
        print("\n3. axpy then square per chunk (the chunk between them stays on its worker):")
        for key, workers in sorted(where.items(), key=lambda kv: str(kv[0])):
            print(f"     chunk {key[1]}: {', '.join(workers)} ({devices[workers[0]]})")
        result = persisted.compute()
        same = np.allclose(result, (3.0 * host) ** 2, rtol=1e-15, atol=0)
        print(f"\n4. computed: {result.shape[0]:,} values, equal to NumPy's: {same}")

        broken = host.copy()
        broken[3 * CHUNK + 5] = -1.0
        failing = map_blocks(square, map_blocks(
            checked_sqrt, da.from_array(broken, chunks=CHUNK), dim=256), dim=256)
        print("\n5. a negative value in chunk 3, then checked_sqrt and square:")
        try:
            failing.compute()
            print("     no failure: unexpected")
            return 1
        except cube.LaunchFailure as failure:
            print(f"     compute() raised LaunchFailure of kernel {failure.kernel_id}")
            print(f"     root cause: {type(failure.root).__name__}: {failure.root}")
            print(f"     chain: {' -> '.join(failure.chain)}")
            for note in getattr(failure, "__notes__", ()):
                print(f"     {note}")
    return 0 if same else 1
