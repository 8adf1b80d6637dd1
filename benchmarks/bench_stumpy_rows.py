"""stumpy's row kernel, its generated parallel and serial variants called directly, against the
same rows written by hand (issues 32, 33).

``gpu_stump`` makes one launch of ``_compute_and_update_PI_kernel`` per row; this takes the
runtime out and times what the CPU translator made of the kernel: the module a checked launch
compiles (bounds checks on, the default), its ``__par`` and ``__ser`` variants called on the
arrays of a real ``gpu_stump`` call, ``ROWS`` rows in a row. Two translations side by side:

- today's, where the store every unit makes to one element (``QT_out[0] = QT_first[j]``) is
  made only when it changes the element (``passes/shared_stores.py``);
- the same translation with that pass switched off (``NUMBA_CUBE_DISABLE_PASSES=shared_stores``):
  every unit stores, every core writes one cache line.

The reference is ``stomp_rows_ref.py``: the kernel's body by hand under ``prange`` (one
parallel region per row) and the same function compiled without ``parallel``. Each variant's
profile is checked against the hand-written one's before anything is timed; then every variant
runs once per round, rounds taking turns, and the fastest round counts.

Run: ``python benchmarks/bench_stumpy_rows.py [--n N] [--rows R] [--rounds K]`` (defaults
20,000, 200, 5); ``NUMBA_NUM_THREADS`` sets the threads.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numba
import numpy as np
from numba import types

import numba_cube as cube

cube.install("cpu")
import stumpy  # noqa: E402  (after install: stumpy makes its kernels at import)

from numba_cube.backends.cpu.cache import translations  # noqa: E402
from numba_cube.backends.cpu.translate import translate_source  # noqa: E402
from stomp_rows_ref import stomp_rows  # noqa: E402

M = 50
_module = sys.modules["stumpy.gpu_stump"]          # (stumpy.gpu_stump is the function)


class _Recorded(Exception):
    pass


def first_launch(n: int) -> list:
    """Host copies of the arguments of ``gpu_stump``'s first launch on a series of ``n``."""
    kernel = _module._compute_and_update_PI_kernel
    seen = []

    class Recording:
        def __getitem__(self, config):
            def launch(*args):
                seen.extend(a.copy_to_host() if hasattr(a, "copy_to_host") else a for a in args)
                raise _Recorded
            return launch

    _module._compute_and_update_PI_kernel = Recording()
    try:
        stumpy.gpu_stump(np.random.default_rng(0).random(n), M)
    except _Recorded:
        pass
    finally:
        _module._compute_and_update_PI_kernel = kernel
    return seen


def translation(shared_stores: bool):
    """The checked module of the kernel, with or without the shared_stores pass."""
    py_func = _module._compute_and_update_PI_kernel.py_func
    if not shared_stores:
        os.environ["NUMBA_CUBE_DISABLE_PASSES"] = "shared_stores"
    try:
        source = translate_source(py_func, boundscheck=True)
    finally:
        os.environ.pop("NUMBA_CUBE_DISABLE_PASSES", None)
    return translations.load_module("_compute_and_update_PI_kernel", source)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args(argv)
    first = first_launch(opts.n)
    row0, w = first[0], first[13]
    tpb = 512
    cubes = (w + tpb - 1) // tpb

    def fresh():
        return [a.copy() if isinstance(a, np.ndarray) else a for a in first]

    def generated(entry):
        def run():
            a = fresh()
            a[22] = False                  # the first launch only reads QT (as gpu_stump's)
            entry(cubes, 1, 1, tpb, 1, 1, row0, *a[1:])
            a[22] = True
            for j in range(row0 + 1, row0 + opts.rows + 1):
                entry(cubes, 1, 1, tpb, 1, 1, j, *a[1:])
            return a
        return run

    def by_hand(function):
        def run():
            a = fresh()
            function(row0 + 1, row0 + opts.rows + 1, *a[1:22], a[23], a[24], a[25],
                     stumpy.config.STUMPY_DENOM_THRESHOLD)
            return a
        return run

    signature = (types.int64,) * 7 + tuple(numba.typeof(a) for a in first[1:])
    variants = {"by hand, prange": by_hand(stomp_rows),
                "by hand, serial": by_hand(numba.njit(nogil=True)(stomp_rows.py_func))}
    for label, shared in (("generated, shared stores", True), ("generated, every unit stores",
                                                                False)):
        module = translation(shared)
        name = "_compute_and_update_PI_kernel"
        for twin, suffix in (("parallel", "__par"), ("serial", "__ser")):
            dispatcher = getattr(module, name + suffix)
            dispatcher.compile(signature)
            variants[f"{label}, {twin}"] = generated(dispatcher)
    want = variants["by hand, serial"]()
    for label, run in variants.items():
        got = run()
        np.testing.assert_allclose(got[16], want[16], rtol=1e-9, atol=1e-9, err_msg=label)
        np.testing.assert_array_equal(got[19], want[19], err_msg=label)
    best = {label: float("inf") for label in variants}
    for _ in range(opts.rounds):
        for label, run in variants.items():
            t0 = time.perf_counter()
            run()
            best[label] = min(best[label], time.perf_counter() - t0)
    rows = opts.rows + 1
    per_row = {label: t / rows for label, t in best.items()}
    print(f"stumpy's row kernel, n = {opts.n}, {rows} rows, {numba.get_num_threads()} threads, "
          f"checked (load {os.getloadavg()[0]:.1f})")
    for label, t in per_row.items():
        print(f"  {label:42s} {t * 1e6:9.1f} us a row")
    hand = per_row["by hand, prange"]
    ours = per_row["generated, shared stores, parallel"]
    print(f"  parallel variant / prange by hand: {ours / hand:.2f}")
    print(f"  shared stores / every unit stores (parallel): "
          f"{ours / per_row['generated, every unit stores, parallel']:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
