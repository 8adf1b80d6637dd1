"""Generated CPU code runs numba.cuda-dialect kernels correctly (serial and parallel variants).

Every test builds a program with ``build_program`` and calls ``prog.serial`` / ``prog.parallel``
directly with ``(grid_x, grid_y, grid_z, block_x, block_y, block_z, *args)``, comparing against
NumPy on fresh random inputs. Programs are built once per module (Numba compiles are 1-5 s).
"""

import os

import numpy as np
import pytest
from numba import types

from numba_cube.backends.cpu.translate import CpuProgram, build_program, translate_source

import kernels_cases as K

VARIANTS = ["serial", "parallel"]


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        d = tmp_path_factory.mktemp("cube_cache")
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(d))
        yield d


_programs: dict = {}


def prog(kernel, boundscheck=False) -> CpuProgram:
    key = (kernel.py_func, boundscheck)
    if key not in _programs:
        _programs[key] = build_program(kernel.py_func, boundscheck=boundscheck)
    return _programs[key]


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"rng seed: {seed}")            # shown by pytest when a test fails
    return np.random.default_rng(seed)


def launch(program, variant, grid, block, *args):
    grid = tuple(grid) + (1,) * (3 - len(grid))
    block = tuple(block) + (1,) * (3 - len(block))
    getattr(program, variant)(*grid, *block, *args)


def cdiv(a, b):
    return (a + b - 1) // b


# ---- barrier-free kernels --------------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_elementwise(variant, rng):
    """An elementwise kernel with an `if i < n` guard writes exactly the n valid elements, also
    when the grid has more units than elements."""
    n = 1000 + int(rng.integers(0, 100))
    a, b = rng.random(n), rng.random(n)
    c = np.full(n + 7, -1.0)
    launch(prog(K.vec_add), variant, (cdiv(n, 64),), (64,), a, b, c[:n])
    np.testing.assert_allclose(c[:n], a + b)
    assert (c[n:] == -1.0).all()


@pytest.mark.parametrize("variant", VARIANTS)
def test_early_return_and_scalar_argument(variant, rng):
    """`if i >= n: return` ends only that unit; scalar arguments are passed through."""
    n = 777
    x, y = rng.random(n), rng.random(n)
    out = np.zeros(n)
    launch(prog(K.saxpy_early_return), variant, (cdiv(n, 32),), (32,), 3.0, x, y, out)
    np.testing.assert_allclose(out, 3.0 * x + y)


