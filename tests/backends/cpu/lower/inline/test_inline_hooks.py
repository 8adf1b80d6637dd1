"""Where an inlined call may be hoisted before its statement (``lower/inline/hooks.py``): not where
Python would evaluate it conditionally or repeatedly, and not after another call of the same
statement that it would overtake. Refusals are checked on the translation alone; one kernel
checks that hoisting keeps the order of two inlined calls (against NumPy).
"""

import inspect

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.translate import build_program, translate_source
from numba_cube.errors import CompileError

LAZY = "inlined device function call in a lazily evaluated expression"


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


def refused(kernel) -> CompileError:
    with pytest.raises(CompileError) as info:
        translate_source(kernel.py_func)
    return info.value


def line_of(fn, needle: str) -> int:
    lines, start = inspect.getsourcelines(fn.py_func)
    return start + next(k for k, text in enumerate(lines) if needle in text)


@cuda.jit(device=True)
def bump(counter):
    """Inlined (it has a barrier): adds one to counter[0] and returns the new value."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        counter[0] += 1
    cuda.syncthreads()
    return counter[0]


@cuda.jit(device=True)
def plain_read(counter):
    return counter[0]


@cuda.jit
def in_while_condition(counter):
    while bump(counter) < 3:
        pass


@cuda.jit
def in_conditional_branch(counter, flag):
    counter[1] = bump(counter) if flag else 0


@cuda.jit
def in_chained_comparison(counter):
    counter[1] = 0 < counter[0] < bump(counter)


@pytest.mark.parametrize("kernel,needle", [(in_while_condition, "while bump"),
                                           (in_conditional_branch, "bump(counter) if"),
                                           (in_chained_comparison, "< bump(counter)")])
def test_lazily_evaluated_calls_are_refused(kernel, needle):
    """An inlined call in a while condition, a branch of 'x if c else y' or a later operand of
    a chained comparison is refused at the call (hoisting it would run it once, always)."""
    err = refused(kernel)
    assert err.construct == LAZY
    assert err.lineno == line_of(kernel, needle)


@cuda.jit
def after_another_call(counter, out):
    out[0] = plain_read(counter) + bump(counter)


def test_inlined_call_after_another_call_is_refused():
    """An inlined call after another device-function call of the same statement would overtake
    it once hoisted: refused."""
    err = refused(after_another_call)
    assert err.construct == "inlined call after another call in one statement"


@cuda.jit
def read_before_writing_call(counter, out):
    out[0] = counter[0] * 10 + bump(counter)


@cuda.jit
def element_update_with_writing_call(counter):
    counter[1] += bump(counter)


@pytest.mark.parametrize("kernel", [read_before_writing_call, element_update_with_writing_call])
def test_array_read_before_a_writing_inlined_call_is_refused(kernel):
    """An array element Python reads before the call (left operand, or the target of +=) would
    be read after the hoisted body, which writes memory: refused."""
    err = refused(kernel)
    assert err.construct == "array read before an inlined call in one statement"


@cuda.jit
def two_in_order(counter, out):
    out[0] = bump(counter) * 10 + bump(counter)


def test_two_inlined_calls_keep_their_order():
    """Two inlined calls of one statement run left to right: 1 * 10 + 2, as CPython would
    compute with the same counter."""
    counter = np.zeros(2, dtype=np.int64)
    out = np.zeros(1, dtype=np.int64)
    build_program(two_in_order.py_func).serial(1, 1, 1, 4, 1, 1, counter, out)
    assert out[0] == 12 and counter[0] == 2
