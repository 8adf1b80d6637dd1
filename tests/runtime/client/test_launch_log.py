"""The issuing thread's launched log (``runtime/client/launch_log.py``): per thread, bounded, and the same
log that ``numba_cube.testing`` offers to tests."""

from __future__ import annotations

import threading

from numba_cube import testing
from numba_cube.runtime.client import launch_log


def test_testing_offers_the_same_log():
    """``numba_cube.testing``'s log functions are the runtime's own: what the client notes is what
    a test reads."""
    assert testing.launched is launch_log.launched
    assert testing.record_launches is launch_log.record_launches
    launch_log.clear_launched()
    launch_log.note_launch("k-1")
    assert testing.launched() == ["k-1"]


def test_each_thread_has_its_own_bounded_log():
    """A launch noted on another thread is not in this thread's log, and the log keeps the last
    1024 ids."""
    launch_log.clear_launched()
    worker = threading.Thread(target=launch_log.note_launch, args=("elsewhere",))
    worker.start()
    worker.join()
    for i in range(1030):
        launch_log.note_launch(f"k-{i}")
    log = launch_log.launched()
    assert "elsewhere" not in log and len(log) == 1024 and log[-1] == "k-1029"
