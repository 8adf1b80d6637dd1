"""Dependency inference from read and write sets (CONTRACT.md section 3), as units.

Tasks are tiny fakes with ``.done`` and ``.stream``, the only things the tracker may look at.
"""

from __future__ import annotations

from numba_cube.runtime.streams.hazards import HazardTracker

A, B, C = "A", "B", "C"   # streams
M, N = 1, 2              # buffers (memory ids)


class FakeTask:
    def __init__(self, stream, name=""):
        self.stream = stream
        self.done = False
        self.name = name

    def __repr__(self):
        return f"<{self.name}@{self.stream}{' done' if self.done else ''}>"


def reg(tracker, stream, reads=(), writes=(), name=""):
    t = FakeTask(stream, name)
    return t, tracker.register(t, reads, writes)


def ids(deps):
    return {id(d) for d in deps}


def test_read_after_write_waits_for_the_writer():
    """3 (RAW): a task reading a buffer waits for its last writer on another stream."""
    h = HazardTracker()
    w, _ = reg(h, A, writes=[M])
    r, deps = reg(h, B, reads=[M])
    assert deps == [w]


def test_write_after_read_waits_for_the_readers():
    """3 (WAR): a task writing a buffer waits for every reader since the last write."""
    h = HazardTracker()
    r1, _ = reg(h, A, reads=[M])
    r2, _ = reg(h, B, reads=[M])
    w, deps = reg(h, C, writes=[M])
    assert ids(deps) == ids([r1, r2])


def test_write_after_write_waits_for_the_writer():
    """3 (WAW): a task writing a buffer waits for its last writer on another stream."""
    h = HazardTracker()
    w1, _ = reg(h, A, writes=[M])
    w2, deps = reg(h, B, writes=[M])
    assert deps == [w1]


def test_read_read_on_different_streams_is_not_ordered():
    """3 (better rule): two launches that only read the same buffer do not wait for each other."""
    h = HazardTracker()
    r1, d1 = reg(h, A, reads=[M])
    r2, d2 = reg(h, B, reads=[M])
    assert d1 == [] and d2 == []


def test_written_on_a_read_on_b_written_on_c_orders_c_after_both():
    """3: a buffer written on A, read on B, then written on C orders C after both A and B
    (and B after A)."""
    h = HazardTracker()
    a, _ = reg(h, A, writes=[M], name="a")
    b, db = reg(h, B, reads=[M], name="b")
    c, dc = reg(h, C, writes=[M], name="c")
    assert db == [a]
    assert ids(dc) == ids([a, b])


def test_unrelated_buffers_are_not_ordered():
    """3: only shared buffers order work: a task on another buffer waits for nothing."""
    h = HazardTracker()
    reg(h, A, writes=[M])
    _, deps = reg(h, B, reads=[N], writes=[N])
    assert deps == []


def test_same_stream_dependencies_are_omitted():
    """3: a stream runs its own work in order, so a dependency on the same stream is not returned
    (it is satisfied by the queue), while the hazard is still tracked for other streams."""
    h = HazardTracker()
    w, _ = reg(h, A, writes=[M])
    _, deps = reg(h, A, reads=[M], writes=[M])
    assert deps == []
    _, deps = reg(h, A, writes=[M])
    assert deps == []
    last, _ = reg(h, A, writes=[M])
    _, deps = reg(h, B, reads=[M])
    assert deps == [last]


def test_done_tasks_are_not_waited_for():
    """3: finished work is no dependency: done writers and readers are dropped from the answer."""
    h = HazardTracker()
    w, _ = reg(h, A, writes=[M])
    r, _ = reg(h, B, reads=[M])
    w.done = True
    _, deps = reg(h, C, reads=[M])
    assert deps == []
    _, deps = reg(h, C, writes=[M])
    assert deps == [r]
    r.done = True
    _, deps = reg(h, A, writes=[M])
    assert len(deps) == 1 and deps[0].stream == C  # only the unfinished writer on C


def test_done_readers_are_pruned_in_a_long_loop():
    """3 (bounded state): readers are kept as the last one per stream, so the state per buffer
    stays as small as the number of streams when one buffer is read over and over."""
    h = HazardTracker()
    reg(h, A, writes=[M])
    for i in range(1000):
        t, _ = reg(h, B if i % 2 else C, reads=[M])
        t.done = True
    assert len(h.users_of(M)) == 1          # the unfinished writer only
    assert len(h._buffers[M].readers) <= 2  # one per stream (B, C), not 1000 readers


