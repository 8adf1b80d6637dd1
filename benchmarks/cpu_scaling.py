"""CPU scaling of the classic kernels (issue 33): ``bench_kernels.py`` at several thread counts,
numba_cube and its hand-written ``njit(parallel=True)`` + ``prange`` reference side by side.

Each thread count is a fresh process (``NUMBA_NUM_THREADS`` is fixed when Numba starts its pool)
running ``bench_kernels.py --no-simulator --json``. Printed afterwards:

- per kernel, numba_cube's ratio to the reference at each thread count (goal: geometric mean
  <= 1.10x at each count, no kernel above 1.5x);
- per kernel, the speed-up from the fewest to the most threads, numba_cube's beside the
  reference's (goal: within 10% of the reference's).

Run: ``python benchmarks/cpu_scaling.py [--threads 1,4,16] [--quick] [--out DIR]`` on the
many-core host (the device machine's: 16 cores, 32 on the two-GPU kind).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run_at(threads: int, out_dir: str, quick: bool) -> dict:
    path = os.path.join(out_dir, f"kernels_{threads}.json")
    cmd = [sys.executable, os.path.join(HERE, "bench_kernels.py"), "--no-simulator",
           "--json", path] + (["--quick"] if quick else [])
    env = {**os.environ, "NUMBA_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    print(f"\n######## NUMBA_NUM_THREADS={threads} ########", flush=True)
    subprocess.run(cmd, env=env, check=True)
    with open(path) as f:
        return json.load(f)


def geo(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summarize(runs: dict[int, dict]) -> None:
    counts = sorted(runs)
    names = list(runs[counts[0]]["times"])
    print("\n== ratio to hand-written njit(parallel) + prange, per thread count ==")
    print(f"{'kernel':42}" + "".join(f"{t:>8}" for t in counts))
    for name in names:
        cells = [runs[t]["times"][name][0] / runs[t]["times"][name][1] for t in counts]
        print(f"{name[:42]:42}" + "".join(f"{c:8.2f}" for c in cells))
    means = [geo(o / r for o, r in runs[t]["times"].values()) for t in counts]
    worst = [max(o / r for o, r in runs[t]["times"].values()) for t in counts]
    print(f"{'geometric mean (goal <= 1.10)':42}" + "".join(f"{m:8.2f}" for m in means))
    print(f"{'worst kernel (goal <= 1.5)':42}" + "".join(f"{w:8.2f}" for w in worst))
    lo, hi = counts[0], counts[-1]
    if lo == hi:
        return
    print(f"\n== speed-up from {lo} to {hi} threads (goal: numba_cube's within 10% of the "
          f"reference's) ==")
    print(f"{'kernel':42}{'numba_cube':>12}{'reference':>12}{'ours/ref':>10}")
    for name in names:
        ours = runs[lo]["times"][name][0] / runs[hi]["times"][name][0]
        ref = runs[lo]["times"][name][1] / runs[hi]["times"][name][1]
        verdict = "met" if ours >= 0.9 * ref else "NOT met"
        print(f"{name[:42]:42}{ours:12.2f}{ref:12.2f}{ours / ref:10.2f}  {verdict}")


def main() -> None:
    argv = sys.argv
    threads = [int(t) for t in (argv[argv.index("--threads") + 1] if "--threads" in argv
                                else "1,4,16").split(",")]
    out_dir = argv[argv.index("--out") + 1] if "--out" in argv else tempfile.mkdtemp()
    os.makedirs(out_dir, exist_ok=True)
    runs = {t: run_at(t, out_dir, "--quick" in argv) for t in threads}
    summarize(runs)


if __name__ == "__main__":
    main()
