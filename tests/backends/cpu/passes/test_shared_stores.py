"""Stores that every unit makes to one element are made only when they change it
(``passes/shared_stores.py``, ``kernel_runtime/support.store_differs``).

Pinned on parsed bodies: which stores are rewritten (a uniform index: constants, parameters,
the prologue's names, the grid's sizes, never assigned in the unit code) and which are not (an
index from a unit's id or a name the code assigns, an augmented store, a subscripted
subscript). Then end to end against NumPy, serial and parallel: stumpy's shape (a shared
element written in every unit's grid-stride loop, read back by unit 0), and the stores whose
bits differ although the values compare equal (``-0.0`` over ``0.0``), a NaN, a value cast to
the element's type, an integer that wraps, a boolean, a complex.
"""

import ast

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.passes.shared_stores import conditional_shared_stores
from numba_cube.backends.cpu.translate import build_program, translate_source

VARIANTS = ["serial", "parallel"]


pytestmark = pytest.mark.usefixtures("private_cache_dir")


def rewrite(src: str, uniform=("a", "k", "n")) -> str:
    return ast.unparse(ast.Module(conditional_shared_stores(ast.parse(src).body, uniform), []))


@pytest.mark.parametrize("store", ["a[0] = v", "a[k] = v", "a[-1] = v", "a[0, k] = v",
                                   "a[__gdx] = v", "a[n, -2] = v"])
def test_a_store_to_a_uniform_element_is_made_conditional(store):
    """The value is kept in a temporary first, then stored only if it changes the element."""
    target = store.split(" = ")[0]
    assert rewrite(f"for i in range(n):\n    {store}") == (
        f"for i in range(n):\n    __shared_value1 = v\n"
        f"    if __store_differs({target}, __shared_value1):\n        {target} = __shared_value1")


@pytest.mark.parametrize("store", [
    "a[i] = v",              # a unit's element
    "a[__tx] = v",           # a unit's id
    "a[k] = v\nk = 1",       # k is assigned in the unit code
    "a[0] += v",             # reads the element anyway
    "a[0:2] = v",            # a slice
    "b.c[0] = v",            # not a name
    "a[0] = b[0] = v",       # two targets
    "a[0.5] = v",            # not an integer constant
])
def test_other_stores_are_left_alone(store):
    src = f"i = __tx\n{store}"
    assert rewrite(src) == ast.unparse(ast.parse(src))


@cuda.jit
def ping_pong_row(j, first, even, odd, out):
    """stumpy's shape: every unit of a grid-stride loop writes the shared element ``0`` of the
    row's output buffer, unit 0 reads it back."""
    start = cuda.grid(1)
    if j % 2 == 0:
        q_out, q_in = even, odd
    else:
        q_out, q_in = odd, even
    for i in range(start, q_out.shape[0], cuda.gridsize(1)):
        if i > 0:
            q_out[i] = q_in[i - 1] + 1.0
        q_out[0] = first[j]
        out[i] = 2.0 * q_out[i]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("boundscheck", [False, True], ids=["unchecked", "checked"])
def test_stumpys_shape_answers_as_numpy(variant, boundscheck):
    """Rows after rows, both parities: each row's buffer and output as NumPy computes them."""
    src = translate_source(ping_pong_row.py_func, boundscheck=boundscheck)
    assert "__store_differs(q_out[0]" in src
    run = getattr(build_program(ping_pong_row.py_func, boundscheck=boundscheck), variant)
    n, rows = 1000, 6
    first = np.arange(rows, dtype=np.float64) * 10.0
    bufs = [np.zeros(n), np.zeros(n)]
    want_bufs = [np.zeros(n), np.zeros(n)]
    for j in range(rows):
        out = np.zeros(n)
        run(3, 1, 1, 64, 1, 1, j, first, bufs[0], bufs[1], out)
        w_out, w_in = want_bufs[j % 2], want_bufs[1 - j % 2]
        w_out[1:] = w_in[:-1] + 1.0
        w_out[0] = first[j]
        np.testing.assert_array_equal(bufs[j % 2], w_out)
        np.testing.assert_array_equal(out, 2.0 * w_out)


@cuda.jit
def store_everywhere(out, value):
    """Every unit stores ``value`` into ``out[0]``."""
    out[0] = value


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype, before, value, after", [
    (np.float64, 0.0, -0.0, -0.0),               # equal values, other bits: stored
    (np.float64, -0.0, 0.0, 0.0),
    (np.float64, 1.5, np.nan, np.nan),           # a NaN is stored
    (np.float64, np.nan, 2.5, 2.5),
    (np.float32, 0.0, 0.1, np.float32(0.1)),     # cast to the element's type
    (np.int8, 0, 300, np.int8(44)),              # wraps as the store does
    (np.int64, 7, 7, 7),
    (np.bool_, False, 5, True),
    (np.complex128, 0.0, -0.0 + 0j, -0.0 + 0j),  # complex: always stored
])
def test_a_skipped_store_never_changes_what_the_element_holds(variant, dtype, before, value,
                                                                after):
    """Whatever the element held, afterwards it holds exactly what a plain store leaves: the
    same bits (signed zeros, NaN), the value cast to the element's type."""
    run = getattr(build_program(store_everywhere.py_func), variant)
    out = np.array([before], dtype=dtype)
    run(4, 1, 1, 32, 1, 1, out, value)
    expected = np.array([after], dtype=dtype)
    assert out.tobytes() == expected.tobytes() or (np.isnan(out).all() and np.isnan(expected).all())


def test_switched_off_it_leaves_the_store_as_written(monkeypatch):
    """``NUMBA_CUBE_DISABLE_PASSES=shared_stores`` prints the plain store."""
    monkeypatch.setenv("NUMBA_CUBE_DISABLE_PASSES", "shared_stores")
    src = translate_source(ping_pong_row.py_func)
    assert "if __store_differs(" not in src and "q_out[0] = first[j]" in src
