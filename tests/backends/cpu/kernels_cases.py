"""Example kernels in numba.cuda's dialect, shared by the CPU translator tests.

Plain ``@cuda.jit`` kernels: creating them needs no GPU (numba only compiles for CUDA on first
launch), and the translator reads ``.py_func``. Module-level constants (``TPB``, ``TILE``) exercise
constant freezing.
"""

import math

import numpy as np
from numba import cuda, float32, float64, int32, types

import numba.cuda as nc

TPB = 64
TILE = 8
SCAN = 32
LOCAL_N = 4
GAIN = 2.5


# ---- barrier-free ----------------------------------------------------------------------------

@cuda.jit
def vec_add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@cuda.jit
def saxpy_early_return(a, x, y, out):
    i = cuda.grid(1)
    if i >= out.size:
        return
    out[i] = a * x[i] + y[i]


@cuda.jit
def stencil_2d(u, out):
    x, y = cuda.grid(2)
    n, m = u.shape
    if 1 <= x < m - 1 and 1 <= y < n - 1:
        out[y, x] = 0.25 * (u[y - 1, x] + u[y + 1, x] + u[y, x - 1] + u[y, x + 1])


@cuda.jit
def grid_3d(out):
    x, y, z = cuda.grid(3)
    nx, ny, nz = cuda.gridsize(3)
    if z < out.shape[0] and y < out.shape[1] and x < out.shape[2]:
        out[z, y, x] = x + 10 * y + 100 * z + 1000 * (nx + ny + nz)


@cuda.jit
def ids_2d(out_t, out_b):
    """Writes threadIdx/blockIdx of every unit (checks the 2-D decomposition)."""
    x, y = cuda.grid(2)
    if y < out_t.shape[0] and x < out_t.shape[1]:
        out_t[y, x] = cuda.threadIdx.x + 100 * cuda.threadIdx.y
        out_b[y, x] = cuda.blockIdx.x + 100 * cuda.blockIdx.y


@cuda.jit
def grid_stride_math(x, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.size, stride):
        out[i] = math.sqrt(abs(x[i])) * GAIN + math.floor(x[i])


@cuda.jit
def early_return_in_loop(a, out, limit):
    i = cuda.grid(1)
    if i >= out.size:
        return
    acc = 0.0
    for k in range(a.shape[1]):
        if a[i, k] > limit:
            out[i] = -1.0 - k
            return
        acc += a[i, k]
    out[i] = acc


@cuda.jit
def local_array_sort(x, out):
    """Sorts groups of LOCAL_N values in a per-unit cuda.local.array."""
    i = cuda.grid(1)
    if i * LOCAL_N >= x.size:
        return
    buf = cuda.local.array(LOCAL_N, float64)
    for k in range(LOCAL_N):
        buf[k] = x[i * LOCAL_N + k]
    for p in range(LOCAL_N):
        for q in range(LOCAL_N - 1 - p):
            if buf[q] > buf[q + 1]:
                t = buf[q]
                buf[q] = buf[q + 1]
                buf[q + 1] = t
    for k in range(LOCAL_N):
        out[i * LOCAL_N + k] = buf[k]