def test_writer_of_and_users_of():
    """3/4.3: a read waits for the last unfinished writer; a free or a host write waits for every
    unfinished user (readers and the writer)."""
    h = HazardTracker()
    assert h.writer_of(M) is None and h.users_of(M) == []
    w, _ = reg(h, A, writes=[M])
    r, _ = reg(h, B, reads=[M])
    assert h.writer_of(M) is w
    assert ids(h.users_of(M)) == ids([w, r])
    w.done = True
    assert h.writer_of(M) is None
    assert h.users_of(M) == [r]
    h.forget(M)
    assert h.users_of(M) == [] and len(h) == 0


def test_a_task_reading_and_writing_a_buffer_is_its_writer():
    """3: a buffer in both sets is written: the next reader on another stream waits for it."""
    h = HazardTracker()
    rw, _ = reg(h, A, reads=[M], writes=[M])
    _, deps = reg(h, B, reads=[M])
    assert deps == [rw]


def test_baseline_rule_orders_read_read_sharing():
    """3 (baseline, CubeCL's): any buffer shared with another stream makes the task wait for all
    of that stream's queued work (its last task), even when both only read it."""
    h = HazardTracker(baseline=True)
    r1, _ = reg(h, A, reads=[M])
    other, _ = reg(h, A, reads=[N])          # A's tail: unrelated to M, still waited for
    _, deps = reg(h, B, reads=[M])
    assert deps == [other]


def test_baseline_rule_never_under_synchronizes_the_three_stream_case():
    """3 (baseline): written on A, read on B, written on C: C waits for B's tail, and B waited
    for A's, so C is ordered after both."""
    h = HazardTracker(baseline=True)
    a, _ = reg(h, A, writes=[M])
    b, db = reg(h, B, reads=[M])
    c, dc = reg(h, C, writes=[M])
    assert db == [a]
    assert dc == [b]


# -- the warm path: register_solo ----------------------------------------------------------------
def solo(tracker, stream, reads=(), writes=(), name=""):
    """register_solo as the CUDA warm path calls it: states of the read-only and written buffers."""
    t = FakeTask(stream, name)
    read_only = [m for m in reads if m not in writes]
    ok = tracker.register_solo(t, tracker.states(read_only), tracker.states(writes))
    return t, ok


def test_register_solo_takes_buffers_only_its_own_stream_uses():
    """A launch whose buffers only its own stream has touched waits for nothing and becomes their
    writer/reader, so a later launch of another stream still waits for it."""
    h = HazardTracker()
    reg(h, A, writes=[M])               # a full registration makes M solo on A
    reg(h, A, reads=[M], writes=[N])
    t, ok = solo(h, A, reads=[M], writes=[N])
    assert ok
    _, deps = reg(h, B, reads=[N])
    assert deps == [t]                  # read after the solo write
    _, deps = reg(h, B, writes=[M])
    assert t in deps                    # write after the solo read (and M's writer)


def test_register_solo_declines_when_another_stream_is_live_and_changes_nothing():
    """Another stream's unfinished entry on any buffer: register_solo returns False and leaves the
    state as it was, so the full walk that follows computes the dependency."""
    h = HazardTracker()
    w, _ = reg(h, B, writes=[M])
    reg(h, A, writes=[N])
    before = (h._buffers[M].writer, dict(h._buffers[M].readers), h._buffers[N].writer)
    t, ok = solo(h, A, reads=[M], writes=[N])
    assert not ok
    assert (h._buffers[M].writer, dict(h._buffers[M].readers), h._buffers[N].writer) == before
    _, deps = reg(h, A, reads=[M], writes=[N])
    assert deps == [w]


def test_a_buffer_becomes_solo_again_once_other_streams_are_done():
    """Finished entries of other streams are pruned by the full walk, after which the warm path
    applies again (a buffer written once by another thread, then read in a loop)."""
    h = HazardTracker()
    w, _ = reg(h, B, writes=[M])
    reg(h, A, reads=[M])
    assert not solo(h, A, reads=[M])[1]
    w.done = True
    reg(h, A, reads=[M])                # prunes the finished writer
    assert solo(h, A, reads=[M])[1]


from hypothesis import given, settings, strategies as st  # noqa: E402

_step = st.tuples(st.sampled_from([A, B, C]), st.lists(st.integers(1, 4), max_size=3),
                  st.lists(st.integers(1, 4), max_size=2), st.lists(st.integers(0, 30), max_size=2))


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(_step, min_size=1, max_size=30))
def test_register_solo_agrees_with_the_full_walk(steps):
    """Property: whenever register_solo accepts a registration, the full walk on a tracker with
    the same history would have found no dependency, and both trackers end with the same
    writers and live readers. (Tasks finish at random points; both trackers see the same tasks.)"""
    warm, full = HazardTracker(), HazardTracker()
    tasks = []
    for stream, reads, writes, finish in steps:
        for k in finish:
            if k < len(tasks):
                tasks[k].done = True
        t = FakeTask(stream)
        tasks.append(t)
        read_only = [m for m in reads if m not in writes]
        deps_full = full.register(t, reads, writes)
        if warm.register_solo(t, warm.states(read_only), warm.states(writes)):
            assert deps_full == [], (stream, reads, writes)
        else:
            assert ids(warm.register(t, reads, writes)) == ids(deps_full)
        for m in set(reads) | set(writes):
            assert warm.writer_of(m) is full.writer_of(m)
            assert ids(warm.users_of(m)) == ids(full.users_of(m))


