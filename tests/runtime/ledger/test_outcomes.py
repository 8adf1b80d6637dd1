"""The log of failures no buffer carries (runtime/ledger/outcomes.py), as a unit: who gets which
failure reported, that nothing leaves it unreported (also when reporting raises), and that it is
bounded without losing count. The end-to-end contract is in test_lost_failures.py."""

from __future__ import annotations

import threading
import warnings

import pytest

from numba_cube import LaunchFailure, UnrecordedFailureWarning
from numba_cube.runtime.ledger.ledger import Failure
from numba_cube.runtime.ledger.outcomes import MAX_KEPT, LaunchOutcome, UnrecordedFailures


def _failure(i: int) -> Failure:
    return Failure(ValueError(f"failure {i}"), f"k{i}", (f"k{i}",))


def _reported(log, issuer):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        log.report(issuer, stacklevel=1)
    return [w.message for w in seen]


def test_each_failure_is_reported_once_to_its_thread_or_to_everyone():
    """report(issuer) reports that thread's failures, oldest first; report(None) the rest; a
    reported failure is gone from the log."""
    log = UnrecordedFailures("dev:0")
    log.add(_failure(1), issuer=10)
    log.add(_failure(2), issuer=20)
    log.add(_failure(3), issuer=10)
    mine = _reported(log, 10)
    assert [str(m.failure.root) for m in mine] == ["failure 1", "failure 3"]
    assert all(isinstance(m, UnrecordedFailureWarning) and isinstance(m.failure, LaunchFailure)
               for m in mine)
    assert _reported(log, 10) == []
    assert [m.failure.kernel_id for m in _reported(log, None)] == ["k2"]
    assert not log


def test_a_report_that_raises_keeps_the_rest():
    """With the warning made an error, each report raises for one failure and keeps the others
    for the next call: none is lost."""
    log = UnrecordedFailures("dev:0")
    for i in range(3):
        log.add(_failure(i), issuer=1)
    raised = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrecordedFailureWarning)
        for _ in range(3):
            with pytest.raises(UnrecordedFailureWarning) as info:
                log.report(1, stacklevel=1)
            raised.append(info.value.failure.kernel_id)
        log.report(1, stacklevel=1)      # nothing left: no error
    assert raised == ["k0", "k1", "k2"]


def test_the_log_is_bounded_and_counts_what_it_did_not_keep():
    """Past MAX_KEPT entries the log counts instead of keeping; report(None) says how many."""
    log = UnrecordedFailures("dev:0")
    for i in range(MAX_KEPT + 5):
        log.add(_failure(i), issuer=1)
    messages = _reported(log, None)
    assert len(messages) == MAX_KEPT + 1
    assert "5 more" in str(messages[-1])
    assert not log


def test_concurrent_adds_lose_nothing():
    """Stream workers add from several threads at once; every failure is reported."""
    log = UnrecordedFailures("dev:0")

    def add(base):
        for i in range(100):
            log.add(_failure(base + i), issuer=0)

    threads = [threading.Thread(target=add, args=(k * 100,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(int(m.failure.kernel_id[1:]) for m in _reported(log, None)) == list(range(400))


def test_reporter_ignores_inherited_failures_and_outcome_keeps_the_first():
    """A launch's reporter logs its own failure, not one it inherited (that one lives on its
    input); a waiting caller's outcome keeps the first failure it is told, own or inherited."""
    log = UnrecordedFailures("dev:0")
    report = log.reporter(7)
    report(_failure(1), True)
    assert not log
    report(_failure(2), False)
    assert [m.failure.kernel_id for m in _reported(log, 7)] == ["k2"]
    outcome = LaunchOutcome()
    assert outcome.failure is None
    first, second = _failure(3), _failure(4)
    outcome(first, True)
    outcome(second, False)
    assert outcome.failure is first
