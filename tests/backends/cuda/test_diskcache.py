"""The CUDA backend's on-disk kernel cache (``backends/cuda/kernels/diskcache.py``), on the fake driver.

The fake compiler (``tests/cuda/cases/_cuda_fake.py``, ``images=True``) hands back a fake
"cubin" that the fake driver's ``cuModuleLoadData`` loads in another process. Each run below is
a fresh Python process with the same cache directory: what it reports (the server's
``cuda_disk_cache_*`` counters, how often the fake compiler compiled) is what a warm start on a
GPU does, and its result is checked against NumPy there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba_cuda")
pytest.importorskip("cuda.bindings")

REPO = Path(__file__).resolve().parents[3]
CASES = REPO / "tests" / "cuda" / "cases"

KERNEL_MODULE = """
from numba import cuda

SCALE = {scale!r}


def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i] + {offset!r} * SCALE
"""

RUNNER = """
import json, sys
sys.path[:0] = [{cases!r}, {folder!r}]
import numpy as np
import numba_cube as cube
from _cuda_fake import register_fake_cuda
import kernels

api = register_fake_cuda("fakecuda_disk", devices=1, images=True)
client = cube.client("fakecuda_disk:0")
x, y = np.arange(100.0), np.ones(100)
out = client.empty(100)
client.launch(cube.kernel(kernels.axpy), 4, 32, 2.0, client.create(x), client.create(y), out)
stats = client.server.stats
print("RESULT", json.dumps({{
    "out": client.read(out).tolist(),
    "compiled": api.compilers[0].compiled,
    "loaded": api.calls["cuModuleLoadData"],
    **{{k: stats[k] for k in ("cuda_disk_cache_hits", "cuda_disk_cache_misses",
                             "cuda_disk_cache_uncacheable")}}}}))
