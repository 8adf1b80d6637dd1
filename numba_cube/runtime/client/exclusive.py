"""Exclusive use of a device by one thread (``client.exclusive``; autotune measures this way)."""

from __future__ import annotations

import threading

__all__ = ["ExclusiveGate"]


class ExclusiveGate:
    """Exclusive use of a device by one thread (``client.exclusive``): other threads' launches
    wait at the gate while it is held. The hot path reads one attribute when nobody holds it."""

    def __init__(self):
        self._lock = threading.RLock()
        self._depth = 0
        self.owner: int | None = None

    def __enter__(self):
        self._lock.acquire()
        self._depth += 1
        self.owner = threading.get_ident()
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth == 0:
            self.owner = None
        self._lock.release()
        return False

    def wait_if_held(self) -> None:
        owner = self.owner
        if owner is not None and owner != threading.get_ident():
            with self._lock:
                pass
