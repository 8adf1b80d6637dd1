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


def alternate(cold, warm, repeats: int) -> tuple[list[dict], list[dict]]:
    """``repeats`` runs of ``cold(r)`` (a fresh cache each) and of ``warm()`` (the cache of
    ``cold(0)``), interleaved after the first cold run: what the warm-start benchmarks (new
    processes, a cold cache against a warm one) take turns with."""
    colds, warms = [cold(0)], []
    for r in range(1, repeats):
        warms.append(warm())
        colds.append(cold(r))
    warms.append(warm())
    return colds, warms


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


# -- peak memory of a steady-state launch loop (issue 15: within 1.1x of the live data) ---------

PEAK_GOAL = 1.1


def _resident_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_resident_peak() -> int | None:
    """Reset the process's resident high-water mark (Linux's ``VmHWM``) to what is resident now,
    and return that (KiB); None where the system cannot (then only ``allocated`` is reported)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return _resident_kib("VmRSS")


def loop_peak(run, live_bytes: int, pool, rounds: int = 3) -> tuple[float, float | None]:
    """``(allocated, resident)`` peaks of ``rounds`` calls of ``run`` (a warm launch loop), each as
    a multiple of ``live_bytes`` (the bytes of the buffers the loop's launches bind).

    ``allocated``: the live bytes, plus what the memory ``pool`` had to take from the backend
    during the loop (per-launch device temporaries, staged copies), plus the peak of the loop's
    host allocations that tracemalloc sees (NumPy temporaries, plan caches). ``resident``: the
    live bytes plus how far the process's resident high-water mark rose above what was resident
    before the loop; it also sees what tracemalloc cannot, such as Numba's own allocations inside
    the compiled kernels (shared, local and replica arrays). Call it after the loop has run once,
    so that compiling and first-use caches are not in it; nothing here is timed. The two are
    measured in rounds of their own: tracemalloc's own bookkeeping is resident memory too."""
    held_before = pool.held_bytes
    with PeakMemory() as mem:
        for _ in range(rounds):
            run()
    allocated = live_bytes + max(0, pool.held_bytes - held_before) + mem.peak
    resident = None
    resident_before = _reset_resident_peak()
    if resident_before is not None:
        for _ in range(rounds):
            run()
        rise = max(0, (_resident_kib("VmHWM") or 0) - resident_before) * 1024
        resident = (live_bytes + rise) / live_bytes
    return allocated / live_bytes, resident


def report_peaks(peaks: dict) -> None:
    """Print ``loop_peak``'s ratios per kernel, and whether every one is within ``PEAK_GOAL``."""
    print("\n== peak memory of the launch loop (steady state) / bytes of the live buffers ==")
    print(f"{'kernel':46} {'allocated':>10} {'resident':>10}")
    for name, (allocated, resident) in peaks.items():
        shown = "-" if resident is None else f"{resident:.3f}x"
        print(f"{name:46} {allocated:9.3f}x {shown:>10}")
    worst = max(max(a, r or 0.0) for a, r in peaks.values())
    verdict = "met" if worst <= PEAK_GOAL else "NOT met"
    print(f"{'worst':46} {worst:9.3f}x  (goal <= {PEAK_GOAL}: {verdict})")
    sys.stdout.flush()
