"""Where a launch runs: one resolved dispatch (``Recorded``) and the scope it runs in.

Every launch of a host-executing or CUDA server ends here, whether it runs at once (a stream
task), later (a replayed graph node, ``graphs/capture.py``), or behind a dynamic count that a device
buffer holds (``resolve_count``, read when the dispatch runs, after the writers of that buffer):

- ``regions_of``: a launch's read and write sets (ledger regions) from its kernel's access;
- ``Recorded``: what a dispatch needs, resolved at launch time (the compiled artifact, arrays,
  geometry, read and write sets, and how to report a failure nobody else would see);
- ``run_recorded``: runs it inside the ledger's ``ExecuteScope``, so that a failed input skips the
  dispatch and the failure is inherited, and the kernel's own exception is recorded on the write
  set (``ledger/ledger.py``). An artifact that returns a ``pending.Run`` (a GPU launch of a kernel
  that may raise: its exception is known once it completes) leaves the write set ``Pending``,
  and the dispatch's report hears of that state (``report.pend``) instead of a failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from numba_cube.runtime.launch.composite import COMPOSITE_TYPES, add_regions
from numba_cube.runtime.launch.geometry import count_beyond_limits
from numba_cube.runtime.memory.handle import Binding
from numba_cube.runtime.ledger.ledger import ExecuteScope, Failure, failed_writing
from numba_cube.runtime.ledger.pending import Run

__all__ = ["Recorded", "regions_of", "resolve_count", "run_recorded"]


@dataclass
class Recorded:
    """One resolved dispatch of a recording."""

    kernel_id: str
    artifact: Any
    count: tuple
    dim: tuple
    arrays: list
    count_view: Any
    reads: tuple
    writes: tuple
    # ``report(failure, inherited)``: told the dispatch's failure when the write set cannot carry
    # it alone (a launch that writes nothing, or one whose caller waits for it: ledger/outcomes.py).
    report: Any = None
    # Dynamic shared memory per cube: a recording replays with the size it was launched with.
    shared_bytes: int = 0


def regions_of(req, access: tuple) -> tuple[tuple, tuple]:
    """``(reads, writes)``: the ledger regions of ``req``'s buffers (and those inside its tuples
    and records) that the kernel's ``access`` (per parameter (read, written)) says it reads and
    writes; a dynamic count's buffer is read."""
    reads, writes = [], []
    for arg, (r, w) in zip(req.args, access):
        if isinstance(arg, Binding):
            if r:
                reads.append(arg.region)
            if w:
                writes.append(arg.region)
        elif type(arg) in COMPOSITE_TYPES:
            add_regions(arg, (r, w), reads, writes)
    if req.count_binding is not None:
        reads.append(req.count_binding.region)
    return tuple(reads), tuple(writes)


def resolve_count(view) -> tuple:
    """Three uint32 (x, y, z) from a count buffer's bytes; ``ValueError`` past CUDA's grid limits
    (``geometry.MAX_CUBE_COUNT``: a count one backend refuses is refused by all of them)."""
    count = tuple(int(v) for v in view.reshape(-1).view(np.uint32)[:3])
    problem = count_beyond_limits(count)
    if problem is not None:
        raise ValueError(f"dynamic {problem}")
    return count


def run_recorded(ledger, rec: Recorded) -> float | None:
    """Run one resolved dispatch inside an execute scope: the body of every launch task and of
    every replayed graph node. Returns the seconds the dispatch ran, or None if it did not run."""
    count = rec.count
    report = rec.report
    if rec.count_view is not None and ledger.first_failure(rec.reads) is None:
        try:
            count = resolve_count(rec.count_view)
        except Exception as exc:  # noqa: BLE001 - an unresolvable count
            failure = failed_writing(ledger, rec.kernel_id, rec.writes, exc)
            if report is not None:
                report(failure, False)
            return None
        if 0 in count:
            return None  # a count of zero dispatches nothing and claims nothing new
    elapsed = None
    with ExecuteScope(ledger, rec.kernel_id, rec.reads, rec.writes) as scope:
        if scope.entered:
            start = time.perf_counter()
            try:
                if rec.shared_bytes:
                    # Only then: an artifact of a backend without dynamic shared memory takes
                    # three arguments (HostBackend.compile), and is never asked for any.
                    checked = rec.artifact(count, rec.dim, rec.arrays, rec.shared_bytes)
                else:
                    checked = rec.artifact(count, rec.dim, rec.arrays)
                if isinstance(checked, Run):
                    scope.checked_later(checked)
            except Exception as exc:  # noqa: BLE001 - the kernel's own failure
                scope.fail(exc)
                if report is not None:
                    report(Failure(exc, rec.kernel_id, (rec.kernel_id,)), False)
            elapsed = time.perf_counter() - start
    if report is not None:
        if scope.inherited is not None:
            report(scope.inherited.through(rec.kernel_id), True)
        elif scope.pending is not None:
            report.pend(scope.pending)     # its outcome is known once it completes
    return elapsed
