"""The disk caches' housekeeping (``cache_admin.py``): entries of real compiles, counted and
removed whole, by age, by kind, under the writers' locks, while other processes use the cache.

Every compile here is real (Numba for ``cpu``; the fake CUDA driver's compiler, whose images
the fake driver loads, for ``cuda``) into a temporary ``NUMBA_CUBE_CACHE_DIR``, each run a fresh
Python process; results are checked against NumPy, file counts against the directory itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from filelock import FileLock

from numba_cube import cache_admin

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "cuda" / "cases"

KERNELS = """
from numba import cuda


def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def scale(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 3.0 * x[i]
"""

CPU_RUNNER = """
import json, sys
sys.path.insert(0, {folder!r})
import numpy as np
import numba_cube as cube
import kernels

client = cube.client("cpu")
x = np.arange(100.0)
out, out2 = client.empty(100), client.empty(100)
for _ in range({rounds}):
    client.launch(cube.kernel(kernels.axpy), 1, 128, 2.0, client.create(x), client.create(x), out)
    client.launch(cube.kernel(kernels.scale), 1, 128, client.create(x), out2)
    assert (client.read(out) == 3 * x).all() and (client.read(out2) == 3 * x).all()
print("RESULT", json.dumps({{"ok": True}}))
"""

CUDA_RUNNER = """
import json, sys
sys.path[:0] = [{cases!r}, {folder!r}]
import numpy as np
import numba_cube as cube
from _cuda_fake import register_fake_cuda
import kernels

api = register_fake_cuda("fakecuda_admin", devices=1, images=True)
client = cube.client("fakecuda_admin:0")
x = np.arange(100.0)
out = client.empty(100)
client.launch(cube.kernel(kernels.axpy), 4, 32, 2.0, client.create(x), client.create(x), out)
print("RESULT", json.dumps({{"out": client.read(out).tolist(), "compiled": api.compilers[0].compiled}}))
"""


def _run(runner: str, folder: Path, cache: Path, **fields) -> dict:
    (folder / "kernels.py").write_text(KERNELS)
    env = {**os.environ, "NUMBA_CUBE_CACHE_DIR": str(cache)}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    code = runner.format(folder=str(folder), cases=str(CASES), **fields)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300, cwd=str(folder))
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _files(cache: Path) -> set[str]:
    return {str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()}


BOOKKEEPING = {"numba-cache.key", "cache.lock"}


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A cache directory after one process compiled the two kernels on the CPU (kept pristine:
    tests copy it)."""
    folder, cache = tmp_path_factory.mktemp("kernels"), tmp_path_factory.mktemp("cache")
    _run(CPU_RUNNER, folder, cache, rounds=1)
    return folder, cache


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    os.chmod(dst, 0o700)
    return dst


def test_info_counts_each_kernel_as_one_cpu_entry_with_all_its_bytes(warm_cache, tmp_path):
    """``info`` finds one cpu entry per kernel (its module, translation and Numba's files
    together) and as many bytes as the directory holds outside the key and the locks."""
    _, cache = warm_cache
    cache = _copy(cache, tmp_path / "c")
    data = cache_admin.info(cache)
    files = _files(cache) - BOOKKEEPING
    assert data["kinds"]["cpu"]["entries"] == 2
    assert data["kinds"]["cpu"]["bytes"] == sum((cache / f).stat().st_size for f in files)
    assert data["kinds"]["cuda"]["entries"] == data["kinds"]["autotune"]["entries"] == 0
    assert any(f.startswith("translation-") for f in files) and any(f.endswith(".nbc") for f in files)


def test_clear_removes_entries_whole_and_keeps_the_key(warm_cache, tmp_path):
    """``clear`` of every kind removes every file of every entry, keeps the sealing key and the
    lock, and a new process then compiles again and computes what NumPy does."""
    folder, cache = warm_cache
    cache = _copy(cache, tmp_path / "c")
    before = _files(cache) - BOOKKEEPING
    result = cache_admin.clear(root=cache)
    removed = {str(Path(f).relative_to(cache)) for e in result["removed"] for f in e["files"]}
    assert removed == before
    assert _files(cache) == BOOKKEEPING
    assert _run(CPU_RUNNER, folder, cache, rounds=1)["ok"]
    assert cache_admin.info(cache)["kinds"]["cpu"]["entries"] == 2


def test_older_than_removes_only_entries_not_used_since(warm_cache, tmp_path):
    """``older_than_days`` removes an entry only when every file of it is older; an entry with
    one fresh file stays whole."""
    _, cache = warm_cache
    cache = _copy(cache, tmp_path / "c")
    entries, _ = cache_admin.scan(cache)
    old, fresh = entries
    ten_days_ago = time.time() - 10 * 86400
    for path in old.files + fresh.files[1:]:
        os.utime(path, (ten_days_ago, ten_days_ago))
    result = cache_admin.clear(older_than_days=5, root=cache)
    assert [e["name"] for e in result["removed"]] == [old.name]
    assert not any(os.path.exists(p) for p in old.files)
    assert all(os.path.exists(p) for p in fresh.files)


def test_a_warm_start_marks_its_entries_used(warm_cache, tmp_path):
    """A process that loads an entry from the cache marks it used, so that an entry in use is
    not pruned as old however long ago it was compiled."""
    folder, cache = warm_cache
    cache = _copy(cache, tmp_path / "c")
    ten_days_ago = time.time() - 10 * 86400
    for path in cache.rglob("*"):
        os.utime(path, (ten_days_ago, ten_days_ago))
    assert _run(CPU_RUNNER, folder, cache, rounds=1)["ok"]
    assert cache_admin.clear(older_than_days=5, root=cache)["removed"] == []


def test_kind_selects_and_temporary_files_are_removed_only_when_old(warm_cache, tmp_path):
    """``kinds`` limits what is removed; a writer's temporary file is removed only by a clear of
    every kind and only when it is over an hour old (a writer in flight keeps its file)."""
    _, cache = warm_cache
    cache = _copy(cache, tmp_path / "c")
    young, old = cache / ".tmp-young.py", cache / "__pycache__" / ".tmp-old"
    young.write_bytes(b"x")
    old.write_bytes(b"y")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    assert cache_admin.clear(kinds=("cuda", "autotune"), root=cache)["removed"] == []
    assert old.exists()
    removed = cache_admin.clear(root=cache)["removed"]
    assert {e["kind"] for e in removed} == {"cpu", "temporary"}
    assert young.exists() and not old.exists()


def test_autotune_results_are_removed_under_their_writers_lock(tmp_path):
    """The autotune file is removed under ``autotune.json.lock``, the lock its writers take: while
    another holder has it, ``clear`` waits, and past its timeout removes nothing and says so."""
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    (cache / "autotune.json").write_text("{}")
    with FileLock(str(cache / "autotune.json.lock")):
        done = []
        thread = threading.Thread(target=lambda: done.append(
            _busy(lambda: cache_admin.clear(kinds=("autotune",), root=cache, timeout=0.2))))
        thread.start()
        thread.join()
    assert isinstance(done[0], cache_admin.CacheBusyError)
    assert (cache / "autotune.json").exists()
    assert [e["kind"] for e in cache_admin.clear(kinds=("autotune",), root=cache)["removed"]] == ["autotune"]


def _busy(call):
    try:
        return call()
    except cache_admin.CacheBusyError as exc:
        return exc


def test_clear_waits_for_a_writer_holding_the_cache_lock(tmp_path):
    """``clear`` takes the lock every cpu and cuda writer publishes under: while it is held,
    nothing is removed (a timeout is ``CacheBusyError``, an ``OSError``)."""
    from numba_cube import cache_layout

    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    (cache / "cuda-0123.bin").write_bytes(b"entry")
    with cache_layout.writing(cache):
        result = []
        thread = threading.Thread(target=lambda: result.append(
            _busy(lambda: cache_admin.clear(root=cache, timeout=0.2))))
        thread.start()
        thread.join()
    assert isinstance(result[0], cache_admin.CacheBusyError) and isinstance(result[0], OSError)
    assert (cache / "cuda-0123.bin").exists()


def test_clearing_while_another_process_launches_never_breaks_it(warm_cache, tmp_path):
    """A thread clears the cache over and over while other processes start, load and launch
    kernels from it: each finds its entries, or finds them gone and compiles again, and every
    result is NumPy's."""
    folder, cache = warm_cache
    cache = _copy(cache, tmp_path / "c")
    stop = threading.Event()
    sweeps, errors = [0], []

    def clear_forever():
        while not stop.is_set():
            try:
                cache_admin.clear(root=cache)
                sweeps[0] += 1
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)
            time.sleep(0.005)

    thread = threading.Thread(target=clear_forever)
    thread.start()
    try:
        for _ in range(2):
            assert _run(CPU_RUNNER, folder, cache, rounds=2)["ok"]
    finally:
        stop.set()
        thread.join()
    assert errors == [] and sweeps[0] > 1


def test_cuda_entries_are_counted_cleared_and_compiled_again(tmp_path):
    """A compiled CUDA kernel is one ``cuda`` entry; after ``clear`` of that kind the next
    process compiles it again (a miss, not a failure) and computes what NumPy does."""
    pytest.importorskip("numba_cuda")
    pytest.importorskip("cuda.bindings")
    folder, cache = tmp_path / "k", tmp_path / "c"
    folder.mkdir()
    expected = (3 * np.arange(100.0)).tolist()
    assert _run(CUDA_RUNNER, folder, cache) == {"out": expected, "compiled": 1}
    assert _run(CUDA_RUNNER, folder, cache)["compiled"] == 0            # the cache's hit
    assert cache_admin.info(cache)["kinds"]["cuda"]["entries"] == 1
    removed = cache_admin.clear(kinds=("cuda",), root=cache)["removed"]
    assert [e["kind"] for e in removed] == ["cuda"]
    assert _run(CUDA_RUNNER, folder, cache) == {"out": expected, "compiled": 1}
