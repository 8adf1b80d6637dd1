"""The channels' ``post`` (``runtime/streams/channel.py``): what handle finalizers use to free memory.

A finalizer runs on whatever thread dropped the object, possibly inside another lock (a stream
worker's pool lock, the ledger's lock), so ``post`` must never wait for the device lock; what it
posts must still run, after what was submitted before it.
"""

from __future__ import annotations

import threading

from numba_cube.runtime.streams.channel import InlineChannel, ThreadChannel


def test_inline_post_runs_at_once_when_the_device_is_free():
    """With nobody inside the channel, a posted operation runs before ``post`` returns."""
    ch = InlineChannel("t")
    ran = []
    ch.post(ran.append, 1)
    assert ran == [1]


def test_inline_post_never_waits_for_the_device_lock():
    """While another thread holds the device lock, ``post`` returns at once without running the
    operation; the holder runs it when its operation ends."""
    ch = InlineChannel("t")
    ran = []
    entered, release = threading.Event(), threading.Event()

    def long_operation():
        entered.set()
        release.wait(10)
        ran.append("operation")

    holder = threading.Thread(target=ch.call, args=(long_operation,))
    holder.start()
    assert entered.wait(10)
    done = threading.Event()
    poster = threading.Thread(target=lambda: (ch.post(ran.append, "posted"), done.set()))
    poster.start()
    assert done.wait(10), "post blocked on the device lock"
    assert ran == []
    release.set()
    holder.join(10)
    poster.join(10)
    assert ran == ["operation", "posted"]


def test_inline_post_from_inside_an_operation_runs_after_it():
    """A finalizer that fires inside an operation of the same thread is deferred to its end
    (the server's state is not re-entrant)."""
    ch = InlineChannel("t")
    ran = []

    def operation():
        ch.post(ran.append, "posted")
        ran.append("operation")

    ch.call(operation)
    assert ran == ["operation", "posted"]


def test_thread_channel_post_keeps_fifo_order():
    """On a device thread, a posted operation runs after everything submitted before it."""
    ch = ThreadChannel("t")
    ran = []
    ch.submit(ran.append, 1)
    ch.post(ran.append, 2)
    ch.call(ran.append, 3)
    assert ran == [1, 2, 3]
    ch.close()
