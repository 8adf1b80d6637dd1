"""Global atomics privatized per chunk (``passes/privatize.py``): which arrays qualify, and that
every kernel -- privatized or not -- gives what NumPy's ``np.add.at``/``np.bincount`` give, in both
variants, over many cubes, through the runtime and from several threads at once."""

import threading

import numpy as np
import pytest
from numba import cuda, int64

import numba_cube as cube
from numba_cube.backends.cpu.kernel_runtime import private_atomics as P
from numba_cube.backends.cpu.emit.entry_points import CHUNKS
from numba_cube.backends.cpu.translate import build_program

BLOCK = 128
N = 1 << 18            # parallel chunks of N / CHUNKS units: privatized for up to 64 bins


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


def prog(kernel, boundscheck=False):
    key = (kernel, boundscheck)
    if key not in _programs:
        _programs[key] = build_program(kernel.py_func, boundscheck=boundscheck)
    return _programs[key]


def run(kernel, variant, n, *args, boundscheck=False):
    getattr(prog(kernel, boundscheck), variant)((n + BLOCK - 1) // BLOCK, 1, 1, BLOCK, 1, 1,
                                                *args)


def privatizes(size, itemsize, n, data_bytes, variant):
    """Whether the run-time policy admits an array of ``size`` elements in this launch."""
    nchunks = CHUNKS if variant == "parallel" else 1
    return P.worth_privatizing(size, size * itemsize, n // nchunks, data_bytes, nchunks)


# ---- kernels whose arrays are privatized ---------------------------------------------------

@cuda.jit
def histogram(x, h):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(h, x[i], 1)


@cuda.jit
def histogram_2d(x, y, h):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(h, (x[i], y[i]), 2)
        cuda.atomic.sub(h, (y[i] % h.shape[0], x[i] % h.shape[1]), 1)


@cuda.jit
def two_histograms_with_exits(x, evens, odds):
    i = cuda.grid(1)
    if i >= x.size:
        return
    if x[i] % 2 == 0:
        cuda.atomic.add(evens, x[i] // 2, 1)
        return
    cuda.atomic.add(odds, -1 - x[i] // 2, 1)        # negative indices wrap, as in NumPy


@cuda.jit
def histogram_with_barrier(x, h):
    sm = cuda.shared.array(BLOCK, int64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[t] = x[i] if i < x.size else -1
    cuda.syncthreads()
    v = sm[BLOCK - 1 - t]                             # another unit's element
    if v >= 0:
        cuda.atomic.add(h, v, 1)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64])
@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_histogram_matches_bincount(variant, dtype, rng):
    """One atomic add per element into 16 bins, over 2048 cubes: exactly np.bincount, with the
    array privatized (the sizes satisfy the policy) and a real atomic merge."""
    x = rng.integers(0, 16, N)
    h = np.zeros(16, dtype)
    assert privatizes(16, h.itemsize, N, x.nbytes + h.nbytes, variant)
    run(histogram, variant, N, x, h)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=16).astype(dtype))
    assert "__private_add(h, __priv_h, x[i], 1)" in prog(histogram).source


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_histogram_wraps_like_the_atomics(variant, rng):
    """int32 counts that overflow wrap modulo 2^32, as np.add.at on int32 does."""
    x = rng.integers(0, 4, N)
    h = np.full(4, np.iinfo(np.int32).max - 1000, np.int32)
    expected = h.copy()
    np.add.at(expected, x, np.int32(1))
    run(histogram, variant, N, x, h)
    np.testing.assert_array_equal(h, expected)


@pytest.mark.parametrize("dtype", [np.int32, np.uint64])
@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_2d_add_and_sub_match_add_at(variant, dtype, rng):
    """add and sub on one 2-D array (tuple indices, metadata read through h.shape) give what
    np.add.at gives, modulo 2^n for the unsigned dtype."""
    x, y = rng.integers(0, 4, N), rng.integers(0, 4, N)
    h = np.zeros((4, 4), dtype)
    assert privatizes(16, h.itemsize, N, x.nbytes * 2 + h.nbytes, variant)
    expected = np.zeros((4, 4), dtype)
    np.add.at(expected, (x, y), dtype(2))
    np.subtract.at(expected, (y % 4, x % 4), dtype(1))
    run(histogram_2d, variant, N, x, y, h)
    np.testing.assert_array_equal(h, expected)
    assert "__private_sub(h, __priv_h" in prog(histogram_2d).source


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_two_arrays_with_early_returns(variant, rng):
    """Two privatized arrays (both merged), updates after and between early returns, negative
    indices: as np.add.at."""
    x = rng.integers(0, 32, N)
    evens, odds = np.zeros(16, np.int64), np.zeros(16, np.int64)
    run(two_histograms_with_exits, variant, N, x, evens, odds)
    ref_e, ref_o = np.zeros(16, np.int64), np.zeros(16, np.int64)
    np.add.at(ref_e, x[x % 2 == 0] // 2, 1)
    np.add.at(ref_o, -1 - x[x % 2 == 1] // 2, 1)
    np.testing.assert_array_equal(evens, ref_e)
    np.testing.assert_array_equal(odds, ref_o)
    src = prog(two_histograms_with_exits).source
    assert "__merge_private(evens, __priv_evens)" in src and "__merge_private(odds, __priv_odds)" in src


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_kernel_with_barriers(variant, rng):
    """A cube-shaped kernel (shared memory, a barrier) with a masked global atomic after it."""
    n = N - 37                                        # a partial last cube
    x = rng.integers(0, 8, n)
    h = np.zeros(8, np.int64)
    run(histogram_with_barrier, variant, n, x, h)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=8))
    assert "__priv_h" in prog(histogram_with_barrier).source


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_refused_at_run_time_still_exact(variant, rng):
    """An array too large for the policy (fewer units per chunk than it asks) takes the real
    atomics: still np.bincount."""
    n = 20_000
    x = rng.integers(0, 4096, n)
    h = np.zeros(4096, np.int64)
    assert not privatizes(4096, 8, n, x.nbytes + h.nbytes, variant)
    run(histogram, variant, n, x, h)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=4096))


