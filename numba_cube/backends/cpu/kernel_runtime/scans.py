"""Run-time helpers of the scan idiom (``passes/scan_idiom.py``): a cube's Hillis-Steele rounds on an
integer shared array, done by one unit in one pass.

Imported by generated modules; part of ``module.SUPPORT_DIGEST``, so editing this file changes
the text (and so the caches) of the kernels that use it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from numba_cube.backends.cpu.cache.helpers import sign_helpers

__all__ = ["doubling_end", "windowed_scan"]


@njit(nogil=True, cache=True)
def doubling_end(bound):
    """The value of ``d`` after ``d = 1; while d < bound: d *= 2`` (the rounds' loop)."""
    d = 1
    while d < bound:
        d *= 2
    return d


@njit(nogil=True, cache=True)
def windowed_scan(sm, n, bound):
    """What Hillis-Steele rounds with offsets ``1, 2, 4, ... < bound`` leave in ``sm[:n]``:
    ``sm[u]`` becomes the sum of the ``w`` values ending at ``u`` (fewer at the start), where
    ``w = doubling_end(bound)``; ``w >= n`` is the inclusive prefix sum.

    Exact for the integer dtypes ``scan_idiom`` admits: each round computes in int64 and stores
    modulo the element's width, which equals the sum modulo that width in any order."""
    w = doubling_end(bound)
    if w >= n:
        for u in range(1, n):
            sm[u] += sm[u - 1]
        return
    before = sm[:n].astype(np.int64)
    acc = np.int64(0)
    for u in range(n):
        acc += before[u]
        if u >= w:
            acc -= before[u - w]
        sm[u] = acc


# Last: Numba's unsigned cache of these helpers is never read (cache/helpers.py says why).
sign_helpers(globals())
