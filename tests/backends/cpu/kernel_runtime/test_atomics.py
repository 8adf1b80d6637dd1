"""cuda.atomic.* on the CPU: real atomics across concurrently running cubes, CUDA's contract
(the old value is returned), plain read-modify-write for cube-private (shared/local) arrays.
"""

import numpy as np
import pytest
from numba import cuda, int64, njit
from numba.core.errors import TypingError

from numba_cube.backends.cpu.kernel_runtime import atomics as A
from numba_cube.backends.cpu.translate import build_program

NBINS = 16
BLOCK = 64


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        d = tmp_path_factory.mktemp("cube_cache")
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(d))
        yield d


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"rng seed: {seed}")
    return np.random.default_rng(seed)


_programs = {}


def prog(kernel):
    if kernel not in _programs:
        _programs[kernel] = build_program(kernel.py_func)
    return _programs[kernel]


def cdiv(a, b):
    return (a + b - 1) // b


@cuda.jit
def histogram(x, h):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(h, x[i], 1)


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_histogram_across_cubes_is_exact(variant, rng):
    """Many cubes incrementing few bins concurrently lose no update (parallel variant). The
    array is only ever added to, so its atomics go through the per-chunk private copy
    (``passes/privatize.py``), whose fallback and merge are the real atomics."""
    n = 300_000
    x = rng.integers(0, NBINS, n)
    h = np.zeros(NBINS, np.int64)
    getattr(prog(histogram), variant)(cdiv(n, BLOCK), 1, 1, BLOCK, 1, 1, x, h)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=NBINS))
    src = prog(histogram).source
    assert "__private_add(h, __priv_h, x[i], 1)" in src and "__merge_private(h, __priv_h)" in src


@cuda.jit
def all_ops(vals, add, sub, mx, mn, exch_cell, exch_old, cas_cell, cas_won):
    i = cuda.grid(1)
    if i < vals.size:
        v = vals[i]
        k = i % 4
        cuda.atomic.add(add, k, v)
        cuda.atomic.sub(sub, k, v)
        cuda.atomic.max(mx, k, v)
        cuda.atomic.min(mn, k, v)
        exch_old[i] = cuda.atomic.exch(exch_cell, 0, v)
        if cuda.atomic.cas(cas_cell, 0, 0, 1) == 0:       # only the first unit flips 0 -> 1
            cuda.atomic.add(cas_won, 0, 1)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_each_atomic_op(variant, dtype, rng):
    """add/sub/max/min/exch/cas on int and float dtypes of 32 and 64 bits."""
    n = 20_000
    if np.issubdtype(dtype, np.integer):
        vals = rng.integers(-1000, 1000, n).astype(dtype)
    else:
        vals = rng.normal(size=n).astype(dtype)
    add, sub = np.zeros(4, dtype), np.zeros(4, dtype)
    mx, mn = np.full(4, vals.min() - 1, dtype), np.full(4, vals.max() + 1, dtype)
    exch_cell, exch_old = np.array([42], dtype), np.zeros(n, dtype)
    cas_cell, cas_won = np.zeros(1, dtype), np.zeros(1, np.int64)
    getattr(prog(all_ops), variant)(cdiv(n, BLOCK), 1, 1, BLOCK, 1, 1, vals, add, sub, mx, mn,
                                    exch_cell, exch_old, cas_cell, cas_won)
    groups = [vals[k::4] for k in range(4)]
    exact = np.issubdtype(dtype, np.integer)
    ref = np.array([g.astype(np.float64).sum() for g in groups])
    tol = dict(rtol=0, atol=0) if exact else dict(rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(add, ref, **tol)
    np.testing.assert_allclose(sub, -ref, **tol)
    np.testing.assert_array_equal(mx, [g.max() for g in groups])
    np.testing.assert_array_equal(mn, [g.min() for g in groups])
    # exch: every value went through the cell exactly once
    np.testing.assert_array_equal(np.sort(np.concatenate([exch_old, exch_cell])),
                                  np.sort(np.concatenate([vals, [42]]).astype(dtype)))
    assert cas_won[0] == 1 and cas_cell[0] == 1


@cuda.jit
def int_ops(out, idx2d):
    i = cuda.grid(1)
    if i < 100:
        cuda.atomic.inc(out, 0, 9)            # wraps to 0 after reaching 9
        cuda.atomic.dec(out, 1, 9)            # 0 wraps to 9
        cuda.atomic.or_(out, 2, 1 << (i % 8))
        cuda.atomic.and_(out, 3, ~(1 << (i % 8)))
        cuda.atomic.xor(out, 4, 1)
        cuda.atomic.compare_and_swap(out[5:], 0, 7)   # slot 5: 0 -> 7 once
        cuda.atomic.add(idx2d, (i % 3, i % 2), 1)       # tuple index into a 2-D array


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_integer_only_ops_and_tuple_index(variant):
    """inc/dec wrap like CUDA; and_/or_/xor; compare_and_swap; tuple indices for 2-D arrays."""
    out = np.array([0, 0, 0, 0xFF, 0, 0], np.uint32)
    idx2d = np.zeros((3, 2), np.int64)
    getattr(prog(int_ops), variant)(4, 1, 1, 32, 1, 1, out, idx2d)
    assert out[0] == 100 % 10                  # 100 increments modulo 10
    assert out[1] == (-100) % 10               # 100 decrements, wrapping 0 -> 9
    assert out[2] == 0xFF and out[3] == 0 and out[4] == 0 and out[5] == 7
    ref = np.zeros((3, 2), np.int64)
    for i in range(100):
        ref[i % 3, i % 2] += 1
    np.testing.assert_array_equal(idx2d, ref)


@cuda.jit
def shared_histogram(x, h):
    sm = cuda.shared.array(16, int64)
    t = cuda.threadIdx.x
    if t < 16:
        sm[t] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(sm, x[i], 1)
    cuda.syncthreads()
    if t < 16:
        cuda.atomic.add(h, t, sm[t])


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_shared_memory_atomics(variant, rng):
    """Atomics on a shared array use a plain read-modify-write (one worker owns the cube); the
    per-cube results merge into a global array with real atomics (through the private-copy
    path of ``passes/privatize.py``, as the global array is only added to)."""
    n = 50_000
    x = rng.integers(0, 16, n)
    h = np.zeros(16, np.int64)
    getattr(prog(shared_histogram), variant)(cdiv(n, BLOCK), 1, 1, BLOCK, 1, 1, x, h)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=16))
    src = prog(shared_histogram).source
    assert "__plain_add(sm, x[i], 1)" in src and "__private_add(h, __priv_h, t, sm[t])" in src


