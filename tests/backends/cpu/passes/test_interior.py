"""Cubes wholly inside their guards run a region with the guards' tests known true
(``passes/interior.py``).

Pinned here: kernels whose regions have edge guards (a tiled matmul, a tiled transpose, a 3-D
cube) give what NumPy gives bit for bit, for sizes that are and are not multiples of the cube
(edge cubes take the loops with the tests), in both variants; their generated code has the
interior copy; guards with parameter offsets, float and NaN bounds, lower bounds, an ``else``,
a body that assigns a name (its type kept) and a conditional expression are exact; and each
near-miss of the rules (a coordinate subtracted or multiplied, a bound the region assigns, a
division, a test that splits every cube) prints exactly the code the translator prints without the
pass."""

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.passes import interior
from numba_cube.backends.cpu.translate import build_program, translate_source

from kernels_cases import TILE, matmul_tiled as matmul, transpose_shared as transpose
_programs = {}


def prog(kernel):
    if kernel not in _programs:
        _programs[kernel] = build_program(kernel.py_func)
    return _programs[kernel]


def has_interior(kernel) -> bool:
    return "(passes/interior.py)" in translate_source(kernel.py_func)


def without_pass(kernel, monkeypatch) -> str:
    with monkeypatch.context() as mp:
        mp.setattr(interior, "split", lambda *args: None)
        return translate_source(kernel.py_func)


def cubes(n, t=TILE):
    return (n + t - 1) // t


def matmul_in_order(A, B):
    """A @ B summed over k in ascending order, as each unit of ``matmul`` sums (the zero
    padding of the edge tiles adds +0.0, which changes nothing)."""
    C = np.zeros((A.shape[0], B.shape[1]))
    for k in range(A.shape[1]):
        C += A[:, k:k + 1] * B[k:k + 1, :]
    return C


@pytest.mark.parametrize("variant", ["parallel", "serial"])
@pytest.mark.parametrize("m,k,n", [(16, 16, 16), (17, 9, 23), (5, 3, 7), (40, 33, 8)])
def test_matmul_bit_for_bit(variant, m, k, n, rng):
    """The tiled matmul, with interior and edge cubes: NumPy's products summed in the kernel's
    order, bit for bit."""
    assert has_interior(matmul)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    C = np.full((m, n), np.nan)
    getattr(prog(matmul), variant)(cubes(n), cubes(m), 1, TILE, TILE, 1, A, B, C)
    np.testing.assert_array_equal(C, matmul_in_order(A, B))


@pytest.mark.parametrize("variant", ["parallel", "serial"])
@pytest.mark.parametrize("shape", [(8, 8), (9, 17), (31, 4), (1, 1), (64, 40)])
def test_transpose(variant, shape, rng):
    """A tiled transpose whose guards read names the region assigns once (``x``, ``y``, each
    assigned twice in the kernel): a.T exactly, including cubes past the edge in either axis."""
    assert has_interior(transpose)
    a = rng.standard_normal(shape).astype(np.float32)
    out = np.zeros(shape[::-1], np.float32)
    getattr(prog(transpose), variant)(cubes(shape[1]), cubes(shape[0]), 1, TILE, TILE, 1, a, out)
    np.testing.assert_array_equal(out, a.T)


@cuda.jit
def box_3d(out, lo):
    # a 3-D cube; the guard sums all three coordinates and has a lower bound
    sm = cuda.shared.array(1, np.int64)
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0 and cuda.threadIdx.z == 0:
        sm[0] = 7
    cuda.syncthreads()
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    s = i + cuda.threadIdx.y + cuda.threadIdx.z
    if s < out.shape[0] and s >= lo:
        cuda.atomic.add(out, s, sm[0])


@pytest.mark.parametrize("variant", ["parallel", "serial"])
@pytest.mark.parametrize("size,lo,grid,block", [(100, 0, 4, (4, 2, 3)), (9, 3, 3, (4, 2, 2)),
                                               (1000, 0, 2, (8, 4, 2)), (5, 10, 2, (2, 2, 2))])
