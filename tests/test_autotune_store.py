"""``autotune.json`` (numba_cube.autotune_store): a malformed file is reported once, ignored and
rewritten on the next save; concurrent processes saving results lose none of each other's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

from numba_cube import autotune_store
from numba_cube.autotune_store import ResultStore

GOOD = {"best": "a", "timings": {"a": 0.5, "b": 1.0}, "disqualified": {"c": "boom"},
        "launched": ["k-0123456789ab"]}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(d))
    return d


def messages(caught):
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("content", ["{not json", "\xff\xfe", "[]", "3", '{"x": 1}',
                                     json.dumps({"k": {**GOOD, "launched": "not a list"}}),
                                     json.dumps({"k": {**GOOD, "timings": {"a": "fast"}}})])
def test_malformed_file_is_reported_once_ignored_and_rewritten(cache_dir, content):
    """Bad JSON, JSON that is not an object of results, and entries of the wrong shape: loading
    warns once per process (naming the file), yields no bad entry, and the next save rewrites the
    file with only well-formed entries."""
    cache_dir.mkdir(mode=0o700)
    path = cache_dir / "autotune.json"
    path.write_bytes(content.encode("latin-1"))
    store = ResultStore()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.load() == {}
        assert store.load() == {}                    # the same problem is not reported again
        store.store("fresh", GOOD)
    assert len(messages(caught)) == 1 and str(path) in messages(caught)[0]
    assert "ignoring" in messages(caught)[0]
    assert json.loads(path.read_text()) == {"fresh": GOOD}


def test_good_entries_survive_next_to_bad_ones(cache_dir):
    """Only the malformed entries of a file are dropped; well-formed ones stay usable."""
    cache_dir.mkdir(mode=0o700)
    (cache_dir / "autotune.json").write_text(json.dumps({"good": GOOD, "bad": {"best": 3}}))
    with pytest.warns(RuntimeWarning, match="1 entry of the wrong shape"):
        assert ResultStore().load() == {"good": GOOD}


def test_unwritable_file_is_reported_and_does_not_raise(cache_dir):
    """A save that cannot write (here: autotune.json is a directory) warns and returns: results
    stay in memory, the tuner call does not fail."""
    (cache_dir / "autotune.json").mkdir(parents=True)
    with pytest.warns(RuntimeWarning, match="cannot"):
        ResultStore().store("k", GOOD)
        ResultStore().load()


def test_drop_forgets_one_entry(cache_dir):
    """``drop`` removes one key and keeps the others."""
    store = ResultStore()
    store.store("a", GOOD)
    store.store("b", GOOD)
    store.drop("a")
    assert store.load() == {"b": GOOD}


WRITER = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import numba_cube as cube
    from numba_cube.testing import register_python_backend

    index, go = int(sys.argv[1]), sys.argv[2]
    register_python_backend("storetest", inline=True)
    client = cube.client("storetest:0")

    @cube.kernel
    def double(x, out):
        out[:] = 2.0 * x

    def candidate(client, x, out):
        client.launch(double, 1, 1, x, out)

    tuner = cube.Tuner("concurrent", {"one": candidate}, key=lambda x, out: x.size,
                       warmup=0, samples=1)
    open(go + f".ready{index}", "w").close()
    while not os.path.exists(go):             # start together, so that the saves overlap
        time.sleep(0.005)
    for j in range(5):
        n = 100 * index + j + 1               # a key no other process tunes
        x, out = client.create(np.ones(n)), client.empty(n, np.float64)
        tuner(client, x, out)
        assert (client.read(out) == 2.0).all()
""")


def test_concurrent_processes_keep_every_entry(cache_dir, tmp_path):
    """Four processes, each tuning five keys of its own at the same time, all end up in
    autotune.json: saves are read-merge-write under a file lock, published atomically."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    go = str(tmp_path / "go")
    env = dict(os.environ, NUMBA_CUBE_CACHE_DIR=str(cache_dir),
               NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD="1")
    procs = [subprocess.Popen([sys.executable, str(script), str(i), go], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    try:
        for i, p in enumerate(procs):
            while not os.path.exists(f"{go}.ready{i}") and p.poll() is None:
                time.sleep(0.01)
        open(go, "w").close()
        results = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err[-2000:]
    data = json.loads((cache_dir / "autotune.json").read_text())
    keys = sorted(int(k.rsplit("|", 1)[1]) for k in data if "|concurrent|" in k)
    assert keys == sorted(100 * i + j + 1 for i in range(4) for j in range(5))
    assert all(autotune_store.valid_entry(v) for v in data.values())
    assert [p for p in os.listdir(cache_dir) if p.startswith(".autotune-")] == []