# ---- the intrinsics themselves ---------------------------------------------------------------

@njit
def _ops_return_old(a, f):
    return (A.atomic_add(a, 0, 5), A.atomic_exch(a, 1, 9), A.atomic_cas(a, 2, 3, 8),
            A.atomic_cas(a, 3, 99, 8), A.plain_sub(a, 4, 1), A.atomic_max(f, (0, 0), 2.5),
            A.plain_min(f, (0, 1), -3.0))


def test_intrinsics_return_the_old_value():
    """Every operation returns the value the cell held before (CUDA's contract)."""
    a = np.array([1, 2, 3, 4, 5], np.int64)
    f = np.array([[1.0, 1.0]])
    assert _ops_return_old(a, f) == (1, 2, 3, 4, 5, 1.0, 1.0)
    np.testing.assert_array_equal(a, [6, 9, 8, 4, 4])
    np.testing.assert_array_equal(f, [[2.5, -3.0]])


@njit
def _float_minmax(cells, v):
    A.atomic_max(cells, 0, v)
    A.atomic_nanmax(cells, 1, v)
    A.atomic_min(cells, 2, v)
    A.atomic_nanmin(cells, 3, v)


def test_float_nan_rules_match_numba_cuda():
    """max/min ignore updates when either side is NaN; nanmax/nanmin replace a NaN cell and
    ignore a NaN value."""
    cells = np.array([1.0, 1.0, 1.0, 1.0])
    _float_minmax(cells, np.nan)
    np.testing.assert_array_equal(cells, [1.0, 1.0, 1.0, 1.0])
    cells = np.full(4, np.nan)
    _float_minmax(cells, 2.0)
    assert np.isnan(cells[0]) and cells[1] == 2.0 and np.isnan(cells[2]) and cells[3] == 2.0


def test_readonly_array_is_refused():
    """An atomic on a read-only array does not type-check (it would write through it)."""
    @njit
    def f(a):
        return A.atomic_add(a, 0, 1)
    a = np.zeros(3)
    a.flags.writeable = False
    with pytest.raises(TypingError):
        f(a)


def test_global_atomics_are_real_atomic_instructions():
    """The global variant lowers to an LLVM atomicrmw (not a plain load/store)."""
    @njit
    def f(a):
        return A.atomic_add(a, 0, 1)
    f(np.zeros(2, np.int64))
    assert "atomicrmw add" in f.inspect_llvm(f.signatures[0])