def test_3d_cube_with_lower_bound(variant, size, lo, grid, block):
    """Guards on a sum of the three coordinates, with a lower bound: every unit whose sum is in
    ``[lo, size)`` adds 7 at its sum, as NumPy counts it."""
    assert has_interior(box_3d)
    out = np.zeros(size, np.int64)
    getattr(prog(box_3d), variant)(grid, 1, 1, *block, out, lo)
    expect = np.zeros(size, np.int64)
    bx, by, bz = block
    for b in range(grid):
        for x in range(bx):
            for y in range(by):
                for z in range(bz):
                    s = b * bx + x + y + z
                    if lo <= s < size:
                        expect[s] += 7
    np.testing.assert_array_equal(out, expect)


@cuda.jit
def offset_guard(out, off, n):
    sm = cuda.shared.array(1, np.int64)
    sm[0] = 1
    cuda.syncthreads()
    out[cuda.threadIdx.x + 16] = -1     # a statement before the guard: not passes/guards.py's case
    if cuda.threadIdx.x + off < n:
        out[cuda.threadIdx.x] = sm[0]


@pytest.mark.parametrize("variant", ["parallel", "serial"])
@pytest.mark.parametrize("off,n", [(0, 5), (0, 16), (0, 64), (-3, 2), (5, 3), (-20, -10)])
def test_guard_with_a_parameter_offset(variant, off, n):
    """``tx + off < n`` with an offset and bound from parameters: cubes the guard cuts, admits
    whole, or admits none of; the units NumPy's comparison admits write, the others do not."""
    assert has_interior(offset_guard)
    out = np.zeros(32, np.int64)
    getattr(prog(offset_guard), variant)(1, 1, 1, 16, 1, 1, out, np.int64(off), np.int64(n))
    with np.errstate(over="ignore"):
        sums = np.arange(16, dtype=np.int64) + np.int64(off)
    np.testing.assert_array_equal(out[:16], (sums < np.int64(n)).astype(np.int64))
    np.testing.assert_array_equal(out[16:], -1)


@cuda.jit
def float_bound(out, bound):
    sm = cuda.shared.array(1, np.float64)
    sm[0] = 2.5
    cuda.syncthreads()
    out[cuda.threadIdx.x + 8] = -1.0     # a statement before the guard: not passes/guards.py's case
    if cuda.grid(1) < bound:
        out[cuda.threadIdx.x] = sm[0]


@pytest.mark.parametrize("bound", [np.nan, 3.5, 100.0, -1.0, np.inf])
def test_float_and_nan_bounds(bound):
    """A float bound, NaN included (no unit passes a test against NaN): NumPy's comparison."""
    assert has_interior(float_bound)
    out = np.zeros(16)
    prog(float_bound).serial(1, 1, 1, 8, 1, 1, out, bound)
    np.testing.assert_array_equal(out[:8], np.where(np.arange(8) < bound, 2.5, 0.0))
    np.testing.assert_array_equal(out[8:], -1.0)


# ---- near misses: exactly today's code ---------------------------------------------------


