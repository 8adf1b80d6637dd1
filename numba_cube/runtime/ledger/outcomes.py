"""Where a launch's failure goes when no buffer can carry it (CONTRACT.md section 4.3).

Failures live on the buffers a launch should have written. A launch that writes no buffer (only
scalars, or buffers it only reads) has nowhere to put one, so its failure (the kernel raised, an
out-of-bounds read under ``boundscheck``, a compile failure, a refused geometry) would vanish.
Two ways out, decided per launch on the server when it knows the launch's write set:

- **the launch's own outcome** (``LaunchOutcome``), for a caller that waits for that launch: a
  numba-style ``kernel[count, dim](...)`` is synchronous by contract, so it submits blocking and
  raises its own failure right there, written or not (``Client.launch_and_wait``);
- **the device's log of unrecorded failures** (``UnrecordedFailures``), for ``client.launch``,
  which returns before the launch ran. Each entry is reported once, as an
  ``UnrecordedFailureWarning`` issued with ``warnings.warn``.

Where the warning surfaces. The failure is found on a stream worker (CPU) or inside the device
lock (CUDA), where a warning would reach nobody: with ``-W error`` it would become an exception
in a worker thread (which the runtime treats as a broken device), and a ``catch_warnings`` block
of the user's never sees another thread's warnings. So it is issued on a thread of the user's,
at a call that waits for the device:

- the launching thread's next ``read``, ``read_many`` or ``sync_buffers`` reports that thread's
  failures (those found by then);
- any thread's ``sync()`` reports every one: it waits for all work on the device, so it is the
  one call that has seen every outcome, and it reports failures whose launching thread ended or
  never waits (a pool thread that only launches);
- whatever is still unreported when the interpreter exits is reported then.

``LaunchRouting`` (mixed into the policy server) is the server's side: which of the two a
launch's dispatch reports to (``reporter``, which the mechanism asks when it makes a dispatch),
the body of a launch that cannot run at all (``_refused_run``), and a skipped launch's report to
the dry runs that skipped it (``_skip``).

A launch whose outcome is known only once it completes (a GPU kernel that may raise, or one that
read what such a kernel wrote: ``ledger/pending.py``) hands either of them its ``Pending`` state instead
(``pend``): the waiting caller resolves it after its wait (``DeviceServer.outcome_of``); the log
keeps it until a report finds it resolved (clean ones are dropped unreported), and the reports
of ``sync()`` and of interpreter exit, which come after every launch, wait for it.

An entry leaves the log only when its warning was issued; if issuing raises (``-W error``), the
entries not yet reported stay for the next call. The log is bounded: past ``MAX_KEPT`` entries it
counts the rest and reports their number, so a loop of failing launches that never waits cannot
grow it without bound, and still loses nothing silently.
"""

from __future__ import annotations

import atexit
import sys
import threading
import warnings
import weakref
from typing import Callable

from numba_cube.errors import UnrecordedFailureWarning
from numba_cube.runtime.ledger.ledger import Failure, failed_writing
from numba_cube.runtime.ledger.pending import UNRESOLVED
from numba_cube.runtime.launch.requests import LaunchRequest

__all__ = ["LaunchOutcome", "UnrecordedFailures", "LaunchRouting", "MAX_KEPT"]

#: Entries kept per device before the rest are only counted.
MAX_KEPT = 1000

#: Every log with something in it, for the report at interpreter exit.
_nonempty: "weakref.WeakSet[UnrecordedFailures]" = weakref.WeakSet()


class LaunchOutcome:
    """The failure of one launch, own or inherited (``None`` if it ran and completed), for the
    caller that waits for it. Called by the dispatch as ``outcome(failure, inherited)``, or told
    the launch's ``Pending`` state (``pend``), which the caller resolves after its wait."""

    __slots__ = ("failure", "pending")

    def __init__(self):
        self.failure: Failure | None = None
        self.pending = None

    def __call__(self, failure: Failure, inherited: bool) -> None:
        if self.failure is None:
            self.failure = failure

    def pend(self, node) -> None:
        self.pending = node


class _Reporter:
    """The report function of a launch of thread ``issuer`` that writes nothing (``reporter``)."""

    __slots__ = ("log", "issuer")

    def __init__(self, log: "UnrecordedFailures", issuer: int):
        self.log = log
        self.issuer = issuer

    def __call__(self, failure: Failure, inherited: bool) -> None:
        # An inherited failure is not logged: it already lives on the input that carried it.
        if not inherited:
            self.log.add(failure, self.issuer)

    def pend(self, node) -> None:
        self.log.add(node, self.issuer)


