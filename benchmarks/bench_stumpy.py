"""stumpy's ``gpu_stump``, unchanged, through numba_cube's CPU backend (issue 32).

1. Against ``stumpy.stump`` (stumpy's own hand-written ``njit(parallel=True)`` CPU code) at
   n = 2,000 and 20,000, m = 50, in one process: both compiled first (a short series), then the
   median of a few calls each; the ratio is ours / stump's (goal <= 1.5).
1b. Against the same algorithm written by hand (``stomp_rows_ref.py``: the kernel's body under
   ``prange``, one parallel region per row, as a user would port it): ``stump`` is another
   algorithm (diagonals, half the matrix), so this ratio is numba_cube's own cost and section
   1's the algorithm's on top of it. The reference's profile is checked against gpu_stump's.
2. Against numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``, a subprocess: the simulator
   replaces numba.cuda for the whole process) at n = 200 and 400, where the simulator finishes
   in seconds to minutes (one Python thread per GPU thread): the ratio is the simulator's /
   ours (goal >= 10^3).
3. Where one call's time goes: ``gpu_stump`` makes one launch of ``_compute_and_update_PI_kernel``
   per row of the matrix profile (n - m + 1 launches). The per-launch time of the layer
   (``kernel[grid, block](*args)`` on device arrays) is set against the same kernel launched
   through ``client.launch`` directly, and a cProfile of one call lists the top functions.

Run: ``python benchmarks/bench_stumpy.py [--quick] [--no-simulator]`` (``--quick``: n = 2,000
only, no simulator; the full run takes several minutes). The load average is printed at the start and
the end. Absolute times on a shared machine mean little; the ratios are the result.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import subprocess
import sys
import time

import numpy as np

import numba_cube as cube

cube.install("cpu")
import stumpy  # noqa: E402  (after install: stumpy makes its kernels at import)

from common import fmt_time, median_time  # noqa: E402

M = 50

_SIMULATOR_PROGRAM = r"""
import sys, time
import numpy as np
import stumpy
T = np.random.default_rng(0).random(int(sys.argv[1]))
stumpy.gpu_stump(T[:120], 50)                     # the same warm-up as numba_cube's
t0 = time.perf_counter()
stumpy.gpu_stump(T, 50)
print(time.perf_counter() - t0)
"""


def against_stump(n: int, repeats: int) -> None:
    T = np.random.default_rng(n).random(n)
    ours = median_time(lambda: stumpy.gpu_stump(T, M), repeats=repeats, warmup=1)
    theirs = median_time(lambda: stumpy.stump(T, M), repeats=repeats, warmup=1)
    print(f"n = {n:6d}, m = {M}: gpu_stump on numba_cube {fmt_time(ours)}, stumpy.stump "
          f"{fmt_time(theirs)}, ratio {ours / theirs:6.2f} (goal <= 1.5)", flush=True)


def _record_launches(T):
    """Run gpu_stump once, recording its launches: (host copies of the first launch's
    arguments, the first and last row index, the final device arrays)."""
    gpu_stump_module = sys.modules["stumpy.gpu_stump"]     # (stumpy.gpu_stump is the function)
    kernel = gpu_stump_module._compute_and_update_PI_kernel
    seen = {}

    class Recording:            # gpu_stump looks its kernel up in its module at every launch
        def __getitem__(self, config):
            def launch(*args):
                if "first" not in seen:
                    seen["first"] = [a.copy_to_host() if hasattr(a, "copy_to_host") else a
                                     for a in args]
                seen.setdefault("rows", []).append(args[0])
                seen["args"] = args
                return kernel[config](*args)
            return launch

    gpu_stump_module._compute_and_update_PI_kernel = Recording()
    try:
        stumpy.gpu_stump(T, M)
    finally:
        gpu_stump_module._compute_and_update_PI_kernel = kernel
    return seen["first"], seen["rows"][0], seen["rows"][-1], seen["args"]


def against_same_algorithm(n: int, repeats: int) -> None:
    from stomp_rows_ref import stomp_rows

    T = np.random.default_rng(0).random(n)
    first, first_row, last_row, final = _record_launches(T)
    initial = [a.copy() if isinstance(a, np.ndarray) else a for a in first]

    def reference():
        a = [x.copy() if isinstance(x, np.ndarray) else x for x in initial]
        stomp_rows(first_row + 1, last_row + 1, *a[1:22], a[23], a[24], a[25],
                   stumpy.config.STUMPY_DENOM_THRESHOLD)
        return a

    got = reference()
    np.testing.assert_allclose(got[16], final[16].copy_to_host(), rtol=1e-9, atol=1e-9,
                               err_msg="hand-written STOMP rows against gpu_stump's profile")
    ours = median_time(lambda: stumpy.gpu_stump(T, M), repeats=repeats, warmup=1)
    theirs = median_time(reference, repeats=repeats, warmup=1)
    print(f"n = {n:6d}, m = {M}: gpu_stump on numba_cube {fmt_time(ours)}, the same rows by "
          f"hand (njit prange) {fmt_time(theirs)}, ratio {ours / theirs:6.2f}", flush=True)


def against_simulator(n: int) -> None:
    T = np.random.default_rng(0).random(n)
    ours = median_time(lambda: stumpy.gpu_stump(T, M), repeats=5)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", _SIMULATOR_PROGRAM, str(n)],
                         env=env, capture_output=True, text=True, check=True)
    simulator = float(out.stdout.split()[-1])
    print(f"n = {n:6d}, m = {M}: gpu_stump on numba_cube {fmt_time(ours)}, on numba-cuda's "
          f"simulator {fmt_time(simulator)}, simulator / ours {simulator / ours:8.0f} "
          f"(goal >= 1000)", flush=True)


def launch_cost(n: int) -> None:
    """One row's launch as gpu_stump makes it, through the layer and through client.launch."""
    from numba import cuda
    gpu_stump_module = sys.modules["stumpy.gpu_stump"]     # (stumpy.gpu_stump is the function)
    captured = {}
    kernel = gpu_stump_module._compute_and_update_PI_kernel

    class Recording:            # gpu_stump looks its kernel up in its module at every launch
        def __getitem__(self, config):
            def launch(*args):
                captured["config"], captured["args"] = config, args
                return kernel[config](*args)
            return launch

    T = np.random.default_rng(1).random(n)
    launches = n - M + 1
    gpu_stump_module._compute_and_update_PI_kernel = Recording()
    try:
        stumpy.gpu_stump(T, M)
    finally:
        gpu_stump_module._compute_and_update_PI_kernel = kernel
    (grid, block), args = captured["config"][:2], captured["args"]
    client = cube.client("cpu")
    direct = kernel.cube_kernel      # the cube.Kernel the layer launches
    handles = [getattr(a, "handle", a) for a in args]   # device arrays -> their handles
    burst = 100

    def through_layer():
        for _ in range(burst):
            kernel[grid, block](*args)
        cuda.synchronize()

    def through_client():
        for _ in range(burst):
            client.launch(direct, grid, block, *handles)
        client.sync()

    layer = median_time(through_layer, repeats=5) / burst
    bare = median_time(through_client, repeats=5) / burst
    total = median_time(lambda: stumpy.gpu_stump(T, M), repeats=3)
    print(f"n = {n}: {launches} launches of {grid[0] if isinstance(grid, tuple) else grid} x "
          f"{block[0] if isinstance(block, tuple) else block} units; one call "
          f"{fmt_time(total)} = {fmt_time(total / launches)} a launch; {burst} launches then a "
          f"synchronize: {fmt_time(layer)} a launch through the layer, {fmt_time(bare)} through "
          f"client.launch", 
          flush=True)
    profile = cProfile.Profile()
    profile.enable()
    stumpy.gpu_stump(T, M)
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(14)
    print(text.getvalue())


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    print(f"load: {os.getloadavg()}, cores: {os.cpu_count()}", flush=True)
    warm = np.random.default_rng(7).random(120)
    t0 = time.perf_counter()
    stumpy.stump(warm, M)
    stumpy.gpu_stump(warm, M)         # compiles: the kernel on the CPU backend, stump's njit
    print(f"compiles (both): {fmt_time(time.perf_counter() - t0)}", flush=True)
    print("\n== gpu_stump on numba_cube against stumpy.stump ==")
    against_stump(2_000, repeats=3)
    if not quick:
        against_stump(20_000, repeats=1)
    print("\n== gpu_stump on numba_cube against its algorithm written by hand ==")
    against_same_algorithm(2_000, repeats=3)
    if not quick:
        against_same_algorithm(20_000, repeats=1)
    print("\n== gpu_stump on numba_cube against numba-cuda's simulator ==")
    if not quick and "--no-simulator" not in argv:
        for n in (200, 400):
            against_simulator(n)
    print("\n== where a gpu_stump call's time goes ==")
    launch_cost(2_000)
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main(sys.argv[1:])
