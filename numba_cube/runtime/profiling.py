"""Profiles: per-launch durations for the launches issued inside ``client.profile(fn)``.

While a profile is open on a stream, that stream's launches are submitted *blocking*: the issuing
thread waits for each dispatch and gets its duration back (runtime.md 1.1 gate 6). The profile is
per issuing thread and stream, so another thread's launches are neither slowed nor counted.

Inside a capture window a profile is refused (timestamps are not kernel work a graph can carry):
the capture is doomed, and the launches are *given back*: they go the normal way (recorded), so
nothing is lost, and the profile returns no durations for them.

``NUMBA_CUBE_PROFILE_LOG=1`` is the always-on alternative: every dispatch logs its duration to the
``numba_cube.profile`` logger, without blocking anybody.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .watchers import watch

__all__ = ["Profile", "KernelTiming", "open_profile", "active_profile"]

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
