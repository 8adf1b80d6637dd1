"""Profiles: per-launch durations for the launches issued inside ``client.profile(fn)``.

While a profile is open on a stream, that stream's launches are submitted *blocking*: the issuing
thread waits for each dispatch and gets its duration back (CONTRACT.md 1.1, gate 6). The profile is
per issuing thread and stream, so another thread's launches are neither slowed nor counted.

Inside a capture window a profile is refused (timestamps are not kernel work a graph can carry):
``client.profile`` raises ``CaptureError`` at the call, before running anything, and the capture
is doomed like by every refused operation. A capture opened *inside* a profile records the
launches issued in its window (no duration comes back for them: they did not run).

``NUMBA_CUBE_PROFILE_LOG=1`` is the always-on alternative: every dispatch logs its duration to the
``numba_cube.profile`` logger (``log_duration``), without blocking anybody. Setting the variable
asks for those lines, so they show even in an application that configured no logging: the logger
is put at INFO unless the application set its level, and a fallback handler writes to stderr
while no other handler would see the record (``logging.lastResort``'s rule, at INFO).
"""

from __future__ import annotations

import logging
import sys
import threading
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from numba_cube.runtime.client.watchers import watch

__all__ = ["Profile", "ProfileResult", "KernelStats", "KernelTiming", "open_profile", "active_profile", "note_duration",
           "log_duration", "PROFILE_LOG"]

PROFILE_LOG = logging.getLogger("numba_cube.profile")

_local = threading.local()
# How many profiles are open in the process: the launch hot path looks at this int only.
ACTIVE = [0]
_count_lock = threading.Lock()


@dataclass(frozen=True)
class KernelTiming:
    kernel_id: str
    seconds: float


class KernelStats(NamedTuple):
    """Durations of one kernel's launches in a profile, in seconds (``std``: NumPy's, ddof 0)."""

    calls: int
    mean: float
    std: float
    min: float
    median: float


class ProfileResult(NamedTuple):
    """What ``client.profile(fn)`` returns: ``fn``'s result and one ``KernelTiming`` per launch
    (so ``result, timings = client.profile(fn)`` unpacks as it always did); printed, a table of
    each kernel's calls, mean, std, min and median, in the spirit of ``cupyx.profiler.benchmark``."""

    result: object
    timings: list

    def stats(self) -> dict[str, KernelStats]:
        """Per kernel id, in the order of first launch: its ``KernelStats``."""
        by_kernel: dict[str, list[float]] = {}
        for timing in self.timings:
            by_kernel.setdefault(timing.kernel_id, []).append(timing.seconds)
        return {kernel_id: KernelStats(len(s), float(np.mean(s)), float(np.std(s)),
                                       float(np.min(s)), float(np.median(s)))
                for kernel_id, s in by_kernel.items()}

    def table(self) -> str:
        """The stats as a text table, durations in microseconds."""
        stats = self.stats()
        width = max([len("kernel")] + [len(k) for k in stats])
        columns = ("calls", "mean (us)", "std (us)", "min (us)", "median (us)")
        rows = [f"{'kernel':<{width}}  " + "  ".join(f"{c:>11}" for c in columns)]
        for kernel_id, s in stats.items():
            times = (s.mean, s.std, s.min, s.median)
            rows.append(f"{kernel_id:<{width}}  {s.calls:>11}  "
                        + "  ".join(f"{v * 1e6:>11.3f}" for v in times))
        if not stats:
            rows.append("(no launches)")
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.table()


@dataclass
class Profile:
    stream: object
    durations: list = field(default_factory=list)


def open_profile(stream) -> Profile:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    prof = Profile(stream)
    stack.append(prof)
    with _count_lock:
        ACTIVE[0] += 1
    watch(1)
    return prof


def close_profile(prof: Profile) -> None:
    _local.stack.remove(prof)
    with _count_lock:
        ACTIVE[0] -= 1
    watch(-1)


def active_profile(stream) -> Profile | None:
    """The innermost profile of this thread on ``stream``, if any."""
    stack = getattr(_local, "stack", None)
    if not stack:
        return None
    for prof in reversed(stack):
        if prof.stream == stream:
            return prof
    return None


def note_duration(prof: Profile, kernel_id: str, task) -> None:
    """Wait for a profiled launch's task and add its duration to ``prof`` (nothing if no task
    came back, or it did not run)."""
    if task is not None:
        task.wait()
        if task.duration is not None:
            prof.durations.append(KernelTiming(kernel_id, task.duration))


class _StderrWhenUnconfigured(logging.Handler):
    """Writes a record to stderr only while no other handler on the logger's chain would see it,
    so an application that configures logging later (or a test's capture) gets each line once."""

    def emit(self, record: logging.LogRecord) -> None:
        logger = PROFILE_LOG
        while logger is not None:
            # (a NullHandler, the library convention numba_cube's logger follows, shows nothing)
            if any(handler is not self and not isinstance(handler, logging.NullHandler)
                   for handler in logger.handlers):
                return
            if not logger.propagate:
                break
            logger = logger.parent
        try:
            # sys.stderr looked up at each line, as logging.lastResort does (it may be replaced)
            sys.stderr.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


_fallback_installed = False
_fallback_lock = threading.Lock()


def _install_fallback() -> None:
    global _fallback_installed
    with _fallback_lock:
        if _fallback_installed:
            return
        handler = _StderrWhenUnconfigured()
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        PROFILE_LOG.addHandler(handler)
        if PROFILE_LOG.level == logging.NOTSET:
            # The default (WARNING, inherited) would drop the INFO lines the variable asked for.
            PROFILE_LOG.setLevel(logging.INFO)
        _fallback_installed = True


def log_duration(kernel_id: str, device: str, seconds: float) -> None:
    """One ``NUMBA_CUBE_PROFILE_LOG`` line: a dispatch of ``kernel_id`` on ``device`` took
    ``seconds`` (the caller checks the variable; the fallback handler is set up at the first line)."""
    if not _fallback_installed:
        _install_fallback()
    PROFILE_LOG.info("%s on %s: %.3f ms", kernel_id, device, seconds * 1e3)
