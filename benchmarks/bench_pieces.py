"""How many pieces the CPU backend's parallel variant cuts a launch into (issues 32, 33).

A kernel's parallel variant is a ``prange`` over pieces of the launch, each a call of the chunk
function (``backends/cpu/emit/entry_points.py``). Numba's ``prange`` hands each thread one
contiguous share of the iterations (a static schedule), so more pieces than threads balance
nothing; they cost a call each and, in a cube kernel, the allocation of the piece's shared,
local and replica arrays. Today's rule is one piece per thread of Numba's pool (``CHUNKS``); the
reference is the rule before it, 256 pieces. Both variants are the same translation with a
different literal, loaded side by side, and called directly (no runtime around them) with the
same arguments, taking turns round by round; the ratio is today's / 256 pieces' (below 1:
faster). The kernels: ``bench_kernels.py``'s reductions and histogram at 2^22 elements, and two
launches of 20,000 units (stumpy's ``gpu_stump`` makes one such launch per row).

Run: ``python benchmarks/bench_pieces.py`` (``NUMBA_NUM_THREADS`` sets the pool, hence today's
piece count). The cubes' work is the same in both variants: the results are checked equal.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
import types

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_kernels as bk  # noqa: E402
from common import Table  # noqa: E402

from numba_cube.backends.cpu.emit.entry_points import CHUNKS  # noqa: E402
from numba_cube.backends.cpu.translate import translate_source  # noqa: E402

REFERENCE_PIECES = 256


def parallel_variants(kernel) -> dict:
    """pieces -> the kernel's parallel variant cut into that many pieces at most."""
    text = translate_source(kernel.py_func)
    name = re.search(r"^def (\w+)__par\(", text, re.M).group(1)
    out = {}
    for pieces in (REFERENCE_PIECES, CHUNKS):
        variant = re.sub(r"(__nchunks = min\(.*, )\d+\)", rf"\g<1>{pieces})", text)
        module = types.ModuleType(f"pieces_{pieces}_{name}")
        exec(compile(variant.replace("cache=True", "cache=False"), module.__name__, "exec"),
             module.__dict__)
        out[pieces] = getattr(module, f"{name}__par")
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    big, small = 1 << 22, 20000

    def units(n):
        return (bk.grid1(n), 1, 1, bk.TPB, 1, 1)

    cases = {
        "block_sum, 2^22": (bk.block_sum, units(big), (rng.standard_normal(big), np.zeros(1))),
        "warp_sum, 2^22": (bk.warp_sum, units(big), (rng.standard_normal(big), np.zeros(1))),
        "hist_shared, 2^22": (bk.hist_shared, (min(bk.HIST_CUBES, bk.grid1(big)), 1, 1, bk.NBINS,
                                               1, 1),
                              (rng.integers(0, bk.NBINS, big).astype(np.int32),
                               np.zeros(bk.NBINS, np.int64))),
        "axpy, 2^22": (bk.axpy, units(big), (2.0, rng.standard_normal(big),
                                             rng.standard_normal(big), np.zeros(big))),
        "axpy, 20,000 units": (bk.axpy, units(small), (2.0, rng.standard_normal(small),
                                                       rng.standard_normal(small), np.zeros(small))),
        "block_sum, 20,000 units": (bk.block_sum, units(small), (rng.standard_normal(small),
                                                                 np.zeros(1))),
    }
    table = Table(f"parallel variant: {CHUNKS} pieces (one per thread) vs {REFERENCE_PIECES} "
                  f"({numba.config.NUMBA_NUM_THREADS} threads; per launch)")
    for label, (kernel, geometry, args) in cases.items():
        variants = parallel_variants(kernel)
        outputs = {}
        for pieces, fn in variants.items():
            fresh = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            fn(*geometry, *fresh)
            outputs[pieces] = fresh[-1]
        np.testing.assert_allclose(outputs[CHUNKS], outputs[REFERENCE_PIECES], rtol=1e-9)
        reps = 200 if "20,000" in label else 20
        samples: dict = {pieces: [] for pieces in variants}
        for _ in range(7):
            for pieces, fn in variants.items():
                t0 = time.perf_counter()
                for _ in range(reps):
                    fn(*geometry, *args)
                samples[pieces].append((time.perf_counter() - t0) / reps)
        table.row(label, statistics.median(samples[CHUNKS]),
                  statistics.median(samples[REFERENCE_PIECES]), f"{REFERENCE_PIECES} pieces")


if __name__ == "__main__":
    main()
