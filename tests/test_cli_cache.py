"""``python -m numba_cube cache info`` and ``cache clear`` (``cli_cache.py``): the cache directory
and its entries per kind as text or ``--json``, what a clear removed, and bad command lines or a
busy cache as one line with exit status 2 or 1. Run as a real command in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from numba_cube import cache_layout


def _cli(cache, *args):
    env = {**os.environ, "NUMBA_CUBE_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "numba_cube", "cache", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def _cache(tmp_path):
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    (cache / "cuda-00112233445566778899aabbccddeeff.bin").write_bytes(b"k" * 100)
    (cache / "autotune.json").write_text("{}")
    old = time.time() - 3 * 86400
    os.utime(cache / "autotune.json", (old, old))
    return cache


def test_info_json_gives_the_directory_and_each_kind(tmp_path):
    """``cache info --json`` is one object: the directory, and per kind its entries and bytes
    (the directory's own files are the reference)."""
    cache = _cache(tmp_path)
    done = _cli(cache, "info", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["root"] == str(cache)
    assert data["kinds"]["cuda"]["entries"] == 1 and data["kinds"]["cuda"]["bytes"] == 100
    assert data["kinds"]["autotune"] == {**data["kinds"]["autotune"], "entries": 1, "bytes": 2}
    assert data["kinds"]["cpu"]["entries"] == 0


def test_info_text_names_the_directory_and_kinds(tmp_path):
    """``cache info`` prints the directory and a row per kind."""
    cache = _cache(tmp_path)
    done = _cli(cache, "info")
    assert done.returncode == 0, done.stderr
    assert f"cache directory: {cache}" in done.stdout
    for kind in ("cpu", "cuda", "autotune", "temporary", "other"):
        assert f"\n  {kind} " in done.stdout


def test_clear_prints_what_it_removed(tmp_path):
    """``cache clear --older-than 1`` removes (and names) only the entry unused for longer;
    ``--kind cuda --json`` then lists the cuda entry it removed."""
    cache = _cache(tmp_path)
    done = _cli(cache, "clear", "--older-than", "1")
    assert done.returncode == 0, done.stderr
    assert "removed autotune  autotune.json" in done.stdout and "removed 1 entry" in done.stdout
    assert not (cache / "autotune.json").exists()
    done = _cli(cache, "clear", "--kind", "cuda", "--json")
    assert done.returncode == 0, done.stderr
    removed = json.loads(done.stdout)["removed"]
    assert [(e["kind"], e["name"]) for e in removed] == [("cuda", "00112233445566778899aabbccddeeff")]
    assert sorted(p.name for p in cache.iterdir() if p.is_file()) == ["autotune.json.lock", "cache.lock"]


def test_bad_command_lines_are_one_line_with_status_2(tmp_path):
    """A bad ``--older-than`` or ``--kind`` is one line on stderr, exit status 2, nothing removed."""
    cache = _cache(tmp_path)
    for args in (("clear", "--older-than", "soon"), ("clear", "--older-than", "-1"),
                 ("clear", "--kind", "gpu")):
        done = _cli(cache, *args)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert len(list(cache.iterdir())) == 2


def test_a_busy_cache_is_one_line_with_status_1(tmp_path, monkeypatch, capsys):
    """A clear that cannot get the writers' lock (held past the timeout by another holder: a
    thread here, with its own lock file descriptor) says so in one line, exit status 1, and
    removes nothing."""
    from numba_cube.cli import main

    cache = _cache(tmp_path)
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(cache))
    monkeypatch.setattr(cache_layout, "LOCK_TIMEOUT_S", 0.2)
    held, release = threading.Event(), threading.Event()

    def hold():
        with cache_layout.writing(cache):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(10)
    try:
        status = main(["cache", "clear"])
    finally:
        release.set()
        thread.join()
    err = capsys.readouterr().err
    assert status == 1
    assert len(err.strip().splitlines()) == 1 and "try again" in err
    assert (cache / "autotune.json").exists()
