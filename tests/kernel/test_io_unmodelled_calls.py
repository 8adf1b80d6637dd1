"""Contracts of the IO analysis for calls it does not model (issue 30, item 3).

An array that reaches a call the analysis does not model (a numba.cuda builtin it does not list,
an ``@intrinsic``, an ``@overload``-ed function, a foreign function, anything it cannot resolve)
must count as read *and* written: ``IO_UNKNOWN``, which the runtime resolves to "read and
written" (CONTRACT.md section 4.2). Only what is modelled may be more precise. The expectations
here are numba-cuda's documented semantics, written out by hand, not read from the analysis'
tables: a test that copied the tables would pass whatever they said.

Nothing is compiled: the analysis reads the untyped IR, so a kernel passing an array where
numba-cuda wants a number is still a kernel it must answer for.
"""

from __future__ import annotations

import ctypes
import importlib
import math
import types

import numba
import numpy as np
import pytest
from numba import cuda
from numba.core.extending import intrinsic, overload, register_jitable

import numba_cube as cube
from numba_cube.kernel.io_analysis import IO_UNKNOWN, TUPLE, analyse_io
from numba_cube.backends.cuda.driver import probe
from numba_cube.kernel.kernel import resolve_access

# These are numba-cuda's own names. Under its simulator numba.cuda has others (cuda.stcg is None
# there, fp16 does not import): tests/cuda/cases/test_cuda_cache_hints_io.py covers that case.
pytestmark = pytest.mark.skipif(probe.simulating(), reason="numba.cuda is the simulator's")


def io(fn, *ndims):
    return analyse_io(fn, ndims)


# -- every public name of numba.cuda ------------------------------------------------------------

#: numba-cuda's documented effect on an array at positions 0, 1, 2 (what is not an array
#: position there, an index or a value, is at most read).
_ATOMIC = ("rw", "r", "r")                    # cuda.atomic.<op>(ary, idx, val[, val])
_LOAD = ("r", "r", "r")                       # cuda.ldcg(array, i): loads array[i]
_STORE = ("w", "r", "r")                      # cuda.stcg(array, i, value): array[i] = value
DOCUMENTED = {
    **{f"atomic.{op}": _ATOMIC for op in ("add", "sub", "and_", "or_", "xor", "inc", "dec",
                                          "exch", "max", "min", "nanmax", "nanmin",
                                          "compare_and_swap", "cas")},
    **{name: _LOAD for name in ("ldca", "ldcg", "ldcs", "ldlu", "ldcv")},
    **{name: _STORE for name in ("stcg", "stcs", "stwb", "stwt")},
    "const.array_like": ("r", "r", "r"),      # copies its argument into constant memory
}
#: The kernel API namespaces below numba.cuda. ``random`` is left out on purpose: its
#: generators are ordinary device functions, analysed by their bodies like any user's
#: (test_io_analysis.py::test_numba_cuda_random_generators_write_their_states).
NAMESPACES = ("libdevice", "cg", "fp16", "bf16", "fp8")


def _public(obj):
    return [(n, v) for n, v in sorted(vars(obj).items())
            if not n.startswith("_") and not isinstance(v, types.ModuleType)]


def _cuda_names():
    """(dotted path below numba.cuda, object) for every public attribute of numba.cuda, of the
    stub classes it exports (``atomic.add``, ``shared.array``) and of its API namespaces."""
    names = []
    for name, value in _public(cuda):
        names.append((name, value))
        if isinstance(value, type) and value.__module__.startswith("numba.cuda"):
            names += [(f"{name}.{m}", v) for m, v in _public(value)]
    for ns in NAMESPACES:
        try:
            module = importlib.import_module(f"numba.cuda.{ns}")
        except ImportError:
            continue
        names += [(f"{ns}.{n}", v) for n, v in _public(module)]
    return names


CUDA_NAMES = _cuda_names()


def _kernel(call: str, env: dict):
    """``def k(a0, a1, a2): <call>(a0, a1, a2)``: an array at each of three positions."""
    scope = dict(env)
    exec(f"def k(a0, a1, a2):\n    {call}(a0, a1, a2)\n", scope)   # noqa: S102 - test input
    return scope["k"]


