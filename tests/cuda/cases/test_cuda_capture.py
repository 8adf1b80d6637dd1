"""Graph capture and replay on the CUDA backend (CONTRACT.md section 6).

On the GPU path a graph is a hardware CUDA graph made by stream capture (one ``cuGraphLaunch``
per replay); under the simulator it is the runtime's software graph. The contract is the same.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import CaptureError, LaunchFailure

from _cuda_setup import only

TPB = 32


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
def copy_into(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@cube.kernel
def fill_index(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i + 1.0


def warm(client, x, y):
    client.launch(axpy_inplace, 2, TPB, 1.0, x, y)
    client.launch(double, 2, TPB, y)
    client.sync()


def captured_iteration(client, x, y):
    """Warm up, zero ``y``, and capture ``y = 2 * (x + y)`` (two launches): the graph."""
    client.graph_prepare()
    warm(client, x, y)
    client.write(y, np.zeros(64))
    client.start_capture()
    client.launch(axpy_inplace, 2, TPB, 1.0, x, y)
    client.launch(double, 2, TPB, y)
    return client.stop_capture()


def test_replay_reruns_the_recorded_launches(client, kind, fake_api):
    """Launches inside the window are recorded, not run; each replay re-runs them in order (on
    the GPU path: as one CUDA graph launch)."""
    x = client.create(np.ones(64))
    y = client.create(np.zeros(64))
    graph = captured_iteration(client, x, y)
    assert len(graph) == 2
    np.testing.assert_array_equal(client.read(y), np.zeros(64))   # nothing ran in the window
    launches = fake_api.calls["cuGraphLaunch"] if fake_api else 0
    ref = np.zeros(64)
    for _ in range(3):
        graph.replay()
        ref = 2.0 * (ref + 1.0)
    np.testing.assert_array_equal(client.read(y), ref)
    if kind == "fake":
        assert fake_api.calls["cuGraphLaunch"] == launches + 3
    if kind in ("fake", "gpu"):
        assert graph.nodes == 2


def test_fresh_inputs_between_replays(client):
    """Inputs are refreshed with host writes between replays, on the same stream; scalar
    arguments keep the values they had when recorded."""
    x = client.create(np.ones(64))
    y = client.create(np.zeros(64))
    client.graph_prepare()
    warm(client, x, y)
    client.start_capture()
    client.launch(axpy_inplace, 2, TPB, 3.0, x, y)
    graph = client.stop_capture()
    for value in (1.0, 2.0, 5.0):
        client.write(x, np.full(64, value))
        client.write(y, np.zeros(64))
        graph.replay()
        np.testing.assert_array_equal(client.read(y), np.full(64, 3.0 * value))


def test_read_inside_the_window_is_refused_late(client):
    """A read inside the window raises on the spot and dooms the recording: stop_capture raises
    CaptureError naming it."""
    x = client.create(np.ones(32))
    client.graph_prepare()
    client.start_capture()
    client.launch(double, 1, TPB, x)
    with pytest.raises(CaptureError):
        client.read(x)
    with pytest.raises(CaptureError, match="read"):
        client.stop_capture()


def test_start_capture_needs_graph_prepare():
    """start_capture before graph_prepare is refused on the spot (a fresh device)."""
    from _cuda_setup import DEVICE

    c = cube.client(f"{DEVICE}:0", fastmath=False)   # same server as `client`: already prepared?
    server = c.server
    prepared = server.graph_prepared
    server.graph_prepared = False
    try:
        with cube.stream():
            with pytest.raises(CaptureError, match="graph_prepare"):
                c.start_capture()
    finally:
        server.graph_prepared = prepared


def test_failed_input_at_replay_propagates(client):
    """If an input carries a failure when the graph is replayed, the dispatches that read it are
    skipped and their outputs inherit the root, exactly as the same launches one by one."""
    x = client.create(np.ones(32))
    out = client.create(np.zeros(32))
    client.graph_prepare()
    client.launch(copy_into, 1, TPB, x, out)
    client.sync()
    client.start_capture()
    client.launch(copy_into, 1, TPB, x, out)
    graph = client.stop_capture()
    src = client.create(np.ones(32))
    client.launch(copy_into, 1, 2048, src, x)    # refused: x now carries a failure
    graph.replay()
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert info.value.kernel_id == copy_into.id
    client.launch(copy_into, 1, TPB, src, x)     # repair x; the next replay runs
    graph.replay()
    np.testing.assert_array_equal(client.read(out), np.ones(32))


@only("fake", "gpu", why="the device-count form is what a CUDA graph can carry")
def test_dynamic_count_in_a_graph(client):
    """A dynamic-count launch is recorded in its device-count form: each replay reads the count
    the device holds then; with the read-back form the recording is refused."""
    count = client.create(np.array([1, 1, 1], np.uint32))
    out = client.create(np.zeros(64))
    client.graph_prepare()
    client.launch(fill_index, cube.CubeCount.dynamic(count), TPB, out)
    client.sync()
    client.start_capture()
    client.launch(fill_index, cube.CubeCount.dynamic(count), TPB, out)
    graph = client.stop_capture()
    client.write(out, np.zeros(64))
    client.write(count, np.array([2, 1, 1], np.uint32))
    graph.replay()
    np.testing.assert_array_equal(client.read(out), np.arange(1, 65.0))
    server = client.server
    server.mechanism.dynamic.mode = "readback"
    server.channel.call(server.forget_bound_launches)
    try:
        client.start_capture()
        client.launch(fill_index, cube.CubeCount.dynamic(count), TPB, out)
        with pytest.raises(CaptureError, match="dynamic count"):
            client.stop_capture()
    finally:
        server.mechanism.dynamic.mode = "auto"
        server.channel.call(server.forget_bound_launches)


def test_replay_after_a_buffer_was_freed_is_refused(client):
    """Replaying a graph whose buffers were freed raises CaptureError instead of touching freed
    memory."""
    import gc

    x = client.create(np.ones(32))
    client.graph_prepare()
    client.launch(double, 1, TPB, x)
    client.sync()
    client.start_capture()
    client.launch(double, 1, TPB, x)
    graph = client.stop_capture()
    del x
    gc.collect()
    client.sync()
    with pytest.raises(CaptureError, match="freed"):
        graph.replay()


def test_a_replay_waits_for_another_streams_launch_on_its_buffers(client):
    """A replay registers its buffers as a launch does (CONTRACT.md section 3; the fake driver
    runs a stream that waits for nothing before the others): a buffer another
    stream wrote last, or is still reading, orders the replay after that work, and a launch of
    another stream after the replay is ordered after it, whether the replay took the solo way
    (every buffer its stream's alone) or the full walk."""
    x = client.create(np.ones(64))
    y = client.create(np.zeros(64))
    # The other stream's CUDA stream first: the fake driver then runs the replay's stream (the
    # newer one) first wherever the replay does not wait.
    other = client.set_stream(cube.StreamId.new())
    other.launch(double, 2, TPB, x)
    other.sync()
    client.write(x, np.ones(64))
    graph = captured_iteration(client, x, y)
    ref_x, ref_y = np.ones(64), np.zeros(64)
    for _ in range(3):
        other.launch(double, 2, TPB, x)              # another stream writes what the graph reads
        ref_x = 2.0 * ref_x
        graph.replay()                              # full walk: waits for it
        ref_y = 2.0 * (ref_x + ref_y)
        graph.replay()                              # solo: its stream's alone again once done
        ref_y = 2.0 * (ref_x + ref_y)
        other.launch(axpy_inplace, 2, TPB, 1.0, y, x)   # reads what the graph wrote
        ref_x = ref_y + ref_x
    np.testing.assert_array_equal(client.read(x), ref_x)
    np.testing.assert_array_equal(client.read(y), ref_y)


@only("fake", why="the fake driver refuses a graph launch on request")
def test_a_refused_or_interrupted_graph_launch_fails_the_write_set(client, fake_api, monkeypatch):
    """A ``cuGraphLaunch`` the driver refuses fails every buffer the recording writes, with the
    driver's error as the root (a reader raises it, and a later launch that rewrites the buffer
    repairs it); one whose call raises leaves them failed too (not written), and the exception
    reaches the caller. A buffer only read stays clean."""
    from _cuda_fake import R

    x = client.create(np.ones(64))
    y = client.create(np.zeros(64))
    graph = captured_iteration(client, x, y)
    monkeypatch.setattr(fake_api, "cuGraphLaunch", lambda *a: (R.CUDA_ERROR_INVALID_VALUE,))
    graph.replay()
    with pytest.raises(LaunchFailure, match="CUDA_ERROR_INVALID_VALUE"):
        client.read(y)
    np.testing.assert_array_equal(client.read(x), np.ones(64))

    def interrupted(*a):
        raise KeyboardInterrupt
    client.write(y, np.zeros(64))
    monkeypatch.setattr(fake_api, "cuGraphLaunch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        graph.replay()
    with pytest.raises(LaunchFailure, match="did not complete"):
        client.read(y)
    monkeypatch.undo()
    client.write(y, np.zeros(64))
    graph.replay()
    np.testing.assert_array_equal(client.read(y), 2.0 * np.ones(64))