@cuda.jit
def assigns_in_body(a, out):
    sm = cuda.shared.array(32, np.int32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    v = 0
    if i < a.size:
        v = a[i]            # v's type where the branches meet is int64, int32 without the if
    sm[tid] = v
    cuda.syncthreads()
    out[tid] = sm[tid]


@cuda.jit
def subtracted(a, out):
    sm = cuda.shared.array(1, np.int64)
    sm[0] = 1
    cuda.syncthreads()
    if cuda.threadIdx.x - cuda.threadIdx.y < a.size:
        out[cuda.threadIdx.x, cuda.threadIdx.y] = sm[0]


@cuda.jit
def squared(a, out):
    sm = cuda.shared.array(1, np.int64)
    sm[0] = 1
    cuda.syncthreads()
    if cuda.threadIdx.x * cuda.threadIdx.x < a.size:
        out[cuda.threadIdx.x] = sm[0]


@cuda.jit
def bound_assigned(a, out):
    sm = cuda.shared.array(1, np.int64)
    sm[0] = 1
    cuda.syncthreads()
    n = a.size
    n = n - 1
    if cuda.threadIdx.x < n:
        out[cuda.threadIdx.x] = sm[0]


@cuda.jit
def with_else(a, out):
    sm = cuda.shared.array(1, np.int64)
    sm[0] = 1
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < a.size:
        out[i] = sm[0]
    else:
        out[i] = 2


@cuda.jit
def divided_bound(a, out):
    sm = cuda.shared.array(1, np.int64)
    sm[0] = 1
    cuda.syncthreads()
    if cuda.threadIdx.x < a.size // a.shape[0]:
        out[cuda.threadIdx.x] = sm[0]


@cuda.jit
def split_in_cube(a, out):
    # Hillis-Steele's step: ``tid >= off`` splits every cube; it is no edge of the data
    sm = cuda.shared.array(32, np.int64)
    tid = cuda.threadIdx.x
    sm[tid] = a[tid]
    cuda.syncthreads()
    off = 1
    while off < 32:
        t = sm[tid - off] if tid >= off else 0
        cuda.syncthreads()
        sm[tid] += t
        cuda.syncthreads()
        off *= 2
    out[tid] = sm[tid]


@pytest.mark.parametrize("kernel", [subtracted, squared, bound_assigned, divided_bound,
                                    split_in_cube],
                         ids=["subtracted", "squared", "bound-assigned", "division",
                              "split-in-cube"])
def test_near_misses_print_todays_code(kernel, monkeypatch):
    """A guard outside the rules is left as it is: the module is exactly the one printed with
    the pass switched off."""
    assert not has_interior(kernel)
    assert translate_source(kernel.py_func) == without_pass(kernel, monkeypatch)


@pytest.mark.parametrize("variant", ["parallel", "serial"])
@pytest.mark.parametrize("n", [32, 10, 0])
def test_body_that_assigns_keeps_its_type(variant, n):
    """A guarded body that assigns a name (``v = a[tid]``, int32, where ``v = 0`` before it):
    the interior copy keeps both sides of the branch, so ``v`` is the int64 Numba unifies, as
    without the pass: the input values, zeros past the input."""
    assert has_interior(assigns_in_body)
    a = np.arange(1, n + 1, dtype=np.int32)
    out = np.full(32, -1, np.int32)
    getattr(prog(assigns_in_body), variant)(1, 1, 1, 32, 1, 1, a, out)
    np.testing.assert_array_equal(out, np.concatenate([a, np.zeros(32 - n, np.int32)]))


@pytest.mark.parametrize("n", [64, 5, 0])
def test_guard_with_else(n):
    """``if tid < a.size: ... else: ...``: the units the test admits take the body, the others
    the ``else``, in interior cubes (every unit admitted) and edge cubes alike."""
    assert has_interior(with_else)
    out = np.zeros(64, np.int64)
    prog(with_else).serial(2, 1, 1, 32, 1, 1, np.zeros(n), out)
    expect = np.where(np.arange(64) < n, 1, 2)
    np.testing.assert_array_equal(out, expect)


@cuda.jit
def conditional_expression(x, out):
    # the block reduction's load: a guard in a conditional expression, an int32 input whose
    # value meets a float 0.0 (Numba types the expression float64 either way)
    sm = cuda.shared.array(32, np.float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i] if i < x.size else 0.5
    cuda.syncthreads()
    if i < out.size:
        out[i] = sm[tid] * 3


@pytest.mark.parametrize("variant", ["parallel", "serial"])
@pytest.mark.parametrize("n", [96, 70, 1])
def test_conditional_expression(variant, n, rng):
    """A guard in a conditional expression: interior cubes load every element, edge cubes put
    0.5 past the end, as NumPy computes it."""
    assert has_interior(conditional_expression)
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = np.zeros(96)
    getattr(prog(conditional_expression), variant)(3, 1, 1, 32, 1, 1, x, out)
    expect = np.concatenate([x.astype(np.float64), np.full(96 - n, 0.5)]) * 3
    np.testing.assert_array_equal(out, expect)
