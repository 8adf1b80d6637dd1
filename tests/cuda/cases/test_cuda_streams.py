"""Streams and inferred dependencies on the CUDA backend (CONTRACT.md section 3).

On the GPU path cross-stream ordering is device-side (``cuStreamWaitEvent`` on the producer's
event). The fake driver runs the newest stream first whenever it may, so a missing wait shows up
there as a stale read; on a GPU the producer is made slow for the same reason.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
from numba import cuda

import numba_cube as cube

from _cuda_setup import KIND, only

TPB = 32


@cube.kernel
def slow_fill(out, value, spin):
    # Burns time before writing, so a consumer that does not wait reads the old bytes.
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for k in range(spin):
            acc += k * 1e-30
        out[i] = value + acc * 0.0


@cube.kernel
def add_into(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += x[i]


@cube.kernel
def copy_into(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


SPIN = 200_000 if KIND == "gpu" else 1


def test_consumer_on_another_stream_waits_for_the_producer(client):
    """A buffer written on stream A and read on stream B: B's launch sees A's write without any
    event written by the user (read after write)."""
    n = 64
    buf = client.create(np.zeros(n))
    out = client.create(np.zeros(n))
    a = client.set_stream(cube.StreamId.new())
    b = client.set_stream(cube.StreamId.new())
    a.launch(slow_fill, 2, TPB, buf, 7.0, SPIN)
    b.launch(copy_into, 2, TPB, buf, out)
    np.testing.assert_array_equal(b.read(out), np.full(n, 7.0))


def test_writer_on_another_stream_waits_for_readers(client):
    """A reader on A, then a writer of the same buffer on B: the reader sees the old contents
    (write after read)."""
    n = 64
    src = client.create(np.full(n, 1.0))
    seen = client.create(np.zeros(n))
    a = client.set_stream(cube.StreamId.new())
    b = client.set_stream(cube.StreamId.new())
    a.launch(slow_fill, 2, TPB, seen, 0.0, SPIN)    # keep A busy
    a.launch(copy_into, 2, TPB, src, seen)            # A reads src
    b.launch(slow_fill, 2, TPB, src, 5.0, 1)          # B overwrites src
    np.testing.assert_array_equal(client.read(seen), np.full(n, 1.0))
    np.testing.assert_array_equal(client.read(src), np.full(n, 5.0))


def test_written_on_a_read_on_b_written_on_c(client):
    """A buffer written on A, read on B, then written on C: C is ordered after both."""
    n = 32
    x = client.create(np.zeros(n))
    seen = client.create(np.zeros(n))
    sa, sb, sc = (client.set_stream(cube.StreamId.new()) for _ in range(3))
    sa.launch(slow_fill, 1, TPB, x, 3.0, SPIN)
    sb.launch(copy_into, 1, TPB, x, seen)
    sc.launch(slow_fill, 1, TPB, x, 9.0, 1)
    np.testing.assert_array_equal(client.read(seen), np.full(n, 3.0))
    np.testing.assert_array_equal(client.read(x), np.full(n, 9.0))


@only("fake", why="counts the driver's stream waits")
def test_two_readers_do_not_wait_for_each_other(client, fake_api):
    """Two launches that only read a shared buffer (each writes its own output) are not ordered:
    no stream wait is enqueued between them."""
    n = 32
    shared = client.create(np.ones(n))
    o1, o2 = client.create(np.zeros(n)), client.create(np.zeros(n))
    a = client.set_stream(cube.StreamId.new())
    b = client.set_stream(cube.StreamId.new())
    client.sync()
    a.launch(copy_into, 1, TPB, shared, o1)
    waits = fake_api.calls["cuStreamWaitEvent"]
    b.launch(copy_into, 1, TPB, shared, o2)
    assert fake_api.calls["cuStreamWaitEvent"] == waits
    np.testing.assert_array_equal(client.read(o2), np.ones(n))


def test_threads_get_their_own_streams_and_are_ordered_by_buffers(client):
    """Two threads launching on one client land on two streams; a buffer they share orders them."""
    n = 32
    acc = client.create(np.zeros(n))
    one = client.create(np.ones(n))
    base = client.stream_id   # unpinned client: each thread uses its own stream
    c = cube.client(client.device)
    del base
    done = threading.Event()

    def worker():
        c.launch(slow_fill, 1, TPB, acc, 10.0, SPIN)
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert done.is_set()
    c.launch(add_into, 1, TPB, one, acc)          # this thread's stream, after the other's write
    np.testing.assert_array_equal(c.read(acc), np.full(n, 11.0))


def test_host_write_is_in_stream_order(client):
    """client.write lands after earlier work on the buffer and before later work."""
    n = 32
    x = client.create(np.zeros(n))
    out = client.create(np.zeros(n))
    client.launch(slow_fill, 1, TPB, x, 1.0, SPIN)
    client.write(x, np.full(n, 4.0))
    client.launch(copy_into, 1, TPB, x, out)
    client.write(x, np.full(n, 6.0))
    np.testing.assert_array_equal(client.read(out), np.full(n, 4.0))
    np.testing.assert_array_equal(client.read(x), np.full(n, 6.0))


def test_freed_memory_is_not_reused_while_a_launch_uses_it(client):
    """Dropping a handle while a launch on another stream still reads it does not let a new
    buffer take its memory before that launch is done."""
    n = 64
    out = client.create(np.zeros(n))
    a = client.set_stream(cube.StreamId.new())
    src = a.create(np.full(n, 2.0))
    a.launch(slow_fill, 2, TPB, out, 0.0, SPIN)
    a.launch(add_into, 2, TPB, src, out)
    del src
    gc.collect()
    fresh = [client.create(np.full(n, -1.0)) for _ in range(4)]
    np.testing.assert_array_equal(client.read(out), np.full(n, 2.0))
    for f in fresh:
        np.testing.assert_array_equal(client.read(f), np.full(n, -1.0))


def test_sync_waits_for_every_stream(client):
    """sync() returns after all streams' work, and reports no fault on a healthy device."""
    bufs = [client.create(np.zeros(32)) for _ in range(3)]
    for i, b in enumerate(bufs):
        client.set_stream(cube.StreamId.new()).launch(slow_fill, 1, TPB, b, float(i), SPIN)
    client.sync()
    for i, b in enumerate(bufs):
        np.testing.assert_array_equal(client.read(b), np.full(32, float(i)))