def _acceptable(path, value):
    """What the analysis may answer for the three array positions of a call to ``value``."""
    if path in DOCUMENTED:
        return {DOCUMENTED[path]}
    if isinstance(value, numba.core.types.Type) or getattr(value, "__module__", None) == "math":
        # A numba type called is a cast (cuda.float32(x)), a function of Python's math module
        # (fp16 re-exports math.exp2) computes a number: they read what they are given.
        return {("r",) * 3, (IO_UNKNOWN,) * 3}
    return {(IO_UNKNOWN,) * 3}


def test_the_names_cover_the_api():
    """The enumeration reaches what the issue is about: the cache hints, every atomic, the
    namespaces (a broken enumeration would make the next test vacuous)."""
    paths = {p for p, _ in CUDA_NAMES}
    assert set(DOCUMENTED) <= paths
    assert {"grid", "shfl_sync", "shared.array", "libdevice.sin", "cg.this_grid",
            "fp16.hadd", "fp16.atomicAdd"} <= paths
    assert len(paths) > 500


@pytest.mark.parametrize("spelling", ["attribute", "object"])
def test_every_public_numba_cuda_name_is_modelled_or_read_and_written(spelling):
    """Every public name of numba.cuda (its attributes, its stub classes' members, libdevice,
    cg, fp16, bf16, fp8), called with an array at each of its first three positions, either has
    numba-cuda's documented effect (atomics read+write their array, ``ld*`` read it, ``st*``
    write it, ``const.array_like`` reads it) or leaves the arrays unknown (read and written).
    A name numba-cuda adds is checked too: it passes only if the analysis does not claim to
    know it. Spelled as ``cuda.<path>(...)`` and as a global bound to the object."""
    wrong = []
    for path, value in CUDA_NAMES:
        if spelling == "attribute":
            k = _kernel(f"cuda.{path}", {"cuda": cuda})
        else:
            k = _kernel("f", {"f": value})
        got = io(k, 1, 1, 1)
        if got not in _acceptable(path, value):
            wrong.append((path, got))
    assert not wrong, wrong


def test_cache_hinted_stores_write_and_loads_read():
    """numba-cuda's ``st*(array, index, value)`` stores ``value`` at ``array[index]``: the array
    is written (a pure output), the array the value was loaded from is read; 2-D indices too."""
    for name in ("stcg", "stcs", "stwb", "stwt"):
        k = _kernel(f"cuda.{name}", {"cuda": cuda})
        assert io(k, 1, 1, 1)[0] == "w", name

    def copy_2d(r, x):
        i, j = cuda.grid(2)
        cuda.stwt(r, (i, j), cuda.ldcs(x, (i, j)))

    assert io(copy_2d, 2, 2) == ("w", "r")


# -- aliases: the array reaches the store some other way ----------------------------------------

STORE = cuda.stcg                                  # a module-level alias


def test_closure_and_global_aliases_of_a_store():
    """``store = cuda.stcg`` bound in the kernel, in an enclosing function (a closure cell) or
    in the module: the store is still a write of ``r``."""
    def local_alias(r, x):
        store = cuda.stcg
        store(r, 0, x[0])

    def make(store):
        def closure_alias(r, x):
            store(r, 0, x[0])
        return closure_alias

    def global_alias(r, x):
        STORE(r, 0, x[0])

    for fn in (local_alias, make(cuda.stcg), global_alias):
        assert io(fn, 1, 1) == ("w", "r"), fn.__qualname__


@cuda.jit(device=True)
def dev_hinted_store(a, i, v):
    cuda.stcg(a, i, v)


def test_views_tuples_and_device_parameters_reaching_a_store():
    """A slice, a row of a 2-D array, an item of a tuple (built in the kernel or passed as a
    tuple argument) and a device function's parameter all carry the store back to the
    caller's array; a whole tuple handed to the store is unknown."""
    def through_slice(r, x):
        cuda.stcg(r[1:], 0, x[0])

    def through_row(m, x):
        cuda.stcg(m[1], 0, x[0])

    def through_built_tuple(r, x):
        t = (r, x)
        cuda.stcg(t[0], 0, 1.0)

    def through_tuple_argument(t):
        cuda.stcg(t[0], 0, 1.0)

    def through_device_function(r, x):
        dev_hinted_store(r, 0, x[0])

    def whole_tuple(r, x):
        t = (r, x)
        cuda.stcg(t, 0, 1.0)

    assert io(through_slice, 1, 1) == ("w", "r")
    assert io(through_row, 2, 1) == ("w", "r")
    r, x = io(through_built_tuple, 1, 1)
    assert "w" in r and "w" in x                  # t[0] may be either: both count as written
    assert io(through_tuple_argument, TUPLE) == ("w",)
    assert io(through_device_function, 1, 1) == ("w", "r")
    assert io(whole_tuple, 1, 1) == (IO_UNKNOWN, IO_UNKNOWN)


