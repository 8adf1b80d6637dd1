"""numba_cube's own nopython helpers (``kernel_runtime/warps.py``, ``kernel_runtime/scans.py``) are cached signed,
like generated kernels (``cache/helpers.py``): Numba's unsigned cache of them, wherever
``NUMBA_CACHE_DIR`` points, is never read, and the signed one in numba_cube's cache directory
is read back by the next process.

Each run is a new process (Numba's caches are read at a process's first compile), with a fresh
numba_cube cache directory and ``NUMBA_CACHE_DIR`` on a directory anyone could have written:
a pickle planted there, in the very index files Numba would read for these helpers, must never
run. Results are checked against NumPy.
"""

from __future__ import annotations

import json
import textwrap

from numba_cube import cache_layout


#: Plants, in Numba's own cache location for every cache=True helper (as Numba's locators find
#: it under NUMBA_CACHE_DIR), an index file whose unpickling creates the file argv[1].
PLANT = textwrap.dedent('''
    import importlib, os, pickle, sys
    from numba.core.caching import FunctionCache
    from numba.core.dispatcher import Dispatcher

    class Planted:
        def __reduce__(self):
            return (open, (sys.argv[1], "w"))

    planted = []
    for name in ("warps", "scans"):
        module = importlib.import_module("numba_cube.backends.cpu.kernel_runtime." + name)
        for value in vars(module).values():
            if isinstance(value, Dispatcher) and value.py_func.__globals__ is vars(module):
                index = FunctionCache(value.py_func)._cache_file._index_path
                os.makedirs(os.path.dirname(index), exist_ok=True)
                with open(index, "wb") as f:
                    f.write(pickle.dumps(Planted()))
                planted.append(index)
    print(len(planted))
''')

#: Launches a warp kernel (shuffle, ballot) and a shared-memory scan (the scan idiom), with a
#: constant from argv[1] so each run compiles new kernels; prints the outputs and, per helper,
#: how many of its compiles were cache hits.
RUN = textwrap.dedent('''
    import importlib, json, sys
    import numpy as np
    from numba import cuda, int64
    from numba.core.dispatcher import Dispatcher
    import numba_cube as cube

    SHIFT = int(sys.argv[1])

    @cube.kernel
    def warp(x, out):
        i = cuda.grid(1)
        v = x[i]
        below = cuda.shfl_down_sync(0xFFFFFFFF, v, 1)
        big = cuda.popc(cuda.ballot_sync(0xFFFFFFFF, v > 40))
        out[i] = below + big + SHIFT

    @cube.kernel
    def scan(x, out):
        sm = cuda.shared.array(64, int64)
        tid = cuda.threadIdx.x
        i = cuda.grid(1)
        sm[tid] = x[i]
        cuda.syncthreads()
        off = 1
        while off < 64:
            t = sm[tid - off] if tid >= off else 0
            cuda.syncthreads()
            sm[tid] += t
            cuda.syncthreads()
            off *= 2
        out[i] = sm[tid] + SHIFT

    c = cube.client("cpu")
    x = c.create(np.arange(128, dtype=np.int64))
    outs = {}
    for name, kernel in (("warp", warp), ("scan", scan)):
        out = c.create(np.zeros(128, np.int64))
        c.launch(kernel, 2, 64, x, out)
        outs[name] = c.read(out).tolist()
    hits = {}
    for name in ("warps", "scans"):
        module = importlib.import_module("numba_cube.backends.cpu.kernel_runtime." + name)
        for key, value in vars(module).items():
            if isinstance(value, Dispatcher) and value.py_func.__globals__ is vars(module):
                hits[name + "." + key] = sum(value.stats.cache_hits.values())
    print(json.dumps({"outs": outs, "hits": hits}))
''')


def expected(shift: int) -> dict:
    import numpy as np

    x = np.arange(128, dtype=np.int64)
    below = np.where(np.arange(128) % 32 == 31, x, np.roll(x, -1))   # lane 31 reads its own
    big = np.repeat([(x[w * 32:(w + 1) * 32] > 40).sum() for w in range(4)], 32)
    scan = np.concatenate([np.cumsum(x[:64]), np.cumsum(x[64:])])
    return {"warp": (below + big + shift).tolist(), "scan": (scan + shift).tolist()}


def test_helpers_never_read_numbas_unsigned_cache_and_read_their_signed_one(tmp_path, run_script):
    """With ``NUMBA_CACHE_DIR`` holding planted pickles in the helpers' own index files, warp and
    scan kernels compile and give NumPy's answer, the planted pickles never run and are left as
    they were (Numba's location is neither read nor written); the helpers' cache is signed in
    numba_cube's cache directory, and a second process compiling new kernels loads the helpers
    from it."""
    shared, cache, marker = tmp_path / "shared", tmp_path / "cache", tmp_path / "planted_ran"
    shared.mkdir(mode=0o777)
    env = {"NUMBA_CACHE_DIR": str(shared), "NUMBA_CUBE_CACHE_DIR": str(cache)}
    planted = int(run_script(PLANT, str(marker), env=env))
    assert planted >= 10                    # every cache=True helper of both modules
    before = {p: p.read_bytes() for p in shared.rglob("*.nbi")}

    first = json.loads(run_script(RUN, "1", env=env))
    assert first["outs"] == expected(1)
    assert not marker.exists()
    sealed = sorted(p for p in (cache / "__pycache__").glob("*.nb*")
                    if p.name.partition(".")[0] in ("warps", "scans"))
    assert {p.name.partition(".")[0] for p in sealed} == {"warps", "scans"}
    assert all(p.read_bytes().startswith(cache_layout.SEALED_MAGIC) for p in sealed)

    second = json.loads(run_script(RUN, "2", env=env))
    assert second["outs"] == expected(2)
    assert not marker.exists()
    assert sum(second["hits"].values()) > 0 and sum(first["hits"].values()) == 0
    assert {p: p.read_bytes() for p in shared.rglob("*.nbi")} == before
