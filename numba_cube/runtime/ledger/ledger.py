"""The failure ledger and the execute scope (CONTRACT.md section 4.1).

Launches return nothing; when one fails, the failure is recorded where a later reader will look:
on the buffers the launch did not write. Every byte range of every buffer is, at any moment,
clean, *claimed* by a launch in flight (a provisional failure: "the launch did not complete"), or
failed with a root cause. A reader that finds a failure raises ``LaunchFailure``; a launch that
reads one does not run and points its own outputs at the *same* root cause.

Regions are ``(memory_id, start, stop)`` byte ranges, so a failure on one view of a buffer does not
poison its other views, and a launch that rewrites a failed view repairs exactly that view.

Ordering: the ledger itself takes no position on time. Its callers guarantee that every update to
a region happens in program order for that region (the scheduler orders all writers of a buffer
and its readers; see ``streams/hazards.py``), so "the last record wins" is the right rule. A lock makes
the individual updates atomic because several stream workers may close scopes at once.

One scope implementation serves every backend: without it each backend would copy the same
bookkeeping, and one early return would eventually forget it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterable

from numba_cube.runtime.ledger.failure import Failure, IncompleteLaunch
from numba_cube.runtime.ledger.pending import UNRESOLVED, Pending

__all__ = ["Failure", "Ledger", "ExecuteScope", "failed_writing", "Region", "Pending",
           "pending_inputs"]

Region = tuple  # (memory_id, start_byte, stop_byte)


@dataclass
class _Entry:
    start: int
    stop: int
    failure: Failure          # or a Pending (ledger/pending.py): not a failure until resolved


def _ANY(entry) -> bool:
    return True


class Ledger:
    """Per buffer, the byte ranges that carry a failure. Absent means clean."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries: dict[object, list[_Entry]] = {}
        # The same dict, public for one use: its truth says whether anything failed anywhere
        # (or is pending: its keys are the memories with any entry), which a hot path (the CUDA
        # warm launch) reads without the lock or a call, as ``first_failure`` does. Never
        # rebound; read it, never change it.
        self.failed_memories = self._entries
        #: whether a ``Pending`` state was ever recorded (set once; only the CUDA backend makes
        #: them, so everywhere else the scopes never look for one)
        self.has_pending = False
        #: the task whose dispatch is running now, set by an executor that dispatches inline (the
        #: CUDA streams) so that a pending state made by the execute scope knows its position
        self.dispatching = None
        #: bumped by every change of an entry: equal numbers mean nothing changed in between
        #: (the CUDA warm path renews a pending state on that: ``warm_checks.py``)
        self.version = 0

    def failure_of(self, region: Region) -> Failure | None:
        """A failure on any byte of ``region``; a settled one is preferred over a claim in flight.
        A ``Pending`` state is not a failure (see ``pending_of``, ``settle``)."""
        mem, start, stop = region
        found = None
        with self._lock:
            for e in self._entries.get(mem, ()):
                if e.start < stop and start < e.stop:
                    f = e.failure
                    if type(f) is Pending:
                        continue
                    if not f.in_flight:
                        return f
                    found = f
        return found

    def pending_of(self, regions: Iterable[Region]) -> tuple:
        """The distinct ``Pending`` states on any byte of ``regions``, in region order."""
        found: dict = {}
        if not self.has_pending or not self._entries:
            return ()
        with self._lock:
            for mem, start, stop in regions:
                for e in self._entries.get(mem, ()):
                    if type(e.failure) is Pending and e.start < stop and start < e.stop:
                        found[e.failure] = None
        return tuple(found)

    def inputs_of(self, reads: Iterable[Region], writes: Iterable[Region]) -> tuple | None:
        """One look for a launch about to run (the CUDA warm path): None if a settled failure
        or a claim sits on ``reads`` or ``writes`` (the general path decides then), else the
        distinct ``Pending`` states on ``reads`` in read order."""
        found: dict = {}
        with self._lock:
            entries = self._entries
            for regions, reading in ((reads, True), (writes, False)):
                for mem, start, stop in regions:
                    for e in entries.get(mem, ()):
                        if e.start < stop and start < e.stop:
                            f = e.failure
                            if type(f) is not Pending:
                                return None
                            if reading:
                                found[f] = None
        return tuple(found)

    def settle(self, region: Region, wait: bool = False) -> Failure | None:
        """Resolve the ``Pending`` states on ``region`` (``ledger/pending.py``): those that failed
        become their ``Failure`` here, clean ones are dropped. Returns a failure found, else
        None (also for states still unresolved, which are not failures yet). ``wait``: the
        caller waited for the region's writers, so a state still unresolved is waited for (its
        launch completed before those writers; only the bookkeeping did not see it). Call it
        where no launch can run meanwhile (the device lock): a state resolved here must not be
        renewed for a later launch at the same time."""
        failure = None
        for node in self.pending_of((region,)):
            got = node.resolve()
            if got is UNRESOLVED and wait:
                node.wait()
                got = node.resolve(complete=True)
            if got is UNRESOLVED:
                continue
            self._settled(region[0], node, got)
            if got is not None and failure is None:
                failure = got
        return failure

    def _settled(self, mem, node: Pending, outcome) -> None:
        """Replace ``node``'s entries of ``mem`` by its outcome (a Failure, or clean: removed)."""
        with self._lock:
            self.version += 1
            entries = self._entries.get(mem)
            if entries is None:
                return
            if outcome is None:
                self._store(mem, [e for e in entries if e.failure is not node])
            else:
                for e in entries:
                    if e.failure is node:
                        e.failure = outcome

    def first_failure(self, regions: Iterable[Region]) -> Failure | None:
        if not self._entries:
            return None   # nothing failed anywhere (a read of a dict's size needs no lock)
        for r in regions:
            f = self.failure_of(r)
            if f is not None:
                return f
        return None

    def settled_failure(self, regions: Iterable[Region]) -> Failure | None:
        """A failure on any byte of ``regions`` that is not a claim in flight (a launch still
        running) nor ``Pending``: what a launch queued now would inherit whatever happens."""
        if not self._entries:
            return None
        with self._lock:
            for mem, start, stop in regions:
                for e in self._entries.get(mem, ()):
                    f = e.failure
                    if e.start < stop and start < e.stop and type(f) is not Pending \
                            and not f.in_flight:
                        return f
        return None

    def record(self, regions: Iterable[Region], failure: Failure | None) -> None:
        """Make ``failure`` (or clean, for ``None``) the state of every byte of ``regions``."""
        with self._lock:
            self.version += 1
            for mem, start, stop in regions:
                entries = self._entries.get(mem)
                if entries is None:               # the common case: a clean buffer
                    if failure is not None:
                        self._entries[mem] = [_Entry(start, stop, failure)]
                    continue
                if len(entries) == 1 and entries[0].start == start and entries[0].stop == stop:
                    # The next common one: the buffer's one entry, on these very bytes, replaced.
                    old = entries[0].failure
                    if type(old) is Pending:
                        old.sealed = True         # rewritten (see _cut)
                    if failure is None:
                        del self._entries[mem]
                    else:
                        entries[0] = _Entry(start, stop, failure)
                    continue
                kept = self._cut(mem, start, stop, _ANY)
                if failure is not None:
                    kept.append(_Entry(start, stop, failure))
                self._store(mem, kept)
            if type(failure) is Pending:
                self.has_pending = True

    def release(self, regions: Iterable[Region], claim: Failure) -> None:
        """Clear the bytes of ``regions`` that still carry ``claim`` (and nothing else)."""
        with self._lock:
            self.version += 1
            for mem, start, stop in regions:
                entries = self._entries.get(mem)
                if entries is None:
                    continue
                if len(entries) == 1 and entries[0].failure is claim and entries[0].start >= start \
                        and entries[0].stop <= stop:
                    del self._entries[mem]        # the common case: only this claim was there
                    continue
                self._store(mem, self._cut(mem, start, stop, lambda e: e.failure is claim))

    def forget(self, memory_id: object) -> None:
        """The buffer is freed: its entries die with it."""
        with self._lock:
            self.version += 1
            for e in self._entries.pop(memory_id, ()):
                if type(e.failure) is Pending:
                    e.failure.sealed = True

    def __len__(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._entries.values())

    # -- helpers (called with the lock held) --------------------------------------------------
    def _cut(self, mem, start, stop, matches) -> list[_Entry]:
        """The entries of ``mem`` with [start, stop) removed from those that ``matches``."""
        out = []
        for e in self._entries.get(mem, ()):
            if e.stop <= start or stop <= e.start or not matches(e):
                out.append(e)
                continue
            if type(e.failure) is Pending:
                # Overwritten somewhere: it no longer stands for all its write set, so it may
                # not be renewed for another launch (ledger/pending.py, "sealed").
                e.failure.sealed = True
            if e.start < start:
                out.append(_Entry(e.start, start, e.failure))
            if stop < e.stop:
                out.append(_Entry(stop, e.stop, e.failure))
        return out

    def _store(self, mem, entries) -> None:
        if entries:
            self._entries[mem] = entries
        else:
            self._entries.pop(mem, None)


