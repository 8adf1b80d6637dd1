"""The bounded worker pool behind host streams (CONTRACT.md section 3; ``streams/worker_pool.py``).

Driven through ``HostStreams`` (the pool's only user) with plain Python tasks on real threads.
"""

from __future__ import annotations

import os
import random
import threading

import pytest

from numba_cube.errors import DeviceFault
from numba_cube.runtime.streams import worker_pool as stream_pool
from numba_cube.runtime.streams.host_streams import HostStreams, Task

TIMEOUT = 10.0
CANNOT_START = "can't start new thread"


def make(max_tasks=32, max_workers=4, name="pool"):
    faults = []
    return HostStreams(name, max_tasks, faults.append, max_workers=max_workers), faults


def refuse_worker_threads(monkeypatch, name):
    """Make starting a worker thread of HostStreams ``name`` fail as it does in a process that is
    out of threads; every other thread starts normally."""
    real_start = threading.Thread.start

    def start(thread):
        if thread.name.startswith(f"numba_cube-{name}-worker"):
            raise RuntimeError(CANNOT_START)
        return real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)


def test_max_workers_must_be_positive():
    """3: a pool has at least one worker."""
    with pytest.raises(ValueError):
        HostStreams("x", 4, lambda e: None, max_workers=0)


def test_max_workers_comes_from_the_environment(monkeypatch):
    """config: NUMBA_CUBE_STREAM_WORKERS sets the bound; unset, it is twice the usable CPUs
    (at least 4)."""
    monkeypatch.setenv("NUMBA_CUBE_STREAM_WORKERS", "3")
    assert HostStreams("x", 4, lambda e: None).max_workers == 3
    monkeypatch.delenv("NUMBA_CUBE_STREAM_WORKERS")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert HostStreams("x", 4, lambda e: None).max_workers == max(4, 2 * cpus)


def test_a_stream_waiting_for_a_dependency_does_not_hold_the_only_worker():
    """3 (deadlock freedom with a bounded pool): with one worker, a stream whose next task waits
    for another stream's task gives the worker up, so the dependency runs and then the
    dependent. (A worker that kept its stream and waited would wait for ever.)"""
    hs, faults = make(max_tasks=1, max_workers=1)
    release = threading.Event()
    order = []
    x1 = Task(lambda: release.wait(TIMEOUT), "X", "x1")
    hs.enqueue(x1, [])                          # the only worker runs x1 and blocks in it
    z1 = Task(lambda: order.append("z1"), "Z", "z1")
    hs.enqueue(z1, [])                          # Z waits for a worker
    x2 = Task(lambda: order.append("x2"), "X", "x2")
    hs.enqueue(x2, [z1])                        # queued behind x1 on the worker's own stream
    release.set()
    assert x2.wait(TIMEOUT)
    assert order == ["z1", "x2"] and faults == []
    assert len(hs.workers()) <= 1


def test_streams_run_concurrently_up_to_the_bound():
    """3: different streams run on different workers at the same time, as many as the bound:
    two tasks that only finish together (a barrier of two) both finish with two workers."""
    hs, faults = make(max_tasks=1, max_workers=2)
    together = threading.Barrier(2, timeout=TIMEOUT)
    a, b = Task(together.wait, "A"), Task(together.wait, "B")
    hs.enqueue(a, [])
    hs.enqueue(b, [])
    assert a.wait(TIMEOUT) and b.wait(TIMEOUT)
    assert not together.broken and faults == []


@pytest.mark.parametrize("seed", range(4))
def test_many_streams_share_few_workers_in_order_one_task_at_a_time(seed):
    """3: 40 streams with cross-stream dependencies on 3 workers: never more than 3 workers,
    each stream's tasks run in submission order and never two at once, and a task runs only
    after every task it depends on (a dependency is always an earlier-registered task)."""
    rng = random.Random(seed)
    hs, faults = make(max_tasks=rng.choice([1, 3, 8]), max_workers=3)
    streams = [f"S{k}" for k in range(40)]
    ran = {s: [] for s in streams}
    busy = {s: False for s in streams}
    violations, worker_counts = [], []
    registered = []

    def body(task, index):
        def run():
            if busy[task.stream]:
                violations.append(f"{task.stream} ran two tasks at once")
            busy[task.stream] = True
            if not all(d.done for d in task.deps):
                violations.append(f"{task.label} ran before a dependency")
            worker_counts.append(len(hs.workers()))
            ran[task.stream].append(index)
            busy[task.stream] = False
        return run

    counts = {s: 0 for s in streams}
    for n in range(1500):
        sid = rng.choice(streams)
        t = Task(None, sid, f"{sid}#{counts[sid]}")
        t.run = body(t, counts[sid])
        counts[sid] += 1
        others = [d for d in registered[-30:] if d.stream != sid and not d.done]
        deps = rng.sample(others, min(len(others), rng.randint(0, 2)))
        registered.append(t)
        hs.enqueue(t, deps)
        if rng.random() < 0.05:
            hs.flush(rng.choice(streams))       # a reader flushing some stream
    for tail in hs.flush_all():
        assert tail.wait(TIMEOUT)
    assert all(t.done for t in registered)
    assert violations == [] and faults == []
    assert {s: ran[s] for s in streams} == {s: list(range(counts[s])) for s in streams}
    assert max(worker_counts) <= 3


