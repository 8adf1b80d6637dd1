"""The ledger's pending state (``runtime/ledger/pending.py``, CONTRACT.md section 4.1 "Pending"), as units.

A GPU launch of a kernel that may raise, and every launch that reads what such a launch wrote,
leaves its write set ``Pending``: not a failure, not clean, decided once the launches it depends
on are known complete. The runs and tasks here are stand-ins for the CUDA backend's error words
and stream positions; nothing here needs a device.
"""

from __future__ import annotations

import pytest

from numba_cube.runtime.ledger.ledger import ExecuteScope, Failure, Ledger
from numba_cube.runtime.ledger.pending import UNRESOLVED, Pending, Run

MEM, OTHER = 1, 2
R, R2 = (MEM, 0, 64), (OTHER, 0, 64)


class Stream:
    def __init__(self):
        self.done_seq = 0


class Task:
    """A launch's position: complete once the stream's ``done_seq`` reaches ``seq``."""

    def __init__(self, stream: Stream, seq: int = 1):
        self.cs = stream
        self.seq = seq
        self.waited = 0

    def wait(self):
        self.waited += 1
        self.cs.done_seq = max(self.cs.done_seq, self.seq)


class FakeRun(Run):
    """An error word that says ``exc`` (None: clean) once its launch is complete; ``freezes``:
    it can stand for its last launch alone (``Run.frozen``)."""

    def __init__(self, exc=None, after=0, inheriting=1, freezes=False):
        self.exc, self.after, self._inheriting, self.freezes = exc, after, inheriting, freezes

    def frozen(self):
        return FakeRun(self.exc, self.after) if self.freezes else None

    def outcome(self, complete):
        if not complete:
            return UNRESOLVED
        return None if self.exc is None else (self.exc, self.after)

    def inheriting(self):
        return self._inheriting


def node(kid, run=None, parents=(), done=False):
    stream = Stream()
    task = Task(stream)
    if done:
        stream.done_seq = 1
    return Pending(kid, parents, run, task, task.seq)


def test_a_pending_state_is_not_a_failure():
    """``failure_of``/``first_failure`` do not report it (a launch reading it runs); it is
    found by ``pending_of``."""
    ledger = Ledger()
    p = node("k", FakeRun(ValueError("x")))
    ledger.record([R], p)
    assert ledger.has_pending
    assert ledger.failure_of(R) is None and ledger.first_failure([R]) is None
    assert ledger.pending_of([R2, R]) == (p,)


def test_own_exception_once_complete_and_kept():
    """Unresolved while its launch is not known complete; then its run's exception with a chain
    of one, the same object every time (parents and run dropped)."""
    p = node("k", FakeRun(ValueError("boom")))
    assert p.resolve() is UNRESOLVED
    p.task.cs.done_seq = 1
    f = p.resolve()
    assert isinstance(f, Failure) and str(f.root) == "boom" and f.chain == ("k",)
    assert p.resolve() is f and p.run is None and p.sealed


def test_settle_waits_only_when_asked_and_rewrites_the_ledger():
    """``settle`` without ``wait`` leaves an unresolved state (a claim in flight is not a
    failure); with it (the reader waited for the writers) it waits and records the failure,
    which ``failure_of`` then reports; a clean state is removed."""
    ledger = Ledger()
    bad, good = node("bad", FakeRun(ValueError("x"))), node("good", FakeRun(None))
    ledger.record([R], bad)
    ledger.record([R2], good)
    task = bad.task
    assert ledger.settle(R) is None and ledger.pending_of([R]) == (bad,)
    f = ledger.settle(R, wait=True)
    assert task.waited == 1 and ledger.failure_of(R) is f
    assert ledger.settle(R2, wait=True) is None and len(ledger) == 1


def test_a_failed_input_is_inherited_with_the_chain():
    """A launch that read a pending buffer whose writer raised counts as skipped: its writes
    carry the same root, one launch further down the chain; completion of the downstream launch
    implies its inputs' (it waited for them on the device)."""
    a = node("a", FakeRun(ValueError("root")))
    b = node("b", None, (a,))
    c = node("c", FakeRun(KeyError("garbage")), (b,), done=True)
    fc = c.resolve()
    assert fc.chain == ("a", "b", "c") and type(fc.root) is ValueError
    assert a.resolve().root is fc.root and b.resolve().chain == ("a", "b")


