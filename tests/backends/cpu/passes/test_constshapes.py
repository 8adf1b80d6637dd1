"""Loop bounds computed from constants are cube-uniform: shared/local array shapes
(passes/const_shapes.py).

A Blelloch (work-efficient up-sweep/down-sweep) exclusive scan loops over its log2(n) rounds with
a barrier in each round. Written with the round count taken from the shared array itself
(``range(round(math.log2(temp.size)))``), it used to be refused as a barrier under a
unit-dependent loop range, while the same number passed as an argument worked. The kernels here
run through a CPU client and are checked against NumPy's exclusive scan; the loops reuse their
variable ``d`` (so the run-time ``while`` fallback of ``analyze/warp_loops.py`` does not apply: the bound
must be proven uniform statically). Bounds that really depend on the unit stay refused, or
checked at run time where the design does so.
"""

import inspect
import math

import numpy as np
import pytest
from numba import cuda, int64

import numba_cube as cube
from numba_cube.backends.cpu.translate import build_program, translate_source
from numba_cube.errors import CompileError, DivergenceError

N = 128                 # elements scanned per cube
TPB = N // 2            # each unit loads and stores two elements
LEVELS = 7              # log2(N): a module-level constant


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


def exclusive_scan(x: np.ndarray) -> np.ndarray:
    """NumPy's reference: each cube's N values, exclusive prefix sums."""
    rows = x.reshape(-1, N)
    return (np.cumsum(rows, axis=1) - rows).ravel()


def run_scan(kernel, cubes: int = 3, block: int = TPB) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(30).integers(-1000, 1000, cubes * N).astype(np.int64)
    out = np.zeros_like(x)
    client = cube.client("cpu")
    with client:
        cube.kernel(kernel)[cubes, block](x, out)
    return x, out


def line_of(kernel, needle: str) -> int:
    lines, start = inspect.getsourcelines(kernel.py_func)
    return start + next(k for k, text in enumerate(lines) if needle in text)


# ---- the scan, written out with the round count from the shared array's size ---------------

@cuda.jit
def blelloch_log2_size(a, out):
    temp = cuda.shared.array(N, int64)
    tid = cuda.threadIdx.x
    base = cuda.blockIdx.x * N
    temp[2 * tid] = a[base + 2 * tid]
    temp[2 * tid + 1] = a[base + 2 * tid + 1]
    offset = 1
    for d in range(round(math.log2(temp.size))):        # up-sweep: build the sum tree
        cuda.syncthreads()
        if tid < temp.size >> (d + 1):
            ai = offset * (2 * tid + 1) - 1
            bi = offset * (2 * tid + 2) - 1
            temp[bi] += temp[ai]
        offset *= 2
    if tid == 0:
        temp[temp.size - 1] = 0
    for d in range(round(math.log2(temp.size))):        # down-sweep: push prefixes down
        offset >>= 1
        cuda.syncthreads()
        if tid < 1 << d:
            ai = offset * (2 * tid + 1) - 1
            bi = offset * (2 * tid + 2) - 1
            t = temp[ai]
            temp[ai] = temp[bi]
            temp[bi] += t
    cuda.syncthreads()
    out[base + 2 * tid] = temp[2 * tid]
    out[base + 2 * tid + 1] = temp[2 * tid + 1]


def test_blelloch_scan_bounded_by_log2_of_shared_size():
    """`for d in range(round(math.log2(temp.size)))` around barriers, temp a shared array:
    translates (the bound is a constant, hence uniform) and gives NumPy's exclusive scan."""
    x, out = run_scan(blelloch_log2_size)
    np.testing.assert_array_equal(out, exclusive_scan(x))


def test_shared_size_bound_is_uniform_statically():
    """The bound is proven uniform at translation, not merely checked at run time: the
    generated code has no run-time check of the loops' trip counts."""
    src = translate_source(blelloch_log2_size.py_func)
    assert "__check_cube(" not in src           # (lockstep regions may import it unused)
    assert src.count("for d in range(") == 2    # both sweeps stay loops, not masked whiles


# ---- the same scan with the bound written other ways -----------------------------------------
# (the rounds' bodies, which contain no barrier, are device functions shared by the variants)

@cuda.jit(device=True)
def load_pair(temp, a, tid):
    base = cuda.blockIdx.x * N
    temp[2 * tid] = a[base + 2 * tid]
    temp[2 * tid + 1] = a[base + 2 * tid + 1]


