"""The memory pool: size classes, quarantine of freed memory, steady state (CONTRACT.md section 3,
"Freeing": a handle's memory is not reused while a task on any stream may still touch it)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import numba_cube as cube
from numba_cube.runtime.memory.pool import ALIGNMENT, MemoryPool, size_class

from .._util import drain

MIB = 1 << 20


class FakeTask:
    def __init__(self):
        self.done = False


class FakeBackend:
    """Counts allocations and releases; memory is a fresh object each time (identity matters)."""

    def __init__(self):
        self.allocated = []
        self.released = []

    def allocate(self, n):
        mem = object()
        self.allocated.append((n, mem))
        return mem

    def release(self, mem):
        self.released.append(mem)


@pytest.fixture
def pool():
    be = FakeBackend()
    p = MemoryPool(be.allocate, be.release)
    p.backend = be
    return p


# -- size classes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("nbytes, expected", [
    (0, ALIGNMENT), (1, ALIGNMENT), (ALIGNMENT, ALIGNMENT), (ALIGNMENT + 1, 128), (100, 128),
    (1000, 1024), (MIB - 1, MIB), (MIB, MIB), (MIB + 1, 2 * MIB), (3 * MIB + 5, 4 * MIB),
    (5 * MIB, 5 * MIB),
])
def test_size_classes(nbytes, expected):
    """3 (pool): sizes round up to a power of two (at least the 64-byte alignment) up to 1 MiB,
    and to whole MiB above, so one shape always lands in one class."""
    assert size_class(nbytes) == expected


def test_size_class_covers_the_request_and_is_aligned():
    """1.2/3: a block is never smaller than asked and is a multiple of the pool alignment."""
    for n in [0, 1, 7, 63, 64, 65, 4095, 4097, MIB + 3, 17 * MIB + 1]:
        c = size_class(n)
        assert c >= n and c % ALIGNMENT == 0


# -- reuse and quarantine -----------------------------------------------------------------------


def test_freed_memory_without_users_is_reused(pool):
    """3: freed memory that no task uses goes back to its size class and is reused."""
    cap, mem = pool.allocate(100)
    assert cap == 128
    pool.free(cap, mem, [])
    cap2, mem2 = pool.allocate(120)        # same class
    assert mem2 is mem
    assert len(pool.backend.allocated) == 1


def test_freed_memory_with_unfinished_users_is_quarantined_until_they_finish(pool):
    """3: freeing memory must not let it be reused while a task still uses it: it is
    quarantined, a new request gets other memory, and only once every user is done is it reused."""
    cap, mem = pool.allocate(100)
    t1, t2 = FakeTask(), FakeTask()
    pool.free(cap, mem, [t1, t2])
    assert pool.quarantined == 1
    _, other = pool.allocate(100)
    assert other is not mem
    pool.free(cap, other, [])
    t1.done = True
    _, again = pool.allocate(100)
    assert again is other                 # t2 still runs: mem stays out of reuse
    assert pool.quarantined == 1
    t2.done = True
    pool.free(cap, again, [])
    got = {id(pool.allocate(100)[1]), id(pool.allocate(100)[1])}
    assert got == {id(mem), id(other)}
    assert pool.quarantined == 0


def test_done_users_do_not_quarantine(pool):
    """3: users that already finished do not hold memory back."""
    t = FakeTask()
    t.done = True
    cap, mem = pool.allocate(64)
    pool.free(cap, mem, [t])
    assert pool.quarantined == 0
    assert pool.allocate(64)[1] is mem


def test_other_size_classes_are_not_reused(pool):
    """3 (pool): reuse is by size class: a freed 128-byte block does not serve a 1 KiB request."""
    cap, mem = pool.allocate(100)
    pool.free(cap, mem, [])
    _, big = pool.allocate(1000)
    assert big is not mem


def test_byte_accounting(pool):
    """3 (pool): held bytes count live, idle and quarantined memory; live and idle are separate."""
    cap, mem = pool.allocate(100)
    assert (pool.live_bytes, pool.idle_bytes, pool.held_bytes) == (128, 0, 128)
    t = FakeTask()
    pool.free(cap, mem, [t])
    assert (pool.live_bytes, pool.idle_bytes, pool.held_bytes) == (0, 0, 128)
    t.done = True
    pool.sweep()
    assert (pool.live_bytes, pool.idle_bytes, pool.held_bytes) == (0, 128, 128)
    assert pool.peak_bytes == 128


def test_idle_memory_above_the_limit_is_given_back():
    """3 (pool): idle memory above max_idle_bytes is released to the backend, not kept."""
    be = FakeBackend()
    pool = MemoryPool(be.allocate, be.release, max_idle_bytes=128)
    a = pool.allocate(128)
    b = pool.allocate(128)
    pool.free(*a, [])
    pool.free(*b, [])
    assert be.released == [b[1]]
    assert pool.idle_bytes == 128 and pool.held_bytes == 128
    pool.trim()
    assert be.released == [b[1], a[1]]
    assert pool.idle_bytes == 0 and pool.held_bytes == 0


def test_held_idle_memory_is_kept_then_given_back():
    """6 (graph_prepare): while the pool holds idle memory, freed blocks are all kept, above
    max_idle_bytes too (the capture window will reuse them); once the hold ends, the idle memory
    above the limit is given back, and later frees follow the limit again."""
    be = FakeBackend()
    pool = MemoryPool(be.allocate, be.release, max_idle_bytes=128)
    blocks = [pool.allocate(128) for _ in range(4)]
    pool.hold_idle()
    for cap, mem in blocks:
        pool.free(cap, mem, [])
    assert be.released == [] and pool.idle_bytes == 4 * 128
    pool.release_idle_hold()
    assert len(be.released) == 3 and pool.idle_bytes == 128 and pool.held_bytes == 128
    a, b = pool.allocate(128), pool.allocate(128)
    pool.free(*a, [])
    pool.free(*b, [])
    assert len(be.released) == 4 and pool.idle_bytes == 128


def test_a_pool_at_its_bound_waits_for_the_oldest_quarantined_block_instead_of_growing():
    """3 (pool): while quarantined and idle memory stay within ``max_idle_bytes`` a request for a
    fresh block grows the pool without waiting; past it the pool settles the oldest quarantined
    block's users and serves the request from that block (no new allocation)."""
    be = FakeBackend()
    settled = []

    def settle(tasks):
        settled.append(tasks)
        for task in tasks:
            task.done = True

    pool = MemoryPool(be.allocate, be.release, max_idle_bytes=256, settle=settle)
    a, first = pool.allocate(128), FakeTask()
    pool.free(*a, [first])
    b, second = pool.allocate(128), FakeTask()
    pool.free(*b, [second])
    assert settled == [] and len(be.allocated) == 2
    c = pool.allocate(128)
    assert settled == [[first]] and c[1] is a[1] and len(be.allocated) == 2


