"""The Numba trampolines of ``backends/cuda/driver/launch_call.py`` are cached signed (issue 35, item 7).

A warm CUDA launch's driver call is compiled code; where no thunk can be made it is a Numba
trampoline, compiled once and kept on disk. Numba's own ``cache=True`` would keep it unsigned
where ``NUMBA_CACHE_DIR`` points and unpickle whatever it found there, so a pickle planted in a
shared directory would run at the first hot launch. The trampolines use the signed cache of
numba_cube's own helpers instead: Numba's location is never read nor written, the signed file is
read back by the next process.

No GPU is needed: the trampoline calls a Numba ``cfunc`` with ``cuLaunchKernel``'s C prototype
that records what it received. Each run is a new process (Numba reads its caches at a process's
first compile), with a fresh numba_cube cache directory.
"""

from __future__ import annotations

import json
import textwrap

from numba_cube import cache_layout


#: Plants, where Numba's locators put the cache of every trampoline under NUMBA_CACHE_DIR, an
#: index file whose unpickling creates the file argv[1].
PLANT = textwrap.dedent('''
    import os, pickle, sys
    from numba.core.caching import FunctionCache
    from numba_cube.backends.cuda.driver import launch_call

    class Planted:
        def __reduce__(self):
            return (open, (sys.argv[1], "w"))

    names = ("_launch_from_block", "_cooperative_from_block", "_record_and_wait_from_block",
             "_wait_from_block")
    for name in names:
        index = FunctionCache(getattr(launch_call, name))._cache_file._index_path
        os.makedirs(os.path.dirname(index), exist_ok=True)
        with open(index, "wb") as f:
            f.write(pickle.dumps(Planted()))
    print(len(names))
''')

#: Makes a trampoline launcher (no thunk) over a recording cfunc and calls it; prints what the
#: C side saw, the call's result and how many of the trampoline's compiles were cache hits.
RUN = textwrap.dedent('''
    import json
    import numpy as np
    from numba import cfunc, types
    from numba_cube.backends.cuda.driver import launch_call

    U32, U64, OUT = types.uint32, types.uint64, types.CPointer(types.uint64)

    @cfunc(types.int32(U64, U32, U32, U32, U32, U32, U32, U32, U64, OUT, U64))
    def record(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        params[0], params[1], params[2], params[3], params[4] = f, gx, gy, gz, bx
        params[5], params[6], params[7], params[8], params[9] = by, bz, shared, stream, extra
        return 42

    seen = np.zeros(10, np.uint64)
    call = launch_call.c_launcher(record.address, 11, (2, 3, 4), (5, 6, 7), 8, 9,
                                  seen.ctypes.data, thunk=False)
    result = call()
    dispatcher = launch_call._compiled(launch_call._launch_from_block)
    print(json.dumps({"result": result, "seen": seen.tolist(),
                      "hits": sum(dispatcher.stats.cache_hits.values())}))
''')


def test_the_trampolines_never_read_numbas_unsigned_cache_and_read_their_signed_one(
        tmp_path, run_script):
    """With ``NUMBA_CACHE_DIR`` holding planted pickles in the trampolines' own index files, a
    trampoline launch passes every argument and returns the entry point's result, the planted
    pickles never run and are left as they were; the trampoline's file is signed in
    numba_cube's cache directory, and a second process loads it from there."""
    shared, cache, marker = tmp_path / "shared", tmp_path / "cache", tmp_path / "planted_ran"
    shared.mkdir(mode=0o777)
    env = {"NUMBA_CACHE_DIR": str(shared), "NUMBA_CUBE_CACHE_DIR": str(cache)}
    assert int(run_script(PLANT, str(marker), env=env)) == 4
    before = {p: p.read_bytes() for p in shared.rglob("*.nbi")}
    expected_seen = [11, 2, 3, 4, 5, 6, 7, 8, 9, 0]

    first = json.loads(run_script(RUN, env=env))
    assert first["result"] == 42 and first["seen"] == expected_seen and first["hits"] == 0
    assert not marker.exists()
    sealed = sorted(p for p in (cache / "__pycache__").glob("launch_call.*.nb*"))
    assert sealed and all(p.read_bytes().startswith(cache_layout.SEALED_MAGIC) for p in sealed)

    second = json.loads(run_script(RUN, env=env))
    assert second["result"] == 42 and second["seen"] == expected_seen and second["hits"] == 1
    assert not marker.exists()
    assert {p: p.read_bytes() for p in shared.rglob("*.nbi")} == before