@cuda.jit(device=True)
def store_pair(temp, out, tid):
    base = cuda.blockIdx.x * N
    out[base + 2 * tid] = temp[2 * tid]
    out[base + 2 * tid + 1] = temp[2 * tid + 1]


@cuda.jit(device=True)
def up_round(temp, tid, d):
    offset = 1 << d
    if tid < N >> (d + 1):
        temp[offset * (2 * tid + 2) - 1] += temp[offset * (2 * tid + 1) - 1]


@cuda.jit(device=True)
def down_round(temp, tid, d):
    offset = N >> (d + 1)
    if tid < 1 << d:
        ai = offset * (2 * tid + 1) - 1
        bi = offset * (2 * tid + 2) - 1
        t = temp[ai]
        temp[ai] = temp[bi]
        temp[bi] += t


@cuda.jit(device=True)
def clear_last(temp, tid):
    if tid == 0:
        temp[N - 1] = 0


@cuda.jit
def blelloch_shape0(a, out):
    temp = cuda.shared.array(N, int64)
    tid = cuda.threadIdx.x
    load_pair(temp, a, tid)
    for d in range(round(math.log2(temp.shape[0]))):
        cuda.syncthreads()
        up_round(temp, tid, d)
    clear_last(temp, tid)
    for d in range(round(math.log2(temp.shape[0]))):
        cuda.syncthreads()
        down_round(temp, tid, d)
    cuda.syncthreads()
    store_pair(temp, out, tid)


@cuda.jit
def blelloch_len(a, out):
    temp = cuda.shared.array(N, int64)
    tid = cuda.threadIdx.x
    load_pair(temp, a, tid)
    for d in range(int(math.log2(len(temp)))):
        cuda.syncthreads()
        up_round(temp, tid, d)
    clear_last(temp, tid)
    for d in range(int(math.log2(len(temp)))):
        cuda.syncthreads()
        down_round(temp, tid, d)
    cuda.syncthreads()
    store_pair(temp, out, tid)


@cuda.jit
def blelloch_log2_literal(a, out):
    temp = cuda.shared.array(N, int64)
    tid = cuda.threadIdx.x
    load_pair(temp, a, tid)
    for d in range(round(math.log2(128))):
        cuda.syncthreads()
        up_round(temp, tid, d)
    clear_last(temp, tid)
    for d in range(math.floor(math.log(128) / math.log(2) + 0.5)):
        cuda.syncthreads()
        down_round(temp, tid, d)
    cuda.syncthreads()
    store_pair(temp, out, tid)


def make_closure_scan(n):
    """The round count from a closure constant ``n`` (the kernel's free variable)."""
    @cuda.jit
    def blelloch_closure(a, out):
        temp = cuda.shared.array(N, int64)
        tid = cuda.threadIdx.x
        load_pair(temp, a, tid)
        for d in range(round(math.log2(n))):
            cuda.syncthreads()
            up_round(temp, tid, d)
        clear_last(temp, tid)
        for d in range(max(0, min(LEVELS, abs(math.ceil(math.log2(n)))))):
            cuda.syncthreads()
            down_round(temp, tid, d)
        cuda.syncthreads()
        store_pair(temp, out, tid)
    return blelloch_closure


@cuda.jit
def blelloch_named_levels(a, out):
    temp = cuda.shared.array((N,), int64)
    tid = cuda.threadIdx.x
    load_pair(temp, a, tid)
    levels = round(math.log2(temp.size))      # a cube-level name: uniform through the constant
    (n,) = temp.shape
    for d in range(levels):
        cuda.syncthreads()
        up_round(temp, tid, d)
    clear_last(temp, tid)
    for d in range(levels - 1, -1, -1):       # the textbook down-sweep: d from the top
        cuda.syncthreads()
        down_round(temp, tid, levels - 1 - d)
    cuda.syncthreads()
    store_pair(temp, out, tid)
    if n != N * temp.ndim:
        out[0] = -1


@pytest.mark.parametrize("kernel", [blelloch_shape0, blelloch_len, blelloch_log2_literal,
                                    make_closure_scan(N), blelloch_named_levels],
                         ids=["shape0", "len", "log2_literal", "closure", "named_levels"])
def test_blelloch_scan_bound_variants(kernel):
    """The round count from `temp.shape[0]`, `len(temp)`, `math.log2`/`math.log` of a literal
    (through `round`, `int`, `math.floor`), a closure constant (through `math.ceil`, `abs`,
    `min`, `max` with a module constant), and a cube-level name assigned from `temp.size`
    (with `n, = temp.shape` and `temp.ndim`): each is uniform, and the scan is NumPy's."""
    x, out = run_scan(kernel)
    np.testing.assert_array_equal(out, exclusive_scan(x))


