"""Per-stream queues and worker threads of host-executing backends (CONTRACT.md section 3)."""

from __future__ import annotations

import collections
import gc
import threading
import weakref

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.errors import DeviceFault
from numba_cube.runtime.streams import worker_pool as stream_pool
from numba_cube.runtime.streams.host_streams import HostStreams, Task

from .._util import run_in_thread

TIMEOUT = 10.0


def make(max_tasks=32):
    faults = []
    return HostStreams("test", max_tasks, faults.append), faults


def task(stream, fn=lambda: None, label=""):
    return Task(fn, stream, label)


def test_max_tasks_must_be_positive():
    """3: each stream has a queue bound max_tasks of at least one."""
    with pytest.raises(ValueError):
        HostStreams("x", 0, lambda e: None)


def test_reaching_max_tasks_executes_the_stream_without_any_wait_call():
    """3: reaching a stream's queue bound max_tasks executes that stream on the spot; below it
    the work stays pending (not handed to a worker)."""
    hs, _ = make(max_tasks=3)
    ran = []
    t1 = task("S", lambda: ran.append(1))
    t2 = task("S", lambda: ran.append(2))
    hs.enqueue(t1, [])
    hs.enqueue(t2, [])
    st = hs._streams["S"]
    assert len(st.pending) == 2 and hs.workers() == []  # nothing handed over yet
    assert not t1.done and not t2.done
    t3 = task("S", lambda: ran.append(3))
    hs.enqueue(t3, [])                                  # the bound: flushed on the spot
    assert st.pending == []
    assert t3.wait(TIMEOUT)
    assert ran == [1, 2, 3]


def test_max_tasks_one_runs_every_task_at_once():
    """3: with max_tasks=1 every enqueue executes the stream."""
    hs, _ = make(max_tasks=1)
    t = task("S")
    hs.enqueue(t, [])
    assert t.wait(TIMEOUT)


def test_a_dependent_task_on_another_stream_flushes_the_producer_stream():
    """3: another stream's task that depends on this stream's work makes this stream execute
    (its pending work is flushed), while the dependent stays pending on its own stream."""
    hs, _ = make()
    producer = task("P")
    hs.enqueue(producer, [])
    assert hs._streams["P"].pending == [producer]
    consumer = task("C")
    hs.enqueue(consumer, [producer])
    assert hs._streams["P"].pending == []
    assert producer.wait(TIMEOUT)
    assert hs._streams["C"].pending == [consumer]
    assert not consumer.done


def test_a_dependent_waits_for_its_producer_to_finish():
    """3: the scheduler makes S wait for T's work before running S's dependent task."""
    hs, _ = make()
    release = threading.Event()
    seen = []
    producer = task("P", lambda: release.wait(TIMEOUT))
    hs.enqueue(producer, [])
    consumer = task("C", lambda: seen.append(producer.done))
    hs.enqueue(consumer, [producer])
    hs.flush("C")
    assert not consumer.wait(0.05)      # bounded look: it must not have run yet
    release.set()
    assert consumer.wait(TIMEOUT)
    assert seen == [True]


def test_tasks_of_one_stream_run_in_order():
    """3: a stream is a queue: its tasks run one at a time, in the order enqueued, across
    several flushes."""
    hs, _ = make(max_tasks=7)
    order = []
    tasks = [task("S", (lambda i=i: order.append(i))) for i in range(50)]
    for t in tasks:
        hs.enqueue(t, [])
    hs.flush("S")
    assert tasks[-1].wait(TIMEOUT)
    assert order == list(range(50))


def test_streams_run_concurrently():
    """3: different streams run at the same time (on different workers of the pool): a task on S
    can finish while a task on T is still blocked."""
    hs, _ = make(max_tasks=1)
    release = threading.Event()
    blocked = task("T", lambda: release.wait(TIMEOUT))
    hs.enqueue(blocked, [])
    free = task("S")
    hs.enqueue(free, [])
    try:
        assert free.wait(TIMEOUT)
        assert not blocked.done
    finally:
        release.set()
    assert blocked.wait(TIMEOUT)


def test_flush_all_returns_the_unfinished_tails():
    """4.3 sync: flushing every stream gives each stream's last task (waiting on them waits for
    all work)."""
    hs, _ = make()
    release = threading.Event()
    a1, a2 = task("A", lambda: release.wait(TIMEOUT)), task("A")
    b1 = task("B")
    for t in (a1, a2, b1):
        hs.enqueue(t, [])
    tails = hs.flush_all()
    assert a2 in tails and a1 not in tails
    release.set()
    for t in tails:
        assert t.wait(TIMEOUT)
    assert b1.done and a1.done


def test_a_task_that_raises_is_a_fault_and_the_stream_goes_on():
    """4.3: a stream task that raises is a broken device, not a launch failure: it is reported
    to on_fault, the task still counts as done (nobody hangs), and later work runs."""
    hs, faults = make()
    err = RuntimeError("bug")

    def bad():
        raise err

    t1, t2 = task("S", bad), task("S")
    hs.enqueue(t1, [])
    hs.enqueue(t2, [])
    hs.flush("S")
    assert t2.wait(TIMEOUT)
    assert t1.done
    assert faults == [err]


