"""Contracts of kernel identity (numba_cube.kernel.identity, ``Kernel.id``): two kernels share an
id exactly when everything that decides their code is the same, in every process.

The kernels are in ``identity_cases.py``; variants of a module-level kernel with other globals are
made as the same code over another globals dict (``with_globals``), which is what a module whose
global was rebound looks like to the compiler.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest
from numba import cuda

import identity_cases as C
import numba_cube as cube
from numba_cube.errors import CompileError
from numba_cube.kernel.identity import changed_parts, fingerprint

HERE = os.path.dirname(os.path.abspath(__file__))


def with_globals(fn, **overrides):
    """``fn``'s code over a copy of its globals with ``overrides``: the same source and code."""
    g = {**fn.__globals__, **overrides}
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)


# -- factories -----------------------------------------------------------------------------------

def test_factory_closure_values_give_different_ids():
    """Kernels made by one factory with different closure values have different ids; with the
    same value, the same id."""
    assert C.make_add(1.0).id != C.make_add(2.0).id
    assert C.make_add(1.0).id == C.make_add(1.0).id
    assert C.make_add(1).id != C.make_add(1.0).id          # an int and a float compile apart
    assert C.make_add(True).id != C.make_add(1).id


def test_factory_shared_array_size_gives_different_ids():
    """A closure value that sizes a cuda.shared.array is part of the id."""
    assert C.make_block_sum(32).id != C.make_block_sum(64).id
    assert C.make_block_sum(32).id == C.make_block_sum(32).id


def test_factory_device_function_gives_different_ids():
    """A device function held in a closure cell is part of the id, by its own contents."""
    assert C.make_apply(C.dev_scale).id != C.make_apply(C.njit_clamp).id
    assert C.make_apply(C.dev_scale).id == C.make_apply(C.dev_scale).id


# -- globals -------------------------------------------------------------------------------------

def test_global_scalar_is_part_of_the_id():
    """A global constant the kernel reads changes its id; the same value keeps it."""
    base = cube.kernel(C.uses_everything).id
    assert cube.kernel(with_globals(C.uses_everything, TPB=128)).id != base
    assert cube.kernel(with_globals(C.uses_everything, TPB=64)).id == base


def test_global_array_content_is_part_of_the_id():
    """A global array is identified by dtype, shape and bytes: a copy keeps the id, a changed
    element, dtype or shape does not."""
    base = cube.kernel(C.uses_everything).id
    same = C.LUT.copy()
    changed = C.LUT.copy()
    changed[3] += 1
    assert cube.kernel(with_globals(C.uses_everything, LUT=same)).id == base
    assert cube.kernel(with_globals(C.uses_everything, LUT=changed)).id != base
    assert cube.kernel(with_globals(C.uses_everything, LUT=C.LUT.astype(np.float64))).id != base
    assert cube.kernel(with_globals(C.uses_everything, LUT=C.LUT.reshape(4, 4))).id != base


def test_replaced_global_device_function_changes_the_id():
    """A global device function replaced by another one (even of the same name) changes the id."""
    def dev_scale(v):
        return v * 3
    replacement = cuda.jit(device=True)(dev_scale)
    base = cube.kernel(C.uses_everything).id
    assert cube.kernel(with_globals(C.uses_everything, dev_scale=replacement)).id != base


def test_device_function_globals_are_covered_transitively():
    """A global read by a device function (not by the kernel itself) is part of the kernel's id."""
    rebound = cuda.jit(device=True)(with_globals(C.dev_scale.py_func, TPB=128))
    same = cuda.jit(device=True)(with_globals(C.dev_scale.py_func, TPB=64))
    base = C.make_apply(C.dev_scale).id
    assert C.make_apply(rebound).id != base
    assert C.make_apply(same).id == base


def test_namedtuple_and_enum_globals_by_value():
    """A global namedtuple is its class (name, fields) and values; an IntEnum its members."""
    base = cube.kernel(C.uses_everything).id
    assert cube.kernel(with_globals(C.uses_everything, BOUNDS=C.Pair(1, 8))).id != base
    assert cube.kernel(with_globals(C.uses_everything, BOUNDS=C.Pair(1, 7))).id == base
    import collections
    import enum
    swapped = collections.namedtuple("Pair", ["hi", "lo"])(1, 7)        # same values, fields swapped
    assert cube.kernel(with_globals(C.uses_everything, BOUNDS=swapped)).id != base
    other = enum.IntEnum("Mode", {"ADD": 1, "MUL": 3})
    assert cube.kernel(with_globals(C.uses_everything, Mode=other)).id != base


def test_mutually_recursive_device_functions_terminate_and_count():
    """A cycle of device functions (dev_even <-> dev_odd) is fingerprinted without recursing
    forever, the same way twice, and a change to either function changes the digest."""
    first, second = fingerprint(C.uses_everything), fingerprint(C.uses_everything)
    assert first.digest == second.digest and not first.opaque

    def dev_odd(n):
        return True if n == 0 else dev_even(n - 1)      # noqa: F821 - resolved in g below
    g = {**C.dev_even.py_func.__globals__}
    g["dev_odd"] = cuda.jit(device=True)(types.FunctionType(dev_odd.__code__, g, "dev_odd"))
    g["dev_even"] = cuda.jit(device=True)(types.FunctionType(C.dev_even.py_func.__code__, g, "dev_even"))
    changed = fingerprint(with_globals(C.uses_everything, dev_even=g["dev_even"]))
    assert changed.digest != first.digest
    assert "global dev_even" in changed_parts(first, changed)


# -- options -------------------------------------------------------------------------------------

