"""Automatic graphs (CONTRACT.md section 6.1, ``runtime/graphs/auto_graph.py``) on the fake Python backend,
against a sequential NumPy model of the same program: a repeated sequence is replayed as one
graph, and everything else behaves as the eager launches would."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import CaptureError, LaunchFailure
from numba_cube.runtime.graphs import auto_graph

from .._util import PythonDevices, run_in_thread


@cube.kernel
def axpy(a, x, y):
    y[:] = a * x + y


@cube.kernel
def scale(a, x):
    x[:] = a * x


@cube.kernel
def fail_scale(a, x):
    x[:] = a * x
    raise ValueError(f"injected {a}")


@cube.kernel
def fill(value, out):
    out[:] = value


@pytest.fixture(scope="module", params=["thread", "inline"])
def devices(request):
    """Both channels: a device thread (``ThreadChannel``) and the issuing thread under the device
    lock (``InlineChannel``, with the warm path)."""
    d = PythonDevices(f"rt_auto_graph_{request.param}", inline=request.param == "inline")
    yield d
    d.close()


def stats(client, name: str) -> int:
    """A server counter, once the device has handled everything submitted before."""
    client.server.channel.call(lambda: None)
    return client.server.stats[name]


def body(client, x, y):
    client.launch(axpy, 1, 1, 0.5, x, y)
    client.launch(scale, 1, 1, 0.25, x)
    client.launch(axpy, 1, 1, 2.0, y, x)


def body_ref(x, y):
    y = 0.5 * x + y
    x = 0.25 * x
    x = 2.0 * y + x
    return x, y


def test_a_repeated_sequence_is_replayed_as_one_graph(client):
    """The loop's iteration (three launches) is seen twice, recorded, and replayed once per later
    iteration: the counters show the replays, and the results are NumPy's."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    with client.auto_graph():
        for _ in range(10):
            body(client, x, y)
            rx, ry = body_ref(rx, ry)
    assert stats(client, "auto_graph_recorded") == 1
    assert stats(client, "auto_graph_replays") == 8
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)


def test_reads_and_host_writes_between_iterations_see_every_launch(client):
    """A read between iterations returns what the eager launches would have left, and a host
    write between iterations is seen by the next one; the graph is still replayed."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    with client.auto_graph():
        for i in range(8):
            body(client, x, y)
            rx, ry = body_ref(rx, ry)
            np.testing.assert_array_equal(client.read(y), ry)
            client.write(x, np.full(8, float(i)))
            rx = np.full(8, float(i))
    assert stats(client, "auto_graph_replays") == 6
    np.testing.assert_array_equal(client.read(x), rx)


def test_a_read_in_the_middle_of_a_sequence_flushes_the_deferred_launches(client):
    """A read issued after part of an armed sequence was deferred sees those launches (they are
    handed to the server first, in order), and nothing is replayed twice or lost."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    with client.auto_graph():
        for _ in range(3):
            body(client, x, y)
            rx, ry = body_ref(rx, ry)
        client.launch(axpy, 1, 1, 0.5, x, y)        # deferred: the first of the sequence
        np.testing.assert_array_equal(client.read(y), 0.5 * rx + ry)
        ry = 0.5 * rx + ry
        client.launch(scale, 1, 1, 0.25, x)
        rx = 0.25 * rx
    assert stats(client, "auto_graph_flushed") >= 1
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)