class UnrecordedFailures:
    """One device's failures that no buffer carries, until a client reports them (thread-safe:
    stream workers add, issuing threads take)."""

    def __init__(self, device: str):
        self.device = device
        self._lock = threading.Lock()
        # (launching thread's ident, failure or Pending state)
        self._entries: list[tuple[int, Failure]] = []
        self._dropped = 0
        #: ``resolve(node, wait)`` -> Failure, None or UNRESOLVED: the server's, under its lock
        #: (``DeviceServer.outcome_of``); None where no backend makes pending states
        self.resolve = None

    def __bool__(self) -> bool:
        # Read without the lock on every wait (a list's length is read atomically).
        return bool(self._entries) or self._dropped > 0

    def reporter(self, issuer: int) -> Callable[[Failure, bool], None]:
        """The dispatch's report function for a launch of thread ``issuer`` that writes nothing.
        An inherited failure is not logged: it already lives on the input that carried it."""
        return _Reporter(self, issuer)

    def add(self, failure: Failure, issuer: int) -> None:
        with self._lock:
            if len(self._entries) < MAX_KEPT:
                self._entries.append((issuer, failure))
            else:
                self._dropped += 1
        _nonempty.add(self)

    def _take_one(self, issuer: int | None, wait: bool) -> Failure | None:
        """The oldest failure of ``issuer`` (any thread's for None), taken out of the log;
        pending states met on the way are resolved (``wait``: waiting for their launches) and
        dropped when clean, kept while unresolved."""
        skip = 0
        while True:
            with self._lock:
                found = None
                seen = 0
                for i, (who, failure) in enumerate(self._entries):
                    if issuer is None or who == issuer:
                        if seen == skip:
                            found = i
                            break
                        seen += 1
                if found is None:
                    return None
                failure = self._entries[found][1]
                if type(failure) is Failure:
                    del self._entries[found]
                    return failure
            # A pending state: resolved outside this lock (the server's lock is taken there).
            got = self.resolve(failure, wait) if self.resolve is not None else UNRESOLVED
            if got is UNRESOLVED:
                skip += 1
                continue
            with self._lock:
                self._entries = [e for e in self._entries if e[1] is not failure]
            if got is not None:
                return got

    def report(self, issuer: int | None, stacklevel: int) -> None:
        """Warn about each failure of thread ``issuer`` (every thread's for ``None``), oldest
        first. ``stacklevel`` is counted from the caller of this method. Every thread's report
        (``sync()``, interpreter exit) comes after all launches: it waits for pending ones."""
        while True:
            failure = self._take_one(issuer, wait=issuer is None)
            if failure is None:
                break
            warnings.warn(_warning(failure, self.device), stacklevel=stacklevel + 1)
        if issuer is None and self._dropped:
            with self._lock:
                dropped, self._dropped = self._dropped, 0
            warnings.warn(UnrecordedFailureWarning(
                f"{dropped} more launch(es) on {self.device} failed without a buffer to record the "
                f"failure on (only the first {MAX_KEPT} unreported ones are kept)"),
                stacklevel=stacklevel + 1)


def _warning(failure: Failure, device: str) -> UnrecordedFailureWarning:
    exc = failure.to_exception()
    return UnrecordedFailureWarning(
        f"launch of {failure.kernel_id!r} on {device} failed and writes no buffer to record the "
        f"failure on: {type(failure.root).__name__}: {failure.root}", exc)


class LaunchRouting:
    """Where a server sends what a launch leads to (mixed into ``DeviceServer``). Relies on
    ``ledger``, ``unrecorded``, ``counters``, ``bound_launch(req)`` (``.error`` is its compile
    failure or None) and the mechanism's ``refusal(req, bound)``."""

    def _skip(self, req: LaunchRequest) -> None:
        """A launch a dry run skips (step 3): compile it and fill every cache, claim, queue and
        touch nothing; tell the dry runs that skipped it whether it would have failed before
        running (it does not compile, or its geometry is refused), also if this raises."""
        error = None
        try:
            bound = self.bound_launch(req)
            error = bound.error if bound.error is not None else self.mechanism.refusal(req, bound)
            if isinstance(error, KeyboardInterrupt):
                # An interrupted compile (nothing cached; a dry run claims nothing): the
                # caller's interrupt, raised at its call.
                self.handled_interrupt = error
                raise error
            self.counters["skipped"] += 1
        except BaseException as exc:
            error = exc
            raise
        finally:
            if req.skipped is not None:
                req.skipped.handled(error)
        return None

    def reporter(self, req: LaunchRequest, writes: tuple):
        """Where the dispatch reports a failure that its write set cannot carry alone: the
        launch's own outcome if its caller waits for it; the device's log of unrecorded failures
        if it writes nothing; else nowhere (the ledger has it)."""
        if req.outcome is not None:
            return req.outcome
        if writes:
            return None
        return self.unrecorded.reporter(req.issuer)

    def _refused_run(self, req: LaunchRequest, writes: tuple, error: BaseException):
        """The body of a launch that cannot run (compile failure, refused geometry): it fails its
        write set, in stream order, and reports the failure where the ledger alone cannot."""
        ledger = self.ledger
        kid = req.kernel.id
        report = self.reporter(req, writes)

        def refused():
            failure = failed_writing(ledger, kid, writes, error)
            if report is not None:
                report(failure, False)

        return refused


@atexit.register
def _report_at_exit() -> None:
    """The last chance: report what nobody's ``sync()`` reported. Here a warning turned into an
    error (``-W error``) cannot stop anything any more, so it is printed instead."""
    for log in list(_nonempty):
        while True:
            try:
                log.report(None, stacklevel=1)
                break
            except Warning as exc:
                print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
