"""Float global atomics on one element, logged per chunk against the plain atomic (issue 33).

``bench_kernels.py``'s two reductions end every cube with ``cuda.atomic.add(total, 0, s)`` on a
float64: one cache line that every core wants. The CPU translator logs such adds per chunk and
applies a chunk's run on one element with one compare-and-swap
(``kernel_runtime/logged_atomics.py``). This times, in one process, the *same* translation of
each kernel built twice, with the ``privatize`` pass (which sets up the logs) and without it
(``NUMBA_CUBE_DISABLE_PASSES=privatize``: every add is a real atomic), the parallel variants
called directly, beside the hand-written ``prange`` sum. Every result is checked against NumPy
before it counts; rounds take turns; the fastest round and the median are printed.

Run: ``python benchmarks/bench_float_atomics.py [--n LOG2] [--rounds K]`` (defaults 24, 9);
``NUMBA_NUM_THREADS`` sets the threads (the effect is a many-core one: measure on 16).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_kernels as kernels  # noqa: E402

from numba_cube.backends.cpu.translate import build_program  # noqa: E402

KERNELS = ("block_sum", "warp_sum")


def build(disabled: str) -> dict:
    """Each kernel's program, translated with the passes ``disabled`` switched off."""
    saved = os.environ.get("NUMBA_CUBE_DISABLE_PASSES")
    os.environ["NUMBA_CUBE_DISABLE_PASSES"] = disabled
    try:
        return {k: build_program(getattr(kernels, k).py_func) for k in KERNELS}
    finally:
        if saved is None:
            del os.environ["NUMBA_CUBE_DISABLE_PASSES"]
        else:
            os.environ["NUMBA_CUBE_DISABLE_PASSES"] = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=24, help="log2 of the elements summed")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    n, tpb = 1 << args.n, kernels.TPB
    x = np.random.default_rng(0).standard_normal(n)
    expected = x.sum()
    programs = {"logged": build(""), "atomic": build("privatize")}
    cases = {}
    for label, progs in programs.items():
        for k, p in progs.items():
            def run(p=p):
                total = np.zeros(1)
                p.parallel(n // tpb, 1, 1, tpb, 1, 1, x, total)
                return total[0]
            cases[(k, label)] = run

    def ref():
        total = np.zeros(1)
        kernels.sum_ref(x, total)
        return total[0]
    cases[("prange by hand", "")] = ref
    for name, run in cases.items():          # compile, then check before timing
        got = run()
        assert abs(got - expected) <= 1e-9 * abs(x).sum(), (name, got, expected)
    times = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, run in cases.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    best = {name: min(v) for name, v in times.items()}
    print(f"float atomics on one element, 2^{args.n} float64, {numba.get_num_threads()} threads "
          f"(fastest round; median)")
    for (k, label), v in times.items():
        print(f"  {k:16s} {label:7s} {best[(k, label)] * 1e3:8.3f} ms  {statistics.median(v) * 1e3:8.3f} ms")
    r = best[("prange by hand", "")]
    for k in KERNELS:
        print(f"  {k}: logged / atomic {best[(k, 'logged')] / best[(k, 'atomic')]:.2f}; "
              f"logged / prange by hand {best[(k, 'logged')] / r:.2f}; "
              f"atomic / prange by hand {best[(k, 'atomic')] / r:.2f}")


if __name__ == "__main__":
    main()
