"""Contracts of the IO analysis (numba_cube.kernel.io_analysis.analyse_io).

Every kernel here is a real numba.cuda kernel (``cuda.jit`` imports and decorates without a
GPU); the analysis only reads its Python function. Each test's docstring is the contract it pins.
"""

from __future__ import annotations

import math
import time

import numba
import numpy as np
import pytest
from numba import cuda, float32, typeof

try:
    from numba.cuda import atomic
except ImportError:          # the CUDA simulator installs cuda.atomic only inside a kernel
    atomic = None

from numba_cube.kernel import io_analysis
from numba_cube.kernel.io_analysis import IO_UNKNOWN, TUPLE, analyse_io
from numba_cube.kernel.io_typed import confirm_writes


def io(kernel, *ndims):
    return analyse_io(kernel.py_func, ndims)


def opaque(x):
    """Stands for any callee the analysis does not know."""


GLOBAL_TABLE = np.zeros(8)


# -- device functions --------------------------------------------------------------------------

@cuda.jit(device=True)
def dev_store(dst, i, v):
    dst[i] = v


@cuda.jit(device=True)
def dev_load(src, i):
    return src[i]


@cuda.jit(device=True)
def dev_store_via(dst, i, v):
    dev_store(dst, i, v)                 # nested: the write happens two calls down


@cuda.jit(device=True)
def dev_tail(a):
    return a[1:]                         # returns a view of its argument


@cuda.jit(device=True)
def dev_leak(a):
    opaque(a)


@numba.njit
def njit_fill(a, v):
    for k in range(a.size):
        a[k] = v


# -- the basic shapes --------------------------------------------------------------------------

@cuda.jit
def vec_add(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] + b[i]


def test_elementwise():
    """Element reads of the inputs, a store into the output, scalars "": ("r", "r", "w", "")."""
    assert io(vec_add, 1, 1, 1, None) == ("r", "r", "w", "")


@cuda.jit
def incr(a, n):
    i = cuda.grid(1)
    if i < n:
        a[i] += 1


def test_inplace_update_is_read_and_write():
    """``a[i] += 1`` is a getitem then a setitem: "rw"."""
    assert io(incr, 1, None) == ("rw", "")


@cuda.jit
def block_sum(a, out):
    sm = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    sm[t] = a[cuda.grid(1)]
    cuda.syncthreads()
    s = 32
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = sm[0]


def test_tree_reduction_with_shared_memory():
    """A shared-memory array is not a parameter: its in-place updates touch no parameter, the
    input is "r", the per-block output "w"."""
    assert io(block_sum, 1, 1) == ("r", "w")


@cuda.jit
def scalar_copy_then_inplace(m, out):
    i = cuda.grid(1)
    t = m[i, 1]
    t += 1.0
    out[i] = t


def test_inplace_on_an_element_copy_is_not_a_write():
    """``t = m[i, 1]; t += 1`` updates a scalar copy, not ``m`` (ndim-aware): m stays "r"."""
    assert io(scalar_copy_then_inplace, 2, 1) == ("r", "w")


@cuda.jit
def scalars_only(x, n):
    y = x * n
    y += 1


def test_scalar_parameters_are_empty():
    """Scalar parameters (ndim None) are always ""."""
    assert io(scalars_only, None, None) == ("", "")


@cuda.jit
def ignores_b(a, b, out):
    out[0] = a[0]


def test_unused_array_parameter_is_empty():
    """An array parameter never touched is ""."""
    assert io(ignores_b, 1, 1, 1) == ("r", "", "w")


@cuda.jit
def shape_only(a, out):
    out[0] = a.size + a.shape[0] + a.ndim + len(a)


def test_metadata_is_not_a_read():
    """``.size``, ``.shape``, ``.ndim`` and ``len()`` look at metadata only: a is ""."""
    assert io(shape_only, 1, 1) == ("", "w")


# -- views and aliases -------------------------------------------------------------------------

@cuda.jit
def row_view(m, v):
    i, j = cuda.grid(2)
    row = m[i]
    row[j] = v[i]


def test_write_through_a_row_view():
    """``row = m[i]`` of a 2-D m is a view; ``row[j] = ...`` writes m; making the view is not
    a read: m is "w"."""
    assert io(row_view, 2, 1) == ("w", "r")


@cuda.jit
def row_then_inplace(m):
    i = cuda.grid(1)
    r = m[i]
    r += 1.0