def test_an_idle_worker_exits_and_is_restarted_on_demand(monkeypatch):
    """3 (host streams): an idle worker exits after a while, so short-lived streams do not
    accumulate threads, and a later flush starts a new one that runs the work."""
    monkeypatch.setattr(stream_pool, "_IDLE_EXIT_SECONDS", 0.02)
    hs, _ = make()
    t1 = task("S")
    hs.enqueue(t1, [])
    hs.flush("S")
    assert t1.wait(TIMEOUT)
    first = hs.workers()
    for worker in first:
        worker.join(TIMEOUT)
        assert not worker.is_alive()
    assert hs.workers() == []
    t2 = task("S")
    hs.enqueue(t2, [])
    hs.flush("S")
    assert t2.wait(TIMEOUT)
    assert not set(hs.workers()) & set(first)


def test_finished_tasks_do_not_keep_their_history_alive():
    """3 (long loops): a finished task does not keep the tasks it waited for alive; otherwise a
    ping-pong between two streams retains its whole history through the stream tails."""
    hs, _ = make(max_tasks=1)
    first = task("A")
    hs.enqueue(first, [])
    ref = weakref.ref(first)
    prev = first
    for i in range(20):
        t = task("B" if i % 2 == 0 else "A")
        hs.enqueue(t, [prev])
        prev = t
    assert prev.wait(TIMEOUT)
    del first, t
    gc.collect()
    assert ref() is None


# -- the worker pool seen from a client ---------------------------------------------------------------


@cube.kernel
def scaled_plus(x, out, k):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2.0 * x[i] + k


ISSUING_THREADS = 3000
ALIVE_AT_ONCE = 8
N = 16


def test_three_thousand_short_lived_issuing_threads_keep_the_thread_count_bounded():
    """3 (host streams): 3,000 short-lived issuing threads, each with its own stream, each
    launching a tiny kernel on the CPU backend and reading its output, do not make a worker
    thread per stream: the process's live thread count stays within the issuing threads alive at
    once plus the pool's bound (plus the device thread and the sampler), and every output, read
    in its thread and again afterwards, matches NumPy."""
    client = cube.client("cpu:11")
    bound = client.server.streams.max_workers
    before = threading.active_count()
    high_water = [before]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            high_water.append(threading.active_count())
            stop.wait(0.0005)

    outputs, in_thread, errors = {}, {}, []

    def issue(k):
        try:
            x = client.create(np.arange(N, dtype=np.float64) + k)
            out = client.empty(N, np.float64)
            client.launch(scaled_plus, 1, N, x, out, float(k))
            in_thread[k] = client.read(out)
            outputs[k] = out
            high_water.append(threading.active_count())
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    sampler = threading.Thread(target=sample)
    sampler.start()
    alive = collections.deque()
    try:
        for k in range(ISSUING_THREADS):
            th = threading.Thread(target=issue, args=(k,))
            th.start()
            alive.append(th)
            if len(alive) >= ALIVE_AT_ONCE:
                alive.popleft().join(TIMEOUT)
        for th in alive:
            th.join(TIMEOUT)
        final = {k: client.read(out) for k, out in outputs.items()}
        client.sync()
    finally:
        stop.set()
        sampler.join(TIMEOUT)
    assert errors == []
    assert len(final) == ISSUING_THREADS
    for k in range(ISSUING_THREADS):
        expected = 2.0 * (np.arange(N, dtype=np.float64) + k) + k
        np.testing.assert_array_equal(in_thread[k], expected)
        np.testing.assert_array_equal(final[k], expected)
    # Issuing threads alive at once, the pool, this device's thread and the sampler.
    assert max(high_water) <= before + ALIVE_AT_ONCE + bound + 2, (max(high_water), before, bound)
    assert len(client.server.streams.workers()) <= bound


@cube.kernel
def copy_into(x, out):
    for i in range(out.shape[0]):
        out[i] = x[i]


def test_when_no_worker_can_start_sync_and_read_raise_device_fault(client, monkeypatch):
    """4.3: a stream worker that cannot be started (the process is out of threads) is a broken
    device, never a hang: read() of the buffer it should have written and sync() raise
    DeviceFault (on a helper thread that must finish), a buffer nobody was writing stays
    readable, and once threads can start again, new work on another stream runs."""
    x = client.create(np.arange(4.0))
    out = client.empty(4, np.float64)
    real_start = threading.Thread.start

    def start(thread):
        if thread.name.startswith(f"numba_cube-{client.device}-worker"):
            raise RuntimeError("can't start new thread")
        return real_start(thread)

    with monkeypatch.context() as patch:
        patch.setattr(threading.Thread, "start", start)
        client.launch(copy_into, 1, 1, x, out)
        with pytest.raises(DeviceFault, match="can't start new thread"):
            run_in_thread(client.read, out, timeout=TIMEOUT)
        with pytest.raises(DeviceFault, match="can't start new thread"):
            run_in_thread(client.sync, timeout=TIMEOUT)
    np.testing.assert_array_equal(client.read(x), np.arange(4.0))
    with cube.stream():
        fresh = client.empty(4, np.float64)
        client.launch(copy_into, 1, 1, x, fresh)
        np.testing.assert_array_equal(run_in_thread(client.read, fresh, timeout=TIMEOUT), np.arange(4.0))
    with pytest.raises(DeviceFault):
        run_in_thread(client.sync, timeout=TIMEOUT)       # the device stays marked broken
