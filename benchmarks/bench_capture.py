"""Graph replay against eager launches on the CPU backend (issue 6).

A chain of 20 small launches (serial twin, 32 units each), issued eagerly or replayed from a
captured software graph. Replay skips the launch path's per-launch work (channel hop, cache
lookup, dependency registration, task per launch). Reported per kernel.

Run: ``python benchmarks/bench_capture.py``
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from common import Table, median_time

import numba_cube as cube

CHAIN = 20


@cube.kernel
def step(x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = 0.5 * y[i] + x[i]


def main():
    client = cube.client("cpu")
    x = client.create(np.ones(32))
    y = client.create(np.zeros(32))

    def eager():
        for _ in range(CHAIN):
            client.launch(step, 1, 32, x, y)
        client.sync()

    client.graph_prepare()
    eager()                                   # warm-up: compiles, fills the pool
    client.start_capture()
    for _ in range(CHAIN):
        client.launch(step, 1, 32, x, y)
    graph = client.stop_capture()

    def replay():
        graph.replay()
        client.sync()

    reps = 200
    t_eager = median_time(lambda: [eager() for _ in range(reps)], repeats=3) / (reps * CHAIN)
    t_replay = median_time(lambda: [replay() for _ in range(reps)], repeats=3) / (reps * CHAIN)
    t = Table("graph replay vs eager launches (per kernel)")
    t.row(f"replay of a {CHAIN}-launch graph", t_replay, t_eager, "eager launches + sync")


if __name__ == "__main__":
    main()
