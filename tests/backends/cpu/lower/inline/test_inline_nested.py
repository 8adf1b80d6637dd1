"""Nested functions (closures) in kernels and device functions (``lower/inline/nested.py``): called
where they are defined, or passed to a device function that calls them, as numba-cuda's
make_function pass allows. Results are compared with the same Python code run by CPython.
"""

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.translate import build_program, translate_source
from numba_cube.errors import CompileError

OFFSET = 123


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


def run_one(kernel, *args):
    build_program(kernel.py_func).serial(1, 1, 1, 1, 1, 1, *args)


@cuda.jit
def apply(func, *args):
    return func(*args)


@cuda.jit
def apply_with_keywords(func, *args):
    x, y = args
    return func(x, y, scale=10) + func(x, y)


def closures(x):
    """The reference, run by CPython, and the body of the kernel below."""
    y = 10

    def add(a, b, scale=1):
        z = 4                        # a local of its own, not the caller's
        return (a + b) * scale + y + z + OFFSET

    def twice(f, v):
        return f(f(v, 0), 0)

    direct = add(x, 2)
    escaped = apply(add, x, 3)
    keywords = apply_with_keywords(add, x, 5)
    passed_on = twice(add, x)
    return direct, escaped, keywords, passed_on


@cuda.jit
def closures_kernel(out, x):
    y = 10

    def add(a, b, scale=1):
        z = 4
        return (a + b) * scale + y + z + OFFSET

    def twice(f, v):
        return f(f(v, 0), 0)

    out[0] = add(x, 2)
    out[1] = apply(add, x, 3)
    out[2] = apply_with_keywords(add, x, 5)
    out[3] = twice(add, x)


def test_closures_called_directly_and_passed_on():
    """A closure called where it is defined, passed to a *args device function, called there
    with keyword arguments and defaults, and passed to another closure, gives CPython's
    results."""
    out = np.zeros(4, dtype=np.int64)
    run_one(closures_kernel, out, 7)
    py_apply = apply.py_func
    py_keywords = apply_with_keywords.py_func
    g = closures.__globals__
    saved = g["apply"], g["apply_with_keywords"]
    g["apply"], g["apply_with_keywords"] = py_apply, py_keywords   # the plain Python versions
    try:
        expect = closures(7)
    finally:
        g["apply"], g["apply_with_keywords"] = saved
    assert tuple(out) == expect


@cuda.jit
def late_capture(out, x):
    y = 1

    def read_y():
        return y * 100

    y = x                      # a closure called in place reads the variable at the call
    out[0] = read_y()


def test_direct_call_reads_the_variable_at_the_call():
    """A closure called where it is defined reads the enclosing variable's current value, as
    Python does (100 * x, not 100)."""
    out = np.zeros(1, dtype=np.int64)
    run_one(late_capture, out, 5)
    assert out[0] == 500


@cuda.jit
def escapes_with_non_constant(out, x):
    z = x + 1

    def inner(v):
        return v + z

    out[0] = apply(inner, 1)


def test_escaping_closure_over_a_non_constant_is_refused():
    """A closure passed to another function may only read compile-time constants of the
    enclosing function (numba-cuda: "Cannot capture the non-constant value")."""
    with pytest.raises(CompileError) as info:
        translate_source(escapes_with_non_constant.py_func)
    assert info.value.construct == "closure capturing a non-constant value"
    assert "'z'" in str(info.value)


@cuda.jit
def closure_as_value(out):
    def inner():
        return 1

    f = inner
    out[0] = f()


def test_closure_used_as_a_value_is_refused():
    """A closure bound to another name (a function value at run time) is refused by name."""
    with pytest.raises(CompileError) as info:
        translate_source(closure_as_value.py_func)
    assert info.value.construct == "nested function 'inner' used as a value"


@cuda.jit
def closure_defining_a_closure(out):
    def outer_fn():
        def inner_fn():
            return 10
        return inner_fn() + 1

    out[0] = apply(outer_fn)


def test_closure_defining_its_own_closure():
    """A closure passed to a device function may define and call a closure of its own
    (10 + 1, as CPython computes)."""
    out = np.zeros(1, dtype=np.int64)
    run_one(closure_defining_a_closure, out)
    assert out[0] == 11