def test_a_user_that_never_finishes_does_not_make_the_pool_wait_for_ever():
    """3 (pool): each quarantined block is settled at most once per request; when its users
    still are not done (an abandoned task), the pool grows instead of waiting again."""
    be = FakeBackend()
    settled = []
    pool = MemoryPool(be.allocate, be.release, max_idle_bytes=128, settle=settled.append)
    a, stuck = pool.allocate(128), FakeTask()
    pool.free(*a, [stuck])
    b = pool.allocate(128)
    assert settled == [[stuck]] and b[1] is not a[1] and len(be.allocated) == 2


def test_graph_prepare_keeps_as_many_blocks_per_class_as_were_live_at_once():
    """6 (graph_prepare): with no idle memory allowed (``max_idle_bytes=0``), the hold keeps
    freed blocks all the same, per size class as many as were live at once since it began (two);
    a block of another class that was never live with another is kept alone, and once the hold
    ends everything above the bound is given back."""
    be = FakeBackend()
    pool = MemoryPool(be.allocate, be.release, max_idle_bytes=0)
    pool.hold_idle()
    a, b = pool.allocate(128), pool.allocate(128)
    pool.free(*a, [])
    pool.free(*b, [])
    for _ in range(3):          # one at a time: served from the kept blocks, nothing new
        pool.free(*pool.allocate(128), [])
    big = pool.allocate(1024)
    pool.free(*big, [])
    assert be.released == [] and pool.idle_bytes == 2 * 128 + 1024
    assert len(be.allocated) == 3
    pool.release_idle_hold()
    assert len(be.released) == 3 and pool.idle_bytes == 0


def test_frozen_pool_only_reuses(pool):
    """6: inside a capture window nothing may be allocated: a frozen pool serves from its free
    lists and raises MemoryError for anything else."""
    cap, mem = pool.allocate(100)
    pool.free(cap, mem, [])
    pool.frozen = True
    assert pool.allocate(100)[1] is mem
    with pytest.raises(MemoryError):
        pool.allocate(100)
    assert len(pool.backend.allocated) == 1


# -- through a client -----------------------------------------------------------------------------


@cube.kernel
def double_into(x, out):
    for i in range(out.shape[0]):
        out[i] = 2.0 * x[i]


@cube.kernel
def fail_into(x, out):
    out[:] = x
    raise ValueError("injected")



def test_kernels_io_as_assumed():
    """4.2 (precondition of this module): the IO analysis gives the read/write sets used here."""
    a = np.zeros(4)
    assert double_into.io(a, a) == {"x": "r", "out": "w"}
    assert fail_into.io(a, a) == {"x": "r", "out": "w"}


def test_create_free_loop_reaches_a_steady_state(devices):
    """3 (pool): a loop that creates and frees handles of one shape reaches a steady state: the
    pool holds the same bytes, the memory table does not grow, the ledger stays empty."""
    client = devices.fresh()
    server = client.server
    data = np.arange(16, dtype=np.float64)
    samples = []
    for i in range(10_000):
        h = client.create(data)
        del h
        if i % 1000 == 999:
            drain(client)
            samples.append((server.pool.held_bytes, len(server.memory)))
    client.sync()
    drain(client)
    assert samples[0][0] <= size_class(data.nbytes) * 2
    assert all(s == samples[0] for s in samples), samples
    assert len(server.memory) == 0
    assert len(server.ledger) == 0


def test_launch_loop_with_failures_reaches_a_steady_state(devices):
    """3/4: create, launch (every other launch fails), free, in a loop: the pool and memory table
    stop growing and the failures recorded on dropped buffers die with them (ledger size 0)."""
    client = devices.fresh()
    server = client.server
    data = np.arange(16, dtype=np.float64)
    samples = []
    for i in range(2_000):
        x = client.create(data)
        out = client.empty(16)
        client.launch(fail_into if i % 2 else double_into, 1, 1, x, out)
        answer = client.sync_buffers(out)[0]
        assert (answer is None) == (i % 2 == 0)
        del x, out
        if i % 200 == 199:
            drain(client)
            samples.append((server.pool.held_bytes, len(server.memory)))
    client.sync()
    gc.collect()
    drain(client)
    assert all(s == samples[0] for s in samples), samples
    assert len(server.memory) == 0
    assert len(server.ledger) == 0
    assert server.pool.quarantined == 0