def test_the_first_input_in_read_order_decides():
    """With an earlier input undecided, a later failed one does not decide yet (on the CPU the
    first failed input in read order is the root)."""
    first, second = node("p1", FakeRun(None)), node("p2", FakeRun(OSError("late")), done=True)
    child = node("k", None, (first, second))
    assert child.resolve() is UNRESOLVED
    first.task.cs.done_seq = 1
    assert child.resolve().root.args == ("late",)


def test_repeated_self_reading_launches_lengthen_the_chain():
    """A state standing for n launches of a kernel that reads what it writes passes an input's
    failure through each of them (``Run.inheriting``)."""
    a = node("a", FakeRun(ValueError("x")), done=True)
    k = node("k", FakeRun(None, inheriting=3), (a,), done=True)
    assert k.resolve().chain == ("a", "k", "k", "k")


def test_long_chains_resolve_without_recursion():
    """Thousands of launches between two reads: resolution is iterative."""
    top = node("k0", FakeRun(ValueError("deep")))
    for i in range(1, 5000):
        top = node(f"k{i}", None, (top,))
    top.task.cs.done_seq = 1
    f = top.resolve(complete=True)
    assert f.kernel_id == "k0" and len(f.chain) == 5000


def test_a_state_is_sealed_when_cut_looked_at_or_forgotten():
    """Sealed: no mechanism may let it stand for another launch once its bytes were rewritten,
    somebody resolved it, or its buffer was freed."""
    ledger = Ledger()
    cut, seen, freed = node("a"), node("b", FakeRun(None)), node("c")
    ledger.record([(MEM, 0, 64)], cut)
    ledger.record([(MEM, 0, 8)], None)
    ledger.record([R2], freed)
    ledger.forget(OTHER)
    seen.resolve()
    assert cut.sealed and seen.sealed and freed.sealed


def test_inheriting_takes_a_frozen_copy_where_it_can():
    """A launch reading a state that stands for its last launch alone inherits a frozen copy
    (the state stays open: its producer may renew it); one whose run cannot be frozen is
    inherited itself, sealed."""
    open_node = node("p", FakeRun(ValueError("x"), freezes=True))
    copy = open_node.inherited()
    assert copy is not open_node and not open_node.sealed
    assert copy.kernel_id == "p" and copy.task is open_node.task and copy.seq == open_node.seq
    fixed = node("q", FakeRun(None))
    assert fixed.inherited() is fixed and fixed.sealed


def test_execute_scope_runs_on_a_pending_input_and_leaves_its_writes_pending():
    """The launch is entered (its input is not known failed); on exit its write set is pending
    on that input, at the position of the task being dispatched; with an outcome checked later
    (``checked_later``) on that too."""
    ledger = Ledger()
    upstream = node("a", FakeRun(None))
    ledger.record([R], upstream)
    task = Task(Stream(), seq=7)
    ledger.dispatching = task
    with ExecuteScope(ledger, "b", (R,), (R2,)) as scope:
        assert scope.entered
        scope.checked_later(FakeRun(KeyError("own")))
    state, = ledger.pending_of([R2])
    assert state is scope.pending and state.parents == (upstream,)
    assert state.task is task and state.seq == 7


def test_execute_scope_skips_a_pending_input_known_failed():
    """An input pending on a launch already known complete and failed is a failed input: the
    launch is skipped and inherits it, as for a settled failure."""
    ledger = Ledger()
    ledger.record([R], node("a", FakeRun(ValueError("known")), done=True))
    with ExecuteScope(ledger, "b", (R,), (R2,)) as scope:
        assert not scope.entered
    assert ledger.failure_of(R2).chain == ("a", "b")


def test_scopes_never_look_for_pending_states_where_none_was_made(monkeypatch):
    """A backend that makes none (the CPU) pays nothing: the scope does not ask."""
    ledger = Ledger()
    monkeypatch.setattr(ledger, "pending_of", lambda regions: pytest.fail("asked"))
    with ExecuteScope(ledger, "k", (R,), (R2,)) as scope:
        assert scope.entered
    assert scope.pending is None and len(ledger) == 0