# -- the warm path's walk: register_states ---------------------------------------------------------
def walk(tracker, stream, reads=(), writes=(), name=""):
    """register_states as the CUDA warm path calls it after register_solo declined."""
    t = FakeTask(stream, name)
    read_only = [m for m in reads if m not in writes]
    return t, tracker.register_states(t, tracker.states(read_only), tracker.states(writes))


def test_register_states_waits_for_writer_and_readers_of_other_streams():
    """A write waits for the unfinished writer and every unfinished reader of other streams,
    once each (one reader on two written buffers is one dependency); a read waits for the
    writer only; its own stream's entries and finished tasks are never waited for."""
    h = HazardTracker()
    w, _ = reg(h, B, writes=[M])
    r, _ = reg(h, C, reads=[M, N])
    own, _ = reg(h, A, reads=[N])
    done, _ = reg(h, C, writes=[3])
    done.done = True
    t, deps = walk(h, A, reads=[M, 3], writes=[N])
    assert ids(deps) == {id(w), id(r)}          # M's writer; N's reader of C (own reader: no)
    _, deps = walk(h, B, writes=[M, N])
    assert ids(deps) == {id(r), id(t)}          # M's readers C, A; N's writer A (B's own: no)
    assert len(deps) == 2


def test_register_states_makes_the_launch_writer_and_reader():
    """After the walk the launch is the written buffers' writer and a reader of the read ones,
    so a later launch of another stream waits for it."""
    h = HazardTracker()
    reg(h, B, writes=[M])
    t, _ = walk(h, A, reads=[M], writes=[N])
    _, deps = reg(h, C, writes=[M])
    assert t in deps
    _, deps = reg(h, C, reads=[N])
    assert deps == [t]


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(_step, min_size=1, max_size=30))
def test_register_states_agrees_with_the_full_walk(steps):
    """Property: the warm path's registration (register_solo, else register_states) finds the
    same dependencies as the full walk on a tracker with the same history, and both trackers end
    with the same writers and live users."""
    warm, full = HazardTracker(), HazardTracker()
    tasks = []
    for stream, reads, writes, finish in steps:
        for k in finish:
            if k < len(tasks):
                tasks[k].done = True
        t = FakeTask(stream)
        tasks.append(t)
        read_only = [m for m in reads if m not in writes]
        deps_full = full.register(t, reads, writes)
        rs, ws = warm.states(read_only), warm.states(list(dict.fromkeys(writes)))
        if warm.register_solo(t, rs, ws):
            assert deps_full == []
        else:
            deps_warm = warm.register_states(t, rs, ws)
            assert ids(deps_warm) == ids(deps_full)
            assert len(deps_warm) == len(ids(deps_warm))
        for m in set(reads) | set(writes):
            assert warm.writer_of(m) is full.writer_of(m)
            assert ids(warm.users_of(m)) == ids(full.users_of(m))


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(_step, min_size=1, max_size=30), solo_first=st.lists(st.booleans(), min_size=30))
def test_register_states_without_register_solo_agrees_with_the_full_walk(steps, solo_first):
    """Property: register_states is right on its own, also where register_solo would have
    accepted (the warm path skips register_solo for an entry whose last launch had to wait): the
    same dependencies as the full walk, the same writers and live users after."""
    warm, full = HazardTracker(), HazardTracker()
    tasks = []
    for (stream, reads, writes, finish), try_solo in zip(steps, solo_first):
        for k in finish:
            if k < len(tasks):
                tasks[k].done = True
        t = FakeTask(stream)
        tasks.append(t)
        read_only = [m for m in reads if m not in writes]
        deps_full = full.register(t, reads, writes)
        rs, ws = warm.states(read_only), warm.states(list(dict.fromkeys(writes)))
        if try_solo and warm.register_solo(t, rs, ws):
            assert deps_full == []
        else:
            assert ids(warm.register_states(t, rs, ws)) == ids(deps_full)
        for m in set(reads) | set(writes):
            assert warm.writer_of(m) is full.writer_of(m)
            assert ids(warm.users_of(m)) == ids(full.users_of(m))


