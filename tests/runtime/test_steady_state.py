"""Loops that must reach a steady state without a ``sync()`` (CONTRACT.md section 3, "Freeing";
``memory.py``, ``streams/hazards.py``, ``streams/host_streams.py``).

Each test runs a loop a program may run for ever and looks at what the device holds at
checkpoints: pool bytes, memory ids, live tasks, tracked streams, numba_cube objects. No timings.
Launches run on the fake host backend (``numba_cube.testing.PythonBackend``): a kernel is a
Python function, so the loops cost microseconds and results are checked against NumPy.
"""

from __future__ import annotations

import gc
import threading
import time
import types

import numpy as np

import numba_cube as cube
from numba_cube.runtime.streams.host_streams import Task

BLOCK = 64 * 1024           # bytes of one temporary (a size class of its own)
N = BLOCK // 8


def _accumulate(total, temp):
    time.sleep(0.001)       # a kernel that takes longer than the loop takes to issue it
    total += temp


def _fill_from(out, temp):
    out[:] = temp


def _failing(out):
    out[0] = 1.0
    raise ValueError("this launch fails")


def _live(kind) -> int:
    gc.collect()
    return sum(type(o) is kind for o in gc.get_objects())


_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType,
           types.FrameType, threading.Thread)


def _objects_of(server) -> int:
    """How many objects the device holds: those reachable from its server, not through modules,
    classes, functions or threads (which lead to the whole process)."""
    gc.collect()
    seen = {id(server)}
    todo = [server]
    while todo:
        for ref in gc.get_referents(todo.pop()):
            if id(ref) not in seen and not isinstance(ref, _OPAQUE):
                seen.add(id(ref))
                todo.append(ref)
    return len(seen)


def test_temporaries_dropped_without_a_sync_stop_growing_the_pool(devices):
    """Create a temporary, launch on it, drop it, never sync: freed memory that queued work still
    uses waits in quarantine, but the pool stops growing once quarantined and idle memory reach
    its idle bound (``max_idle_bytes``, lowered here to 4 blocks): an allocation then waits for
    the oldest and reuses it. Pool bytes and memory ids are equal at every checkpoint, and the
    result is NumPy's (no block was reused while a launch still read it)."""
    client = devices.fresh()
    pool = client.server.pool
    pool.max_idle_bytes = 4 * BLOCK
    accumulate = cube.kernel(_accumulate)
    total = client.create(np.zeros(N))
    seen = []
    for i in range(1, 301):
        temp = client.create(np.full(N, float(i)))
        client.launch(accumulate, 1, 1, total, temp)
        del temp
        if i % 100 == 0:
            seen.append((pool.held_bytes, len(client.server.memory)))
    assert seen[0] == seen[1] == seen[2], seen
    assert seen[0][0] <= pool.max_idle_bytes + 2 * BLOCK + BLOCK    # + total + the live temp
    np.testing.assert_array_equal(client.read(total), np.full(N, 300 * 301 / 2))
    client.sync()
    held = pool.held_bytes
    again = client.create(np.zeros(N))
    assert pool.held_bytes == held          # after sync(): reused, nothing new allocated
    del again


def test_short_lived_streams_leave_nothing_behind_without_a_sync(devices):
    """One launch and a read on each of ever new streams (``with cube.stream():``), never a
    ``sync()``: the device forgets the streams whose work is done when it looks (amortized:
    when twice as many as after the last look are tracked; pending work is flushed then),
    so the streams it tracks and the tasks alive stay under one bound at every checkpoint, where
    they grew by one per stream. The result is NumPy's."""
    client = devices.fresh()
    fill = cube.kernel(_fill_from)
    out = client.empty(4)
    src = client.create(np.arange(4.0))
    seen = []
    before = _live(Task)        # other devices' tasks (earlier tests) are not this loop's
    for i in range(1, 1501):
        with cube.stream():
            client.launch(fill, 1, 1, out, src)
            client.read(out)        # waits for this stream's work, as a short-lived thread would
        if i % 500 == 0:
            seen.append((len(client.server.streams.stream_ids()), _live(Task) - before))
    bound = 3 * 64          # twice the fewest entries before a look (64), and what is running
    assert all(streams <= bound and tasks <= bound for streams, tasks in seen), seen
    np.testing.assert_array_equal(client.read(out), np.arange(4.0))


def test_failing_launches_leave_nothing_behind(devices):
    """A loop of launches that fail (each records its failure on the output): the objects the
    device holds (reachable from its server), the pool bytes and the ledger are the same at
    every checkpoint (after a ``sync()``),
    and a read raises the launch's own failure."""
    client = devices.fresh()
    failing = cube.kernel(_failing)
    out = client.empty(4)
    seen = []
    for i in range(1, 1501):
        client.launch(failing, 1, 1, out)
        if i % 500 == 0:
            client.sync()
            seen.append((_objects_of(client.server), client.server.pool.held_bytes,
                         len(client.server.ledger.failed_memories)))
    # Pool bytes and the ledger are exact. The objects reachable from the server may differ by
    # one or two between checkpoints (a worker's transient state at the moment of counting);
    # a leak would add at least one per launch: 500 between checkpoints.
    objects = [s[0] for s in seen]
    assert max(objects) - min(objects) <= 4, seen
    assert seen[0][1:] == seen[1][1:] == seen[2][1:], seen
    failures = client.sync_buffers(out)
    assert isinstance(failures[0].root, ValueError)


def _ones(out):
    out[:] = 1.0


def test_graph_prepare_keeps_what_a_window_can_use_not_every_temporary(devices):
    """After ``graph_prepare`` a warm-up that creates, uses and drops a temporary per step (no
    sync) holds the same pool bytes at every checkpoint, under the idle bound plus one block per
    size class, not one block per temporary (CONTRACT.md section 6); the capture window then
    allocates its temporary from what the warm-up kept, and the graph's replays compute what
    NumPy does."""
    client = devices.fresh()
    pool = client.server.pool
    pool.max_idle_bytes = 2 * BLOCK
    ones, accumulate = cube.kernel(_ones), cube.kernel(_accumulate)
    total = client.create(np.zeros(N))
    client.graph_prepare()
    seen = []
    for i in range(1, 151):
        temp = client.empty(N)
        client.launch(ones, 1, 1, temp)
        client.launch(accumulate, 1, 1, total, temp)
        del temp
        if i % 50 == 0:
            seen.append(pool.held_bytes)
    assert seen[0] == seen[1] == seen[2], seen
    assert seen[0] <= pool.max_idle_bytes + 3 * BLOCK      # + total + one block per class
    client.sync()
    client.start_capture()
    temp = client.empty(N)                  # served from the pool, or CaptureError here
    client.launch(ones, 1, 1, temp)
    client.launch(accumulate, 1, 1, total, temp)
    graph = client.stop_capture()
    graph.replay()
    graph.replay()
    np.testing.assert_array_equal(client.read(total), np.full(N, 152.0))