"""


def _write_kernel(folder: Path, scale: float = 1.0, offset: float = 0.0) -> None:
    (folder / "kernels.py").write_text(KERNEL_MODULE.format(scale=scale, offset=offset))


def _run(folder: Path, cache: Path) -> dict:
    env = {**os.environ, "NUMBA_CUBE_CACHE_DIR": str(cache)}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    code = RUNNER.format(cases=str(CASES), folder=str(folder))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300, cwd=str(folder))
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _expected(offset: float = 0.0, scale: float = 1.0) -> list:
    return (2.0 * np.arange(100.0) + 1.0 + offset * scale).tolist()


@pytest.fixture
def folder(tmp_path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    _write_kernel(work)
    return work


def test_a_second_process_loads_the_kernel_without_compiling(folder, tmp_path):
    """The first process compiles and keeps the kernel (a miss); a new process with the same
    cache directory loads it (a hit, cuModuleLoadData) and compiles nothing, with NumPy's
    result both times."""
    cache = tmp_path / "cache"
    cold = _run(folder, cache)
    assert (cold["compiled"], cold["cuda_disk_cache_misses"], cold["cuda_disk_cache_hits"]) == (1, 1, 0)
    assert cold["out"] == _expected()
    warm = _run(folder, cache)
    assert (warm["compiled"], warm["cuda_disk_cache_hits"], warm["cuda_disk_cache_misses"]) == (0, 1, 0)
    assert warm["loaded"] == 1
    assert warm["out"] == _expected()


def test_a_tampered_entry_is_ignored_and_rewritten(folder, tmp_path):
    """An entry whose bytes changed after it was sealed fails verification: the next process
    compiles instead of loading it, gets NumPy's result, and writes a good entry that the one
    after it loads."""
    cache = tmp_path / "cache"
    _run(folder, cache)
    (entry,) = cache.glob("cuda-*.bin")
    raw = bytearray(entry.read_bytes())
    raw[-1] ^= 0xFF                       # the last byte of the stored PTX text
    entry.write_bytes(bytes(raw))
    tampered = _run(folder, cache)
    assert (tampered["compiled"], tampered["cuda_disk_cache_hits"], tampered["loaded"]) == (1, 0, 0)
    assert tampered["out"] == _expected()
    again = _run(folder, cache)
    assert (again["compiled"], again["cuda_disk_cache_hits"]) == (0, 1)


def test_a_foreign_file_in_the_entrys_place_is_never_loaded(folder, tmp_path):
    """A file planted under an entry's name without this user's seal (here: a valid-looking
    fake cubin) is not loaded: the kernel is compiled and the entry rewritten."""
    cache = tmp_path / "cache"
    _run(folder, cache)
    (entry,) = cache.glob("cuda-*.bin")
    entry.write_bytes(b"NBCUBE1\n" + b"\0" * 32 + b"FAKECUBIN1\n")
    planted = _run(folder, cache)
    assert (planted["compiled"], planted["cuda_disk_cache_hits"], planted["loaded"]) == (1, 0, 0)
    assert planted["out"] == _expected()


@pytest.mark.parametrize("change", [{"offset": 3.0}, {"offset": 3.0, "scale": 2.0}],
                         ids=["source", "global"])
def test_a_changed_source_or_global_misses(folder, tmp_path, change):
    """A kernel whose source (a constant in its body) or a global it reads (``SCALE``) changed
    has another key: the new process compiles it and computes with the new values."""
    cache = tmp_path / "cache"
    if "scale" in change:
        _write_kernel(folder, offset=3.0)
        _run(folder, cache)                   # same source, the old SCALE: kept
    else:
        _run(folder, cache)
    _write_kernel(folder, **change)
    changed = _run(folder, cache)
    assert (changed["compiled"], changed["cuda_disk_cache_hits"], changed["cuda_disk_cache_misses"]) == (1, 0, 1)
    assert changed["out"] == _expected(**change)


# -- what is not kept on disk, in this process ------------------------------------------------------

def test_refusal_names_what_cannot_be_cached():
    """``refusal`` says why a compile is not kept: a debug kernel, linked files, a wrapped
    cuda.jit dispatcher, a composite argument; a plain kernel of buffers and numbers is kept."""
    from numba import cuda

    import numba_cube as cube
    from numba_cube.backends.cuda.kernels.diskcache import refusal
    from numba_cube.runtime.launch.composite import TupleArg
    from numba_cube.runtime.memory.handle import Binding

    def fill(out, v):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = v

    buf = Binding(1, 0, (8,), np.dtype(np.float64))
    plain = cube.kernel(fill)
    assert refusal(plain, (buf, 2.0), {}, None) is None
    assert refusal(plain, (buf, np.float32(2.0)), {"fastmath": {"nsz"}}, None) is None
    assert "debug" in refusal(plain, (buf, 2.0), {"debug": True}, None)
    assert "link" in refusal(plain, (buf, 2.0), {"link": ["f.cu"]}, None)
    dispatcher = cuda.jit(fill)
    assert "dispatcher" in refusal(cube.kernel(dispatcher), (buf, 2.0), {}, dispatcher)
    assert "tuples" in refusal(plain, (buf, TupleArg((2.0, 3.0), None)), {}, None)
    assert "stable text" in refusal(plain, (buf, 2.0), {"opt": object()}, None)


def test_entry_key_changes_with_what_decides_the_code(monkeypatch):
    """The key differs when the kernel id, the signature, the options, the device or the
    ``NUMBA_*`` environment differ, and is the same for the same inputs; a client option with no
    stable text form gives no key at all (two such values could not be told apart)."""
    from numba_cube.backends.cuda.kernels.diskcache import entry_key

    def f(x):
        pass

    base = ("k-0123456789ab", ((np.dtype(np.float64), 1, "C"),), (), {}, "((9, 0), 12080)", f)
    key = entry_key(*base)
    assert key == entry_key(*base)
    for i, other in ((0, "k-ba9876543210"), (1, ((np.dtype(np.float32), 1, "C"),)),
                     (2, (("fastmath", True),)), (3, {"lineinfo": True}),
                     (4, "((8, 0), 12080)")):
        changed = list(base)
        changed[i] = other
        assert entry_key(*changed) != key
    unstable = list(base)
    unstable[2] = (("opt", object()),)
    assert entry_key(*unstable) is None
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", "/somewhere/else")   # where, not what: same key
    assert entry_key(*base) == key
    monkeypatch.setenv("NUMBA_OPT", "1" if os.environ.get("NUMBA_OPT") != "1" else "2")
    assert entry_key(*base) != key