@pytest.mark.parametrize("variant", VARIANTS)
def test_stencil_2d(variant, rng):
    """A 2-D 5-point stencil with chained bounds (`1 <= x < m - 1`) on a ragged grid."""
    u = rng.random((37, 53))
    out = np.zeros_like(u)
    launch(prog(K.stencil_2d), variant, (cdiv(53, 16), cdiv(37, 8)), (16, 8), u, out)
    ref = np.zeros_like(u)
    ref[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    np.testing.assert_allclose(out, ref)


@pytest.mark.parametrize("variant", VARIANTS)
def test_grid_3d(variant):
    """cuda.grid(3) / cuda.gridsize(3) on a 3-D grid of 3-D blocks."""
    out = np.zeros((5, 6, 7), np.int64)
    grid, block = (2, 3, 2), (4, 2, 3)
    launch(prog(K.grid_3d), variant, grid, block, out)
    z, y, x = np.indices(out.shape)
    total = sum(g * b for g, b in zip(grid, block))
    np.testing.assert_array_equal(out, x + 10 * y + 100 * z + 1000 * total)


@pytest.mark.parametrize("variant", VARIANTS)
def test_thread_and_block_ids_2d(variant):
    """threadIdx/blockIdx .x/.y match the unit's global position."""
    shape = (13, 21)
    out_t, out_b = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
    launch(prog(K.ids_2d), variant, (cdiv(21, 8), cdiv(13, 4)), (8, 4), out_t, out_b)
    y, x = np.indices(shape)
    np.testing.assert_array_equal(out_t, x % 8 + 100 * (y % 4))
    np.testing.assert_array_equal(out_b, x // 8 + 100 * (y // 4))


@pytest.mark.parametrize("variant", VARIANTS)
def test_grid_stride_loop_math_and_constants(variant, rng):
    """A grid-stride loop over few large cubes; math.* and a frozen global constant."""
    x = rng.normal(size=5000)
    out = np.zeros_like(x)
    launch(prog(K.grid_stride_math), variant, (2,), (128,), x, out)
    np.testing.assert_allclose(out, np.sqrt(np.abs(x)) * K.GAIN + np.floor(x))


@pytest.mark.parametrize("variant", VARIANTS)
def test_return_inside_user_loop(variant, rng):
    """`return` inside the kernel's own loop leaves the unit, not just the loop."""
    a = rng.random((300, 6))
    out = np.zeros(300)
    launch(prog(K.early_return_in_loop), variant, (cdiv(300, 64),), (64,), a, out, 0.9)
    ref = np.empty(300)
    for i in range(300):
        hits = np.nonzero(a[i] > 0.9)[0]
        ref[i] = -1.0 - hits[0] if hits.size else a[i].sum()
    np.testing.assert_allclose(out, ref)


@pytest.mark.parametrize("variant", VARIANTS)
def test_local_array(variant, rng):
    """cuda.local.array is private to each unit."""
    x = rng.random(4 * 250)
    out = np.zeros_like(x)
    launch(prog(K.local_array_sort), variant, (cdiv(250, 32),), (32,), x, out)
    np.testing.assert_allclose(out, np.sort(x.reshape(-1, 4), axis=1).ravel())


@pytest.mark.parametrize("variant", VARIANTS)
def test_device_functions(variant, rng):
    """Device functions (nested, using threadIdx/blockIdx, with different argument types)."""
    x = rng.normal(size=300)
    out = np.zeros_like(x)
    launch(prog(K.device_calls), variant, (cdiv(300, 64),), (64,), x, out)
    np.testing.assert_allclose(out, np.clip(x * K.GAIN, -1, 1) + np.clip(np.arange(300), 0, 3))
    assert "clamp__dev" in prog(K.device_calls).source


@pytest.mark.parametrize("variant", VARIANTS)
def test_cuda_module_alias(variant, rng):
    """`import numba.cuda as nc` is recognised; cuda.warpsize is 32."""
    a = rng.random(100)
    out = np.zeros(100)
    launch(prog(K.alias_module), variant, (4,), (32,), a, out)
    np.testing.assert_allclose(out, a * 32 + 32)


@pytest.mark.parametrize("variant", VARIANTS)
def test_parameter_reassigned_per_unit(variant):
    """A parameter reassigned by each unit starts from the argument for every unit."""
    a = np.zeros(50, np.int64)
    launch(prog(K.reassign_param), variant, (2,), (32,), a, 100)
    np.testing.assert_array_equal(a, 100 - np.arange(50))


# ---- barriers and shared memory ----------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_tree_reduction(variant, rng):
    """Shared-memory tree reduction with a barrier inside a while loop."""
    nb = 37
    a = rng.random(nb * K.TPB - 5)
    out = np.zeros(nb)
    launch(prog(K.block_sum), variant, (nb,), (K.TPB,), a, out)
    ref = np.concatenate([a, np.zeros(5)]).reshape(nb, K.TPB).sum(axis=1)
    np.testing.assert_allclose(out, ref)


@pytest.mark.parametrize("variant", VARIANTS)
def test_tiled_matmul(variant, rng):
    """Shared-memory tiled matmul: two barriers inside a for loop, ragged edges."""
    A, B = rng.random((29, 19)), rng.random((19, 23))
    C = np.zeros((29, 23))
    launch(prog(K.matmul_tiled), variant, (cdiv(23, K.TILE), cdiv(29, K.TILE)),
           (K.TILE, K.TILE), A, B, C)
    np.testing.assert_allclose(C, A @ B)


@pytest.mark.parametrize("variant", VARIANTS)
def test_shared_memory_transpose(variant, rng):
    """Tile transpose through a padded float32 shared array."""
    a = rng.random((21, 34)).astype(np.float32)
    out = np.zeros((34, 21), np.float32)
    launch(prog(K.transpose_shared), variant, (cdiv(34, K.TILE), cdiv(21, K.TILE)),
           (K.TILE, K.TILE), a, out)
    np.testing.assert_array_equal(out, a.T)


@pytest.mark.parametrize("variant", VARIANTS)
def test_block_scan(variant, rng):
    """Hillis-Steele inclusive scan per block (two barriers per step, value live across one)."""
    a = rng.integers(-50, 50, 5 * K.SCAN - 3).astype(np.int32)
    out = np.zeros_like(a)
    launch(prog(K.block_scan), variant, (5,), (K.SCAN,), a, out)
    padded = np.concatenate([a, np.zeros(3, np.int32)]).reshape(5, K.SCAN)
    np.testing.assert_array_equal(out, np.cumsum(padded, axis=1).ravel()[:a.size])


@pytest.mark.parametrize("variant", VARIANTS)
def test_early_return_with_barrier(variant, rng):
    """Units that returned before a barrier skip the regions after it (Volta semantics)."""
    n = 3 * K.TPB - 10
    a = rng.random(n)
    out = np.full(n + 5, 7.0)
    launch(prog(K.exit_then_barrier), variant, (3,), (K.TPB,), a, out[:n])
    ref = a.copy()
    for i in range(n):
        j = i - i % K.TPB + (i % K.TPB + 1) % K.TPB
        if j < n:
            ref[i] += a[j]
    np.testing.assert_allclose(out[:n], ref)
    assert (out[n:] == 7.0).all()


@pytest.mark.parametrize("variant", VARIANTS)
def test_values_and_local_arrays_across_barrier(variant, rng):
    """A per-unit value and a per-unit local array keep their contents across a barrier."""
    n = 2 * K.TPB
    a = rng.random(n)
    out = np.zeros(n)
    launch(prog(K.shared_local_across_barrier), variant, (2,), (K.TPB,), a, out)
    v = 2 * a
    other = v.reshape(2, K.TPB)[:, ::-1].ravel()
    np.testing.assert_allclose(out, v + (v + 1) + other + v)


@pytest.mark.parametrize("variant", VARIANTS)
def test_names_imported_from_numba_cuda(variant, rng):
    """`from numba.cuda import threadIdx, syncthreads, ...` works like `cuda.threadIdx`."""
    a = rng.random(2 * K.TPB)
    out = np.zeros_like(a)
    launch(prog(K.imported_names), variant, (2,), (K.TPB,), a, out)
    np.testing.assert_allclose(out, a.reshape(2, K.TPB)[:, ::-1].ravel())


@pytest.mark.parametrize("variant", VARIANTS)
def test_barrier_reductions(variant, rng):
    """syncthreads_count/and/or count the units of the cube; the result is uniform and can
    steer a loop that contains barriers (here: rounds until every unit's counter is zero)."""
    a = rng.integers(-2, 5, 3 * 32 - 7)
    a[32:64] = np.abs(a[32:64]) + 1                 # cube 1: every predicate true
    counts, flags = np.zeros(3, np.int64), np.zeros((3, 3), np.int64)
    launch(prog(K.barrier_reductions), variant, (3,), (32,), a, counts, flags)
    padded = np.concatenate([a, np.zeros(7, a.dtype)]).reshape(3, 32)
    np.testing.assert_array_equal(counts, (padded > 0).sum(axis=1))
    np.testing.assert_array_equal(flags[:, 0], (padded > 0).all(axis=1))
    np.testing.assert_array_equal(flags[:, 1], (padded > 0).any(axis=1))
    np.testing.assert_array_equal(flags[:, 2], np.maximum(padded.max(axis=1), 0))


@pytest.mark.parametrize("variant", VARIANTS)
def test_uniform_break_out_of_barrier_loop(variant, rng):
    """`if k >= limit: break` (uniform) inside a loop with barriers runs at cube level; device
    functions with local arrays and atomics work from a fission kernel."""
    n = 2 * K.TPB
    a = rng.random(n)
    out, total = np.zeros(n), np.zeros(1, np.int64)
    launch(prog(K.uniform_break), variant, (2,), (K.TPB,), a, out, total, 5)
    ref = np.zeros(n)
    for i in range(n):
        base, t = i - i % K.TPB, i % K.TPB
        for k in range(5):
            ref[i] += a[(base + (t + 1) % K.TPB + k) % n]
    np.testing.assert_allclose(out, ref + 6 * a)
    assert total[0] == n


@pytest.mark.parametrize("variant", VARIANTS)
def test_array_view_across_barrier(variant, rng):
    """A per-unit value that is an array view (not a number) is kept across a barrier."""
    A = rng.random((10, 2))
    out = np.zeros(K.TPB)
    launch(prog(K.row_view_across_barrier), variant, (1,), (K.TPB,), A, out)
    i = np.arange(K.TPB)
    np.testing.assert_allclose(out, A[i % 10, 1] + A[(i + 1) % K.TPB % 10, 0])


# ---- shape of the generated code -------------------------------------------------------------

def test_barrier_free_kernel_is_flattened_and_guard_hoisted():
    """A barrier-free kernel becomes one flat loop; its `if i < n` guard becomes a loop bound
    (on the global coordinate: the ids are only `cuda.grid(1)`, so the loop walks rows)."""
    p = prog(K.vec_add)
    assert p.shape == "flat"
    assert "__hi = min(__hi, __bound_lt(c.size))" in p.source
    assert "for __gx in range(__lo, __hi):" in p.source
    assert "if i < c.size" not in p.source


def test_only_values_live_across_barriers_are_replicated():
    """Liveness: ids are recomputed, not stored; only `acc` of matmul is kept per unit."""
    assert prog(K.block_sum).shape == "cube"
    assert "__l = []" not in prog(K.block_sum).source          # tid, i: rematerialised
    src = prog(K.matmul_tiled).source
    assert [ln.strip() for ln in src.splitlines() if ln.strip().endswith("__l = []")] == [
        "acc__l = []"]


def test_constants_are_frozen_into_the_source():
    """Global constants appear as literals, so changing one changes the module (and its hash)."""
    def make(tile):
        from numba import cuda

        def kern(a):
            i = cuda.grid(1)
            if i < a.size:
                a[i] = tile
        return kern
    s3, s4 = translate_source(make(3)), translate_source(make(4))
    assert "a[i] = 3" in s3 and "a[i] = 4" in s4


def test_compile_for_signature_without_running(rng):
    """`prog.parallel.compile((int64,) * 6 + argtypes)` compiles without a call (dry runs)."""
    p = prog(K.vec_add)
    arr = types.Array(types.float64, 1, "C")
    p.parallel.compile((types.int64,) * 6 + (arr, arr, arr))
    p.serial.compile((types.int64,) * 6 + (arr, arr, arr))
    assert len(p.parallel.signatures) >= 1
    a, b, c = rng.random(10), rng.random(10), np.zeros(10)
    p.parallel(1, 1, 1, 16, 1, 1, a, b, c)
    np.testing.assert_allclose(c, a + b)


@pytest.mark.parametrize("variant", VARIANTS)
def test_boundscheck_raises_index_error(variant):
    """With boundscheck=True an out-of-bounds access raises IndexError from the compiled code."""
    p = prog(K.ids_2d, boundscheck=True)
    small = np.zeros((4, 4), np.int64)
    ok = np.zeros((4, 4), np.int64)
    launch(p, variant, (1, 1), (4, 4), ok, np.zeros((4, 4), np.int64))   # in bounds: fine
    with pytest.raises(IndexError):
        launch(p, variant, (1, 1), (4, 4), small, np.zeros((2, 2), np.int64))
    assert "boundscheck=True" in p.source


def test_empty_grid_does_nothing():
    """A launch with zero cubes or zero units per cube runs no unit."""
    c = np.full(4, -1.0)
    for variant in VARIANTS:
        launch(prog(K.vec_add), variant, (0,), (64,), c, c, c)
        launch(prog(K.block_sum), variant, (3,), (0,), c, c)
    assert (c == -1.0).all()


def test_simulator_module_and_signature_device_function(tmp_path):
    """Under NUMBA_ENABLE_CUDASIM the simulator's `cuda` module is recognised, and a device
    function declared with a signature (`cuda.jit("f8(f8)", device=True)`) is translated."""
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "sim_kernel.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        from numba import cuda
        from numba_cube.backends.cpu.translate import build_program

        @cuda.jit("float64(float64)", device=True)
        def twice(x):
            return 2.0 * x

        @cuda.jit
        def k(a, out):
            i = cuda.grid(1)
            if i < a.size:
                out[i] = twice(a[i]) + cuda.threadIdx.x

        p = build_program(k.py_func)
        a = np.arange(10.0); out = np.zeros(10)
        p.serial(2, 1, 1, 8, 1, 1, a, out)
        assert np.allclose(out, 2 * a + np.arange(10) % 8), out
        print("OK")
    """))
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NUMBA_CUBE_CACHE_DIR=str(tmp_path / "c"))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-2000:]
