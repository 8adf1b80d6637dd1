"""Automatic graphs against eager launches and an explicit capture, in one process (issue 18).

The same loop (a training-loop shape: an iteration of ``CHAIN`` small launches over a few buffers,
then the next iteration) run three ways on one device: eager ``client.launch`` calls; the
iteration captured once by hand (``graph_prepare``/``start_capture``/``stop_capture``) and
replayed; and eager-looking calls inside ``with client.auto_graph():``, which records the
iteration after two repeats and replays it. Each is timed over whole iterations ending with a
``sync`` and reported per kernel; the ratios are what the default of ``auto_graph`` is chosen
from (a host backend's launch is already a few microseconds: see README "Automatic graphs").

Run: ``python benchmarks/bench_auto_graph.py [device]`` (``cpu`` by default, ``cuda`` on a GPU).
"""

from __future__ import annotations

import sys

import numpy as np
from numba import cuda

from common import Table, median_time

import numba_cube as cube

CHAIN = 16
ITERATIONS = 100


@cube.kernel
def scale_add(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + y[i]


@cube.kernel
def halve(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 0.5 * x[i]


def main(device: str = "cpu") -> None:
    client = cube.client(device)
    x = client.create(np.ones(256))
    y = client.create(np.zeros(256))
    z = client.create(np.zeros(256))

    def iteration():
        for k in range(CHAIN // 2):
            # (a scalar per step: the iteration is one period of CHAIN launches)
            client.launch(scale_add, 2, 128, 0.25 / (k + 1), x, y if k % 2 else z)
            client.launch(halve, 2, 128, z if k % 2 else y)

    def eager():
        for _ in range(ITERATIONS):
            iteration()
        client.sync()

    client.graph_prepare()
    eager()                                   # warm-up: compiles, arms the warm path
    client.start_capture()
    iteration()
    graph = client.stop_capture()

    def explicit():
        for _ in range(ITERATIONS):
            graph.replay()
        client.sync()

    def auto():
        with client.auto_graph():
            for _ in range(ITERATIONS):
                iteration()
            client.sync()

    per_kernel = ITERATIONS * CHAIN
    before = client.server.stats["auto_graph_replays"]
    t_auto = median_time(auto, repeats=5) / per_kernel
    replays = client.server.stats["auto_graph_replays"] - before
    t_eager = median_time(eager, repeats=5) / per_kernel
    t_explicit = median_time(explicit, repeats=5) / per_kernel
    t = Table(f"{device}: automatic graph vs eager and explicit capture (per kernel, "
              f"{CHAIN} launches an iteration)")
    t.row("auto graph", t_auto, t_eager, "eager launches")
    t.row("auto graph", t_auto, t_explicit, "explicit capture + replay")
    t.row("explicit capture + replay", t_explicit, t_eager, "eager launches")
    print(f"auto graph replays: {replays} over {5 + 1} runs of {ITERATIONS} iterations")


if __name__ == "__main__":
    main(*sys.argv[1:])