@cuda.jit(device=True)
def clamp(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@cuda.jit(device=True)
def global_id():
    return cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x


@cuda.jit(device=True)
def scaled_clamp(v):
    return clamp(v * GAIN, -1.0, 1.0)


@cuda.jit
def device_calls(x, out):
    i = global_id()
    if i < x.size:
        out[i] = scaled_clamp(x[i]) + clamp(i, 0, 3)


@nc.jit
def alias_module(a, out):
    """Uses an alias of numba.cuda (``import numba.cuda as nc``)."""
    i = nc.grid(1)
    if i < a.size:
        out[i] = a[i] * nc.blockDim.x + nc.warpsize


@cuda.jit
def reassign_param(a, n):
    i = cuda.grid(1)
    n = n - i           # per-unit reassignment of a parameter
    if i < a.size:
        a[i] = n


# ---- barriers and shared memory --------------------------------------------------------------

@cuda.jit
def block_sum(a, out):
    """Tree reduction: a barrier inside a while loop with a uniform condition."""
    sm = cuda.shared.array(TPB, float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < a.size:
        sm[tid] = a[i]
    else:
        sm[tid] = 0.0
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sm[tid] += sm[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = sm[0]


@cuda.jit
def matmul_tiled(A, B, C):
    """Shared-memory tiled matmul: two barriers inside a for loop."""
    sA = cuda.shared.array((TILE, TILE), float64)
    sB = cuda.shared.array((TILE, TILE), float64)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    acc = 0.0
    for k in range((A.shape[1] + TILE - 1) // TILE):
        sA[ty, tx] = 0.0
        sB[ty, tx] = 0.0
        if y < A.shape[0] and k * TILE + tx < A.shape[1]:
            sA[ty, tx] = A[y, k * TILE + tx]
        if x < B.shape[1] and k * TILE + ty < B.shape[0]:
            sB[ty, tx] = B[k * TILE + ty, x]
        cuda.syncthreads()
        for j in range(TILE):
            acc += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = acc


@cuda.jit
def transpose_shared(a, out):
    """Tile transpose through shared memory (padded to TILE + 1 columns)."""
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    x = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    y = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    if y < a.shape[0] and x < a.shape[1]:
        tile[cuda.threadIdx.y, cuda.threadIdx.x] = a[y, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE + cuda.threadIdx.x
    y = cuda.blockIdx.x * TILE + cuda.threadIdx.y
    if y < out.shape[0] and x < out.shape[1]:
        out[y, x] = tile[cuda.threadIdx.x, cuda.threadIdx.y]


@cuda.jit
def block_scan(a, out):
    """Hillis-Steele inclusive scan per block: read, barrier, write, barrier in a for loop."""
    sm = cuda.shared.array(SCAN, int32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = a[i] if i < a.size else 0
    cuda.syncthreads()
    offset = 1
    while offset < SCAN:
        v = 0
        if tid >= offset:
            v = sm[tid - offset]
        cuda.syncthreads()
        sm[tid] += v
        cuda.syncthreads()
        offset *= 2
    if i < a.size:
        out[i] = sm[tid]


@cuda.jit
def exit_then_barrier(a, out):
    """Early return with barriers: exited units must skip the later regions."""
    sm = cuda.shared.array(TPB, float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = -1.0
    if i >= a.size:
        return
    sm[tid] = a[i]
    cuda.syncthreads()
    j = (tid + 1) % cuda.blockDim.x
    if cuda.blockIdx.x * cuda.blockDim.x + j < a.size:
        out[i] = sm[tid] + sm[j]
    else:
        out[i] = sm[tid]


@cuda.jit
def shared_local_across_barrier(a, out):
    """A local array and a computed value both live across a barrier."""
    sm = cuda.shared.array(TPB, float64)
    loc = cuda.local.array(2, types.float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    v = a[i] * 2.0 if i < a.size else 0.0
    loc[0] = v
    loc[1] = v + 1.0
    sm[tid] = v
    cuda.syncthreads()
    other = sm[cuda.blockDim.x - 1 - tid]
    if i < a.size:
        out[i] = loc[0] + loc[1] + other + v


# ---- import styles ---------------------------------------------------------------------------

from numba.cuda import blockDim, blockIdx, syncthreads, threadIdx  # noqa: E402


@cuda.jit
def imported_names(a, out):
    """Uses names imported from numba.cuda instead of the module."""
    sm = cuda.shared.array(TPB, float64)
    t = threadIdx.x
    i = blockIdx.x * blockDim.x + t
    sm[t] = a[i] if i < a.size else 0.0
    syncthreads()
    if i < a.size:
        out[i] = sm[blockDim.x - 1 - t]


@cuda.jit
def barrier_reductions(a, counts, flags):
    """syncthreads_count/and/or; the result is cube-uniform and may steer a loop with barriers."""
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    v = a[i] if i < a.size else 0
    n = cuda.syncthreads_count(v > 0)
    every = cuda.syncthreads_and(v > 0)
    some = cuda.syncthreads_or(v > 0)
    rounds = 0
    busy = cuda.syncthreads_or(v > 0)
    while busy:
        v -= 1
        rounds += 1
        busy = cuda.syncthreads_or(v > 0)
    if t == 0:
        counts[cuda.blockIdx.x] = n
        flags[cuda.blockIdx.x, 0] = every
        flags[cuda.blockIdx.x, 1] = some
        flags[cuda.blockIdx.x, 2] = rounds


@cuda.jit(device=True)
def dev_local_sum(x, i):
    """A device function with its own local array and an atomic on a global array."""
    tmp = cuda.local.array(3, np.float64)
    for k in range(3):
        tmp[k] = x[i] * (k + 1)
    return tmp[0] + tmp[1] + tmp[2]


@cuda.jit
def uniform_break(a, out, total, limit):
    """A uniform `break` out of a loop with barriers; block-level values computed after a barrier."""
    sm = cuda.shared.array(TPB, np.float64)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * cuda.blockDim.x
    acc = 0.0
    for k in range(1000):
        sm[t] = a[(base + t + k) % a.size]
        cuda.syncthreads()
        if k >= limit:
            break
        acc += sm[(t + 1) % cuda.blockDim.x]
        cuda.syncthreads()
    out[base + t] = acc + dev_local_sum(a, base + t)
    cuda.atomic.add(total, 0, 1)


@cuda.jit
def row_view_across_barrier(A, out):
    """A per-unit array view (not a number) lives across a barrier."""
    sm = cuda.shared.array(TPB, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    row = A[i % A.shape[0]]
    sm[t] = row[0]
    cuda.syncthreads()
    if i < out.size:
        out[i] = row[1] + sm[(t + 1) % cuda.blockDim.x]