@cuda.jit
def blelloch_local_rounds(a, out, active):
    temp = cuda.shared.array(N, int64)
    took = cuda.local.array(LEVELS, int64)      # per unit: which up-sweep rounds it worked in
    tid = cuda.threadIdx.x
    load_pair(temp, a, tid)
    for d in range(took.size):
        cuda.syncthreads()
        took[d] = 1 if tid < N >> (d + 1) else 0
        up_round(temp, tid, d)
    clear_last(temp, tid)
    for d in range(len(took)):
        cuda.syncthreads()
        down_round(temp, tid, d)
    cuda.syncthreads()
    store_pair(temp, out, tid)
    s = 0
    for k in range(took.shape[0]):           # per-unit code: no barrier in this loop
        s += took[k]
    active[cuda.grid(1)] = s


def test_local_array_shape_bounds_loops_around_barriers():
    """A cuda.local.array's size, len and shape[0] bound loops around barriers (each unit has
    its own array, but the shape is a constant): the scan is NumPy's, and the local array's
    contents, written across the barriers, count the up-sweep rounds each unit took part in."""
    cubes = 2
    x = np.random.default_rng(5).integers(-50, 50, cubes * N).astype(np.int64)
    out = np.zeros_like(x)
    active = np.zeros(cubes * TPB, np.int64)
    with cube.client("cpu"):
        cube.kernel(blelloch_local_rounds)[cubes, TPB](x, out, active)
    np.testing.assert_array_equal(out, exclusive_scan(x))
    tid = np.arange(TPB)
    rounds = sum((tid < (N >> (d + 1))).astype(np.int64) for d in range(LEVELS))
    np.testing.assert_array_equal(active, np.tile(rounds, cubes))


@cuda.jit
def blelloch_then_grid_sync(a, out, totals):
    temp = cuda.shared.array(N, int64)
    tid = cuda.threadIdx.x
    load_pair(temp, a, tid)
    for d in range(round(math.log2(temp.size))):
        cuda.syncthreads()
        up_round(temp, tid, d)
    cuda.syncthreads()
    if tid == 0:
        totals[cuda.blockIdx.x] = temp[N - 1]
    clear_last(temp, tid)
    for d in range(round(math.log2(len(temp)))):
        cuda.syncthreads()
        down_round(temp, tid, d)
    cuda.cg.this_grid().sync()
    # after the grid sync: add the totals of the cubes before this one (a grid-wide scan)
    carry = 0
    for c in range(cuda.blockIdx.x):
        carry += totals[c]
    base = cuda.blockIdx.x * N
    out[base + 2 * tid] = temp[2 * tid] + carry
    out[base + 2 * tid + 1] = temp[2 * tid + 1] + carry


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_shared_shape_bound_in_grid_mode(variant):
    """In a kernel that syncs the grid (where cube-level code runs once per grid and the shared
    array is bound only inside each cube's loop), the shared-size bound is still uniform: the
    cube scans plus the carried totals give NumPy's exclusive scan of the whole input."""
    cubes = 3
    x = np.random.default_rng(7).integers(-1000, 1000, cubes * N).astype(np.int64)
    out = np.zeros_like(x)
    totals = np.zeros(cubes, np.int64)
    build_program(blelloch_then_grid_sync.py_func).__getattribute__(variant)(
        cubes, 1, 1, TPB, 1, 1, x, out, totals)
    np.testing.assert_array_equal(out, np.cumsum(x) - x)


# ---- bounds that depend on the unit stay refused (or checked at run time) ---------------------

def refused(kernel) -> CompileError:
    with pytest.raises(CompileError) as info:
        translate_source(kernel.py_func)
    return info.value


@cuda.jit
def rounds_from_thread_index(a, out):
    temp = cuda.shared.array(N, int64)
    tid = cuda.threadIdx.x
    load_pair(temp, a, tid)
    for d in range(round(math.log2(temp.size)) - tid % 2):
        cuda.syncthreads()
        up_round(temp, tid, d)
    for d in range(round(math.log2(temp.size))):
        cuda.syncthreads()
        down_round(temp, tid, d)
    store_pair(temp, out, tid)


@cuda.jit
def rounds_from_memory(a, out, levels):
    temp = cuda.shared.array(N, int64)
    tid = cuda.threadIdx.x
    load_pair(temp, a, tid)
    for d in range(levels[0]):
        cuda.syncthreads()
        up_round(temp, tid, d)
    for d in range(round(math.log2(temp.size))):
        cuda.syncthreads()
        down_round(temp, tid, d)
    store_pair(temp, out, tid)


