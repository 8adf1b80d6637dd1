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
and its readers; see ``hazards.py``), so "the last record wins" is the right rule. A lock makes
the individual updates atomic because several stream workers may close scopes at once.

One scope implementation serves every backend: without it each backend would copy the same
bookkeeping, and one early return would eventually forget it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterable

from ..errors import LaunchFailure

__all__ = ["Failure", "Ledger", "ExecuteScope", "failed_writing", "Region"]

Region = tuple  # (memory_id, start_byte, stop_byte)


class IncompleteLaunch(RuntimeError):
    """The provisional root of a claim: the launch started and has not (yet) completed."""

    def __str__(self) -> str:
        # Made with just the kernel id (a claim is made per dispatch: no string formatting there).
        return f"launch of {self.args[0]} did not complete" if self.args else "launch did not complete"


@dataclass(frozen=True, eq=False)
class Failure:
    """A root cause, the kernel that caused it, and the launches it travelled through.

    Compared by identity: a scope releases only *its own* claim, never a newer record that
    happens to carry the same exception.
    """

    root: BaseException
    kernel_id: str | None
    chain: tuple = ()
    provisional: bool = False
    # For a provisional claim: [True] once the body that made it raised (the claim then stays for
    # good). A provisional claim whose body is still running is *in flight*: a reader that is not
    # ordered after that launch (it waited for the writers it is ordered after) must not report
    # it, or a read racing another thread's later launch would see a spurious failure.
    abandoned: list | None = None

    @classmethod
    def claim(cls, kernel_id: str) -> "Failure":
        """A launch's provisional claim (``ExecuteScope``): ``Failure(IncompleteLaunch(kernel_id),
        kernel_id, (kernel_id,), provisional=True, abandoned=[False])``, the same fields of a new
        object, set straight into its ``__dict__``: a frozen dataclass's ``__init__`` sets each
        field through ``object.__setattr__``, which was a third of a graph replay's execute scope
        (every dispatch and every replay makes one)."""
        claim = object.__new__(cls)
        fields = claim.__dict__
        fields["root"] = IncompleteLaunch(kernel_id)
        fields["kernel_id"] = kernel_id
        fields["chain"] = (kernel_id,)
        fields["provisional"] = True
        fields["abandoned"] = [False]
        return claim

    @property
    def in_flight(self) -> bool:
        return self.provisional and not (self.abandoned and self.abandoned[0])

    def through(self, kernel_id: str) -> "Failure":
        """The same root cause, inherited by one more launch (it was skipped)."""
        return Failure(self.root, self.kernel_id, self.chain + (kernel_id,), self.provisional,
                       self.abandoned)

    def to_exception(self) -> LaunchFailure:
        exc = LaunchFailure(self.root, self.kernel_id, self.chain)
        exc.__cause__ = self.root
        return exc


@dataclass
class _Entry:
    start: int
    stop: int
    failure: Failure


def _ANY(entry) -> bool:
    return True


class Ledger:
    """Per buffer, the byte ranges that carry a failure. Absent means clean."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries: dict[object, list[_Entry]] = {}
        # The same dict, public for one use: its truth says whether anything failed anywhere,
        # which a hot path (the CUDA warm launch) reads without the lock or a call, as
        # ``first_failure`` does. Never rebound; read it, never change it.
        self.failed_memories = self._entries

    def failure_of(self, region: Region) -> Failure | None:
        """A failure on any byte of ``region``; a settled one is preferred over a claim in flight."""
        mem, start, stop = region
        found = None
        with self._lock:
            for e in self._entries.get(mem, ()):
                if e.start < stop and start < e.stop:
                    if not e.failure.in_flight:
                        return e.failure
                    found = e.failure
        return found

    def first_failure(self, regions: Iterable[Region]) -> Failure | None:
        if not self._entries:
            return None   # nothing failed anywhere (a read of a dict's size needs no lock)
        for r in regions:
            f = self.failure_of(r)
            if f is not None:
                return f
        return None

    def record(self, regions: Iterable[Region], failure: Failure | None) -> None:
        """Make ``failure`` (or clean, for ``None``) the state of every byte of ``regions``."""
        with self._lock:
            for mem, start, stop in regions:
                if mem not in self._entries:      # the common case: a clean buffer
                    if failure is not None:
                        self._entries[mem] = [_Entry(start, stop, failure)]
                    continue
                kept = self._cut(mem, start, stop, _ANY)
                if failure is not None:
                    kept.append(_Entry(start, stop, failure))
                self._store(mem, kept)

    def release(self, regions: Iterable[Region], claim: Failure) -> None:
        """Clear the bytes of ``regions`` that still carry ``claim`` (and nothing else)."""
        with self._lock:
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
            self._entries.pop(memory_id, None)

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

    Why decide in the constructor: a scope that entered and then found it should have skipped
    would have its provisional claim overwritten by the propagated failure, and the exit that
    should clean it up is on the path that no longer runs. Why claim on entry rather than record
    on exit: the body may return early or raise, and a record on exit misses exactly those paths.
    """

    # A plain class with slots, not a dataclass: every dispatch makes one, so its construction is
    # on the launch path.
    __slots__ = ("ledger", "kernel_id", "reads", "writes", "on_skip", "inherited", "_claim", "_error")

    def __init__(self, ledger: Ledger, kernel_id: str, reads: tuple, writes: tuple,
                 on_skip: Callable[[Failure], None] | None = None):
        self.ledger = ledger
        self.kernel_id = kernel_id
        self.reads = reads
        self.writes = writes
        self.on_skip = on_skip
        self._error: BaseException | None = None
        self._claim: Failure | None = None
        self.inherited = ledger.first_failure(reads)
        if self.inherited is not None:
            ledger.record(writes, self.inherited.through(kernel_id))
            if on_skip is not None:
                on_skip(self.inherited)
        else:
            self._claim = Failure.claim(kernel_id)
            ledger.record(writes, self._claim)

    @property
    def entered(self) -> bool:
        return self.inherited is None

    def fail(self, error: BaseException) -> None:
        """The body reports that the work failed (the driver refused it, the kernel raised)."""
        self._error = error

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
        else:
            self.ledger.release(self.writes, self._claim)
        return False


def failed_writing(ledger: Ledger, kernel_id: str, writes: Iterable[Region],
                   error: BaseException) -> Failure:
    """Work that never started (compile failure, unresolvable count): claim its outputs anyway.

    The destinations' *contents* stay as they were, but the caller asked for them to be written
    and they were not, so a reader must hear about it.
    """
    failure = Failure(error, kernel_id, (kernel_id,))
    ledger.record(writes, failure)
    return failure
