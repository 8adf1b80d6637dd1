"""``cache_layout.py``: the generated module's file stem, the writers' lock (exclusive between
threads and processes, re-entrant within a thread), and the last-use mark readers leave."""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest
from filelock import Timeout

from numba_cube import cache_layout


def test_generated_stem_is_the_kernel_name_and_the_texts_sha256():
    """A generated module's stem is ``<kernel>_<first 16 hex digits of SHA-256 of its text>``."""
    text = "def k():\n    pass\n"
    assert cache_layout.generated_stem("k", text) == "k_" + hashlib.sha256(text.encode()).hexdigest()[:16]


def test_writing_excludes_another_thread_and_is_reentrant_in_its_own(tmp_path):
    """While one thread holds the lock, another's attempt times out with ``filelock.Timeout``
    (an ``OSError``: what writers treat as an unwritable cache); the holder may take it again
    without waiting for itself."""
    outcome = []
    with cache_layout.writing(tmp_path):
        with cache_layout.writing(tmp_path, timeout=0.1):
            pass                                   # the same thread: no self-deadlock

        def other():
            try:
                with cache_layout.writing(tmp_path, timeout=0.2):
                    outcome.append("acquired")
            except Timeout as exc:
                outcome.append(exc)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert isinstance(outcome[0], Timeout) and isinstance(outcome[0], OSError)
    with cache_layout.writing(tmp_path, timeout=0.2):
        pass                                       # released on exit


def test_mark_used_refreshes_an_old_mark_only(tmp_path):
    """``mark_used`` sets the file's mtime to now when its mark is over an hour old, leaves a
    recent one alone (one ``stat`` per load), and ignores a file that is gone."""
    path = tmp_path / "entry"
    path.write_bytes(b"x")
    recent = time.time() - 60
    os.utime(path, (recent, recent))
    cache_layout.mark_used(path)
    assert os.stat(path).st_mtime == pytest.approx(recent)
    old = time.time() - 2 * 86400
    os.utime(path, (old, old))
    cache_layout.mark_used(path)
    assert time.time() - os.stat(path).st_mtime < 60
    cache_layout.mark_used(tmp_path / "gone")