def test_the_same_index_is_a_view_or_an_element_by_ndim():
    """The answer depends on ndims: ``r = m[i]; r += 1`` updates a row in place for a 2-D m
    ("rw"), but only a scalar copy of an element for a 1-D m ("r")."""
    assert io(row_then_inplace, 2) == ("rw",)
    assert io(row_then_inplace, 1) == ("r",)


@cuda.jit
def slice_write(a, b):
    i = cuda.grid(1)
    a[2:][i] = b[i]


def test_write_through_a_slice():
    """``a[2:][i] = ...`` writes a."""
    assert io(slice_write, 1, 1) == ("w", "r")


@cuda.jit
def reshape_alias(a, b):
    i = cuda.grid(1)
    c = a
    d = c.reshape((a.size,))
    d[i] = b[i]


def test_reshape_alias():
    """A copy of a parameter and its ``reshape`` alias it: the store through d writes a."""
    assert io(reshape_alias, 2, 1) == ("w", "r")


@cuda.jit
def transpose_write(m, out):
    i, j = cuda.grid(2)
    t = m.T
    t[j, i] = out[i, j]


def test_transpose_is_a_view():
    """``.T`` is a view of the same ndim: writing it writes m."""
    assert io(transpose_write, 2, 2) == ("w", "r")


@cuda.jit
def rebind_in_branch(a, b, out, flag):
    i = cuda.grid(1)
    if flag:
        x = a
    else:
        x = b[1:]
    x[i] = out[i]


def test_rebinding_through_an_if_joins_both():
    """A variable bound to different parameters in two branches may be either: both are "w"."""
    assert io(rebind_in_branch, 1, 1, 1, None) == ("w", "w", "r", "")


@cuda.jit
def rebind_param(a, b):
    i = cuda.grid(1)
    if i > 4:
        a = b
    a[i] = 1.0


def test_rebinding_a_parameter_name():
    """``a = b`` in a branch: the store may hit either array (flow-insensitive union)."""
    assert io(rebind_param, 1, 1) == ("w", "w")


@cuda.jit
def rows_loop(m, out):
    for r in m:
        r[0] = out[0]


def test_iterating_rows_of_a_2d_array():
    """Iterating a 2-D array yields row views: a store into a row writes m."""
    assert io(rows_loop, 2, 1) == ("w", "r")


@cuda.jit(device=True)
def dev_set_x(rec, v):
    rec.x = v


@cuda.jit
def record_fields(recs, recs2, vals, recs3):
    i = cuda.grid(1)
    recs[i].x = vals[i]
    dev_set_x(recs2[i], vals[i])
    recs3.x[i] = vals[i]


def test_record_field_stores_write_the_array():
    """An element may be a record, a reference into its array: ``recs[i].x = v``, directly or
    in a device function, writes the array (and taking the element counts as a read). A field
    of a record array (``recs3.x``, not an ndarray attribute) is a view of it."""
    assert io(record_fields, 1, 1, 1, 1) == ("rw", "rw", "r", "w")


# -- 2-D indexing ------------------------------------------------------------------------------

@cuda.jit
def matmul(A, B, C):
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = acc


@cuda.jit
def grid_tuple_index(m, out):
    idx = cuda.grid(2)
    out[idx] = m[idx] * 2.0


def test_2d_tuple_indices():
    """Tuple indices with as many entries as ndim are elements: A, B "r", C "w"; a tuple from
    ``cuda.grid(2)`` counts as two indices."""
    assert io(matmul, 2, 2, 2) == ("r", "r", "w")
    assert io(grid_tuple_index, 2, 2) == ("r", "w")


# -- builtins and calls ------------------------------------------------------------------------

@cuda.jit
def hist(x, h):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(h, x[i], 1)


@cuda.jit
def atomic_ops(a, b, c):
    i = cuda.grid(1)
    cuda.atomic.max(a, 0, i)
    cuda.atomic.compare_and_swap(b, 0, 1)
    c[i] = math.sqrt(float(i)) + cuda.threadIdx.x


def test_atomics_read_and_write_their_array():
    """``cuda.atomic.add(h, x[i], 1)``: h "rw", x "r"; every atomic op is a read-modify-write;
    math and thread-index builtins touch no array."""
    assert io(hist, 1, 1) == ("r", "rw")
    assert io(atomic_ops, 1, 1, 1) == ("rw", "rw", "w")


@cuda.jit
def atomic_forms(h, m, x):
    i, j = cuda.grid(2)
    atomic.add(h, x[i], 1)               # imported name rather than cuda.atomic
    cuda.atomic.add(m[i], j, 1)          # on a row view of a 2-D array


