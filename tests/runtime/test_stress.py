"""Stress: many threads and launches, shared buffers: no deadlock, no lost update (CONTRACT.md 3)."""

from __future__ import annotations

import threading

import numpy as np
from numba import cuda

import numba_cube as cube

THREADS = 8
LAUNCHES = 5000
NBUF = 4


@cube.kernel
def inc(x, by):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += by


@cube.kernel
def inc_from(src, x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += src[i] * 0.0 + 1.0


def test_eight_threads_five_thousand_launches_each():
    """8 threads x 5,000 launches read-modify-write 4 shared buffers (and read a fifth): every
    increment lands (increments commute, so the final values are known whatever the interleaving)
    and the whole run finishes within a bounded time: no deadlock."""
    client = cube.client("cpu")
    bufs = [client.create(np.zeros(64)) for _ in range(NBUF)]
    src = client.create(np.ones(64))
    expected = np.zeros(NBUF)
    plans = []
    rng = np.random.default_rng(1234)
    for _ in range(THREADS):
        plan = rng.integers(0, NBUF, LAUNCHES)
        plans.append(plan)
        expected += np.bincount(plan, minlength=NBUF)
    errors = []

    def worker(plan):
        try:
            for k, b in enumerate(plan):
                if k % 2:
                    client.launch(inc, 1, 64, bufs[b], 1.0)
                else:
                    client.launch(inc_from, 1, 64, src, bufs[b])
                if k % 1000 == 999:
                    client.read(bufs[b])          # reads mixed in: flushes other streams' work
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(p,)) for p in plans]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=240)
    assert not any(th.is_alive() for th in threads), "deadlock or livelock: threads still running"
    assert not errors, errors
    client.sync()
    for b in range(NBUF):
        np.testing.assert_array_equal(client.read(bufs[b]), np.full(64, expected[b]))