@cuda.jit
def add_ones(h, idx):
    i = cuda.grid(1)
    if i < idx.size:
        cuda.atomic.add(h, idx[i], 1.0)


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_float_adds_are_not_reassociated(variant):
    """float64 atomics stay real atomics: 1e16 plus N ones is 1e16 in every order of the adds
    (np.add.at's too), where adding a private partial sum would give 1e16 + N."""
    idx = np.zeros(N, np.int64)
    h = np.array([1e16])
    expected = h.copy()
    np.add.at(expected, idx, 1.0)
    run(add_ones, variant, N, h, idx)
    assert h[0] == expected[0] == 1e16


@cuda.jit
def histogram_via_dynamic_shared(x, h):
    staged = cuda.shared.array(0, int64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    staged[t] = x[i] if i < x.size else -1
    cuda.syncthreads()
    if staged[t] >= 0:
        cuda.atomic.add(h, staged[t], 1)


def test_dynamic_shared_memory_kernel_through_the_runtime(rng):
    """With dynamic shared memory the chunk takes its size after the geometry: the private-copy
    wrapper passes it on; the result is np.bincount."""
    client = cube.client("cpu")
    x = rng.integers(0, 16, N)
    h = client.create(np.zeros(16, np.int64))
    client.launch(cube.kernel(histogram_via_dynamic_shared), N // BLOCK, BLOCK,
                  client.create(x), h, shared_bytes=BLOCK * 8)
    np.testing.assert_array_equal(client.read(h), np.bincount(x, minlength=16))
    assert "__priv_h" in build_program(histogram_via_dynamic_shared.py_func).source


@cuda.jit
def histogram_across_a_grid_sync(x, h, doubled):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(h, x[i], 1)
    cuda.cg.this_grid().sync()
    if i < x.size:
        doubled[i] = 2 * x[i]


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_grid_sync_kernel(variant, rng):
    """A kernel that syncs the grid (one chunk of the whole grid) with privatized atomics
    before the sync: np.bincount, and the work after the sync done."""
    n = 4096
    x = rng.integers(0, 16, n)
    h, doubled = np.zeros(16, np.int64), np.zeros(n, np.int64)
    run(histogram_across_a_grid_sync, variant, n, x, h, doubled)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=16))
    np.testing.assert_array_equal(doubled, 2 * x)
    assert "__priv_h" in prog(histogram_across_a_grid_sync).source


# ---- kernels whose arrays must not be privatized --------------------------------------------

@cuda.jit
def add_then_read(x, h, seen):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(h, x[i], 1)
        seen[i] = h[x[i]]                   # at least this unit's own add


@cuda.jit
def add_result_used(x, h, old):
    i = cuda.grid(1)
    if i < x.size:
        old[i] = cuda.atomic.add(h, 0, 1)


@cuda.jit
def add_and_max(x, h):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(h, x[i], 1)
        cuda.atomic.max(h, 16, x[i])


@cuda.jit(device=True)
def bump(h, b):
    cuda.atomic.add(h, b, 1)


@cuda.jit
def add_in_device_function(x, h):
    i = cuda.grid(1)
    if i < x.size:
        bump(h, x[i])


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_array_also_read_is_not_privatized(variant, rng):
    """A plain read of the array must see the unit's own add (as on the GPU): no copy."""
    x = rng.integers(0, 16, N)
    h, seen = np.zeros(16, np.int64), np.zeros(N, np.int64)
    run(add_then_read, variant, N, x, h, seen)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=16))
    assert (seen >= 1).all()
    assert "__priv_" not in prog(add_then_read).source


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_used_result_is_not_privatized(variant, rng):
    """The old values an atomic returns are distinct and cover 0..N-1: no copy."""
    x = np.zeros(N, np.int64)
    h, old = np.zeros(1, np.int64), np.zeros(N, np.int64)
    run(add_result_used, variant, N, x, h, old)
    assert h[0] == N
    np.testing.assert_array_equal(np.sort(old), np.arange(N))
    assert "__priv_" not in prog(add_result_used).source


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_other_atomic_on_the_array_is_not_privatized(variant, rng):
    """atomic.max next to atomic.add on one array: no copy; counts and maximum as NumPy."""
    x = rng.integers(0, 16, N)
    h = np.zeros(17, np.int64)
    run(add_and_max, variant, N, x, h)
    np.testing.assert_array_equal(h[:16], np.bincount(x, minlength=16))
    assert h[16] == x.max()
    assert "__priv_" not in prog(add_and_max).source


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_array_passed_to_a_device_function_is_not_privatized(variant, rng):
    """An array passed to a device function: no copy; still np.bincount."""
    x = rng.integers(0, 16, N)
    h = np.zeros(16, np.int64)
    run(add_in_device_function, variant, N, x, h)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=16))
    assert "__priv_" not in prog(add_in_device_function).source


