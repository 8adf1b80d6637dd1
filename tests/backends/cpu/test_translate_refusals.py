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


@cuda.jit
def barrier_in_memory_dependent_loop(a, flags):
    sm = cuda.shared.array(32, float64)
    while flags[0] > 0:             # reads memory: not uniform by the static rule
        sm[cuda.threadIdx.x] = a[0]
        cuda.syncthreads()


def test_barriers_under_conditions_not_provably_uniform_translate():
    """A barrier under an `if`/`while` whose condition the static rule cannot prove uniform
    translates: whether the units agree is checked at run time (test_runtime_uniformity.py)."""
    assert "__check_cube" in translate_source(barrier_under_thread_if.py_func)
    assert "__check_cube" in translate_source(barrier_in_memory_dependent_loop.py_func)


@cuda.jit
def barrier_in_unit_loop(a):
    for k in range(cuda.threadIdx.x):
        cuda.syncthreads()
    a[0] = k


def test_barrier_in_loop_over_unit_dependent_range():
    """A `for` loop around a barrier whose range depends on threadIdx is refused when it cannot
    become a run-time-checked `while` (here: its variable is read after the loop)."""
    err = refused(barrier_in_unit_loop)
    check(err, barrier_in_unit_loop, "cuda.syncthreads()", "unit-dependent")


@cuda.jit
def warp_shuffle_with_width(a):
    i = cuda.grid(1)
    v = cuda.shfl_down_sync(0xFFFFFFFF, a[i], 1, 16)
    a[i] = v


def test_warp_shuffle_width_argument_refused():
    """numba-cuda's shuffles take no width (it is always 32): a fourth argument is refused,
    naming cuda.shfl_down_sync and its line."""
    err = refused(warp_shuffle_with_width)
    check(err, warp_shuffle_with_width, "shfl_down_sync", "cuda.shfl_down_sync")
    assert "width" in str(err)


@cuda.jit
def grid_group_attribute(a):
    g = cuda.cg.this_grid()
    a[0] = g.size


def test_grid_group_other_than_sync_refused():
    """Of a grid group only .sync() is supported; any other use is refused at its line."""
    err = refused(grid_group_attribute)
    check(err, grid_group_attribute, "g.size", "grid group")


@cuda.jit
def grid_sync_with_barrier_reduction(a):
    g = cuda.cg.this_grid()
    n = cuda.syncthreads_count(a[cuda.grid(1)] > 0)
    g.sync()
    a[cuda.grid(1)] = n


def test_barrier_reduction_in_grid_sync_kernel_refused():
    """syncthreads_count/and/or in a kernel that syncs the grid is refused (not implemented
    in the CPU backend's grid mode)."""
    err = refused(grid_sync_with_barrier_reduction)
    check(err, grid_sync_with_barrier_reduction, "syncthreads_count",
          "barrier reduction with grid sync")


@cuda.jit
def shuffle_in_conditional_expression(a):
    i = cuda.grid(1)
    a[i] = a[i] > 0 and cuda.shfl_sync(0xFFFFFFFF, a[i], 0)


def test_warp_intrinsic_in_conditional_expression_refused():
    """A warp intrinsic Python would evaluate only sometimes (right of and/or) is refused."""
    err = refused(shuffle_in_conditional_expression)
    check(err, shuffle_in_conditional_expression, "shfl_sync", "conditional expression")


@cuda.jit
def barrier_in_unit_dependent_loop_with_break(a):
    tid = cuda.threadIdx.x
    while a[tid] > 0:
        cuda.syncthreads()
        if a[tid] > 5:
            break
        a[tid] -= 1


def test_break_out_of_a_masked_loop_refused():
    """A `break` out of a loop with a run-time mask (its condition reads memory) is refused."""
    err = refused(barrier_in_unit_dependent_loop_with_break)
    check(err, barrier_in_unit_dependent_loop_with_break, "            break",
          "'break' crossing a barrier region")


@cuda.jit
def break_across_shuffle(a):
    for k in range(4):
        v = cuda.shfl_down_sync(0xFFFFFFFF, a[cuda.threadIdx.x], 1)
        if v > 0:
            break
        a[cuda.threadIdx.x] += 1


def test_break_leaving_a_loop_of_warp_intrinsics_refused():
    """A unit-dependent `break` out of a loop that contains warp intrinsics but no barrier is
    refused: warps may leave it at different rounds on a GPU, which the CPU backend's run-time
    check (every unit of the cube agrees, for loops with a barrier:
    ``test_runtime_uniformity.py``) would call divergent."""
    err = refused(break_across_shuffle)
    check(err, break_across_shuffle, "            break", "'break' crossing a barrier region")


@cuda.jit
def break_on_shared_flag_with_grid_sync(x, out):
    g = cuda.cg.this_grid()
    flag = cuda.shared.array(1, float64)
    for r in range(4):
        if cuda.threadIdx.x == 0:
            flag[0] = x[r * cuda.gridDim.x + cuda.blockIdx.x]
        cuda.syncthreads()
        if flag[0] > 0:
            break
        g.sync()
    out[cuda.grid(1)] = 1


