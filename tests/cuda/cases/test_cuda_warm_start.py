"""Warm starts on a GPU: a new process finds what an earlier one compiled on disk
(``backends/cuda/kernels/diskcache.py``) and launches it without numba-cuda's compiler.

Each run is a fresh Python process on ``cube.client("cuda")`` with the same cache directory; it
reports the server's ``cuda_disk_cache_*`` counters (a hit calls no compiler), and its results are checked against NumPy. The fake-driver form of
these contracts is ``tests/backends/cuda/test_diskcache.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from _cuda_setup import only

KERNELS = """
from numba import cuda


def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def grid_total(x, out):
    g = cuda.cg.this_grid()
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, 0, x[i])
    g.sync()
    if i < x.size:
        x[i] = out[0]


def checked(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 1.0 / x[i]
"""

RUNNER = """
import json, sys
sys.path.insert(0, {folder!r})
import numpy as np
import numba_cube as cube
import kernels

client = cube.client("cuda")
x = np.arange(1000.0)
out = client.empty(1000)
client.launch(cube.kernel(kernels.axpy), 4, 256, 2.0, client.create(x), client.create(np.ones(1000)), out)
hx, total = client.create(np.ones(256)), client.create(np.zeros(1))
client.launch(cube.kernel(kernels.grid_total), 2, 128, hx, total)
client.launch(cube.kernel(kernels.checked, debug=True), 1, 32, client.create(np.ones(32)))
stats = client.server.stats
print("RESULT", json.dumps({{
    "axpy": client.read(out).tolist(), "grid": client.read(hx).tolist(),
    **{{k: stats[k] for k in ("compiles", "cuda_disk_cache_hits", "cuda_disk_cache_misses",
                             "cuda_disk_cache_uncacheable")}}}}))
"""


def _run(folder, cache) -> dict:
    env = {**os.environ, "NUMBA_CUBE_CACHE_DIR": str(cache)}
    for name in ("NUMBA_ENABLE_CUDASIM", "NUMBA_CUBE_TEST_CUDA_DEVICE"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", RUNNER.format(folder=str(folder))],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@only("gpu", why="loads cubins numba-cuda linked for this GPU")
def test_a_warm_process_loads_its_kernels_from_disk(tmp_path):
    """The cold process compiles and keeps the plain and the grid-synchronizing kernel (misses)
    and not the debug one (uncacheable); the warm process loads the first two from disk (hits,
    the grid sync still launched cooperatively) and compiles only the debug kernel; both give
    NumPy's results."""
    folder, cache = tmp_path / "work", tmp_path / "cache"
    folder.mkdir()
    (folder / "kernels.py").write_text(KERNELS)
    expected_axpy = (2.0 * np.arange(1000.0) + 1.0).tolist()
    cold = _run(folder, cache)
    assert (cold["cuda_disk_cache_misses"], cold["cuda_disk_cache_hits"],
            cold["cuda_disk_cache_uncacheable"]) == (2, 0, 1)
    warm = _run(folder, cache)
    assert (warm["cuda_disk_cache_hits"], warm["cuda_disk_cache_misses"],
            warm["cuda_disk_cache_uncacheable"]) == (2, 0, 1)
    for run in (cold, warm):
        assert run["axpy"] == expected_axpy
        assert run["grid"] == [256.0] * 256


@only("gpu", why="loads cubins numba-cuda linked for this GPU")
def test_a_corrupt_entry_is_compiled_again(tmp_path):
    """An entry whose bytes were changed is not loaded: the next process compiles the kernel
    (a miss, NumPy's result) and rewrites the entry."""
    folder, cache = tmp_path / "work", tmp_path / "cache"
    folder.mkdir()
    (folder / "kernels.py").write_text(KERNELS)
    _run(folder, cache)
    entries = sorted(cache.glob("cuda-*.bin"))
    assert len(entries) == 2
    for entry in entries:
        raw = bytearray(entry.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        entry.write_bytes(bytes(raw))
    again = _run(folder, cache)
    assert (again["cuda_disk_cache_hits"], again["cuda_disk_cache_misses"]) == (0, 2)
    assert again["axpy"] == (2.0 * np.arange(1000.0) + 1.0).tolist()

