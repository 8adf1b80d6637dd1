"""Profiling on the CUDA backend: one duration per launch issued inside ``client.profile``."""

from __future__ import annotations

import numpy as np
from numba import cuda

import numba_cube as cube

TPB = 32


@cube.kernel
def bump(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0


def test_profile_returns_one_timing_per_launch(client, kind):
    """client.profile(fn) returns fn's result and one KernelTiming per launch it issued on this
    stream, in order, with a non-negative duration (on the GPU path: measured between two
    device events around the dispatch)."""
    x = client.create(np.zeros(64))

    def work():
        for _ in range(3):
            client.launch(bump, 2, TPB, x)
        return "done"

    result, timings = client.profile(work)
    assert result == "done"
    assert [t.kernel_id for t in timings] == [bump.id] * 3
    assert all(t.seconds >= 0.0 for t in timings)
    if kind == "gpu":
        assert sum(t.seconds for t in timings) > 0.0   # device events: a real duration
    np.testing.assert_array_equal(client.read(x), np.full(64, 3.0))


def test_other_streams_are_not_profiled(client):
    """Launches on another stream inside the profiled function are neither slowed nor counted."""
    x = client.create(np.zeros(32))
    y = client.create(np.zeros(32))
    other = client.set_stream(cube.StreamId.new())

    def work():
        client.launch(bump, 1, TPB, x)
        other.launch(bump, 1, TPB, y)

    _, timings = client.profile(work)
    assert len(timings) == 1
    np.testing.assert_array_equal(client.read(y), np.ones(32))