# -- renewal: register_solo with an owner ---------------------------------------------------------
class Entry:
    """What the CUDA warm path passes as register_solo's owner: one stream, one set of states."""

    def __init__(self, tracker, stream, reads, writes):
        self.stream = stream
        self.mems = set(reads) | set(writes)
        writes = list(dict.fromkeys(writes))
        self.read_states = tracker.states([m for m in dict.fromkeys(reads) if m not in writes])
        self.write_states = tracker.states(writes)

    def fire(self, tracker, name=""):
        t = FakeTask(self.stream, name)
        return t, tracker.register_solo(t, self.read_states, self.write_states, self)


def test_a_repeat_with_nothing_in_between_is_renewed_and_stays_exact():
    """An owner that registers again with no other registration in between moves its task in:
    a later launch of another stream waits for the newest task (not an older one)."""
    h = HazardTracker()
    entry = Entry(h, A, reads=[M], writes=[N])
    reg(h, A, reads=[M], writes=[N])                 # the full walk makes both buffers solo on A
    first, ok1 = entry.fire(h)
    second, ok2 = entry.fire(h)
    assert ok1 and ok2
    _, deps = reg(h, B, reads=[N])
    assert deps == [second]                          # read after the newest write
    _, deps = reg(h, B, writes=[M])
    assert deps == [second]                          # write after the newest read


def test_another_streams_registration_in_between_ends_renewal():
    """A registration of another stream between two repeats (here a read of the buffer the owner
    writes) is seen by the next repeat: it declines (a write after that unfinished read must
    wait), though its owner was the last to succeed before."""
    h = HazardTracker()
    entry = Entry(h, A, reads=[M], writes=[N])
    reg(h, A, reads=[M], writes=[N])
    assert entry.fire(h)[1]
    reader, _ = reg(h, B, reads=[N])
    assert not entry.fire(h)[1]
    _, deps = walk(h, A, reads=[M], writes=[N])
    assert deps == [reader]


def test_a_forgotten_buffer_ends_renewal():
    """``forget`` (a free) between two repeats: the next one takes the full check."""
    h = HazardTracker()
    entry = Entry(h, A, reads=[M], writes=[N])
    reg(h, A, reads=[M], writes=[N])
    assert entry.fire(h)[1]
    h.forget(3)
    assert h.last_solo is None


_renewal_step = st.one_of(
    st.tuples(st.just("entry"), st.integers(0, 3)),
    st.tuples(st.sampled_from(["register", "states", "forget"]), _step),
)
_entry_shape = st.tuples(st.sampled_from([A, B]), st.lists(st.integers(1, 4), max_size=2),
                         st.lists(st.integers(1, 4), min_size=1, max_size=2))


@settings(max_examples=400, deadline=None)
@given(shapes=st.lists(_entry_shape, min_size=4, max_size=4),
       steps=st.lists(_renewal_step, min_size=1, max_size=40))
def test_renewal_agrees_with_the_full_walk(shapes, steps):
    """Property: owners (fixed stream and states, as warm entries) fired in any order among full
    registrations, register_states walks of others and frees: whenever register_solo accepts
    (renewed or not), the full walk on a tracker with the same history finds no dependency, and
    both trackers end every step with the same writers and live users of every buffer."""
    warm, full = HazardTracker(), HazardTracker()
    entries: dict = {}
    tasks = []

    def check():
        for m in range(1, 5):
            assert warm.writer_of(m) is full.writer_of(m)
            assert ids(warm.users_of(m)) == ids(full.users_of(m))

    for kind, arg in steps:
        if kind == "entry":
            if arg not in entries:
                entries[arg] = Entry(warm, *shapes[arg])
            entry = entries[arg]
            stream, reads, writes = shapes[arg]
            t, ok = entry.fire(warm)
            deps_full = full.register(t, reads, writes)
            if ok:
                assert deps_full == [], (arg, shapes[arg])
            else:
                assert ids(warm.register_states(t, entry.read_states, entry.write_states)) == ids(deps_full)
            tasks.append(t)
        else:
            stream, reads, writes, finish = arg
            for k in finish:
                if k < len(tasks):
                    tasks[k].done = True
            if kind == "forget":
                for m in set(reads) | set(writes):
                    warm.forget(m)
                    full.forget(m)
                    # the warm path drops the entries that bind a freed buffer (WarmPath.forget)
                    entries = {k: e for k, e in entries.items() if m not in e.mems}
                continue
            t = FakeTask(stream)
            tasks.append(t)
            deps_full = full.register(t, reads, writes)
            if kind == "register":
                deps_warm = warm.register(t, reads, writes)
            else:           # another launch's warm walk (same task on both trackers)
                writes = list(dict.fromkeys(writes))
                deps_warm = warm.register_states(
                    t, warm.states([m for m in dict.fromkeys(reads) if m not in writes]), warm.states(writes))
            assert ids(deps_warm) == ids(deps_full)
        check()