def test_a_changed_launch_falls_back_to_eager_at_once(client):
    """A launch that is not the next one expected sends the deferred prefix out first, then runs
    eagerly: the program computes what it would without auto graphs."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    with client.auto_graph():
        for i in range(6):
            body(client, x, y)
            rx, ry = body_ref(rx, ry)
        client.launch(axpy, 1, 1, 0.5, x, y)        # deferred
        client.launch(scale, 1, 1, 3.0, x)          # not the expected 0.25: flushed, then eager
        ry = 0.5 * rx + ry
        rx = 3.0 * rx
    assert stats(client, "auto_graph_flushed") == 1
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)


def test_a_sequence_that_never_repeats_is_never_replayed(client):
    """Launches whose scalars change every time are never recorded: they all run eagerly."""
    x = client.create(np.ones(4))
    with client.auto_graph():
        for i in range(20):
            client.launch(scale, 1, 1, 1.0 + i, x)
    assert stats(client, "auto_graph_recorded") == 0
    np.testing.assert_array_equal(client.read(x), np.ones(4) * np.prod(1.0 + np.arange(20)))


def test_signed_zeros_are_different_scalars(client):
    """``-0.0 == 0.0`` in Python, but a kernel tells them apart: a sequence recorded with 0.0 is
    not replayed for -0.0."""
    x = client.create(np.ones(4))
    with client.auto_graph():
        for _ in range(4):
            client.launch(fill, 1, 1, 0.0, x)
        client.launch(fill, 1, 1, -0.0, x)
    assert np.signbit(client.read(x)).all()


def test_a_failure_lands_on_the_same_buffers_with_the_same_root(client):
    """A failing launch in an armed loop: its write set carries its own error, a later launch
    that reads it is skipped and inherits the same root, as eager launches do; a host write
    repairs the buffer and the loop computes on."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    with client.auto_graph():
        for _ in range(4):
            body(client, x, y)
        client.launch(fail_scale, 1, 1, 7.0, x)
        client.sync()                               # the failure is settled, not in flight
        for _ in range(3):
            body(client, x, y)
        # the third is a full match over failed inputs: run as the eager launches
        assert stats(client, "auto_graph_eager") == 3
        with pytest.raises(LaunchFailure) as on_x:
            client.read(x)
        with pytest.raises(LaunchFailure) as on_y:
            client.read(y)
        for info in (on_x, on_y):
            assert isinstance(info.value.root, ValueError)
            assert "injected 7.0" in str(info.value.root)
        client.write(x, np.arange(8.0))
        client.write(y, np.ones(8))
        client.sync()                               # the repair is settled too
        rx, ry = np.arange(8.0), np.ones(8)
        replays = stats(client, "auto_graph_replays")
        for _ in range(4):
            body(client, x, y)
            rx, ry = body_ref(rx, ry)
    assert stats(client, "auto_graph_replays") > replays
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)


def test_another_thread_on_another_stream_sees_deferred_launches_and_orders_after_them(client):
    """A second thread (no scope, its own stream) launching on a buffer the loop's deferred
    launches write sees them, and the loop's next launches see its launch: both ways ordered as
    the eager launches would be."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)

    def other():
        with cube.stream():
            client.launch(scale, 1, 1, -1.0, y)

    with client.auto_graph():
        for _ in range(4):
            body(client, x, y)
            rx, ry = body_ref(rx, ry)
        client.launch(axpy, 1, 1, 0.5, x, y)        # deferred
        ry = 0.5 * rx + ry
        run_in_thread(other)
        ry = -ry
        client.launch(scale, 1, 1, 0.25, x)
        client.launch(axpy, 1, 1, 2.0, y, x)
        rx = 2.0 * ry + 0.25 * rx
    assert stats(client, "auto_graph_flushed") == 1     # the other thread's launch flushed it
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)


def test_leaving_the_scope_flushes(client):
    """What the scope deferred goes out when it is left: another thread's read sees it."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    with client.auto_graph():
        for _ in range(3):
            body(client, x, y)
            rx, ry = body_ref(rx, ry)
        client.launch(axpy, 1, 1, 0.5, x, y)        # deferred
        ry = 0.5 * rx + ry
    np.testing.assert_array_equal(run_in_thread(client.read, y), ry)


def test_nothing_is_deferred_while_a_dry_run_is_open(client):
    """Inside a dry run launches are skipped, as without auto graphs: nothing runs, nothing is
    replayed."""
    x = client.create(np.ones(4))
    with client.auto_graph():
        with cube.dry_run():
            for _ in range(6):
                client.launch(scale, 1, 1, 2.0, x)
    assert stats(client, "auto_graph_replays") == 0
    np.testing.assert_array_equal(client.read(x), np.ones(4))


