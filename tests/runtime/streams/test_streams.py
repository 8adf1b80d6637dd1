"""Stream identity and inferred cross-stream ordering (CONTRACT.md section 3, API.md "Streams")."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import numba_cube as cube
from numba_cube import StreamId

from .._util import drain, run_in_thread

TIMEOUT = 10.0


# -- StreamId and `with cube.stream()` --------------------------------------------------------------


def test_each_thread_has_its_own_current_stream():
    """3: by default each issuing thread has its own stream, stable for the thread."""
    mine = StreamId.current()
    assert StreamId.current() == mine
    theirs = run_in_thread(StreamId.current)
    other = run_in_thread(StreamId.current)
    assert len({mine, theirs, other}) == 3
    assert cube.StreamId is StreamId


def test_stream_block_makes_a_stream_current_and_nests():
    """3, API.md: `with cube.stream()` makes a new stream current for the thread; blocks nest and
    each exit restores the enclosing stream."""
    own = StreamId.current()
    with cube.stream() as outer:
        assert isinstance(outer, StreamId) and outer != own
        assert StreamId.current() == outer
        with cube.stream() as inner:
            assert inner not in (own, outer)
            assert StreamId.current() == inner
        assert StreamId.current() == outer
    assert StreamId.current() == own


def test_stream_block_with_a_given_id_and_after_an_exception():
    """API.md: `with cube.stream(sid)` makes that stream current; leaving by an exception
    restores the previous one."""
    sid = StreamId.new()
    own = StreamId.current()
    with pytest.raises(KeyError):
        with cube.stream(sid) as got:
            assert got == sid and StreamId.current() == sid
            raise KeyError
    assert StreamId.current() == own


def test_stream_block_is_thread_local():
    """3: a stream made current by one thread is not current on another."""
    with cube.stream() as sid:
        assert run_in_thread(StreamId.current) != sid


def test_stream_takes_only_a_stream_id():
    """API.md: cube.stream takes a StreamId or None."""
    with pytest.raises(TypeError):
        cube.stream(3)


def test_stream_ids_are_values():
    """3: a StreamId is a cheap hashable value: equal ids name the same queue."""
    sid = StreamId.new()
    assert StreamId(sid.value) == sid and hash(StreamId(sid.value)) == hash(sid)
    assert StreamId.new() != sid


# -- clients and streams ------------------------------------------------------------------------------


@cube.kernel
def copy_into(x, out):
    for i in range(out.shape[0]):
        out[i] = x[i]


GATE = threading.Event()
PRODUCED = threading.Event()
CONSUMED = threading.Event()


@cube.kernel
def gated_produce(x, buf):
    GATE.wait(10.0)
    for i in range(buf.shape[0]):
        buf[i] = x[i] + 1.0
    PRODUCED.set()


@cube.kernel
def consume(buf, out):
    for i in range(out.shape[0]):
        out[i] = buf[i] * 2.0
    CONSUMED.set()




def test_kernels_io_as_assumed():
    """4.2 (precondition of this module): the IO analysis gives the read/write sets used here."""
    a = np.zeros(4)
    assert copy_into.io(a, a) == {"x": "r", "out": "w"}
    assert gated_produce.io(a, a) == {"x": "r", "buf": "w"}
    assert consume.io(a, a) == {"buf": "r", "out": "w"}


def test_client_stream_id_is_the_threads_current_stream(devices):
    """1.1, API.md: an unpinned client's stream is the issuing thread's current stream."""
    client = devices.fresh()
    assert client.pinned is None
    assert client.stream_id == StreamId.current()
    with cube.stream() as sid:
        assert client.stream_id == sid
    assert run_in_thread(lambda: client.stream_id) != client.stream_id


def test_set_stream_returns_a_pinned_client_and_leaves_the_original(devices):
    """API.md: set_stream returns a new, pinned client (documented choice); the original client
    (shared by every thread) is unchanged; the pin wins over the thread's current stream."""
    client = devices.fresh()
    sid = StreamId.new()
    pinned = client.set_stream(sid)
    assert pinned is not client
    assert client.pinned is None and client.stream_id == StreamId.current()
    assert pinned.stream_id == sid
    assert pinned.server is client.server and pinned.device == client.device
    with cube.stream():
        assert pinned.stream_id == sid
    assert run_in_thread(lambda: pinned.stream_id) == sid
    unpinned = pinned.set_stream(None)
    assert unpinned.pinned is None and unpinned.stream_id == StreamId.current()