def test_options_are_part_of_the_id():
    """reads=/writes= and cuda.jit's options change the id; cube.kernel(cuda.jit(**o)(f)) and
    cube.kernel(f, **o) are the same kernel, and a bare cuda.jit(f) is cube.kernel(f)."""
    f = C.uses_everything
    base = cube.kernel(f).id
    assert cube.kernel(f, writes=("out",)).id != base
    assert cube.kernel(f, reads=("x",)).id != base
    assert cube.kernel(f, fastmath=True).id != base
    assert cube.kernel(f, fastmath=True).id == cube.kernel(cuda.jit(fastmath=True)(f)).id
    assert cube.kernel(f, lineinfo=True).id != cube.kernel(f, fastmath=True).id
    assert cube.kernel(cuda.jit(f)).id == base


# -- fallbacks -----------------------------------------------------------------------------------

class _Opaque:
    """An object with no faithful encoding."""


def test_unfingerprintable_global_never_shares_an_id():
    """A global that cannot be fingerprinted (an arbitrary object) does not break the kernel, is
    named as opaque, and salts the id: two kernels never share one."""
    def reads_config(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = CONFIG.scale      # noqa: F821 - from the globals given below

    fn = types.FunctionType(reads_config.__code__, {"cuda": cuda, "CONFIG": _Opaque()})
    assert fingerprint(fn).opaque
    a, b = cube.kernel(fn), cube.kernel(fn)
    assert a.id != b.id
    assert a.id == a.id


def test_function_without_source_is_identified_by_its_code():
    """A kernel made by exec (no source text) is identified by its code object: the same code
    gives the same id, other constants another one."""
    def made(value):
        ns = {"cuda": cuda}
        exec(f"def fill(out):\n    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = {value}\n", ns)
        return cube.kernel(ns["fill"])
    assert made(1.5).id == made(1.5).id
    assert made(1.5).id != made(2.5).id


# -- stability -----------------------------------------------------------------------------------

def test_ids_are_the_same_in_another_process():
    """A subprocess (with another hash seed) making the same kernels twice gets, both times, the
    ids this process gets: no addresses, no randomised hashes in an id."""
    env = dict(os.environ, PYTHONHASHSEED="12345",
               PYTHONPATH=os.pathsep.join([HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(
                   os.pathsep) if p]))
    proc = subprocess.run([sys.executable, "-c", "import identity_cases; identity_cases.print_ids()"],
                          env=env, capture_output=True, text=True, timeout=300, check=True)
    first, second = json.loads(proc.stdout)
    here = {name: k.id for name, k in C.all_kernels().items()}
    assert first == here
    assert second == here
    assert len(set(here.values())) == len(here)        # and every case is a kernel of its own


# -- frozen at first use -------------------------------------------------------------------------

def test_id_is_fixed_at_first_use_and_changes_are_refused():
    """The id is computed when first asked for (numba.cuda freezes globals at first compile);
    after that, check_frozen raises CompileError naming the global that changed, and passes
    again once it is back."""
    g = dict(C.uses_everything.__globals__)
    fn = types.FunctionType(C.uses_everything.__code__, g, "uses_everything")
    k = cube.kernel(fn)
    g["TPB"] = 32                                      # before first use: simply the value used
    fixed = k.id
    assert fixed == cube.kernel(with_globals(C.uses_everything, TPB=32)).id
    k.check_frozen()
    g["TPB"] = 128
    with pytest.raises(CompileError, match="global TPB"):
        k.check_frozen()
    assert k.id == fixed
    g["TPB"] = 32
    k.check_frozen()


def test_plain_functions_are_opaque():
    """Two kernels calling equal-looking plain functions (whose meaning comes from Numba's
    registry, e.g. an @overload registered for each) never share an id: a plain function cannot
    vouch for the code it compiles to."""
    def make():
        def helper(a):
            pass

        def k(out):
            helper(out)
        return cube.kernel(k)

    assert make().id != make().id


def _source_shapes():
    """Functions whose source is read in different ways: decorated, nested in a factory, a
    lambda, a device function, a kernel with a comment above its decorator, and one typed into
    a REPL (registered in linecache only)."""
    import linecache

    text = "def typed(x, out):\n    out[0] = x  # in a REPL\n"
    linecache.cache["<stdin-identity-test>"] = (len(text), None, text.splitlines(True),
                                                "<stdin-identity-test>")
    namespace = {}
    exec(compile(text, "<stdin-identity-test>", "exec"), namespace)
    shapes = [C.dev_scale.py_func, C.make_add(2).py_func, C.make_block_sum(64).py_func,
              C.uses_everything, namespace["typed"], lambda a: a + 1]
    return [getattr(f, "__code__") for f in shapes]


def test_source_read_for_the_id_is_inspects():
    """The source text that goes into an id is exactly ``inspect.getsource``'s (it is read
    without inspect's scan of every imported module, which a new process would pay)."""
    import inspect

    from numba_cube.kernel import identity

    for code in _source_shapes():
        assert identity._definition_text(code) == inspect.getsource(code), code.co_name


def test_id_is_stable_says_whether_the_id_is_salted():
    """``Kernel.id_is_stable`` is True for a kernel whose id is the same in every process, and
    False for one that reads an object with no faithful encoding (its id is salted)."""
    def reads_config(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = CONFIG.scale      # noqa: F821 - from the globals given below

    opaque = types.FunctionType(reads_config.__code__, {"cuda": cuda, "CONFIG": _Opaque()})
    assert cube.kernel(opaque).id_is_stable is False
    assert cube.kernel(C.uses_everything).id_is_stable is True