def test_a_profile_sees_every_launch(client):
    """A profile inside the scope times each launch (nothing is deferred or replayed)."""
    x = client.create(np.ones(4))
    with client.auto_graph():
        result = client.profile(lambda: [client.launch(scale, 1, 1, 2.0, x) for _ in range(6)])
    assert len(result.timings) == 6
    assert stats(client, "auto_graph_replays") == 0
    np.testing.assert_array_equal(client.read(x), np.ones(4) * 64)


def test_an_explicit_capture_and_auto_graphs_do_not_interfere(client):
    """While a capture window is open, launches in a scope are recorded by the window (as they
    would be without the scope), never deferred; the window's graph replays them."""
    x = client.create(np.ones(4))
    client.graph_prepare()
    with client.auto_graph():
        for _ in range(4):
            client.launch(scale, 1, 1, 2.0, x)          # an armed graph of one launch
        client.start_capture()
        client.launch(scale, 1, 1, 2.0, x)
        graph = client.stop_capture()
        replays = stats(client, "auto_graph_replays")
        graph.replay()
        client.launch(scale, 1, 1, 2.0, x)
    assert len(graph) == 1
    assert stats(client, "auto_graph_replays") <= replays + 1
    np.testing.assert_array_equal(client.read(x), np.ones(4) * 2.0 ** 6)


def test_a_dropped_handle_is_not_replayed_into(client):
    """A loop that drops a buffer and binds a new one in its place: the recorded graph is not
    replayed on the new binding (its key differs), the launches run eagerly, results exact."""
    out = client.create(np.zeros(4))
    with client.auto_graph():
        for i in range(6):
            tmp = client.create(np.full(4, float(i)))
            client.launch(axpy, 1, 1, 1.0, tmp, out)
            del tmp
    np.testing.assert_array_equal(client.read(out), np.full(4, 15.0))


def test_a_scope_left_on_another_thread_is_refused(client):
    """Leaving a scope that this thread did not enter is a CaptureError, and changes nothing."""
    scope = client.auto_graph()
    scope.__enter__()
    with pytest.raises(CaptureError):
        run_in_thread(scope.__exit__, None, None, None)
    scope.__exit__(None, None, None)


