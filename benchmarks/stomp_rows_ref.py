"""gpu_stump's algorithm written by hand for the CPU: the reference that tells the algorithm's
cost from numba_cube's (``bench_stumpy.py``, section 1b).

stumpy's ``gpu_stump`` is STOMP by rows: one launch per row ``j`` of the distance matrix, every
unit ``i`` updating the sliding dot product ``QT[i]`` and the profile of subsequence ``i``. Its
CPU twin ``stumpy.stump`` is another algorithm (diagonals, half the matrix by symmetry, each
diagonal's data in cache). A user porting the kernel to the CPU by hand would write the rows as
below: the kernel's body under ``prange`` over ``i``, one parallel region per row (what a launch
is). Its result is checked against ``gpu_stump``'s before it is timed.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange


@njit(nogil=True)
def _searchsorted_right(a, v, bfs, nlevel):
    """stumpy.core._gpu_searchsorted_right, as an njit function."""
    n = a.shape[0]
    idx = 0
    for level in range(nlevel):
        if v < a[bfs[idx]]:
            next_idx = 2 * idx + 1
        else:
            next_idx = 2 * idx + 2
        if level == nlevel - 1 or bfs[next_idx] < 0:
            if v < a[bfs[idx]]:
                idx = max(bfs[idx], 0)
            else:
                idx = min(bfs[idx] + 1, n)
            break
        idx = next_idx
    return idx


@njit(parallel=True, nogil=True)
def stomp_rows(range_start, range_stop, T_A, T_B, m, QT_even, QT_odd, QT_first, μ_Q, σ_Q, M_T,
               Σ_T, Q_const, T_const, w, ignore_trivial, excl_zone, profile, profile_L,
               profile_R, indices, indices_L, indices_R, bfs, nlevel, k, denom_threshold):
    for row in range(range_start - 1, range_stop):
        j = row
        compute_QT = row >= range_start          # the first launch only reads QT
        QT_out = QT_even if j % 2 == 0 else QT_odd
        QT_in = QT_odd if j % 2 == 0 else QT_even
        for i in prange(QT_out.shape[0]):
            zone_start = max(0, i - excl_zone)
            zone_stop = min(w, i + excl_zone)
            if compute_QT:
                if i == 0:
                    QT_out[0] = QT_first[j]
                else:
                    QT_out[i] = (QT_in[i - 1] - T_A[i - 1] * T_B[j - 1]
                                 + T_A[i + m - 1] * T_B[j + m - 1])
            if math.isinf(μ_Q[i]) or math.isinf(M_T[j]):
                p_norm = np.inf
            elif Q_const[i] and T_const[j]:
                p_norm = 0.0
            elif Q_const[i] or T_const[j]:
                p_norm = float(m)
            else:
                denom = max((σ_Q[i] * Σ_T[j]) * m, denom_threshold)
                ρ = min((QT_out[i] - (μ_Q[i] * M_T[j]) * m) / denom, 1.0)
                p_norm = 2 * m * (1.0 - ρ)
            if ignore_trivial:
                if zone_start <= j <= zone_stop:
                    p_norm = np.inf
                if p_norm < profile_L[i] and j < i:
                    profile_L[i] = p_norm
                    indices_L[i] = j
                if p_norm < profile_R[i] and j > i:
                    profile_R[i] = p_norm
                    indices_R[i] = j
            if p_norm < profile[i, -1]:
                idx = _searchsorted_right(profile[i], p_norm, bfs, nlevel)
                for g in range(k - 1, idx, -1):
                    profile[i, g] = profile[i, g - 1]
                    indices[i, g] = indices[i, g - 1]
                profile[i, idx] = p_norm
                indices[i, idx] = j
