"""Numba's cache files for generated modules are authenticated: a corrupt or planted ``.nbi`` /
``.nbc`` is deleted before anything unpickles it, the kernel is recompiled and works, and the
rewritten entry serves the next load. Numba's ``NUMBA_CACHE_DIR`` does not move them out of the
private cache directory.

"The next process" is a fresh module object and fresh dispatchers reading the same directory
(``forget`` then ``build_program``), which goes through the same files as a new process; one
subprocess test in test_codecache.py checks a real second process.
"""

import os
import pickle
import stat
import sys

import numba
import numpy as np
import pytest
from numba import types

from numba_cube.backends.cpu.cache import numba_cache as numbacache
from numba_cube.backends.cpu.translate import build_program

SIGNATURE = (types.int64,) * 6 + (types.Array(types.float64, 1, "C"),)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(d))
    return d


def make_kernel(value):
    """A fresh kernel that fills its array with ``value`` (part of the generated text)."""
    from numba import cuda

    @cuda.jit
    def fill(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = value
    return fill.py_func


def load_and_run(func, value) -> int:
    """Build ``func`` from the disk cache as a new process would, compile and run the serial
    variant, check its output against NumPy, and return how many signatures came from Numba's
    cache."""
    prog = build_program(func)
    try:
        prog.serial.compile(SIGNATURE)
        a = np.zeros(7)
        prog.serial(1, 1, 1, 8, 1, 1, a)
        np.testing.assert_array_equal(a, np.full(7, value))
        return sum(prog.serial.stats.cache_hits.values())
    finally:
        sys.modules.pop(prog.module_name, None)       # the next build reads the disk again


def cache_files(cache_dir, suffix):
    pycache = cache_dir / "__pycache__"
    found = sorted(pycache / p for p in os.listdir(pycache) if p.endswith(suffix))
    assert found, f"no {suffix} file in {pycache}"
    return found


class Plant:
    """A pickle whose unpickling creates a marker file (what a planted cache file could do)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_files_are_signed_and_a_new_load_hits(cache_dir):
    """Every Numba cache file numba_cube writes starts with its MAC header, the key file is a
    private 0o600 file, and a second load of the same kernel is served from the cache."""
    assert load_and_run(make_kernel(1.25), 1.25) == 0
    for path in cache_files(cache_dir, ".nbi") + cache_files(cache_dir, ".nbc"):
        assert path.read_bytes().startswith(numbacache.MAGIC)
    key = cache_dir / numbacache.KEY_NAME
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert load_and_run(make_kernel(1.25), 1.25) > 0


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_corrupt_file_is_rebuilt_not_a_permanent_failure(cache_dir, suffix, damage):
    """A truncated or garbage index/data file makes the next load recompile (a working kernel),
    and the entry it rewrites serves the load after that."""
    func = make_kernel(2.5)
    load_and_run(func, 2.5)
    for path in cache_files(cache_dir, suffix):
        raw = path.read_bytes()
        path.write_bytes(raw[: len(raw) // 2] if damage == "truncated" else os.urandom(len(raw)))
    assert load_and_run(func, 2.5) == 0
    assert load_and_run(func, 2.5) > 0


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_planted_pickle_is_never_unpickled(cache_dir, tmp_path, suffix):
    """A pickle planted in place of an index or data file (which plain Numba would unpickle) is
    deleted unread: its payload never runs, and the kernel still works."""
    func = make_kernel(3.5)
    load_and_run(func, 3.5)
    marker = tmp_path / "unpickled"
    planted = cache_files(cache_dir, suffix)
    for path in planted:
        path.write_bytes(pickle.dumps(Plant(marker)))
    pickle.loads(pickle.dumps(Plant(tmp_path / "probe"))).close()     # the plant is live
    assert (tmp_path / "probe").exists()
    assert load_and_run(func, 3.5) == 0
    assert not marker.exists()
    assert all(not p.exists() or p.read_bytes().startswith(numbacache.MAGIC) for p in planted)


def test_a_file_signed_with_another_key_is_refused(cache_dir):
    """Files are only as trusted as the key: after the key changes (another user's copy of a
    cache, a replaced key file) the old files are recompiled, not loaded."""
    func = make_kernel(4.5)
    load_and_run(func, 4.5)
    (cache_dir / numbacache.KEY_NAME).write_bytes(os.urandom(32))
    assert load_and_run(func, 4.5) == 0
    assert load_and_run(func, 4.5) > 0


def test_key_readable_by_others_is_replaced(cache_dir):
    """A key file that group or others can read (so could forge files with) is replaced by a
    new private one."""
    cache_dir.mkdir(mode=0o700)
    key = cache_dir / numbacache.KEY_NAME
    key.write_bytes(b"k" * 32)
    os.chmod(key, 0o644)
    fresh = numbacache.secret_key(cache_dir)
    assert fresh != b"k" * 32 and len(fresh) == 32
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and key.read_bytes() == fresh


def test_numba_cache_dir_does_not_move_the_files(cache_dir, tmp_path, monkeypatch):
    """With Numba's own NUMBA_CACHE_DIR set, the generated modules' cache files still go to the
    private ``<cache dir>/__pycache__`` (numba_cube's locator), and nothing to NUMBA_CACHE_DIR."""
    elsewhere = tmp_path / "numba_cache_dir"
    elsewhere.mkdir()
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(elsewhere))
    load_and_run(make_kernel(5.5), 5.5)
    assert cache_files(cache_dir, ".nbi")
    assert [f for _, _, files in os.walk(elsewhere) for f in files if f.endswith(".nbi")] == []
