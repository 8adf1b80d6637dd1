"""``frontend/decompiler/block.py``: the statements and expressions of kernels without source.

Each kernel is made with ``exec`` (no source anywhere), rebuilt from its bytecode, built with
``build_program`` and run in both generated variants against NumPy (or plain Python over the
same values): ufunc calls with an output argument, CUDA attribute chains and atomics, operators,
conditional expressions, short-circuit ``and``/``or``, slices, tuple unpacking and in-place
operators, and the order in which the bytecode evaluates things.
"""

import numpy as np
import pytest

from numba_cube.backends.cpu.translate import build_program
from numba_cube.errors import CompileError

from sourceless_helpers import VARIANTS, cache_dir, launch, made, rng  # noqa: F401 (fixtures)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("ufunc", [np.sin, np.add, np.arctan2])
def test_ufunc_call_with_out_argument(variant, ufunc, rng):
    """numba-cuda's ufunc tests' kernel, ``def fn(a0, a1[, a2]): np.<ufunc>(a0, ...)`` made by
    exec, writes the ufunc's result into its last argument."""
    args = ",".join(f"a{i}" for i in range(ufunc.nargs))
    fn = made(f"def fn({args}):\n    np.{ufunc.__name__}({args})\n")["fn"]
    inputs = [rng.random(37) for _ in range(ufunc.nin)]
    out = np.zeros(37)
    launch(build_program(fn), variant, (1,), (1,), *inputs, out)
    np.testing.assert_allclose(out, ufunc(*inputs))


ATOMICS = made("""
    def atomic_max(res, ary):
        tx = cuda.threadIdx.x
        bx = cuda.blockIdx.x
        cuda.atomic.max(res, 0, ary[tx, bx])

    def atomic_min_normalizedindex(res, ary):
        tx = cuda.threadIdx.x
        bx = cuda.blockIdx.x
        cuda.atomic.min(res, 0, ary[tx, uint64(bx)])

    def atomic_add_returned(res, old, ary):
        i = cuda.grid(1)
        if i < ary.size:
            old[i] = cuda.atomic.add(res, 0, ary[i]) >= 0
""")


@pytest.mark.parametrize("variant", VARIANTS)
def test_atomics_on_global_arrays(variant, rng):
    """Exec'd cuda.atomic.max/min kernels over a 2-D array (numba-cuda's atomic extreme tests)
    give NumPy's max/min; an atomic whose result is used inside an expression still runs once
    per unit (the sum is NumPy's)."""
    ary = rng.random((32, 8))
    res = np.zeros(1)
    launch(build_program(ATOMICS["atomic_max"]), variant, (8,), (32,), res, ary)
    assert res[0] == ary.max()
    res = np.array([2.0])
    launch(build_program(ATOMICS["atomic_min_normalizedindex"]), variant, (8,), (32,), res, ary)
    assert res[0] == ary.min()
    flat = np.arange(100, dtype=np.float64)
    res, old = np.zeros(1), np.zeros(100, dtype=np.bool_)
    launch(build_program(ATOMICS["atomic_add_returned"]), variant, (1,), (128,), res, old, flat)
    assert res[0] == flat.sum() and old.all()


EXPRESSIONS = made("""
    def branches(a, out):
        i = cuda.grid(1)
        if i < a.size:
            x, y = a[i], -a[i]
            if x > 0.5:
                out[i] = x
            elif x > 0.25:
                out[i] = y
            else:
                out[i] = x if x > 0.1 else 0.0
            out[i] += 1 if (x > 0.3 and y < -0.4) or x < 0.05 else 0
            out[i] += a[1:3].sum() + (a[i] ** 2) // 0.125 % 3

    def order(a, out):
        i = cuda.grid(1)
        if i < a.size:
            x, y = a[i], a[(i + 1) % a.size]
            x, y = y, x
            p, q, r = (x, y, x - y)
            out[i, 0] = x
            out[i, 1] = y
            out[i, 2] = r
            out[i, 3] = -(p * q) if not (x < y) else abs(p - q)

    def in_place(a, n):
        i = cuda.grid(1)
        if i < n:
            a[i, 0] += 1.0
            a[i, 1] *= a[i, 0]
            row = a[i]
            row[2] -= 0.5
            k = 3
            k <<= 1
            a[i, 3] = k | 1

    def constants(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = float('inf') if i == 0 else 1e308 * 10 if i == 1 else -1e999
""")


@pytest.mark.parametrize("variant", VARIANTS)
def test_if_elif_ternary_short_circuit_slices(variant, rng):
    """if/elif/else, conditional expressions, and/or, a slice and arithmetic operators in an
    exec'd kernel give NumPy's values."""
    a = rng.random(100)
    out = np.zeros(100)
    launch(build_program(EXPRESSIONS["branches"]), variant, (1,), (128,), a, out)
    x = a
    expect = np.where(x > 0.5, x, np.where(x > 0.25, -x, np.where(x > 0.1, x, 0.0)))
    expect += np.where(((x > 0.3) & (-x < -0.4)) | (x < 0.05), 1, 0)
    expect += a[1:3].sum() + (a ** 2) // 0.125 % 3
    np.testing.assert_allclose(out, expect)


@pytest.mark.parametrize("variant", VARIANTS)
def test_tuple_assignments_keep_python_order(variant, rng):
    """``x, y = y, x`` and tuple unpacking (which the bytecode spells with swaps and copies)
    bind what Python binds."""
    a = rng.random(50)
    out = np.zeros((50, 4))
    launch(build_program(EXPRESSIONS["order"]), variant, (1,), (64,), a, out)
    x, y = np.roll(a, -1), a.copy()
    np.testing.assert_allclose(out[:, 0], x)
    np.testing.assert_allclose(out[:, 1], y)
    np.testing.assert_allclose(out[:, 2], x - y)
    np.testing.assert_allclose(out[:, 3], np.where(x < y, np.abs(x - y), -(x * y)))


@pytest.mark.parametrize("variant", VARIANTS)
def test_in_place_operators(variant, rng):
    """In-place operators on array elements, on a row view and on a local int act in place
    as in Python."""
    a = rng.random((20, 4))
    expect = a.copy()
    expect[:, 0] += 1.0
    expect[:, 1] *= expect[:, 0]
    expect[:, 2] -= 0.5
    expect[:, 3] = (3 << 1) | 1
    launch(build_program(EXPRESSIONS["in_place"]), variant, (1,), (32,), a, 20)
    np.testing.assert_allclose(a, expect)


def test_non_finite_constants():
    """Infinite constants folded into the bytecode survive the rebuild."""
    out = np.zeros(3)
    launch(build_program(EXPRESSIONS["constants"]), "serial", (1,), (3,), out)
    assert out[0] == np.inf and out[1] == np.inf and out[2] == -np.inf


def test_try_statement_is_refused_by_name():
    """A try statement in a kernel without source is refused as such, at its line."""
    fn = made("def k(a):\n    try:\n        a[0] = 1\n    except Exception:\n        pass\n")["k"]
    with pytest.raises(CompileError) as info:
        build_program(fn)
    assert "'try' statement" in info.value.construct and info.value.lineno == 3