def test_two_threads_in_scopes_each_compute_their_own_loop(client):
    """Two threads, each in its own scope on its own stream and buffers, run their loops at
    the same time: each result is NumPy's (they flush each other as needed, never reorder)."""
    results = {}

    def loop(tag):
        with cube.stream(), client.auto_graph():
            x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
            rx, ry = np.arange(8.0), np.ones(8)
            for _ in range(20):
                body(client, x, y)
                rx, ry = body_ref(rx, ry)
            results[tag] = (client.read(x), client.read(y), rx, ry)

    threads = [threading.Thread(target=loop, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert set(results) == {0, 1}
    for got_x, got_y, rx, ry in results.values():
        np.testing.assert_array_equal(got_x, rx)
        np.testing.assert_array_equal(got_y, ry)


def test_a_handle_of_another_device_is_refused_in_an_armed_loop(devices):
    """A handle of another device whose binding repeats the expected one number for number is
    still refused with ForeignHandleError, as the client's gate refuses it without auto graphs."""
    client, other = devices.fresh(), devices.fresh()
    x = client.create(np.ones(4))
    foreign = other.create(np.ones(4))
    assert foreign.binding() == x.binding()          # the same plain numbers
    with client.auto_graph():
        for _ in range(4):
            client.launch(scale, 1, 1, 2.0, x)
        with pytest.raises(cube.ForeignHandleError):
            client.launch(scale, 1, 1, 2.0, foreign)
    np.testing.assert_array_equal(client.read(x), np.full(4, 16.0))
    np.testing.assert_array_equal(other.read(foreign), np.ones(4))


def test_a_period_is_found_with_a_repeated_kernel_inside_it(client):
    """A sequence in which the same launch occurs twice (a, b, a, c) is still recognised as one
    period of four, recorded and replayed, with NumPy's results."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    with client.auto_graph():
        for _ in range(8):
            client.launch(scale, 1, 1, 0.5, x)
            client.launch(axpy, 1, 1, 1.0, x, y)
            client.launch(scale, 1, 1, 0.5, x)
            client.launch(axpy, 1, 1, -1.0, y, x)
            rx = 0.5 * rx
            ry = rx + ry
            rx = 0.5 * rx
            rx = -ry + rx
    assert stats(client, "auto_graph_replays") == 6
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)


@cube.kernel
def cuda_axpy(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + y[i]


def test_the_cpu_backend_replays_its_software_graph():
    """On the real CPU backend (Numba-compiled, with its warm path) a loop in a scope is replayed
    from a software graph, and computes NumPy's result; a numba-style launch in the middle (which
    is synchronous) sees the deferred launches."""
    client = cube.client("cpu")
    with cube.stream():
        x, y = client.create(np.arange(64.0)), client.create(np.zeros(64))
        rx, ry = np.arange(64.0), np.zeros(64)
        before = client.server.stats["auto_graph_replays"]
        with client.auto_graph():
            for _ in range(6):
                client.launch(cuda_axpy, 2, 32, 0.5, x, y)
                client.launch(cuda_axpy, 2, 32, 0.25, y, x)
                ry = 0.5 * rx + ry
                rx = 0.25 * ry + rx
            client.launch(cuda_axpy, 2, 32, 0.5, x, y)          # deferred
            ry = 0.5 * rx + ry
            with client:
                cuda_axpy[2, 32](1.0, y, x)                     # synchronous, sees it
            rx = ry + rx
        assert client.server.stats["auto_graph_replays"] - before == 4
        np.testing.assert_array_equal(client.read(x), rx)
        np.testing.assert_array_equal(client.read(y), ry)


# -- the held launch (graphs/auto_graph.py, "Held launches"): the client matches a launch against this
# thread's last armed tracer before anything else. What that check may rely on and what it must
# still see: the state another thread changes between two held launches (a flush, an observer,
# exclusive use), the stream and the device the launch is for, and the end of the scope.

def iterate(client, x, y, rx, ry, iterations):
    """``iterations`` of the loop, and of its NumPy model (returned)."""
    for _ in range(iterations):
        body(client, x, y)
        rx, ry = body_ref(rx, ry)
    return rx, ry


def armed(client, x, y, rx, ry, iterations=4):
    """Run the loop until its sequence is armed; return the tracer and the NumPy model."""
    rx, ry = iterate(client, x, y, rx, ry, iterations)
    tracer = auto_graph.HELD.tracer
    assert tracer is not None and tracer.graph is not None
    return tracer, rx, ry


def test_held_launches_of_an_armed_loop_do_not_reach_auto_graph_launch(client, monkeypatch):
    """In the steady state every launch of the loop is held (or completes the sequence) by the
    client's own check: ``auto_graph.launch`` is not called, the graph is replayed once per
    iteration, and the results are NumPy's."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    calls = []
    original = auto_graph.launch
    with client.auto_graph():
        _, rx, ry = armed(client, x, y, rx, ry)
        replays = stats(client, "auto_graph_replays")
        monkeypatch.setattr(auto_graph, "launch", lambda *a: calls.append(a) or original(*a))
        rx, ry = iterate(client, x, y, rx, ry, 5)
        monkeypatch.setattr(auto_graph, "launch", original)
        assert stats(client, "auto_graph_replays") == replays + 5
    assert calls == []
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)