def test_a_worker_that_cannot_start_is_no_fault_while_another_lives(monkeypatch):
    """3/4.3: when a second worker cannot be started, the work waits for the live one and runs
    there; nothing is reported as a fault."""
    hs, faults = make(max_tasks=1, max_workers=2, name="onelive")
    release = threading.Event()
    started = threading.Event()
    a = Task(lambda: (started.set(), release.wait(TIMEOUT)), "A")
    hs.enqueue(a, [])
    assert started.wait(TIMEOUT)                # the first worker lives, busy with A
    refuse_worker_threads(monkeypatch, "onelive")
    b = Task(lambda: None, "B")
    hs.enqueue(b, [])                           # a second worker is refused: B waits for the first
    release.set()
    assert b.wait(TIMEOUT) and a.wait(TIMEOUT)
    assert faults == []


def test_when_no_worker_can_start_the_work_is_abandoned_with_a_device_fault(monkeypatch):
    """4.3: when no worker lives and none can be started, the flushed work can never run: it is
    reported once as a DeviceFault (caused by the start error), waiting for it raises
    DeviceFault instead of hanging, and it never counts as done (readers do not read what it
    never wrote)."""
    hs, faults = make(max_tasks=1, name="nothread")
    refuse_worker_threads(monkeypatch, "nothread")
    ran = []
    t = Task(lambda: ran.append(1), "S", "t")
    hs.enqueue(t, [])
    with pytest.raises(DeviceFault, match="no stream worker thread could be started") as info:
        t.wait(TIMEOUT)
    assert isinstance(info.value.__cause__, RuntimeError) and CANNOT_START in str(info.value.__cause__)
    assert len(faults) == 1 and isinstance(faults[0], DeviceFault)
    assert not t.done and ran == []
    assert hs.flush_all() == [t] and "S" in hs.stream_ids()   # sync waits for it (and raises)


def test_work_after_abandoned_work_is_abandoned_and_unrelated_work_runs(monkeypatch):
    """4.3: a task that depends on an abandoned task, and any later task of an abandoned task's
    stream (it may read what was never written), are abandoned too, without needing a worker;
    once workers can start again, work on other streams that depends on nothing abandoned runs."""
    hs, faults = make(max_tasks=1, name="poison")
    with monkeypatch.context() as patch:
        refuse_worker_threads(patch, "poison")
        first = Task(lambda: None, "S", "first")
        hs.enqueue(first, [])
    ran = []
    dependent = Task(lambda: ran.append("dependent"), "T", "dependent")
    hs.enqueue(dependent, [first])
    later = Task(lambda: ran.append("later"), "S", "later")
    hs.enqueue(later, [])
    unrelated = Task(lambda: ran.append("unrelated"), "U", "unrelated")
    hs.enqueue(unrelated, [])
    assert unrelated.wait(TIMEOUT)
    for t in (dependent, later):
        with pytest.raises(DeviceFault):
            t.wait(TIMEOUT)
        assert not t.done
    assert ran == ["unrelated"]
    assert len(faults) == 1


def test_idle_workers_exit(monkeypatch):
    """3: workers with nothing to do exit after a while (a pool of idle threads does not
    linger), and the pool starts again on demand."""
    monkeypatch.setattr(stream_pool, "_IDLE_EXIT_SECONDS", 0.02)
    hs, _ = make(max_tasks=1, max_workers=3)
    together = threading.Barrier(3, timeout=TIMEOUT)
    tasks = [Task(together.wait, f"S{k}") for k in range(3)]
    for t in tasks:
        hs.enqueue(t, [])
    assert all(t.wait(TIMEOUT) for t in tasks)
    for worker in hs.workers():
        worker.join(TIMEOUT)
        assert not worker.is_alive()
    assert hs.workers() == []
    again = Task(lambda: None, "S0")
    hs.enqueue(again, [])
    assert again.wait(TIMEOUT)