class ExecuteScope:
    """Brackets one dispatch: skip-or-enter is decided in the constructor.

    Use::

        with ExecuteScope(ledger, kernel_id, reads, writes) as scope:
            if scope.entered:
                try:
                    run()
                except KernelError as e:     # an expected failure of the work
                    scope.fail(e)

    - **Skip** (an input carries a failure): the body must not run; the write set is pointed at
      that same root cause (``on_skip`` tells the stream, e.g. to doom a graph recording).
    - **Enter**: the write set is claimed with a provisional failure first, then the body runs.
      On normal exit the claim is released, or replaced by the error given to ``fail``. If the body
      raises, the claim stays: the buffers are marked as not written, which is the truth.
    - **Pending** (``ledger/pending.py``): an input is ``Pending`` (not known failed), or the body says
      its own outcome is known later (``checked_later``): the body runs, and on normal exit the
      write set is left ``Pending`` on those inputs and that outcome instead of clean.

    Why decide in the constructor: a scope that entered and then found it should have skipped
    would have its provisional claim overwritten by the propagated failure, and the exit that
    should clean it up is on the path that no longer runs. Why claim on entry rather than record
    on exit: the body may return early or raise, and a record on exit misses exactly those paths.
    """

    # A plain class with slots, not a dataclass: every dispatch makes one, so its construction is
    # on the launch path.
    __slots__ = ("ledger", "kernel_id", "reads", "writes", "on_skip", "inherited", "_claim", "_error",
                 "_parents", "_run", "pending")

    def __init__(self, ledger: Ledger, kernel_id: str, reads: tuple, writes: tuple,
                 on_skip: Callable[[Failure], None] | None = None):
        self.ledger = ledger
        self.kernel_id = kernel_id
        self.reads = reads
        self.writes = writes
        self.on_skip = on_skip
        self._error: BaseException | None = None
        self._claim: Failure | None = None
        self._parents = ()
        self._run = None
        #: the ``Pending`` state the scope left its write set in (ledger/pending.py), or None
        self.pending: Pending | None = None
        inherited = ledger.first_failure(reads)
        if inherited is None and ledger.has_pending:
            inherited, self._parents = pending_inputs(ledger, reads)
        self.inherited = inherited
        if inherited is not None:
            ledger.record(writes, inherited.through(kernel_id))
            if on_skip is not None:
                on_skip(inherited)
        else:
            self._claim = Failure.claim(kernel_id)
            ledger.record(writes, self._claim)

    @property
    def entered(self) -> bool:
        return self.inherited is None

    def fail(self, error: BaseException) -> None:
        """The body reports that the work failed (the driver refused it, the kernel raised)."""
        self._error = error

    def checked_later(self, run) -> None:
        """The body started work whose own outcome is known only once it completes (``run``: a
        ``pending.Run``, e.g. a GPU launch's error word): the write set is left ``Pending``."""
        self._run = run

    def __enter__(self) -> "ExecuteScope":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._claim is None:
            return False  # skipped
        if exc_type is not None:
            self._claim.abandoned[0] = True  # the body raised: the claims stay, for good
            return False
        if self._error is not None:
            self.ledger.record(self.writes, Failure(self._error, self.kernel_id, (self.kernel_id,)))
        elif self._parents or self._run is not None:
            # It ran, but on inputs, or with an outcome, nobody checked yet: Pending, with the
            # position of its launch (the task the executor is dispatching).
            task = self.ledger.dispatching
            self.pending = Pending(self.kernel_id, self._parents, self._run, task,
                                   task.seq if task is not None else 0)
            self.ledger.record(self.writes, self.pending)
        else:
            self.ledger.release(self.writes, self._claim)
        return False


