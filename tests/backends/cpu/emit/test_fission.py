"""Two adjacent barrier regions -- R1 reads shared ``sm[tid + c]``, R2 updates ``sm[tid]`` -- give
NumPy's result, whatever order ``emit/cube_kernel.py`` runs their unit loops in.

These pin the cases a fusion of R1 and R2 into one unit loop would have to tell apart: fusing is
legal for the Hillis-Steele scan (``c = -off``, iterated by descending ``tid``), for ``c > 0``
(ascending) and ``c == 0``, with the sign of ``c`` known only at run time; it would be wrong
for ``c`` of the other sign than the loop order, for an R2 that writes ``sm[tid + 1]``, and for
a global array written in R2 and read in R1 of the next step. Every kernel is checked against a
NumPy simulation of the same rounds, in the serial and the parallel variant, with a cube size
that is not a multiple of 32 and a partial last cube.
"""

import numpy as np
import pytest
from numba import cuda, int64

from numba_cube.backends.cpu.translate import build_program

VARIANTS = ["serial", "parallel"]
TPB = 200           # not a multiple of the warp size
NCUBES = 4
N = NCUBES * TPB - 37   # the last cube is partial


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


_programs: dict = {}


def run(kernel, variant, *args):
    if kernel not in _programs:
        _programs[kernel] = build_program(kernel.py_func)
    getattr(_programs[kernel], variant)(NCUBES, 1, 1, TPB, 1, 1, *args)


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"rng seed: {seed}")            # shown by pytest when a test fails
    return np.random.default_rng(seed)


def cubes(x):
    """``x`` padded with zeros to whole cubes, one row per cube."""
    return np.concatenate([x, np.zeros(NCUBES * TPB - x.size, x.dtype)]).reshape(NCUBES, TPB)


# ---- kernels --------------------------------------------------------------------------------

@cuda.jit
def prefix_scan(x, out):
    """Hillis-Steele inclusive scan: R1 reads the lower lane ``sm[tid - off]``."""
    sm = cuda.shared.array(TPB, int64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i] if i < x.size else 0
    cuda.syncthreads()
    off = 1
    while off < TPB:
        t = sm[tid - off] if tid >= off else 0
        cuda.syncthreads()
        sm[tid] += t
        cuda.syncthreads()
        off *= 2
    if i < x.size:
        out[i] = sm[tid]


@cuda.jit
def suffix_scan(x, out):
    """The mirror image: R1 reads the upper lane ``sm[tid + off]`` (a loop in descending ``tid``
    would read values already updated)."""
    sm = cuda.shared.array(TPB, int64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i] if i < x.size else 0
    cuda.syncthreads()
    off = 1
    while off < TPB:
        t = sm[tid + off] if tid + off < TPB else 0
        cuda.syncthreads()
        sm[tid] += t
        cuda.syncthreads()
        off *= 2
    if i < x.size:
        out[i] = sm[tid]


@cuda.jit
def shifted_adds(x, out, c, rounds):
    """``c`` is a kernel argument: its sign, and so the legal loop order, is known only at run
    time; ``c == 0`` doubles every element each round."""
    sm = cuda.shared.array(TPB, int64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i] if i < x.size else 0
    cuda.syncthreads()
    for _ in range(rounds):
        t = sm[tid + c] if 0 <= tid + c < TPB else 0
        cuda.syncthreads()
        sm[tid] += t
        cuda.syncthreads()
    if i < x.size:
        out[i] = sm[tid]


@cuda.jit
def writes_next_lane(x, out):
    """R2 writes ``sm[tid + 1]``, not ``sm[tid]``: a fused loop in ascending ``tid`` would let a
    unit read ``sm[tid - 1]`` after the unit two below updated it."""
    sm = cuda.shared.array(TPB, int64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i] if i < x.size else 0
    cuda.syncthreads()
    for _ in range(3):
        t = sm[tid - 1] if tid >= 1 else 0
        cuda.syncthreads()
        if tid + 1 < TPB:
            sm[tid + 1] += t
        cuda.syncthreads()
    if i < x.size:
        out[i] = sm[tid]


