"""Kernels the CPU translator cannot run are refused with a CompileError naming the construct,
the line in the user's file, and the file.

Nothing here compiles with Numba: translation fails before any code is generated.
"""

import inspect
import textwrap

import pytest
from numba import cuda, float64, njit

from numba_cube.backends.cpu.translate import build_program, translate_source
from numba_cube.errors import CompileError

THIS_FILE = __file__


def refused(kernel) -> CompileError:
    with pytest.raises(CompileError) as info:
        translate_source(kernel.py_func)
    return info.value


def line_of(kernel, needle: str) -> int:
    """Line number, in this file, of the first source line of ``kernel`` containing ``needle``."""
    lines, start = inspect.getsourcelines(kernel.py_func)
    for k, text in enumerate(lines):
        if needle in text:
            return start + k
    raise AssertionError(f"{needle!r} not in source")


def check(err: CompileError, kernel, needle: str, construct_part: str):
    assert construct_part in err.construct, err.construct
    assert err.lineno == line_of(kernel, needle), (err.lineno, str(err))
    assert err.filename == THIS_FILE
    assert f"line {err.lineno}" in str(err)


@cuda.jit
def barrier_under_thread_if(a):
    i = cuda.grid(1)
    if i < 10:
        cuda.syncthreads()
    a[i] = 1


def test_barrier_under_unit_dependent_if():
    """A barrier under a condition that depends on the unit is refused (line of the barrier)."""
    err = refused(barrier_under_thread_if)
    check(err, barrier_under_thread_if, "cuda.syncthreads()",
          "cuda.syncthreads() under a unit-dependent condition")
    assert f"line {line_of(barrier_under_thread_if, 'if i < 10')}" in str(err)


@cuda.jit
def barrier_in_memory_dependent_loop(a, flags):
    sm = cuda.shared.array(32, float64)
    while flags[0] > 0:             # reads memory: not uniform by our rule
        sm[cuda.threadIdx.x] = a[0]
        cuda.syncthreads()


def test_barrier_in_loop_with_memory_read_condition():
    """A loop condition that reads memory is not cube-uniform."""
    err = refused(barrier_in_memory_dependent_loop)
    check(err, barrier_in_memory_dependent_loop, "cuda.syncthreads()", "unit-dependent")


@cuda.jit
def barrier_in_unit_loop(a):
    for k in range(cuda.threadIdx.x):
        cuda.syncthreads()
    a[0] = 1


def test_barrier_in_loop_over_unit_dependent_range():
    """A loop whose trip count depends on threadIdx cannot contain a barrier."""
    err = refused(barrier_in_unit_loop)
    check(err, barrier_in_unit_loop, "cuda.syncthreads()", "unit-dependent")


@cuda.jit
def warp_shuffle(a):
    i = cuda.grid(1)
    v = cuda.shfl_down_sync(0xFFFFFFFF, a[i], 1)
    a[i] = v


def test_warp_shuffle_refused():
    """Warp shuffles are refused, naming cuda.shfl_down_sync and its line."""
    err = refused(warp_shuffle)
    check(err, warp_shuffle, "shfl_down_sync", "cuda.shfl_down_sync")


@cuda.jit
def grid_sync(a):
    g = cuda.cg.this_grid()
    g.sync()


def test_grid_sync_refused():
    """Cooperative groups / grid-wide sync are refused."""
    err = refused(grid_sync)
    check(err, grid_sync, "this_grid", "cuda.cg")


@cuda.jit
def break_across_barrier(a):
    for k in range(4):
        cuda.syncthreads()
        if a[cuda.threadIdx.x] > 0:
            break
        a[cuda.threadIdx.x] += 1


def test_break_leaving_a_barrier_loop_refused():
    """A unit-dependent `break` out of a loop that contains a barrier is refused."""
    err = refused(break_across_barrier)
    check(err, break_across_barrier, "            break", "'break' crossing a barrier region")


@cuda.jit(device=True)
def device_with_barrier(x):
    cuda.syncthreads()
    return x


@cuda.jit
def calls_device_with_barrier(a):
    a[0] = device_with_barrier(a[0])


def test_barrier_in_device_function_refused():
    """A barrier inside a device function is refused (it is not inlined); the line is the one
    inside the device function."""
    err = refused(calls_device_with_barrier)
    assert "device function" in err.construct
    assert err.lineno == line_of(device_with_barrier, "cuda.syncthreads()")


@cuda.jit
def returns_value(a):
    return a[0]


def test_kernel_returning_a_value_refused():
    """Kernels return nothing in CUDA; `return <value>` in a kernel is refused."""
    err = refused(returns_value)
    check(err, returns_value, "return a[0]", "return with a value")


@cuda.jit
def dynamic_shared(a):
    sm = cuda.shared.array(0, float64)
    sm[0] = a[0]


def test_dynamic_shared_memory_refused():
    """`cuda.shared.array(0, ...)` (dynamic shared memory) is refused."""
    err = refused(dynamic_shared)
    check(err, dynamic_shared, "shared.array(0", "dynamic cuda.shared.array")


@cuda.jit
def uses_try(a):
    try:
        a[0] = 1
    except Exception:
        pass


def test_try_statement_refused():
    """Python constructs the generated loops cannot host (here `try`) are refused by name."""
    err = refused(uses_try)
    check(err, uses_try, "try:", "'try' statement")


@cuda.jit
def reserved_name(a):
    my__x = 1
    a[0] = my__x


def test_reserved_identifier_refused():
    """Identifiers containing '__' are reserved for generated names."""
    err = refused(reserved_name)
    check(err, reserved_name, "my__x = 1", "reserved identifier")


@cuda.jit
def half_add(a):
    a[0] = cuda.fp16.hadd(a[0], a[1])


def test_unsupported_cuda_builtin_is_named():
    """Any CUDA builtin the backend lacks is refused under its own name."""
    err = refused(half_add)
    check(err, half_add, "cuda.fp16.hadd", "cuda.fp16.hadd")


@cuda.jit
def barrier_reduction_in_condition(a):
    while cuda.syncthreads_or(a[cuda.threadIdx.x] > 0):
        a[cuda.threadIdx.x] -= 1


def test_barrier_reduction_inside_an_expression_is_refused():
    """syncthreads_count/and/or are supported as `name = cuda.syncthreads_or(p)` statements
    only, not inside a loop condition."""
    err = refused(barrier_reduction_in_condition)
    check(err, barrier_reduction_in_condition, "syncthreads_or", "cuda.syncthreads_or")


def plain_python_helper(x):
    return x + 1


@cuda.jit
def calls_plain_python(a):
    a[0] = plain_python_helper(a[0])


def test_undefined_and_unsupported_globals():
    """A plain Python function (not cuda.jit / njit) is not callable from a kernel."""
    err = refused(calls_plain_python)
    assert "plain_python_helper" in err.construct
    assert err.lineno == line_of(calls_plain_python, "plain_python_helper(a[0])")


def test_missing_source_refused():
    """A kernel without retrievable source (made by exec) is refused as 'missing source'."""
    ns = {"cuda": cuda}
    exec(textwrap.dedent("""
        def k(a):
            a[cuda.grid(1)] = 1
    """), ns)
    with pytest.raises(CompileError) as info:
        build_program(ns["k"])
    assert info.value.construct == "missing source"


def test_njit_function_is_a_valid_device_function():
    """Calling a numba.njit function from a kernel is allowed (translated like a device fn)."""
    @njit
    def inc(x):
        return x + 1

    @cuda.jit
    def k(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = inc(a[i])

    assert "inc__dev" in translate_source(k.py_func)
