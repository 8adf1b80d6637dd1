"""One resolved dispatch and the scope it runs in (``runtime/launch/dispatch.py``), as units.

``run_recorded`` is the body of every launch task and every replayed graph node on every backend:
these tests pin what it guarantees with a real ``Ledger`` and plain Python artifacts (no backend):
it runs the artifact inside the execute scope, skips it behind a failed input with the failure
inherited, records the artifact's own exception on the write set, reads a dynamic count when it
runs (zero dispatches nothing; past CUDA's grid limits fails the write set), passes the dynamic
shared size only when there is one, and tells ``report`` what nobody else would see.
"""

from __future__ import annotations

import numpy as np
import pytest

from numba_cube.runtime.launch.dispatch import Recorded, resolve_count, run_recorded
from numba_cube.runtime.ledger.ledger import Failure, Ledger

A, OUT = (1, 0, 64), (2, 0, 64)


class Artifact:
    """Records the calls it gets; raises ``error`` if given one."""

    def __init__(self, error: BaseException | None = None):
        self.calls: list[tuple] = []
        self.error = error

    def __call__(self, *args):
        self.calls.append(args)
        if self.error is not None:
            raise self.error


def recorded(artifact, count=(2, 1, 1), count_view=None, report=None, shared_bytes=0):
    return Recorded("k", artifact, count, (32, 1, 1), ["arrays"], count_view, (A,), (OUT,),
                    report, shared_bytes)


def test_runs_the_artifact_and_returns_its_duration():
    """A clean dispatch calls the artifact with (count, dim, arrays) once, leaves the ledger
    clean and returns how long it ran."""
    ledger, art = Ledger(), Artifact()
    seconds = run_recorded(ledger, recorded(art))
    assert art.calls == [((2, 1, 1), (32, 1, 1), ["arrays"])]
    assert isinstance(seconds, float) and seconds >= 0
    assert ledger.first_failure([A, OUT]) is None


def test_failed_input_skips_and_inherits():
    """A dispatch whose input already failed does not run; its write set carries the same root
    cause, travelled through this kernel, and ``report`` hears it as inherited."""
    ledger, art, told = Ledger(), Artifact(), []
    root = Failure(ValueError("upstream"), "first", ("first",))
    ledger.record([A], root)
    assert run_recorded(ledger, recorded(art, report=lambda f, inh: told.append((f, inh)))) is None
    assert art.calls == []
    failure = ledger.failure_of(OUT)
    assert failure.root is root.root and failure.chain == ("first", "k")
    assert told and told[0][1] is True and told[0][0].root is root.root


def test_artifact_exception_fails_the_write_set():
    """The kernel's own exception becomes the root cause on its write set, not the caller's
    exception; its input stays clean."""
    ledger, told = Ledger(), []
    boom = RuntimeError("kernel raised")
    run_recorded(ledger, recorded(Artifact(boom), report=lambda f, inh: told.append((f, inh))))
    assert ledger.failure_of(OUT).root is boom
    assert ledger.failure_of(A) is None
    assert told[0][0].root is boom and told[0][1] is False


def count_view(x, y, z):
    return np.array([x, y, z], np.uint32).view(np.uint8)


def test_dynamic_count_is_read_when_the_dispatch_runs():
    """A count held in a buffer is read at run time and replaces the recorded one."""
    ledger, art = Ledger(), Artifact()
    run_recorded(ledger, recorded(art, count=(0, 0, 0), count_view=count_view(3, 2, 1)))
    assert art.calls[0][0] == (3, 2, 1)


def test_dynamic_count_of_zero_dispatches_nothing():
    """A dynamic count with a zero axis runs nothing and claims nothing."""
    ledger, art = Ledger(), Artifact()
    assert run_recorded(ledger, recorded(art, count_view=count_view(0, 1, 1))) is None
    assert art.calls == [] and ledger.first_failure([OUT]) is None


def test_dynamic_count_past_the_grid_limits_fails_the_write_set():
    """A dynamic count beyond CUDA's grid limits is the launch's failure, on its write set."""
    ledger, art = Ledger(), Artifact()
    run_recorded(ledger, recorded(art, count_view=count_view(1, 70000, 1)))
    assert art.calls == []
    assert isinstance(ledger.failure_of(OUT).root, ValueError)
    with pytest.raises(ValueError, match="grid limits"):
        resolve_count(count_view(1, 70000, 1))


def test_shared_bytes_are_passed_only_when_asked_for():
    """The dynamic shared size is a fourth argument only for a dispatch that has one, so an
    artifact of a backend without dynamic shared memory keeps three parameters."""
    art = Artifact()
    run_recorded(Ledger(), recorded(art, shared_bytes=256))
    assert art.calls[0][3] == 256 and len(art.calls[0]) == 4