@cuda.jit
def global_feedback(x, out):
    """R2 writes the global ``out[i]``, which R1 of the next round reads at ``out[i - 1]``: the
    global array carries data between the lanes just as ``sm`` does."""
    sm = cuda.shared.array(TPB, int64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i] if i < x.size else 0
    if i < out.size:
        out[i] = 0
    cuda.syncthreads()
    for _ in range(3):
        t = sm[tid - 1] if tid >= 1 else 0
        u = out[i - 1] if tid >= 1 and i - 1 < out.size else 0
        cuda.syncthreads()
        sm[tid] += t
        if i < out.size:
            out[i] = sm[tid] + u
        cuda.syncthreads()


# ---- NumPy references -----------------------------------------------------------------------

def shifted_rounds(x, c, rounds):
    """Per cube: ``rounds`` times, every lane adds the lane ``c`` away (0 past the cube)."""
    sm = cubes(x).copy()
    for _ in range(rounds):
        t = np.zeros_like(sm)
        lanes = np.arange(TPB)
        src = lanes + c
        ok = (src >= 0) & (src < TPB)
        t[:, ok] = sm[:, src[ok]]
        sm += t
    return sm.ravel()[:x.size]


# ---- tests ----------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_prefix_scan_reading_lower_lanes(variant, rng):
    """R1 reading ``sm[tid - off]``, R2 adding into ``sm[tid]``: the cube-wise inclusive scan."""
    x = rng.integers(-1000, 1000, N)
    out = np.zeros(N, np.int64)
    run(prefix_scan, variant, x, out)
    np.testing.assert_array_equal(out, np.cumsum(cubes(x), axis=1).ravel()[:N])


@pytest.mark.parametrize("variant", VARIANTS)
def test_suffix_scan_reading_upper_lanes(variant, rng):
    """R1 reading ``sm[tid + off]`` (the other sign): the cube-wise inclusive suffix scan."""
    x = rng.integers(-1000, 1000, N)
    out = np.zeros(N, np.int64)
    run(suffix_scan, variant, x, out)
    suffix = np.cumsum(cubes(x)[:, ::-1], axis=1)[:, ::-1]
    np.testing.assert_array_equal(out, suffix.ravel()[:N])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("c", [-3, -1, 0, 1, 5])
def test_offset_known_only_at_run_time(variant, c, rng):
    """The offset is a kernel argument of either sign (or zero): every round adds the lane ``c``
    away as it was before the round."""
    x = rng.integers(-1000, 1000, N)
    out = np.zeros(N, np.int64)
    run(shifted_adds, variant, x, out, c, 4)
    np.testing.assert_array_equal(out, shifted_rounds(x, c, 4))


@pytest.mark.parametrize("variant", VARIANTS)
def test_second_region_writing_the_next_lane(variant, rng):
    """R2 writing ``sm[tid + 1]`` with the value R1 read at ``sm[tid - 1]``: each round every
    lane adds the lane two below it as it was before the round."""
    x = rng.integers(-1000, 1000, N)
    out = np.zeros(N, np.int64)
    run(writes_next_lane, variant, x, out)
    np.testing.assert_array_equal(out, shifted_rounds(x, -2, 3))


@pytest.mark.parametrize("variant", VARIANTS)
def test_global_written_in_second_region_read_in_first(variant, rng):
    """R2 writes ``out[i]``, R1 of the next round reads ``out[i - 1]``: the value read is the
    one the lower lane wrote in the previous round."""
    x = rng.integers(-1000, 1000, N)
    out = np.full(N, 12345, np.int64)
    run(global_feedback, variant, x, out)
    sm = cubes(x).copy()
    g = np.zeros_like(sm)
    valid = (np.arange(NCUBES * TPB) < N).reshape(NCUBES, TPB)
    for _ in range(3):
        t = np.zeros_like(sm)
        t[:, 1:] = sm[:, :-1]
        u = np.zeros_like(g)
        u[:, 1:] = np.where(valid[:, :-1], g[:, :-1], 0)
        sm += t
        g = np.where(valid, sm + u, g)
    np.testing.assert_array_equal(out, g.ravel()[:N])
