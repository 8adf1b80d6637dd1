"""How many things watch individual launches now: the one number the launch path reads.

Launch observers, task observers, open profiles and dry runs each change what a launch has to do
at the client's gates (notify, time, skip). A server's warm launch path
(``backends/cuda/launch/fast_path.py``) skips that work, so it may only be taken while none of them is
active. Each of them counts itself in here when it starts and out when it ends; the launch path
then reads one int (``WATCHING[0]``) instead of asking four modules.
"""

from __future__ import annotations

import threading

__all__ = ["WATCHING", "watch"]

#: Observers registered + profiles open + dry runs entered, over all threads.
WATCHING = [0]
_lock = threading.Lock()


def watch(delta: int) -> None:
    """Count ``delta`` watchers in (positive) or out (negative)."""
    with _lock:
        WATCHING[0] += delta