@cuda.jit
def add_then_read_alias(acc, view, seen):
    i = cuda.grid(1)
    if i < seen.size:
        if i < 4:
            cuda.atomic.add(acc, i, 1)
            seen[i] = view[i]               # view is acc: sees this unit's own add
        else:
            cuda.atomic.add(acc, 4 + i % 4, 1)


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_array_aliased_by_another_argument_is_not_privatized(variant):
    """Launched with the same array as ``acc`` and ``view``, the read through ``view`` sees the
    unit's own add (the run-time alias test refuses the copy); as NumPy's sequential loop."""
    acc, seen = np.zeros(8, np.int64), np.zeros(N, np.int64)
    run(add_then_read_alias, variant, N, acc, acc, seen)
    np.testing.assert_array_equal(seen[:4], [1, 1, 1, 1])
    expected = np.zeros(8, np.int64)
    np.add.at(expected, np.where(np.arange(N) < 4, np.arange(N), 4 + np.arange(N) % 4), 1)
    np.testing.assert_array_equal(acc, expected)


# ---- failures, the runtime, threads ----------------------------------------------------------

@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_out_of_range_index_raises_as_the_real_atomic(variant, rng):
    """Under boundscheck an index past the end raises IndexError, with the same message as the
    kernel whose array is not privatized (read too), and as NumPy's indexing raises."""
    x = rng.integers(0, 16, N)
    x[N // 3] = 16
    with pytest.raises(IndexError):
        np.zeros(16)[16] += 1
    messages = []
    for kernel, extra in ((histogram, ()), (add_then_read, (np.zeros(N, np.int64),))):
        with pytest.raises(IndexError) as info:
            run(kernel, variant, N, x, np.zeros(16, np.int64), *extra, boundscheck=True)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_out_of_range_index_is_a_recorded_failure():
    """Through the runtime (boundscheck), the out-of-range atomic fails the launch: reading the
    histogram raises LaunchFailure with the IndexError as root; the next launch is correct."""
    checked = cube.client("cpu", boundscheck=True)
    kernel = cube.kernel(histogram)
    x = np.arange(N) % 16
    x[5] = 99
    h = checked.create(np.zeros(16, np.int64))
    checked.launch(kernel, N // BLOCK, BLOCK, checked.create(x), h)
    with pytest.raises(cube.LaunchFailure) as info:
        checked.read(h)
    assert isinstance(info.value.root, IndexError)
    good = checked.create(np.zeros(16, np.int64))
    checked.launch(kernel, N // BLOCK, BLOCK, checked.create(np.arange(N) % 16), good)
    np.testing.assert_array_equal(checked.read(good), np.full(16, N // 16))


def test_dry_run_leaves_the_histogram_as_it_was():
    """A dry run compiles and skips: the buffer keeps its contents; a real run then counts."""
    client = cube.client("cpu")
    kernel = cube.kernel(histogram)
    x = np.arange(N) % 16
    h = client.create(np.full(16, 5, np.int64))
    with cube.dry_run():
        client.launch(kernel, N // BLOCK, BLOCK, client.create(x), h)
    np.testing.assert_array_equal(client.read(h), np.full(16, 5))
    client.launch(kernel, N // BLOCK, BLOCK, client.create(x), h)
    np.testing.assert_array_equal(client.read(h), np.full(16, 5 + N // 16))


def test_threads_launching_at_once_on_different_streams():
    """Four Python threads, each on its own stream, launch the histogram on their own data at
    once, three times each: every result is np.bincount of its data."""
    client = cube.client("cpu")
    kernel = cube.kernel(histogram)
    datas = [np.random.default_rng(k).integers(0, 16, N) for k in range(4)]
    results, errors = [None] * 4, []
    start = threading.Barrier(4)

    def work(k):
        try:
            with cube.stream():
                hs = [client.create(np.zeros(16, np.int64)) for _ in range(3)]
                xs = client.create(datas[k])
                start.wait()
                for h in hs:
                    client.launch(kernel, N // BLOCK, BLOCK, xs, h)
                results[k] = [client.read(h) for h in hs]
        except BaseException as e:        # reported below, on the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in range(4):
        for got in results[k]:
            np.testing.assert_array_equal(got, np.bincount(datas[k], minlength=16))
