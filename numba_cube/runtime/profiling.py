"""Profiles: per-launch durations for the launches issued inside ``client.profile(fn)``.

While a profile is open on a stream, that stream's launches are submitted *blocking*: the issuing
thread waits for each dispatch and gets its duration back (CONTRACT.md 1.1, gate 6). The profile is
per issuing thread and stream, so another thread's launches are neither slowed nor counted.

Inside a capture window a profile is refused (timestamps are not kernel work a graph can carry):
``client.profile`` raises ``CaptureError`` at the call, before running anything, and the capture
is doomed like by every refused operation. A capture opened *inside* a profile records the
launches issued in its window (no duration comes back for them: they did not run).

``NUMBA_CUBE_PROFILE_LOG=1`` is the always-on alternative: every dispatch logs its duration to the
``numba_cube.profile`` logger, without blocking anybody.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .watchers import watch

__all__ = ["Profile", "KernelTiming", "open_profile", "active_profile", "note_duration"]

_local = threading.local()
# How many profiles are open in the process: the launch hot path looks at this int only.
ACTIVE = [0]
_count_lock = threading.Lock()


@dataclass(frozen=True)
class KernelTiming:
    kernel_id: str
    seconds: float


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