def pending_inputs(ledger: Ledger, reads: tuple, found: tuple | None = None,
                   frozen: bool = True) -> tuple:
    """``(inherited, parents)`` for a launch reading ``reads``: the ``Pending`` states on them
    (read order; ``found``, where the caller looked already), except those already known clean;
    or, when the first one decided is known failed (nothing undecided before it), that failure,
    which the launch then inherits as it inherits a settled one (it is skipped). ``frozen``:
    undecided states are inherited as frozen copies where they can be (``Pending.inherited``),
    else sealed (a state that will stand for later launches of a kernel reading what it writes
    must keep its parents' meaning for all of them)."""
    parents = []
    for node in (found if found is not None else ledger.pending_of(reads)):
        if node.outcome is None and not node.known_complete():
            # undecided: the usual case, no resolve
            if frozen:
                parents.append(node.inherited())
            else:
                node.sealed = True
                parents.append(node)
            continue
        got = node.resolve()
        if got is UNRESOLVED:
            parents.append(node)
        elif got is not None:
            if not parents:
                return got, ()
            parents.append(node)
    return None, tuple(parents)


def failed_writing(ledger: Ledger, kernel_id: str, writes: Iterable[Region],
                   error: BaseException) -> Failure:
    """Work that never started (compile failure, unresolvable count): claim its outputs anyway.

    The destinations' *contents* stay as they were, but the caller asked for them to be written
    and they were not, so a reader must hear about it.
    """
    failure = Failure(error, kernel_id, (kernel_id,))
    ledger.record(writes, failure)
    return failure