# -- calls the analysis cannot see into ----------------------------------------------------------

@intrinsic
def intr_store(typingctx, a):
    """Stands for any intrinsic: what its codegen does to ``a`` is invisible to the IR."""


def ov_target(a):
    """Python body irrelevant: the ``@overload`` below is what Numba compiles."""


@overload(ov_target)
def _ov_target(a):
    def impl(a):
        a[0] = 1
    return impl


@register_jitable
def jitable_store(a):
    a[0] = 1


EXTERN = cuda.declare_device("extern_store", "void(float64[::1])")
LIBC = ctypes.CDLL(None)


def _cffi_function():
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    ffi.cdef("void *memset(void *, int, size_t);")
    return ffi.dlopen(None).memset


@pytest.mark.parametrize("callee", ["intrinsic", "overload", "register_jitable",
                                    "declare_device", "ctypes", "cffi", "unresolvable"])
def test_arrays_reaching_an_unmodelled_callee_are_read_and_written(callee):
    """An array passed to an ``@intrinsic``, an ``@overload``-ed function, a
    ``register_jitable`` function, a ``cuda.declare_device`` foreign function, a ctypes or cffi
    function, or a callee the IR cannot resolve (chosen at run time) is unknown, directly and
    through a view; the runtime then counts it read and written. Other arrays stay exact."""
    f = {"intrinsic": intr_store, "overload": ov_target, "register_jitable": jitable_store,
         "declare_device": EXTERN, "ctypes": getattr(LIBC, "memset", None),
         "unresolvable": None}.get(callee) if callee != "cffi" else _cffi_function()

    def direct(a, b, out):
        i = cuda.grid(1)
        f(a)
        out[i] = b[i]

    def through_view(a, b, out):
        i = cuda.grid(1)
        f(a[1:])
        out[i] = b[i]

    def unresolvable(a, b, out, flag):
        i = cuda.grid(1)
        g = intr_store if flag else jitable_store      # two definitions: no single callee
        g(a)
        out[i] = b[i]

    if callee == "unresolvable":
        assert io(unresolvable, 1, 1, 1, None) == (IO_UNKNOWN, "r", "w", "")
        return
    assert io(direct, 1, 1, 1) == (IO_UNKNOWN, "r", "w")
    assert io(through_view, 1, 1, 1) == (IO_UNKNOWN, "r", "w")


def test_unknown_means_read_and_written_at_launch():
    """The runtime's answer for an array handed to an unmodelled callee, with nothing declared:
    read and written (so a numba-style launch copies it back and orders later readers)."""
    def k(a, b, out):
        i = cuda.grid(1)
        intr_store(a)
        out[i] = b[i]

    assert resolve_access(cube.kernel(k), (1, 1, 1)) == ((True, True), (True, False),
                                                         (False, True))


def test_elements_reaching_an_unmodelled_callee_are_unknown():
    """An element handed to an unmodelled callee may be a record, a reference into its array:
    the array is unknown, directly and through a device function's parameter."""
    @cuda.jit(device=True)
    def dev_pass(v):
        jitable_store(v)

    def direct(a, out):
        out[0] = 1
        ov_target(a[0])

    def through_device(a, out):
        out[0] = 1
        dev_pass(a[0])

    assert io(direct, 1, 1) == (IO_UNKNOWN, "w")
    assert io(through_device, 1, 1) == (IO_UNKNOWN, "w")