def test_another_threads_flush_between_two_held_launches_is_seen_by_the_second(client):
    """A read by another thread after the first launch of the sequence was held flushes it and
    resets the tracer: the next launch is not held as the second of a sequence whose first went
    out already (it runs eagerly), so nothing is lost or run twice."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    with client.auto_graph():
        tracer, rx, ry = armed(client, x, y, rx, ry)
        client.launch(axpy, 1, 1, 0.5, x, y)        # held
        assert tracer.position == 1
        ry = 0.5 * rx + ry
        np.testing.assert_array_equal(run_in_thread(client.read, y), ry)
        assert tracer.graph is None                 # the flush reset it
        assert stats(client, "auto_graph_flushed") == 1
        client.launch(scale, 1, 1, 0.25, x)         # eager now
        client.launch(axpy, 1, 1, 2.0, y, x)
        rx = 2.0 * ry + 0.25 * rx
        rx, ry = iterate(client, x, y, rx, ry, 4)
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)


def test_an_observer_registered_by_another_thread_sees_the_next_launch(client):
    """An observer another thread registers between two held launches is notified of the second
    one, which is then not held (what was held goes out first), and the results are exact."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    seen = []
    with client.auto_graph():
        tracer, rx, ry = armed(client, x, y, rx, ry)
        client.launch(axpy, 1, 1, 0.5, x, y)        # held
        ry = 0.5 * rx + ry
        def observer(event):
            seen.append(event.kernel_name)
        run_in_thread(cube.add_observer, observer)
        try:
            client.launch(scale, 1, 1, 0.25, x)
            rx = 0.25 * rx
        finally:
            cube.remove_observer(observer)
        assert tracer.position == 0
    assert seen == ["scale"]
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)


def test_exclusive_use_taken_by_another_thread_stops_the_held_launch_at_the_gate(client):
    """While another thread holds the device (``client.exclusive``), a launch of an armed loop is
    not held: it waits at the gate until the device is given back, and runs after it."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    taken, give_back, order = threading.Event(), threading.Event(), []

    def held_device():
        taken.set()
        give_back.wait(10)
        order.append("given back")

    def owner():
        client.exclusive(held_device)

    with client.auto_graph():
        tracer, rx, ry = armed(client, x, y, rx, ry)
        t = threading.Thread(target=owner)
        t.start()
        taken.wait(10)
        threading.Timer(0.2, give_back.set).start()
        client.launch(axpy, 1, 1, 0.5, x, y)
        order.append("launched")
        ry = 0.5 * rx + ry
        t.join(10)
        assert tracer.position == 0
    assert order == ["given back", "launched"]
    np.testing.assert_array_equal(client.read(y), ry)


def test_a_launch_on_another_stream_is_not_held_by_the_threads_tracer(client):
    """The tracer is (thread, stream)'s: the same launch made by a client pinned to another
    stream is not held by it (it is traced on its own stream), and both streams compute what
    their launches say."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    pinned = client.set_stream(cube.StreamId.new())
    with client.auto_graph():
        tracer, rx, ry = armed(client, x, y, rx, ry)
        pinned.launch(axpy, 1, 1, 0.5, x, y)        # the first launch of the sequence, elsewhere
        ry = 0.5 * rx + ry
        assert tracer.position == 0
        rx, ry = iterate(client, x, y, rx, ry, 2)
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)


def test_a_launch_on_another_device_is_not_held_by_this_devices_tracer(devices):
    """The same kernel and scalars on another device's buffers are never held by this device's
    tracer: the check compares the launch's server first."""
    client, other = devices.fresh(), devices.fresh()
    x = client.create(np.ones(4))
    z = other.create(np.ones(4))
    with client.auto_graph():
        for _ in range(4):
            client.launch(scale, 1, 1, 2.0, x)
        tracer = auto_graph.HELD.tracer
        assert tracer is not None and tracer.server is client.server
        other.launch(scale, 1, 1, 2.0, z)
        assert tracer.position == 0
    np.testing.assert_array_equal(other.read(z), np.full(4, 2.0))
    np.testing.assert_array_equal(client.read(x), np.full(4, 16.0))


def test_leaving_the_scope_clears_the_threads_held_tracer(client):
    """Once the thread's scope on the device is left, no tracer is offered to the client's check
    (and the one that was is reset), so later launches run eagerly at once."""
    x, y = client.create(np.arange(8.0)), client.create(np.ones(8))
    rx, ry = np.arange(8.0), np.ones(8)
    with client.auto_graph():
        tracer, rx, ry = armed(client, x, y, rx, ry)
    assert auto_graph.HELD.tracer is None and tracer.graph is None
    replays = stats(client, "auto_graph_replays")
    rx, ry = iterate(client, x, y, rx, ry, 3)
    assert stats(client, "auto_graph_replays") == replays
    np.testing.assert_array_equal(client.read(x), rx)
    np.testing.assert_array_equal(client.read(y), ry)
