"""``cache_layout.py``: the generated module's file stem, the writers' lock (exclusive between
threads and processes, re-entrant within a thread), the last-use mark readers leave, and the one
way a cache file is read (``read_regular``)."""

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


def test_read_regular_reads_only_a_regular_file_of_its_size_and_never_blocks(tmp_path):
    """Only a regular file (no symlink) of at most ``max_bytes`` is read, whole; a FIFO (whose
    plain open would wait for a writer for ever), a directory or a larger file is
    ``UnusableFile`` at once, a missing one ``FileNotFoundError``. (Each read runs on a thread
    joined with a timeout, so a regression fails instead of hanging.)"""
    good = tmp_path / "good"
    good.write_bytes(b"x" * 100)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(good)

    def outcome(name, max_bytes=1000):
        box = []

        def read():
            try:
                box.append(cache_layout.read_regular(tmp_path / name, max_bytes)[0])
            except OSError as exc:
                box.append(exc)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(10)
        assert box, f"reading {name} blocked"
        return box[0]

    assert outcome("good") == b"x" * 100
    for name, max_bytes in (("fifo", 1000), ("dir", 1000), ("good", 99)):
        assert isinstance(outcome(name, max_bytes), cache_layout.UnusableFile), name
    assert isinstance(outcome("link"), OSError)             # O_NOFOLLOW: ELOOP
    assert isinstance(outcome("missing"), FileNotFoundError)
