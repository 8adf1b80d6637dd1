"""Shared helpers for the side-by-side benchmarks.

Every benchmark runs numba_cube and its reference in the same process and prints the ratio
(ours / theirs): absolute times on a shared 2-core machine are noise, ratios much less so. Times
are medians of several repeats after a warm-up. Memory is reported as the peak the process's
allocations reached (tracemalloc, which sees NumPy's buffers) against the bytes of live data.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import tracemalloc

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def median_time(fn, repeats: int = 7, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:9.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:9.2f} ms"
    return f"{seconds:9.3f} s "


class Table:
    """Rows of (what, ours, reference, ratio); printed as they come and summarised at the end."""

    def __init__(self, title: str):
        self.title = title
        self.rows = []
        print(f"\n== {title} ==")
        print(f"{'case':46} {'numba_cube':>12} {'reference':>12} {'ratio':>7}  reference is")
        sys.stdout.flush()

    def row(self, case: str, ours: float, theirs: float, reference: str, goal: float | None = None):
        ratio = ours / theirs if theirs else float("inf")
        mark = "" if goal is None else ("  (goal <= %.2f: %s)" % (goal, "met" if ratio <= goal else "NOT met"))
        print(f"{case:46} {fmt_time(ours):>12} {fmt_time(theirs):>12} {ratio:7.3f}  {reference}{mark}")
        sys.stdout.flush()
        self.rows.append((case, ours, theirs, ratio))


class PeakMemory:
    """``with PeakMemory() as m: ...``; then ``m.peak`` bytes (tracemalloc sees NumPy buffers)."""

    def __enter__(self):
        tracemalloc.start()
        tracemalloc.reset_peak()
        return self

    def __exit__(self, *exc):
        self.current, self.peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return False


def report_memory(label: str, peak: int, live: int) -> None:
    print(f"{label:46} peak {peak / 2**20:8.1f} MiB for {live / 2**20:8.1f} MiB of live data "
          f"({peak / max(live, 1):.2f}x)")
