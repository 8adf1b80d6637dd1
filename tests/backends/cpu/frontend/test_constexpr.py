"""Compile-time constants as numba-cuda proves them (``frontend/constexpr.py``): array shapes from
literals, module and closure constants, local names assigned once, tuples and arithmetic.

Values are checked against CPython evaluating the same expressions; one kernel checks the
resulting shared/local array sizes against NumPy.
"""

import ast

import numpy as np
import pytest
from numba import cuda, float32, int32

from numba_cube.backends.cpu.frontend import constexpr
from numba_cube.backends.cpu.frontend.source import load_function
from numba_cube.backends.cpu.translate import build_program, translate_source
from numba_cube.errors import CompileError

ROWS = 3
SHAPE = (ROWS, 4)


def make_closure(width):
    def f():
        n = 2                               # assigned once, before its use
        m = 1
        m += 1                              # assigned twice: not a constant
        return (n * width, SHAPE[1] + ROWS, -n, width // 3, m)
    return f


@pytest.fixture(scope="module")
def parsed():
    fn = load_function(make_closure(7))
    ret = fn.node.body[-1].value
    return fn, ret


def test_constants_match_python(parsed):
    """Local once-assigned names, closure values, module tuples and arithmetic evaluate to
    what CPython computes for them."""
    fn, ret = parsed
    expect = make_closure(7)()
    for k, elt in enumerate(ret.elts[:4]):
        assert constexpr.evaluate(fn, elt, fn.node) == expect[k], ast.unparse(elt)


def test_reassigned_local_is_not_constant(parsed):
    """A local assigned twice (here by +=) is not a compile-time constant."""
    fn, ret = parsed
    with pytest.raises(constexpr.NotConstant):
        constexpr.evaluate(fn, ret.elts[4], fn.node)


def test_shape_value_needs_integers(parsed):
    """shape_value gives ints or tuples of ints and refuses floats and booleans."""
    fn, _ = parsed
    assert constexpr.shape_value(fn, ast.parse("SHAPE", mode="eval").body, fn.node) == (3, 4)
    for text in ("2.0", "True"):
        with pytest.raises(TypeError):
            constexpr.shape_value(fn, ast.parse(text, mode="eval").body, fn.node)


def make_kernel(shape):
    @cuda.jit
    def sizes(out):
        n = 5
        a = cuda.shared.array(n, int32)
        b = cuda.shared.array(shape, float32)
        c = cuda.shared.array(SHAPE, float32)
        d = cuda.local.array((n, ROWS + 1), int32)
        out[0] = a.size
        out[1] = b.size
        out[2] = c.size
        out[3] = d.size
    return sizes


def test_array_sizes_from_constants():
    """Shapes from a local constant, a closure tuple, a module tuple and arithmetic give the
    sizes NumPy computes for those shapes."""
    out = np.zeros(4, dtype=np.int64)
    build_program(make_kernel((2, 3, 4)).py_func).serial(1, 1, 1, 1, 1, 1, out)
    expect = [np.prod(s) for s in (5, (2, 3, 4), SHAPE, (5, ROWS + 1))]
    np.testing.assert_array_equal(out, expect)


@cuda.jit
def shape_from_argument(out, n):
    a = cuda.shared.array(n, int32)
    out[0] = a.size


def test_shape_from_a_run_time_value_is_refused():
    """A shape that is a kernel argument is no compile-time constant: refused as before."""
    with pytest.raises(CompileError) as info:
        translate_source(shape_from_argument.py_func)
    assert info.value.construct == "cuda.shared.array shape"
    assert "compile-time constant" in str(info.value)
