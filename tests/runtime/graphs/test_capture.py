"""Graph capture and replay on the CPU backend (CONTRACT.md section 6)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


@cube.kernel
def axpy_inplace(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + y[i]


@cube.kernel
def double(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 2.0 * x[i]


@cube.kernel
def gather(idx, src, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = src[idx[i]]


@pytest.fixture
def client():
    # A fresh stream per test: captures belong to a stream, and tests must not see each other's.
    with cube.stream():
        yield cube.client("cpu")


def warm(client, x, y):
    client.launch(axpy_inplace, 2, 32, 1.0, x, y)
    client.launch(double, 2, 32, y)
    client.sync()


def test_replay_reruns_the_recorded_launches(client):
    """Launches inside the window are recorded, not run; each replay re-runs them in order."""
    x = client.create(np.ones(64))
    y = client.create(np.zeros(64))
    client.graph_prepare()
    warm(client, x, y)
    client.write(y, np.zeros(64))
    client.start_capture()
    client.launch(axpy_inplace, 2, 32, 1.0, x, y)
    client.launch(double, 2, 32, y)
    graph = client.stop_capture()
    assert len(graph) == 2
    np.testing.assert_array_equal(client.read(y), np.zeros(64))   # nothing ran in the window
    ref = np.zeros(64)
    for _ in range(3):
        graph.replay()
        ref = 2.0 * (ref + 1.0)
    np.testing.assert_array_equal(client.read(y), ref)


def test_fresh_inputs_between_replays(client):
    """Inputs are refreshed with host writes between replays, on the same stream."""
    x = client.create(np.ones(64))
    y = client.create(np.zeros(64))
    client.graph_prepare()
    warm(client, x, y)
    client.start_capture()
    client.launch(axpy_inplace, 2, 32, 3.0, x, y)
    graph = client.stop_capture()
    for value in (1.0, 2.0, 5.0):
        client.write(x, np.full(64, value))
        client.write(y, np.zeros(64))
        graph.replay()
        np.testing.assert_array_equal(client.read(y), np.full(64, 3.0 * value))


@pytest.mark.parametrize("operation", ["read", "sync", "write", "profile", "sync_buffers"])
def test_refused_operations_fail_the_capture_late(client, operation):
    """Reads, sync, profiling and host writes inside a window are refused: each raises
    CaptureError at the call (a profile without running its function), and stop_capture raises
    CaptureError naming the first refused operation instead of returning a graph."""
    x = client.create(np.ones(64))
    client.graph_prepare()
    client.start_capture()
    client.launch(double, 2, 32, x)
    ran = []
    with pytest.raises(cube.CaptureError):
        {"read": lambda: client.read(x), "sync": client.sync,
         "write": lambda: client.write(x, np.zeros(64)),
         "profile": lambda: client.profile(lambda: ran.append(1)),
         "sync_buffers": lambda: client.sync_buffers(x)}[operation]()
    assert ran == []
    with pytest.raises(cube.CaptureError) as info:
        client.stop_capture()
    assert {"read": "read", "sync": "sync", "write": "host write", "profile": "profiling",
            "sync_buffers": "sync_buffers"}[operation] in str(info.value)
    np.testing.assert_array_equal(client.read(x), np.ones(64))   # nothing recorded ran


def test_allocation_in_window_served_from_warm_up_or_fails(client):
    """Nothing is allocated inside a window: a request the pool can serve from what the warm-up
    freed succeeds; one it cannot raises CaptureError at the call (nothing allocated) and makes
    the capture fail."""
    client.graph_prepare()
    tmp = client.empty(1000, np.float64)       # the warm-up's temporary ...
    del tmp                                    # ... goes back to the pool
    client.sync()
    client.start_capture()
    again = client.empty(1000, np.float64)     # same size class: served from the pool
    client.stop_capture()
    client.start_capture()
    held = client.server.pool.held_bytes
    with pytest.raises(cube.CaptureError, match="allocation"):
        client.empty(10_000_000, np.float64)   # nothing that large is free
    assert client.server.pool.held_bytes == held
    with pytest.raises(cube.CaptureError, match="allocation"):
        client.stop_capture()
    del again


def test_pool_gives_idle_memory_back_once_the_window_is_closed(devices):
    """graph_prepare keeps what the warm-up frees in the pool (the window reuses it), but only
    until the window is closed: then idle memory above the pool's limit is given back again."""
    client = devices.fresh()
    pool = client.server.pool
    pool.max_idle_bytes = 0          # this device's pool keeps nothing idle when not held
    client.graph_prepare()
    tmp = client.empty(1000, np.float64)
    del tmp
    client.sync()
    assert pool.idle_bytes > 0       # held for the window
    client.start_capture()
    again = client.empty(1000, np.float64)      # served from what the warm-up left
    client.stop_capture()
    del again
    client.sync()
    assert pool.idle_bytes == 0      # the window is closed: nothing is held any more


def test_refused_start_leaves_existing_capture(client):
    """A start_capture refused on the spot (one already open) leaves the open capture as it was."""
    x = client.create(np.ones(64))
    client.graph_prepare()
    client.start_capture()
    client.launch(double, 2, 32, x)
    with pytest.raises(cube.CaptureError):
        client.start_capture()
    graph = client.stop_capture()
    assert len(graph) == 1
    graph.replay()
    np.testing.assert_array_equal(client.read(x), np.full(64, 2.0))


def test_start_capture_needs_graph_prepare():
    """start_capture before graph_prepare is refused: the window would have no warm-up to reuse."""
    with cube.stream():
        fresh = cube.client("cpu:2")
        with pytest.raises(cube.CaptureError, match="graph_prepare"):
            fresh.start_capture()


def test_launch_with_failed_input_dooms_recording(client):
    """A launch skipped inside a window for a failed input dooms the recording."""
    checked = cube.client("cpu", boundscheck=True).set_stream(client.stream_id)
    idx = checked.create(np.array([0, 50], np.int64))
    src = checked.create(np.zeros(4))
    bad = checked.empty(2, np.float64)
    checked.launch(gather, 1, 32, idx, src, bad)        # fails: index 50
    checked.sync_buffers(bad)
    out = checked.empty(2, np.float64)
    checked.graph_prepare()
    checked.start_capture()
    checked.launch(gather, 1, 32, idx[:1], bad, out[:1])
    with pytest.raises(cube.CaptureError, match="failure"):
        checked.stop_capture()


def test_replay_refuses_freed_buffers(client):
    """Replay checks what it can: every buffer the recording used is still allocated."""
    x = client.create(np.ones(64))
    client.graph_prepare()
    client.start_capture()
    client.launch(double, 2, 32, x)
    graph = client.stop_capture()
    del x
    client.sync()
    with pytest.raises(cube.CaptureError, match="freed"):
        graph.replay()
