"""Mid-size CPU launches (5k-50k units): the measured serial/parallel choice against the
hand-written ``njit(parallel=True)`` + ``prange`` reference, and against the old fixed rule.

Issues 32 and 33: a launch below the old fixed bound (32,768 units) ran serial whatever its work
(stumpy's ``gpu_stump``, ~20k units each looping over a window, ran on one core). Now each
kernel's own timed runs choose its twin (``numba_cube/backends/cpu/twin_choice.py``). Two kernels
of opposite weight, at sizes either side of the old bound:

- ``light``: ``out[i] = 2 * x[i] + 1`` (a few ns a unit: serial should win at small sizes);
- ``heavy``: ``out[i] = sum(x[(i + k) % n] for k in range(m))``, m = 256 (a loop per unit).

Printed per row: numba_cube's time (median of alternating rounds; ``client.launch`` +
``sync_buffers``, so the runtime's whole path is in it), the reference's, their ratio, and the
same launch under the fixed rule (``NUMBA_CUBE_SERIAL_UNITS=32768``, a second process, same
rounds, ratio to its own reference run). Results are checked against NumPy first.

Run: ``python benchmarks/bench_launch_sizes.py [--quick]``; on a many-core host set
``NUMBA_NUM_THREADS`` to compare core counts.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import numba
import numpy as np
from numba import cuda, prange

import numba_cube as cube

M = 256


@cube.kernel
def light(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2.0 * x[i] + 1.0


@cube.kernel
def heavy(x, out, m):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for k in range(m):
            acc += x[(i + k) % x.size]
        out[i] = acc


@numba.njit(parallel=True)
def light_ref(x, out):
    for i in prange(out.size):
        out[i] = 2.0 * x[i] + 1.0


@numba.njit(parallel=True)
def heavy_ref(x, out, m):
    for i in prange(out.size):
        acc = 0.0
        for k in range(m):
            acc += x[(i + k) % x.size]
        out[i] = acc


def _rounds(fn_a, fn_b, repeats: int) -> tuple[float, float]:
    a, b = [], []
    for _ in range(repeats):
        for fn, times in ((fn_a, a), (fn_b, b)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(a), statistics.median(b)


def measure(quick: bool) -> list[dict]:
    client = cube.client("cpu")
    rng = np.random.default_rng(0)
    rows = []
    sizes = (5_000, 20_000, 50_000) if not quick else (5_000, 20_000)
    repeats = 7 if quick else 31
    for name, kern, ref, extra in (("light", light, light_ref, ()),
                                   ("heavy", heavy, heavy_ref, (M,))):
        for n in sizes:
            xh = rng.random(n)
            want = 2 * xh + 1 if name == "light" else sum(np.roll(xh, -k) for k in range(M))
            x, out = client.create(xh), client.empty(n)
            ref_out = np.empty(n)
            count = (n + 255) // 256

            def ours():
                client.launch(kern, count, 256, x, out, *extra)
                client.sync_buffers(out)

            def theirs():
                ref(xh, ref_out, *extra)

            for _ in range(8):                    # compile, then let the choice settle
                ours()
                theirs()
            np.testing.assert_allclose(client.read(out), want, rtol=1e-9)
            np.testing.assert_allclose(ref_out, want, rtol=1e-9)
            t_ours, t_ref = _rounds(ours, theirs, repeats)
            rows.append({"kernel": name, "units": count * 256, "ours_ms": t_ours * 1e3,
                         "ref_ms": t_ref * 1e3, "ratio": t_ours / t_ref})
    return rows


def main() -> None:
    quick = "--quick" in sys.argv
    if "--json" in sys.argv:
        print(json.dumps(measure(quick)))
        return
    rows = measure(quick)
    env = dict(os.environ, NUMBA_CUBE_SERIAL_UNITS="32768")
    fixed = json.loads(subprocess.run(
        [sys.executable, __file__, "--json"] + (["--quick"] if quick else []), env=env,
        capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
    print(f"threads: {numba.get_num_threads()}  (ratios: numba_cube / hand-written prange)")
    print(f"{'kernel':8} {'units':>7} {'measured':>10} {'ref':>10} {'ratio':>7} "
          f"{'fixed rule':>11} {'ratio':>7}")
    for row, old in zip(rows, fixed):
        print(f"{row['kernel']:8} {row['units']:7d} {row['ours_ms']:9.3f}ms "
              f"{row['ref_ms']:9.3f}ms {row['ratio']:7.2f} {old['ours_ms']:10.3f}ms "
              f"{old['ratio']:7.2f}")
    geo = lambda rs: float(np.exp(np.mean(np.log([r["ratio"] for r in rs]))))  # noqa: E731
    print(f"geometric mean ratio: measured choice {geo(rows):.2f}, fixed rule {geo(fixed):.2f}")


if __name__ == "__main__":
    main()