def test_atomic_spellings_and_views():
    """``from numba.cuda import atomic`` and an atomic on a row view are read+write too."""
    if atomic is None:
        pytest.skip("no importable numba.cuda.atomic under the CUDA simulator")
    assert io(atomic_forms, 1, 2, 1) == ("rw", "rw", "r")


@cuda.jit
def via_device_fn(x, y, z):
    i = cuda.grid(1)
    dev_store(z, i, dev_load(x, i) * 2.0)


def test_device_function_effects_map_back():
    """A device function storing into its argument writes the caller's parameter (z "w"),
    one loading from it reads it (x "r"); y untouched."""
    assert io(via_device_fn, 1, 1, 1) == ("r", "", "w")


@cuda.jit
def via_nested(x, z):
    i = cuda.grid(1)
    dev_store_via(z[1:], i, x[i])


def test_nested_device_functions():
    """Effects propagate through nested device calls and through a view passed as argument."""
    assert io(via_nested, 1, 1) == ("r", "w")


@cuda.jit(device=True)
def dev_row_store(m, i):
    row = m[i]
    row[0] = 1.0


@cuda.jit
def via_row_store(m):
    i = cuda.grid(1)
    dev_row_store(m, i)


def test_device_function_indexing_with_a_passed_integer():
    """The caller tells the callee that ``i`` is an integer, so ``m[i]`` there is an exact row
    view of the 2-D m: "w", no spurious read."""
    assert io(via_row_store, 2) == ("w",)


@cuda.jit
def via_keyword(x, z):
    i = cuda.grid(1)
    dev_store(v=x[i], i=i, dst=z)


def test_device_function_keyword_arguments():
    """Keyword arguments are mapped to the callee's parameters by name."""
    assert io(via_keyword, 1, 1) == ("r", "w")


@cuda.jit
def via_returned_view(a, b):
    i = cuda.grid(1)
    t = dev_tail(a)
    t[i] = b[i]


def test_device_function_returning_a_view():
    """A device function returning a view of its argument: stores into the result write the
    caller's array."""
    assert io(via_returned_view, 1, 1) == ("w", "r")


@cuda.jit
def via_njit(a):
    njit_fill(a, 1.0)


def test_njit_callee_is_followed():
    """Plain ``numba.njit`` callees are analysed like device functions."""
    assert io(via_njit, 1) == ("w",)


@cuda.jit
def leaks(a, b, out):
    i = cuda.grid(1)
    opaque(a)
    out[i] = b[i]


@cuda.jit
def leaks_in_callee(a, out):
    dev_leak(a)
    out[0] = 1


def test_unknown_callee_makes_the_array_unknown():
    """An array handed to a function the analysis does not know is ``IO_UNKNOWN`` (None),
    also when the unknown call is inside a device function; the other parameters stay exact."""
    assert io(leaks, 1, 1, 1) == (IO_UNKNOWN, "r", "w")
    assert io(leaks_in_callee, 1, 1) == (IO_UNKNOWN, "w")


@cuda.jit
def tuple_escape(a, b):
    pair = (a, b[0])
    opaque(pair)


@cuda.jit
def unknown_method(a, out):
    out[0] = a.byteswap()[0]


def test_arrays_escaping_through_tuples_or_unknown_methods_are_unknown():
    """An array stored into a tuple that escapes, or given to an unlisted method, is unknown;
    so is b, whose element escapes in the tuple (an element may be a record, a reference into
    its array: test_io_unmodelled_calls.py)."""
    assert io(tuple_escape, 1, 1) == (IO_UNKNOWN, IO_UNKNOWN)
    assert io(unknown_method, 1, 1) == (IO_UNKNOWN, "w")


@cuda.jit
def uses_global(out):
    i = cuda.grid(1)
    out[i] = GLOBAL_TABLE[i]
    opaque(GLOBAL_TABLE)


def test_global_arrays_are_not_parameters():
    """Arrays reached through globals or closures are not parameters and are ignored."""
    assert io(uses_global, 1) == ("w",)


@cuda.jit
def numpy_calls(a, b, c):
    np.copyto(c, a)
    c[0] = np.sum(b) + np.float32(1.0)


def test_numpy_calls_with_known_semantics():
    """``np.copyto(dst, src)`` writes dst and reads src; reductions read."""
    assert io(numpy_calls, 1, 1, 1) == ("r", "r", "w")


