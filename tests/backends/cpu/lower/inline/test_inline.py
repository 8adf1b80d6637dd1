"""Device functions that numba-cuda compiles into the kernel's typing are inlined by the CPU
translator (``lower/inline/inliner.py``): shared arrays and barriers inside them, and parameters
bound to compile-time values (a function such as ``cuda.atomic.add``, a dtype, a shape, a flag).

Kernels run through ``build_program`` and are compared with NumPy; refusals are checked on the
translation alone (no Numba compile).
"""

import inspect

import numpy as np
import pytest
from numba import cuda, float32, float64, int64, uint32, uint64

from numba_cube.backends.cpu.translate import build_program, translate_source
from numba_cube.errors import CompileError

THIS_FILE = __file__


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"rng seed: {seed}")
    return np.random.default_rng(seed)


def run(kernel, variant, grid, block, *args):
    grid = tuple(grid) + (1,) * (3 - len(grid))
    block = tuple(block) + (1,) * (3 - len(block))
    getattr(build_program(kernel.py_func), variant)(*grid, *block, *args)


def line_of(fn, needle: str) -> int:
    lines, start = inspect.getsourcelines(fn.py_func)
    return start + next(k for k, text in enumerate(lines) if needle in text)


# ---- compile-time arguments: functions, dtypes, shapes, flags (numba-cuda's test_atomics) ----

@cuda.jit(device=True)
def cast_none(num):
    return num


@cuda.jit(device=True)
def cast_to_uint64(num):
    return uint64(num)


@cuda.jit(device=True)
def binop_1d_shared(ary, idx, op2, ary_dtype, nelements, binop_func, cast_func, init, wrap):
    tid = cuda.threadIdx.x
    sm = cuda.shared.array(nelements, ary_dtype)
    sm[tid] = init
    cuda.syncthreads()
    bin = cast_func(idx[tid] % nelements)
    if wrap:
        bin = bin % nelements
    binop_func(sm, bin, op2)
    cuda.syncthreads()
    ary[tid] = sm[tid]


@cuda.jit
def histogram_kernel(ary):
    binop_1d_shared(ary, ary, 1, uint32, 32, cuda.atomic.add, cast_none, 0, True)


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_function_dtype_shape_and_flag_arguments(variant, rng):
    """A device function with a shared array and barriers, called with cuda.atomic.add, a
    device function, a dtype, a shape and a flag, computes what NumPy's bincount does."""
    ary = rng.integers(0, 32, 32).astype(np.uint32)
    expect = np.bincount(ary, minlength=32).astype(np.uint32)
    run(histogram_kernel, variant, (1,), (32,), ary)
    np.testing.assert_array_equal(ary, expect)


@cuda.jit(device=True)
def binop_2d_shared(ary, op2, ary_dtype, ary_shape, binop_func, y_cast_func, wrap):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    sm = cuda.shared.array(ary_shape, ary_dtype)
    sm[tx, ty] = ary[tx, ty]
    cuda.syncthreads()
    bin = (tx, y_cast_func(ty))
    if wrap:
        bin = (bin[0] % ary_shape[0], bin[1] % ary_shape[1])
    binop_func(sm, bin, op2)
    cuda.syncthreads()
    ary[tx, ty] = sm[tx, ty]


@cuda.jit
def sub_2d_kernel(ary, op2):
    binop_2d_shared(ary, op2, float64, (4, 8), cuda.atomic.sub, cast_to_uint64, True)


def test_tuple_shape_argument_and_tuple_index(rng):
    """A shape tuple argument sizes the shared array, a tuple built from thread ids indexes the
    atomic; each cell loses op2 once, as in NumPy."""
    ary = rng.random((4, 8))
    expect = ary - 0.5
    run(sub_2d_kernel, "serial", (1,), (4, 8), ary, 0.5)
    np.testing.assert_allclose(ary, expect)


@cuda.jit(device=True)
def apply_twice(func, x):
    return func(func(x))


@cuda.jit(device=True)
def square(x):
    return x * x


@cuda.jit(device=True)
def forward(func, x):
    return apply_twice(func, x) + 1          # passes its own compile-time argument on