def test_break_under_a_shared_flag_in_a_grid_sync_kernel_refused():
    """In a kernel that syncs the grid, loops run once for the whole grid, so a `break` under
    a condition that is uniform per cube only at run time is refused, naming grid mode."""
    err = refused(break_on_shared_flag_with_grid_sync)
    check(err, break_on_shared_flag_with_grid_sync, "            break", "grid mode")
    assert "syncs the grid" in str(err)


@cuda.jit(device=True)
def device_with_barrier(x):
    cuda.syncthreads()
    return x


@cuda.jit
def calls_device_with_barrier_lazily(a):
    a[0] = a[1] > 0 and device_with_barrier(a[0])


def test_barrier_in_device_function_refused_where_it_cannot_be_inlined():
    """A device function with a barrier is inlined into the kernel (tests/backends/cpu/
    test_inline.py); where the call cannot be inlined (Python would evaluate it only sometimes,
    right of and/or) it is refused, at the call."""
    err = refused(calls_device_with_barrier_lazily)
    check(err, calls_device_with_barrier_lazily, "device_with_barrier(a[0])",
          "inlined device function call in a lazily evaluated expression")
    assert "'device_with_barrier'" in str(err)


@cuda.jit
def returns_value(a):
    return a[0]


def test_kernel_returning_a_value_refused():
    """Kernels return nothing in CUDA; `return <value>` in a kernel is refused."""
    err = refused(returns_value)
    check(err, returns_value, "return a[0]", "return with a value")


@cuda.jit
def empty_2d_shared(a):
    sm = cuda.shared.array((0, 2), float64)
    sm[0, 0] = a[0]


def test_empty_shared_array_that_is_not_dynamic_refused():
    """`cuda.shared.array((0, 2), ...)` has no elements and is not dynamic shared memory (only a
    1-D array of size 0 is, see test_dynamic_shared.py): refused, as numba-cuda refuses it."""
    err = refused(empty_2d_shared)
    check(err, empty_2d_shared, "shared.array((0", "cuda.shared.array of size <= 0")


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
def half_tanh_approx(a):
    a[0] = cuda.fp16.htanh_approx(a[0])


def test_unsupported_cuda_builtin_is_named():
    """Any CUDA builtin the backend lacks is refused under its own name."""
    err = refused(half_tanh_approx)
    check(err, half_tanh_approx, "cuda.fp16.htanh_approx", "cuda.fp16.htanh_approx")


@cuda.jit
def barrier_reduction_in_conditional(a):
    a[cuda.threadIdx.x] = a[0] > 0 or cuda.syncthreads_or(a[cuda.threadIdx.x] > 0)


def test_barrier_reduction_in_a_conditional_expression_is_refused():
    """syncthreads_count/and/or may sit inside expressions (they are hoisted into a statement),
    but not where Python would evaluate them only sometimes (right of and/or)."""
    err = refused(barrier_reduction_in_conditional)
    check(err, barrier_reduction_in_conditional, "syncthreads_or", "cuda.syncthreads_or")


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
    """A kernel without retrievable source (made by exec) is rebuilt from its bytecode (see
    test_sourceless.py); what has no rebuilt form (a lambda) is refused, saying so."""
    ns = {"cuda": cuda}
    exec(textwrap.dedent("""
        def k(a):
            f = lambda x: x
            a[cuda.grid(1)] = f(1)
    """), ns)
    with pytest.raises(CompileError) as info:
        build_program(ns["k"])
    assert info.value.construct.endswith("without source")


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


HINTED_STORE = cuda.stcg


@cuda.jit
def hinted_store(r, x):
    cuda.stcg(r, 0, x[0])


@cuda.jit
def hinted_store_local_alias(r, x):
    store = cuda.stcs
    store(r, 0, x[0])


@cuda.jit
def hinted_store_module_alias(r, x):
    HINTED_STORE(r, 0, x[0])


@cuda.jit
def hinted_load(r, x):
    r[0] = cuda.ldcg(x, 0)


def test_cache_hints_are_refused_not_run_without_their_store():
    """numba-cuda's cache-hinted stores and loads (``cuda.stcg(r, i, v)``, ``cuda.ldcg(x, i)``),
    spelled directly or through an alias, are refused with a CompileError naming the builtin;
    a numba-style launch on the CPU client raises it and leaves ``r`` as it was, rather than
    running with the store dropped."""
    import numpy as np

    import numba_cube as cube

    for kernel, name in ((hinted_store, "cuda.stcg"), (hinted_store_local_alias, "cuda.stcs"),
                         (hinted_store_module_alias, "cuda.stcg"), (hinted_load, "cuda.ldcg")):
        assert refused(kernel).construct == name
    r, x = np.full(1, -1.0), np.full(1, 7.0)
    with cube.client("cpu"), pytest.raises(CompileError, match="cuda.stcg"):
        cube.kernel(hinted_store)[1, 1](r, x)
    np.testing.assert_array_equal(r, [-1.0])