@cuda.jit
def recursive(a, n):
    if n > 0:
        recursive(a, n - 1)
    a[0] = 1


def test_recursion_is_cut_to_unknown():
    """A call cycle is not followed forever: the arrays passed into it are unknown."""
    assert io(recursive, 1, None) == (IO_UNKNOWN, "")


# -- the interface -----------------------------------------------------------------------------

def test_dispatcher_is_accepted_and_bad_ndims_raise():
    """A dispatcher is unwrapped to its py_func; an ndims of the wrong length is the caller's
    mistake and raises ValueError; a non-function raises TypeError."""
    assert analyse_io(vec_add, (1, 1, 1, None)) == ("r", "r", "w", "")
    with pytest.raises(ValueError):
        analyse_io(vec_add.py_func, (1, 1, 1))
    with pytest.raises(TypeError):
        analyse_io(42, ())


def test_memoised():
    """The second analysis of the same (function, ndims) is a cache hit: the very object the
    first returned, where an analysis after the cache is cleared builds an equal, new one.
    (No timing: a test must not depend on the machine being idle.)"""
    io_analysis._clear_cache()
    first = io(matmul, 2, 2, 2)
    second = io(matmul, 2, 2, 2)
    assert second is first
    io_analysis._clear_cache()
    fresh = io(matmul, 2, 2, 2)
    assert fresh == first and fresh is not first


def test_cold_analysis_is_cheap():
    """A cold analysis (run_frontend included) of a kernel with device calls stays within
    budget; the target is < 25 ms, asserted with slack for slow CI machines."""
    io_analysis._clear_cache()
    t0 = time.perf_counter()
    io(via_device_fn, 1, 1, 1)
    assert time.perf_counter() - t0 < 0.25


def class_in_body(a):
    class Local:                      # LOAD_BUILD_CLASS: run_frontend refuses it
        pass
    a[0] = 1


def test_unanalysable_function_gives_unknown_not_an_exception(caplog):
    """When Numba cannot build the IR, every array parameter is IO_UNKNOWN (scalars ""), and
    the failure is logged at debug level, never raised."""
    with caplog.at_level("DEBUG", logger="numba_cube"):
        assert analyse_io(class_in_body, (1,)) == (IO_UNKNOWN,)
    assert any("IO analysis" in r.message for r in caplog.records)


def test_analysis_bug_gives_unknown(monkeypatch):
    """An exception inside the walk itself (unexpected IR) is contained the same way."""
    def broken(*args):
        raise AssertionError("unexpected IR")
    monkeypatch.setattr(io_analysis, "walk", broken)
    io_analysis._clear_cache()
    try:
        assert io(vec_add, 1, 1, 1, None) == (IO_UNKNOWN, IO_UNKNOWN, IO_UNKNOWN, "")
    finally:
        io_analysis._clear_cache()


# -- the typed readonly probe ------------------------------------------------------------------

@numba.njit
def _fill_first(x):
    x[0] = 1.0