@cuda.jit
def rounds_from_picked_array(a, out):
    big = cuda.shared.array(N, int64)
    small = cuda.shared.array(LEVELS, int64)
    tid = cuda.threadIdx.x
    load_pair(big, a, tid)
    pick = big if tid % 2 == 0 else small     # another array per unit: not a declaration
    for d in range(round(math.log2(pick.size))):
        cuda.syncthreads()
        up_round(big, tid, d)
    for d in range(LEVELS):
        cuda.syncthreads()
        down_round(big, tid, d)
    store_pair(big, out, tid)


@pytest.mark.parametrize("kernel, needle", [
    (rounds_from_thread_index, "- tid % 2"),
    (rounds_from_memory, "levels[0]"),
    (rounds_from_picked_array, "pick.size"),
], ids=["thread_index", "memory", "picked_array"])
def test_unit_dependent_round_counts_stay_refused(kernel, needle):
    """A round count that depends on threadIdx, on a value read from memory, or on the size of
    an array picked per unit (a name bound by something other than its declaration) is not
    proven uniform; with the loop variable reused there is no run-time fallback, so translation
    fails with a CompileError naming the barrier's line and the loop's line."""
    err = refused(kernel)
    assert "unit-dependent loop range" in str(err)
    assert err.lineno == line_of(kernel, "cuda.syncthreads()")
    assert f"line {line_of(kernel, needle)}" in str(err)


@cuda.jit
def rounds_minus_per_unit_skip(a, out, skip):
    temp = cuda.shared.array(N, int64)
    tid = cuda.threadIdx.x
    load_pair(temp, a, tid)
    for r in range(round(math.log2(temp.size)) - skip[tid]):
        cuda.syncthreads()
        up_round(temp, tid, r)
    clear_last(temp, tid)
    for d in range(round(math.log2(temp.size))):
        cuda.syncthreads()
        down_round(temp, tid, d)
    cuda.syncthreads()
    store_pair(temp, out, tid)


def test_round_count_read_per_unit_is_checked_at_run_time():
    """A round count mixing the constant shape with a per-unit memory read (`r` not reused, so
    the loop becomes a run-time-checked `while`): when every unit reads the same value the scan
    is NumPy's, and when they disagree the launch raises DivergenceError naming the barrier."""
    prog = build_program(rounds_minus_per_unit_skip.py_func)
    x = np.random.default_rng(3).integers(-9, 9, N).astype(np.int64)
    out = np.zeros_like(x)
    skip = np.zeros(TPB, np.int64)
    prog.serial(1, 1, 1, TPB, 1, 1, x, out, skip)
    np.testing.assert_array_equal(out, exclusive_scan(x))
    skip[9] = 1
    with pytest.raises(DivergenceError) as info:
        prog.serial(1, 1, 1, TPB, 1, 1, x, out, skip)
    assert info.value.lineno == line_of(rounds_minus_per_unit_skip, "cuda.syncthreads()")


# ---- per-unit code keeps its text ------------------------------------------------------------

@cuda.jit
def reverse_with_sizes(a, out):
    sm = cuda.shared.array(N, int64)
    tid = cuda.threadIdx.x
    j = sm.size - 1 - tid             # per unit (reads tid): stays as written
    levels = round(math.log2(sm.size))    # uniform: becomes the constant's expression
    sm[tid] = a[tid]
    for d in range(levels):
        cuda.syncthreads()
    out[tid] = sm[j] if tid < sm.shape[0] else -1


def test_only_folds_that_make_code_uniform_are_kept():
    """The shape of `sm` is folded where that makes cube-level code uniform (`levels`), and
    left as written elsewhere (`j`, a per-unit condition): the generated code of per-unit
    statements does not change. The kernel still reverses like NumPy."""
    src = translate_source(reverse_with_sizes.py_func)
    assert "j = sm.size - 1 - tid" in src
    assert "tid < sm.shape[0]" in src
    levels = next(line for line in src.splitlines() if line.strip().startswith("levels = "))
    assert str(N) in levels and "sm." not in levels
    a = np.arange(N, dtype=np.int64)
    out = np.zeros(N, np.int64)
    build_program(reverse_with_sizes.py_func).serial(1, 1, 1, N, 1, 1, a, out)
    np.testing.assert_array_equal(out, a[::-1])