def test_modelled_value_functions_keep_read_only_inputs_exact():
    """Elements passed to what is modelled (math, libdevice, fp16, shuffles, ``fma``, casts,
    ``min``, ufuncs, ``len`` and ``.shape``, ``cuda.ldcg``) are values: the arrays they came
    from are read, not made unknown (no false dependency for the common kernels)."""
    import numba.cuda.fp16  # noqa: F401 - makes cuda.fp16 an attribute

    def uses_values(x, y, out):
        i = cuda.grid(1)
        v = math.sqrt(x[i]) + cuda.libdevice.sin(x[i]) + cuda.fma(x[i], y[i], 1.0)
        v += cuda.shfl_sync(0xFFFFFFFF, x[i], 0) + np.float32(y[i]) + min(x[i], y[i])
        v += numba.float32(x[i]) + np.sqrt(y[i]) + len(x) + x.shape[0] + cuda.ldcg(y, i)
        h = cuda.fp16.hadd(x[i], y[i])
        out[i] = v + h

    assert io(uses_values, 1, 1, 1) == ("r", "r", "w")


def test_cuda_builtins_that_are_not_listed_leave_arrays_unknown():
    """An array handed to a numba.cuda builtin that takes numbers is unknown, not read:
    ``fp16.atomicAdd`` (an atomic the rules do not list), ``cuda.literal_unroll`` (its result is
    its argument), libdevice."""
    import numba.cuda.fp16  # noqa: F401

    def fp16_atomic(a, v):
        cuda.fp16.atomicAdd(a, v[0])

    def unrolled(a, b):
        for arr in cuda.literal_unroll((a, b)):
            arr[0] = 1

    def libdevice_on_array(a, out):
        out[0] = cuda.libdevice.sin(a)

    assert io(fp16_atomic, 1, 1) == (IO_UNKNOWN, "r")
    assert io(unrolled, 1, 1) == (IO_UNKNOWN, IO_UNKNOWN)
    assert io(libdevice_on_array, 1, 1) == (IO_UNKNOWN, "w")


def test_record_fields_reaching_a_call_are_not_taken_for_numbers():
    """A field of a record may be an array: handed to a numba.cuda builtin that takes numbers,
    or called a method of (``a[i].v.fill(0)``), it leaves the record array unknown; a method of
    a plain element (``x[i].conjugate()``) is a number's and keeps ``x`` read only."""
    def field_to_builtin(a, out):
        i = cuda.grid(1)
        out[i] = cuda.libdevice.sin(a[i].v)

    def field_method(a, out):
        i = cuda.grid(1)
        a[i].v.fill(0.0)
        out[i] = 1

    def number_method(x, out):
        i = cuda.grid(1)
        out[i] = x[i].conjugate().real

    assert io(field_to_builtin, 1, 1) == (IO_UNKNOWN, "w")
    assert io(field_method, 1, 1) == (IO_UNKNOWN, "w")
    assert io(number_method, 1, 1) == ("r", "w")


def test_device_function_wrapping_a_builtin_keeps_its_caller_exact():
    """A device function handing its scalar parameter to a numba.cuda builtin (a number there)
    leaves the caller's array, whose element it was given, read only."""
    @cuda.jit(device=True)
    def dev_sin(v):
        return cuda.libdevice.sin(v) + cuda.shfl_sync(0xFFFFFFFF, v, 0)

    def k(x, out):
        i = cuda.grid(1)
        out[i] = dev_sin(x[i])

    assert io(k, 1, 1) == ("r", "w")


def test_records_returned_by_a_device_function_or_passed_in_a_tuple():
    """A device function returning ``a[i]`` hands back a reference when it is a record: a field
    stored through the result writes ``a``, while arithmetic on it stays a read; an element
    inside a tuple handed to an unmodelled callee escapes like one handed to it directly."""
    @cuda.jit(device=True)
    def get(a, i):
        return a[i]

    def store_field(a, out):
        r = get(a, 0)
        r.x = 1.0
        out[0] = 1

    def arithmetic(a, out):
        out[0] = get(a, 0) + 1

    def in_a_tuple(a, idx, out):
        out[0] = a[(idx[0], idx[1])]               # a tuple index built of elements: values
        ov_target((a[0, 0], 1))

    assert io(store_field, 1, 1) == ("rw", "w")
    assert io(arithmetic, 1, 1) == ("r", "w")
    assert io(in_a_tuple, 2, 1, 1) == (IO_UNKNOWN, "r", "w")
