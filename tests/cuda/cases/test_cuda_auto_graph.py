"""Automatic graphs on the CUDA backend (CONTRACT.md section 6.1, ``runtime/graphs/auto_graph.py``).

A loop that repeats a sequence of launches inside ``client.auto_graph()`` is recorded once and
replayed: on the GPU path (and the fake driver) as a hardware CUDA graph, one ``cuGraphLaunch``
per iteration; under the simulator as the runtime's software graph. The results are NumPy's
either way, and everything that is not a repeat runs as the eager launches would.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import LaunchArgumentError, LaunchFailure

TPB = 32


@cube.kernel
def axpy(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + y[i]


@cube.kernel
def scale(a, x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = a * x[i]


def body(client, x, y):
    client.launch(axpy, 2, TPB, 0.5, x, y)
    client.launch(scale, 2, TPB, 0.25, x)
    client.launch(axpy, 2, TPB, 2.0, y, x)


def body_ref(x, y):
    y = 0.5 * x + y
    x = 0.25 * x
    x = 2.0 * y + x
    return x, y


def counter(client, name: str) -> int:
    return client.server.stats[name]


def test_a_repeated_loop_is_replayed_as_one_graph(client, kind, fake_api):
    """Two iterations are traced, the third onwards each replay the recorded graph once (on the
    fake driver: one cuGraphLaunch each); the results are NumPy's."""
    x, y = client.create(np.arange(64.0)), client.create(np.ones(64))
    rx, ry = np.arange(64.0), np.ones(64)
    launches = fake_api.calls["cuGraphLaunch"] if fake_api else 0
    replays = counter(client, "auto_graph_replays")
    with client.auto_graph():
        for _ in range(10):
            body(client, x, y)
            rx, ry = body_ref(rx, ry)
        np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)
    assert counter(client, "auto_graph_replays") == replays + 8
    if kind == "fake":
        assert fake_api.calls["cuGraphLaunch"] == launches + 8


def test_reads_and_writes_between_iterations(client):
    """A read between iterations sees every launch before it; a host write between iterations is
    seen by the next replay."""
    x, y = client.create(np.arange(64.0)), client.create(np.ones(64))
    rx, ry = np.arange(64.0), np.ones(64)
    with client.auto_graph():
        for i in range(6):
            body(client, x, y)
            rx, ry = body_ref(rx, ry)
            np.testing.assert_array_equal(client.read(y), ry)
            client.write(x, np.full(64, float(i)))
            rx = np.full(64, float(i))
    np.testing.assert_array_equal(client.read(x), rx)


def test_a_failure_in_the_loop_has_the_eager_root(client):
    """A refused launch (1024 units per cube at most) fails its write set; the loop's later
    launches that read it inherit that root, whether run eagerly or from the graph."""
    x, y = client.create(np.arange(64.0)), client.create(np.ones(64))
    with client.auto_graph():
        for _ in range(4):
            body(client, x, y)
        client.launch(scale, 1, 2048, 1.0, x)          # refused: x carries a failure
        for _ in range(4):
            body(client, x, y)
        with pytest.raises(LaunchFailure) as info:
            client.read(y)
    assert isinstance(info.value.root, LaunchArgumentError)


def test_a_changed_launch_and_another_stream(client):
    """A changed launch falls back to eager launches at once; a second thread on its own stream
    touching the same buffer is ordered after the loop's deferred launches and before its next."""
    x, y = client.create(np.arange(64.0)), client.create(np.ones(64))
    rx, ry = np.arange(64.0), np.ones(64)

    def other():
        with cube.stream():
            client.launch(scale, 2, TPB, -1.0, y)

    with client.auto_graph():
        for _ in range(4):
            body(client, x, y)
            rx, ry = body_ref(rx, ry)
        client.launch(axpy, 2, TPB, 0.5, x, y)          # deferred
        ry = 0.5 * rx + ry
        t = threading.Thread(target=other)
        t.start()
        t.join(60)
        ry = -ry
        client.launch(scale, 2, TPB, 3.0, x)            # changed: eager
        rx = 3.0 * rx
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)