@cuda.jit
def nested_function_arguments(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = forward(square, x[i])


def test_function_argument_passed_through_two_levels(rng):
    """A device function received as an argument can be passed on to another device function;
    out = x**4 + 1 as in NumPy."""
    x = rng.random(50)
    out = np.zeros(50)
    run(nested_function_arguments, "serial", (2,), (32,), out, x)
    np.testing.assert_allclose(out, x ** 4 + 1)


# ---- shared arrays of inlined functions belong to the cube ------------------------------------

@cuda.jit(device=True)
def stash_or_fetch(a, out, fetch):
    sm = cuda.shared.array(32, float64)
    tid = cuda.threadIdx.x
    if fetch:
        out[cuda.grid(1)] = sm[31 - tid]
    else:
        sm[tid] = a[cuda.grid(1)]
    cuda.syncthreads()


@cuda.jit
def reverse_through_two_calls(a, out, first, second):
    stash_or_fetch(a, out, first)
    stash_or_fetch(a, out, second)


def test_calls_with_the_same_compile_time_arguments_share_the_array(rng):
    """Two calls of one device function with the same compile-time arguments (numba-cuda: one
    compiled version) see one shared array per cube, as CUDA's __shared__ in a device function:
    the second call reads what the first wrote, reversing each block of 32."""
    a = rng.random(64)
    out = np.zeros(64)
    run(reverse_through_two_calls, "serial", (2,), (32,), a, out, 0, 1)
    np.testing.assert_array_equal(out, a.reshape(2, 32)[:, ::-1].ravel())


@cuda.jit(device=True)
def static_table():
    table = cuda.shared.array(16, float64)
    return table


@cuda.jit(device=True)
def dynamic_table():
    table = cuda.shared.array(shape=0, dtype=float64)
    return table


@cuda.jit(device=True)
def fill_static(a):
    table = static_table()
    table[cuda.threadIdx.x] = a[cuda.threadIdx.x]


@cuda.jit(device=True)
def fill_dynamic(a):
    table = dynamic_table()
    table[cuda.threadIdx.x] = a[cuda.threadIdx.x]


@cuda.jit
def reverse_static(a, out):
    fill_static(a)
    cuda.syncthreads()
    out[cuda.threadIdx.x] = static_table()[15 - cuda.threadIdx.x]


@cuda.jit
def reverse_dynamic(a, out):
    fill_dynamic(a)
    cuda.syncthreads()
    out[cuda.threadIdx.x] = dynamic_table()[15 - cuda.threadIdx.x]


@pytest.mark.parametrize("kernel,nbytes", [(reverse_static, 0), (reverse_dynamic, 16 * 8)])
def test_a_shared_array_reached_directly_and_through_another_call_is_one_array(kernel, nbytes):
    """A device function declaring shared memory (static, or dynamic by keyword), inlined once
    through another device function and once directly, is one array per cube (the nested
    inlining names it, the direct one finds that name): the direct call reads what the nested
    one wrote, reversing the block as NumPy does."""
    a = np.arange(16.0) * 1.5
    out = np.zeros(16)
    program = build_program(kernel.py_func)
    extra = (nbytes,) if nbytes else ()
    program.serial(1, 1, 1, 16, 1, 1, *extra, a, out)
    np.testing.assert_array_equal(out, a[::-1])


@cuda.jit(device=True)
def roundtrip(a, out, dtype, offset):
    sm = cuda.shared.array(16, dtype)
    tid = cuda.threadIdx.x
    sm[tid] = a[tid] + offset
    cuda.syncthreads()
    out[tid] = sm[15 - tid]
    cuda.syncthreads()


@cuda.jit
def two_dtypes(a, out32, out64):
    roundtrip(a, out32, float32, 0.0)
    roundtrip(a, out64, float64, 1.0)


def test_calls_with_other_dtypes_get_arrays_of_their_own(rng):
    """Calls binding different dtypes get separate shared arrays of those dtypes (float32
    rounding visible in one, float64 exact in the other)."""
    a = rng.random(16)
    out32, out64 = np.zeros(16), np.zeros(16)
    run(two_dtypes, "serial", (1,), (16,), a, out32, out64)
    np.testing.assert_array_equal(out32, a.astype(np.float32)[::-1].astype(np.float64))
    np.testing.assert_array_equal(out64, (a + 1.0)[::-1])


# ---- returns --------------------------------------------------------------------------------

@cuda.jit(device=True)
def block_sum_or_value(x, mode):
    sm = cuda.shared.array(32, float64)
    tid = cuda.threadIdx.x
    if mode == 0:
        return x * 2.0                     # an early return under a cube-uniform condition
    sm[tid] = x
    cuda.syncthreads()
    if tid == 0:
        total = 0.0
        for k in range(32):
            total += sm[k]
        sm[0] = total
    cuda.syncthreads()
    result = sm[0]
    cuda.syncthreads()
    return result


@cuda.jit
def sums(a, out, mode):
    i = cuda.grid(1)
    out[i] = block_sum_or_value(a[i], mode) + 1.0


@pytest.mark.parametrize("mode", [0, 1])
def test_early_return_and_value_after_barriers(mode, rng):
    """An early return and a value computed after barriers both reach the caller: mode 0
    doubles, mode 1 gives every unit its block's sum (plus one, in the caller)."""
    a = rng.random(64)
    out = np.zeros(64)
    run(sums, "serial", (2,), (32,), a, out, mode)
    blocks = a.reshape(2, 32)
    expect = a * 2.0 + 1.0 if mode == 0 else np.repeat(blocks.sum(axis=1), 32) + 1.0
    np.testing.assert_allclose(out, expect)


# ---- a cuda.jit kernel called from a kernel is a device function ------------------------------

@cuda.jit
def kernel_used_as_function(x, k):
    if x > k:
        return x - k
    return int64(0)


@cuda.jit
def calls_a_kernel(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = kernel_used_as_function(a[i], 10)


def test_kernel_called_from_kernel(rng):
    """numba-cuda compiles a cuda.jit kernel called from a kernel as a device function (its
    return value included); out = max(a - 10, 0) as in NumPy."""
    a = rng.integers(0, 20, 40)
    out = np.zeros(40, dtype=np.int64)
    run(calls_a_kernel, "serial", (2,), (32,), out, a)
    np.testing.assert_array_equal(out, np.maximum(a - 10, 0))


# ---- what stays as it was -------------------------------------------------------------------

@cuda.jit(device=True)
def plain_helper(x, scale):
    return x * scale


@cuda.jit
def calls_plain_helper(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = plain_helper(a[i], 3)


def test_plain_device_function_keeps_its_own_function():
    """A device function without shared memory, barriers or compile-time objects is compiled
    as a function of its own (<name>__dev), not inlined, even with a constant argument."""
    src = translate_source(calls_plain_helper.py_func)
    assert "def plain_helper__dev(" in src
    assert "plain_helper__dev(a[i], 3)" in src


# ---- refusals -------------------------------------------------------------------------------

def refused(kernel) -> CompileError:
    with pytest.raises(CompileError) as info:
        translate_source(kernel.py_func)
    return info.value


@cuda.jit(device=True)
def recursive_shared(x, n):
    sm = cuda.shared.array(4, float64)
    sm[0] = x
    if n > 0:
        return recursive_shared(x, n - 1)
    return sm[0]


@cuda.jit
def calls_recursive(out):
    out[0] = recursive_shared(1.0, 3)


def test_recursion_through_an_inlined_function_is_refused():
    """An inlined device function that calls itself is refused by name at the recursive
    call."""
    err = refused(calls_recursive)
    assert err.construct == "recursive inlined device function"
    assert "'recursive_shared'" in str(err)
    assert err.lineno == line_of(recursive_shared, "return recursive_shared(")
    assert err.filename == THIS_FILE


@cuda.jit(device=True)
def return_in_loop(a):
    sm = cuda.shared.array(4, float64)
    for k in range(4):
        if a[k] > 0:
            return k
        sm[k] = a[k]
    return -1


@cuda.jit
def calls_return_in_loop(a, out):
    out[0] = return_in_loop(a)


def test_return_inside_a_loop_of_an_inlined_function_is_refused():
    """A return inside a loop of an inlined device function is refused at that return."""
    err = refused(calls_return_in_loop)
    assert err.construct == "return inside a loop of an inlined device function"
    assert err.lineno == line_of(return_in_loop, "return k")


@cuda.jit(device=True)
def with_barrier(x):
    cuda.syncthreads()
    return x


@cuda.jit
def inlined_call_after_or(a, out):
    i = cuda.grid(1)
    out[i] = a[i] > 0 or with_barrier(a[i]) > 0


def test_inlined_call_in_a_lazy_operand_is_refused():
    """An inlined call in the right operand of 'or' would run unconditionally once hoisted:
    refused at the call."""
    err = refused(inlined_call_after_or)
    assert err.construct == "inlined device function call in a lazily evaluated expression"
    assert err.lineno == line_of(inlined_call_after_or, "or with_barrier")


@cuda.jit(device=True)
def reassigns_function_param(func, x):
    func = square
    return func(x)


@cuda.jit
def calls_reassigning(out):
    out[0] = reassigns_function_param(cuda.atomic.add, 1.0)


def test_compile_time_object_bound_to_a_reassigned_parameter_is_refused():
    """A parameter that receives a compile-time object and is reassigned in the callee cannot
    be a variable: refused at the call."""
    err = refused(calls_reassigning)
    assert err.construct == "reassigned parameter 'func'"
