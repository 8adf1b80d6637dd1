"""Dependency inference: its cost per launch, and read-read sharing overlapping (issue 4).

1. The same program (a chain of small launches over 8 buffers) issued from one stream, then
   spread over 4 streams that share buffers: the per-launch host cost of inferring and honouring
   cross-stream dependencies. Reference: the one-stream run.
2. Two streams that only *read* one shared buffer (each writes its own output): with the hazard
   rule they overlap; with the baseline rule (any shared buffer waits for the other stream) the
   second waits for the first. Reference: the baseline rule, in the same process (a second CPU
   device configured with it).

Run: ``python benchmarks/bench_streams.py``
"""

from __future__ import annotations

import threading
import time

import numpy as np
from numba import cuda

from common import PeakMemory, Table, median_time, report_memory

import numba_cube as cube
from numba_cube.backends.cpu.server import CpuBackend, select_threading_layer
from numba_cube.runtime.streams.channel import ThreadChannel
from numba_cube.runtime.registry import register_backend
from numba_cube.runtime.server import DeviceServer


@cube.kernel
def add_into(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += x[i]


@cube.kernel
def heavy_read(x, out, reps):
    # Reads x many times; writes only its own out.
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for r in range(reps):
            acc += x[(i + r) % x.size]
        out[i] = acc


def program(client, bufs, n_launches, streams):
    sids = [cube.StreamId.new() for _ in range(streams)]
    pinned = [client.set_stream(s) for s in sids]
    for k in range(n_launches):
        c = pinned[k % streams]
        c.launch(add_into, 1, 64, bufs[k % 8], bufs[(k + 1) % 8])
    client.sync()


def main():
    select_threading_layer()
    register_backend("cpu_baseline", lambda i: DeviceServer(f"cpu_baseline:{i}", CpuBackend(),
                                                            ThreadChannel(f"cpu_baseline:{i}"),
                                                            baseline_rule=True))
    hazard = cube.client("cpu")
    baseline = cube.client("cpu_baseline")

    t = Table("dependency inference: cost per launch")
    n = 4000
    bufs = [hazard.create(np.zeros(64)) for _ in range(8)]
    program(hazard, bufs, 200, 1)
    one = median_time(lambda: program(hazard, bufs, n, 1), repeats=3) / n
    many = median_time(lambda: program(hazard, bufs, n, 4), repeats=3) / n
    t.row("per launch, 4 streams sharing 8 buffers", many, one, "same program, 1 stream")

    t = Table("read-read sharing: two streams read one buffer")
    # Below NUMBA_CUBE_SERIAL_UNITS a launch runs the serial twin on one core, so two streams that
    # may overlap can use both cores: the hazard rule's gain shows as ~2x on a 2-core machine.
    size = 1 << 14
    reps = 2000
    for client, label in ((hazard, "hazard rule"), (baseline, "baseline rule")):
        x = client.create(np.ones(size))
        outs = [client.create(np.zeros(size)) for _ in range(2)]
        client.launch(heavy_read, size // 256, 256, x, outs[0], reps)
        client.sync()

    def overlapped(client, x, outs):
        a, b = client.set_stream(cube.StreamId.new()), client.set_stream(cube.StreamId.new())
        a.launch(heavy_read, size // 256, 256, x, outs[0], reps)
        b.launch(heavy_read, size // 256, 256, x, outs[1], reps)
        client.sync()

    times = {}
    live = 0
    for client, label in ((hazard, "hazard"), (baseline, "baseline")):
        x = client.create(np.ones(size))
        outs = [client.create(np.zeros(size)) for _ in range(2)]
        live = 3 * size * 8
        with PeakMemory() as mem:
            times[label] = median_time(lambda: overlapped(client, x, outs), repeats=5)
        single = median_time(lambda: (client.launch(heavy_read, size // 256, 256, x, outs[0], reps), client.sync()), repeats=5)
        times[label + "_single"] = single
    t.row("two reader launches, hazard rule", times["hazard"], times["baseline"], "baseline rule (serializes)")
    print(f"  one reader launch alone: {times['hazard_single'] * 1e3:.2f} ms; two with the hazard rule "
          f"{times['hazard'] * 1e3:.2f} ms, with the baseline rule {times['baseline'] * 1e3:.2f} ms")
    report_memory("two-reader program", mem.peak, live)


if __name__ == "__main__":
    main()
