"""Automatic graphs against eager launches and an explicit capture, in one process (issue 18).

The same loop (a training-loop shape: an iteration of ``CHAIN`` small launches over a few buffers,
then the next iteration) run three ways on one device: eager ``client.launch`` calls; the
iteration captured once by hand (``graph_prepare``/``start_capture``/``stop_capture``) and
replayed; and eager-looking calls inside ``with client.auto_graph():``, which records the
iteration after two repeats and replays it. Each is timed over whole iterations ending with a
``sync`` and reported per kernel; the ratios are what the default of ``auto_graph`` is chosen
from (a host backend's launch is already a few microseconds: see ``benchmarks/README.md``,
"bench_auto_graph.py").

The automatic graph is reported twice, as a user's loop sees it:

- **steady state**: one long scope (``STEADY`` iterations, after ``WARMUP`` untimed ones in the
  same scope), per kernel: a held launch plus the replay's share;
- **start of a scope**: the first ``START`` iterations of a fresh scope (its eager iterations, the
  recording, the instantiation and the first replays), in microseconds for the whole start, since
  a new scope records its graph anew.

Run: ``python benchmarks/bench_auto_graph.py [device]`` (``cpu`` by default, ``cuda`` on a GPU).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from numba import cuda

from common import Table, median_time

import numba_cube as cube

CHAIN = 16
ITERATIONS = 100    # per timed run of the eager and explicit references
STEADY = 1000       # iterations of the one long auto_graph scope timed in steady state
WARMUP = 20         # untimed iterations before it, in the same scope
START = 4           # the start of a scope: 2 eager iterations, the recording, first replays


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

    def auto_steady() -> float:
        with client.auto_graph():
            for _ in range(WARMUP):
                iteration()
            client.sync()
            t0 = time.perf_counter()
            for _ in range(STEADY):
                iteration()
            client.sync()
            return time.perf_counter() - t0

    def auto_start():
        with client.auto_graph():
            for _ in range(START):
                iteration()
            client.sync()

    per_kernel = ITERATIONS * CHAIN
    t_eager = median_time(eager, repeats=5) / per_kernel
    t_explicit = median_time(explicit, repeats=5) / per_kernel
    before = client.server.stats["auto_graph_replays"]
    t_steady = sorted(auto_steady() for _ in range(3))[1] / (STEADY * CHAIN)
    replays = client.server.stats["auto_graph_replays"] - before
    t_start = median_time(auto_start, repeats=5)
    t_start_eager = START * CHAIN * t_eager     # the same launches, eager
    t = Table(f"{device}: automatic graph vs eager and explicit capture (per kernel, "
              f"{CHAIN} launches an iteration)")
    t.row(f"auto graph, steady ({STEADY} iterations)", t_steady, t_eager, "eager launches")
    t.row(f"auto graph, steady ({STEADY} iterations)", t_steady, t_explicit,
          "explicit capture + replay")
    t.row("explicit capture + replay", t_explicit, t_eager, "eager launches")
    t.row(f"auto graph, start of a scope ({START} its.)", t_start, t_start_eager,
          f"{START * CHAIN} eager launches")
    print(f"auto graph replays: {replays} over 3 steady scopes of {WARMUP} + {STEADY} iterations; "
          f"start of a scope: {t_start * 1e6:.0f} us for its first {START} iterations")

if __name__ == "__main__":
    main(*sys.argv[1:])