def cpu_kernel(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
    _fill_first(b.reshape((b.size,))[2:])


def test_confirm_writes_types_with_readonly_arguments():
    """``confirm_writes``: an array argument is written iff typing fails once it is readonly;
    writes through views and inside njit callees count; non-arrays are None; memoised."""
    x = np.zeros(8)
    argtypes = [typeof(v) for v in (x, x, x, 8)]
    assert confirm_writes(cpu_kernel, argtypes) == (False, True, True, None)
    t0 = time.perf_counter()
    assert confirm_writes(cpu_kernel, argtypes) == (False, True, True, None)
    assert time.perf_counter() - t0 < 1e-2


def untypable(a):
    return a.no_such_attribute


def test_confirm_writes_cannot_tell_when_nothing_types():
    """When the function does not type even with plain arguments, every entry is None."""
    assert confirm_writes(untypable, [typeof(np.zeros(3))]) == (None,)


# -- numba.cuda's builtins are known by identity, not by module name ----------------------------

_NAMED_LIKE_CUDA = '''
from numba import cuda


@cuda.jit(device=True)
def store(dst, i, v):
    dst[i] = v
'''


def _module_named(name, source, tmp_path):
    """A module called ``name``, loaded from a real file."""
    import importlib.util

    path = tmp_path / (name.rsplit(".", 1)[-1] + ".py")
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_device_function_of_a_module_named_numba_cuda_is_analysed(tmp_path):
    """A device function whose module is *called* numba.cuda.something is still a user's
    device function: its write is found (kernel.io), not taken for a builtin's read."""
    import numba_cube as cube

    store = _module_named("numba.cuda.user_devices", _NAMED_LIKE_CUDA, tmp_path).store
    assert store.__module__ == "numba.cuda.user_devices"

    def writes_through(src, dst):
        i = cuda.grid(1)
        if i < dst.size:
            store(dst, i, src[i])

    k = cube.kernel(writes_through)
    assert k.io(np.zeros(4), np.zeros(4)) == {"src": "r", "dst": "w"}


def test_numba_cuda_random_generators_write_their_states():
    """numba.cuda.random's generators live in numba.cuda but update the state array they are
    given: it is written (not a read-only builtin argument)."""
    from numba.cuda.random import xoroshiro128p_uniform_float32

    @cuda.jit
    def rand_fill(states, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = xoroshiro128p_uniform_float32(states, i)

    states, out = io(rand_fill, 1, 1)
    assert states is IO_UNKNOWN or "w" in states
    assert out == "w"


def test_rebound_device_function_is_analysed_again():
    """The analysis of a function is keyed by its fingerprint: a device function rebound in its
    globals (here: the same code over another globals dict) is not answered from the analysis
    of the old one."""
    import types

    def calls_dev(a, b):
        i = cuda.grid(1)
        dev(a, b, i)                                   # noqa: F821 - from the globals below

    def reader(a, b, i):
        return a[i] + b[i]

    def writer(a, b, i):
        b[i] = a[i]

    g = {"cuda": cuda, "dev": cuda.jit(device=True)(reader)}
    fn = types.FunctionType(calls_dev.__code__, g, "calls_dev")
    assert analyse_io(fn, (1, 1)) == ("r", "r")
    g["dev"] = cuda.jit(device=True)(writer)
    assert analyse_io(fn, (1, 1)) == ("r", "w")


# -- tuple parameters (io_ir.TUPLE) --------------------------------------------------------------


@cuda.jit
def _tuple_write(t, n):
    i = cuda.grid(1)
    if i < n:
        t[0][i] = 1


@cuda.jit
def _tuple_read(t, out):
    i = cuda.grid(1)
    out[i] = t[0][i] + t[1]


@cuda.jit
def _tuple_nested_write(t):
    t[1][0][0] = 2.0


@cuda.jit
def _tuple_unpacked_write(t):
    a, b = t
    a[0] = b[0]


@cuda.jit
def _tuple_escapes(t):
    opaque(t)


def test_write_through_a_tuple_item_is_a_write_of_the_tuple():
    """``t[0][i] = v`` on a tuple parameter: the tuple is written (never untouched)."""
    assert io(_tuple_write, TUPLE, None) == ("w", "")


def test_read_through_a_tuple_item_is_a_read_of_the_tuple():
    """``t[0][i]`` read (and a number item used): the tuple is read, not written."""
    assert io(_tuple_read, TUPLE, 1) == ("r", "w")


def test_nested_and_unpacked_tuple_writes_are_seen():
    """A write through a nested tuple (``t[1][0][0] = v``) or an unpacked item is a write."""
    assert "w" in io(_tuple_nested_write, TUPLE)[0]
    assert io(_tuple_unpacked_write, TUPLE)[0] == "rw"


def test_tuple_handed_to_an_unknown_function_is_unknown():
    """A tuple passed where the analysis cannot follow it is unknown (read and written)."""
    assert io(_tuple_escapes, TUPLE) == (IO_UNKNOWN,)


@cuda.jit
def _row_through_tuple_index(t, m):
    row = m[t]
    row[0] = 1
    other = m[t[0]]
    other[1] = 2


def test_index_taken_from_a_tuple_may_make_a_view():
    """``m[t]`` and ``m[t[0]]`` with a tuple parameter may be rows (its items may be ints), so
    a write through them writes ``m``: never taken for a copy of the selection."""
    assert io(_row_through_tuple_index, TUPLE, 2)[1] in ("rw", "w", IO_UNKNOWN)


@cuda.jit(device=True)
def _row_of(m, k):
    row = m[k]
    row[0] = 1


@cuda.jit
def _tuple_item_into_device_function(t, m):
    _row_of(m, t[0])


def test_tuple_item_handed_to_a_device_function_is_not_taken_for_an_array():
    """A tuple's item passed to a device function that indexes with it (``m[k]``, a row when
    the item is an int) leaves the write through the row seen."""
    assert io(_tuple_item_into_device_function, TUPLE, 2)[1] in ("rw", "w", IO_UNKNOWN)
