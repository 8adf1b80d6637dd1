"""``cache_admin.py`` and ``python -m numba_cube cache info|clear``: the disk cache's entries are
found by kind (a generated CPU module with Numba's files for it, a kept translation, a compiled
CUDA kernel, ``autotune.json``), removed whole, by kind and by age; files it does not know and
the signing key are never touched; and a process whose entries were removed, before or while it
runs, compiles again and computes the right numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from numba_cube import cache_admin

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERNEL_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from numba import cuda
    import numba_cube as cube

    def make(salt):
        # a kernel per round (the closure value is part of its id): each round translates,
        # writes and loads cache entries of its own, while the test may be removing them
        @cube.kernel
        def axpy_admin(a, x, y, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a * x[i] + y[i] + salt
        return axpy_admin

    c = cube.client("cpu")
    n = 1000
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    for r in range(rounds):
        x = np.arange(n, dtype=np.float64) + r
        y = np.ones(n)
        out = c.empty(n)
        c.launch(make(float(r)), (n + 127) // 128, 128, 2.0, c.create(x), c.create(y), out)
        assert np.array_equal(c.read(out), 2.0 * x + y + r), r
    print("ok", rounds)
""")


def _env(cache_dir):
    env = dict(os.environ, NUMBA_CUBE_CACHE_DIR=str(cache_dir))
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _run_kernel(tmp_path, cache_dir, rounds=1):
    script = tmp_path / "admin_kernel.py"
    script.write_text(KERNEL_SCRIPT)
    return subprocess.Popen([sys.executable, str(script), str(rounds)], env=_env(cache_dir),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _cli(cache_dir, *args):
    proc = subprocess.run([sys.executable, "-m", "numba_cube", "cache", *args], env=_env(cache_dir),
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _finish(proc):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return out


def test_a_real_kernel_makes_cpu_entries_and_clear_removes_them_whole(tmp_path):
    """After a real launch the cache holds CPU entries (the generated module with its Numba
    files, the kept translation); ``cache clear`` removes every file of them and prints each,
    keeps the signing key and files it does not recognise, and a new process compiles again
    and gives NumPy's numbers."""
    cache = tmp_path / "cache"
    assert "ok 1" in _finish(_run_kernel(tmp_path, cache))
    found = cache_admin.entries(cache)
    kinds = {e.kind for e in found}
    assert kinds == {"cpu"}
    module = [e for e in found if not e.name.startswith("translation-")]
    assert module and all(any(p.suffix == ".nbi" for p in e.paths) for e in module)
    (cache / "notes.txt").write_text("mine")
    key = cache / "numba-cache.key"
    assert key.exists()

    info = json.loads(_cli(cache, "info", "--json").stdout)
    assert info["kinds"]["cpu"]["entries"] == len(found) and info["kinds"]["cpu"]["bytes"] > 0

    proc = _cli(cache, "clear")
    assert proc.returncode == 0
    assert f"removed {len(found)} entries" in proc.stdout
    assert cache_admin.entries(cache) == []
    assert not [p for p in (cache / "__pycache__").iterdir() if p.suffix in (".nbi", ".nbc")]
    assert (cache / "notes.txt").read_text() == "mine" and key.exists()

    assert "ok 1" in _finish(_run_kernel(tmp_path, cache))
    assert {e.kind for e in cache_admin.entries(cache)} == {"cpu"}


def test_clearing_while_another_process_launches_loses_nothing(tmp_path):
    """``cache clear`` run again and again while another process starts warm, then translates,
    compiles, caches and launches new kernels: that process's every result is NumPy's (a removed entry is a miss and a recompile, never a torn
    or wrong read)."""
    cache = tmp_path / "cache"
    assert "ok 1" in _finish(_run_kernel(tmp_path, cache))     # round 0's entries: a warm start
    proc = _run_kernel(tmp_path, cache, rounds=4)
    clears = 0
    while proc.poll() is None:
        cache_admin.clear(cache)
        clears += 1
        time.sleep(0.005)          # (not a timing: it only leaves the other process the CPU)
    assert "ok 4" in _finish(proc)
    assert clears >= 1


def test_kind_and_age_select_what_is_removed(tmp_path):
    """``--kind`` removes only that kind; ``--older-than DAYS`` removes only entries whose files
    were last used (accessed or written) more than DAYS ago."""
    cache = tmp_path / "cache"
    pycache = cache / "__pycache__"
    pycache.mkdir(parents=True)
    old, new = "k_0123456789abcdef", "k_fedcba9876543210"
    for stem in (old, new):
        (cache / f"{stem}.py").write_text("# generated")
        (pycache / f"{stem}.k__ser-1.py311.nbi").write_bytes(b"i")
        (pycache / f"{stem}.k__ser-1.py311.1.nbc").write_bytes(b"d")
    (cache / "cuda-0123456789abcdef0123456789abcdef.bin").write_bytes(b"cubin")
    (cache / "autotune.json").write_text("{}")
    ten_days = time.time() - 10 * 86400
    for p in [cache / f"{old}.py", *pycache.glob(f"{old}.*")]:
        os.utime(p, (ten_days, ten_days))

    proc = _cli(cache, "clear", "--kind", "cuda", "--json")
    assert proc.returncode == 0
    removed = json.loads(proc.stdout)["removed"]
    assert [(r["kind"], r["name"]) for r in removed] == [("cuda", "cuda-0123456789abcdef0123456789abcdef")]

    removed = cache_admin.clear(cache, older_than_days=5)
    assert [(r["kind"], r["name"]) for r in removed] == [("cpu", old)]
    assert not list(pycache.glob(f"{old}.*")) and len(list(pycache.glob(f"{new}.*"))) == 2
    assert (cache / "autotune.json").exists()

    assert [r["kind"] for r in cache_admin.clear(cache, kinds=("autotune",))] == ["autotune"]
    assert [e.name for e in cache_admin.entries(cache)] == [new]


def test_bad_arguments_are_typed_errors(tmp_path):
    """An unknown kind or a negative age from Python is a ``ValueError`` naming it; on the
    command line, a bad ``--older-than`` or ``--kind`` is one line and exit status 2."""
    with pytest.raises(ValueError, match="unknown cache kind"):
        cache_admin.clear(tmp_path, kinds=("gpu",))
    with pytest.raises(ValueError, match="0 or more"):
        cache_admin.clear(tmp_path, older_than_days=-1)
    for args in (("clear", "--older-than", "soon"), ("clear", "--kind", "gpu")):
        proc = _cli(tmp_path / "cache", *args)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_info_of_an_empty_cache(tmp_path):
    """``cache info`` of a cache with nothing in it names the directory and zero entries of
    every kind."""
    proc = _cli(tmp_path / "cache", "info")
    assert proc.returncode == 0
    assert f"cache directory: {tmp_path / 'cache'}" in proc.stdout
    for kind in cache_admin.KINDS:
        assert f"{kind} " in proc.stdout and "0 entries" in proc.stdout