def test_two_threads_launching_on_one_client_use_two_streams(devices):
    """3: two threads launching on one client land on two streams (their own)."""
    client = devices.fresh()
    x = client.create(np.arange(4.0))
    outs = [client.empty(4), client.empty(4)]

    def launch(out):
        client.launch(copy_into, 1, 1, x, out)
        return StreamId.current()

    s1 = run_in_thread(launch, outs[0])
    s2 = run_in_thread(launch, outs[1])
    drain(client)
    assert s1 != s2
    assert {s1, s2} <= set(client.server.streams.stream_ids())
    assert StreamId.current() not in client.server.streams.stream_ids()
    for out in outs:
        np.testing.assert_array_equal(client.read(out), np.arange(4.0))


def test_launches_of_a_pinned_client_use_the_pinned_stream_from_any_thread(devices):
    """1.1: the stream of a launch is the client's pinned stream if one was set, else the issuing
    thread's current stream (inside `with cube.stream()` too)."""
    client = devices.fresh()
    sid = StreamId.new()
    pinned = client.set_stream(sid)
    x = client.create(np.arange(4.0))
    out = client.empty(4)

    def from_a_thread():
        pinned.launch(copy_into, 1, 1, x, out)
        return StreamId.current()

    thread_stream = run_in_thread(from_a_thread)
    with cube.stream() as block:
        pinned.launch(copy_into, 1, 1, x, out)
    drain(client)
    used = set(client.server.streams.stream_ids())
    assert sid in used
    assert thread_stream not in used and block not in used and StreamId.current() not in used
    np.testing.assert_array_equal(client.read(out), np.arange(4.0))


def test_the_stream_comes_from_the_issuing_thread_not_the_handles(devices):
    """1.1: a buffer last used on stream S, launched from a thread whose stream is T, goes to T
    (the handle only says what T must wait for)."""
    client = devices.fresh()
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    with cube.stream() as s:
        client.launch(copy_into, 1, 1, x, out)
    with cube.stream() as t:
        client.launch(copy_into, 1, 1, out, x)
    drain(client)
    assert {s, t} <= set(client.server.streams.stream_ids())


def test_a_read_on_another_stream_waits_for_the_producer(eager_devices):
    """3: when a launch on stream S binds a buffer written on stream T, S first waits for T's
    work on it; the user writes no events. Here the consumer is handed to its worker while the
    producer is still blocked, and must not run until the producer has written."""
    GATE.clear(), PRODUCED.clear(), CONSUMED.clear()
    client = eager_devices.fresh()
    x = client.create(np.arange(8.0))
    buf = client.create(np.zeros(8))
    out = client.empty(8)
    try:
        with cube.stream():
            client.launch(gated_produce, 1, 1, x, buf)
        with cube.stream():
            client.launch(consume, 1, 1, buf, out)
        drain(client)            # both tasks are on their workers now (max_tasks=1)
        assert not CONSUMED.wait(0.05)     # a bounded look: the consumer is held back
        assert not PRODUCED.is_set()
    finally:
        GATE.set()
    np.testing.assert_array_equal(client.read(out), (np.arange(8.0) + 1.0) * 2.0)


def test_a_write_on_another_stream_waits_for_an_earlier_reader(eager_devices):
    """3 (WAR): a launch on C writing a buffer that a launch on B still reads waits for B; the
    reader sees the old contents."""
    GATE.clear(), PRODUCED.clear(), CONSUMED.clear()
    client = eager_devices.fresh()
    x = client.create(np.full(8, 10.0))
    buf = client.create(np.arange(8.0))
    out = client.empty(8)
    try:
        with cube.stream():
            # Reads buf (as `x`) after the gate opens; writes out.
            client.launch(gated_produce, 1, 1, buf, out)
        with cube.stream():
            client.launch(copy_into, 1, 1, x, buf)   # overwrites buf: must wait for the reader
        drain(client)
    finally:
        GATE.set()
    np.testing.assert_array_equal(client.read(out), np.arange(8.0) + 1.0)
    np.testing.assert_array_equal(client.read(buf), np.full(8, 10.0))
