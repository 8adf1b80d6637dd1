"""The grid-uniform prologue of a barrier-free kernel runs once per chunk
(``passes/uniform_prologue.py``).

Pinned on parsed bodies: what moves (single assignments and two-branch selections that read only
parameters, grid sizes and values already moved, a re-bound parameter read as the parameter) and
what stays (anything reading a unit's id, memory, a name assigned twice, a division by a
variable, a call other than min/max/abs). Then end to end against NumPy: a ping-pong kernel in
stumpy's shape (buffers picked from a parameter, the parameter reassigned later, a grid-stride
loop) on both parities, serial and parallel, with its selection printed before the chunk's loop.
"""

import ast

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.translate import build_program, translate_source
from numba_cube.backends.cpu.passes.uniform_prologue import split_prologue


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


def split(src: str, params=("a", "b", "p__arg", "n")):
    prologue, rest, names = split_prologue(ast.parse(src).body, list(params))
    text = lambda stmts: ast.unparse(ast.Module(stmts, [])) if stmts else ""
    return text(prologue), text(rest), names


def test_a_selection_of_buffers_from_a_parameter_moves():
    """``p = p__arg`` stays (``p`` is reassigned later) but lets later statements read the
    parameter: ``j = p`` and the two-branch selection on ``j`` move, rewritten."""
    prologue, rest, names = split(
        "p = p__arg\n"
        "i = __nn(__bx * __bdx + __tx)\n"
        "j = p\n"
        "if j % 2 == 0:\n    out = a\n    other = b\nelse:\n    out = b\n    other = a\n"
        "out[i] = other[i]\n"
        "p = i\n")
    assert prologue == ("j = p__arg\n"
                        "if j % 2 == 0:\n    out = a\n    other = b\nelse:\n    out = b\n"
                        "    other = a")
    assert rest == "p = p__arg\ni = __nn(__bx * __bdx + __tx)\nout[i] = other[i]\np = i"
    assert names == {"j", "out", "other"}


@pytest.mark.parametrize("stmt", [
    "x = __tx + 1",                       # a unit's id
    "x = __bx",                           # a cube's id: not the same for every unit of a chunk
    "x = a[0]",                           # memory
    "x = n // m",                         # m is not a parameter
    "x = n // n",                         # a division by a variable may raise
    "x = n % 0",                          # ... and by zero does
    "x = foo(n)",                         # an unknown call
    "x = a.shape[0]",                     # a subscript
])
def test_what_is_not_safe_stays(stmt):
    """Unit ids, cube ids, memory reads, unknown names, divisions by a variable or zero, calls
    other than min/max/abs and subscripts keep a statement in the unit loop."""
    prologue, rest, _ = split(stmt + "\ny = 1")
    assert stmt.split("#")[0].strip() in rest
    assert prologue == "y = 1"


def test_a_name_assigned_twice_stays_and_so_does_what_reads_it():
    """A name assigned again later holds a unit's value there: it stays, and so does a statement
    that reads it after the parameter's alias is gone."""
    prologue, rest, _ = split("x = n + 1\ny = x * 2\nx = __tx\nz = min(n, __gdx * __bdx)")
    assert prologue == "z = min(n, __gdx * __bdx)"
    assert rest == "x = n + 1\ny = x * 2\nx = __tx"


def test_a_one_armed_if_or_one_with_other_statements_stays():
    """Only an ``if`` with both branches made of single assignments moves."""
    _, rest, _ = split("if n > 0:\n    x = a\n")
    assert rest.startswith("if n > 0")
    _, rest, _ = split("if n > 0:\n    x = a\n    a[0] = 1\nelse:\n    x = b\n")
    assert rest.startswith("if n > 0")


@cuda.jit
def pingpong(idx, even, odd, first, out, m):
    """stumpy's shape: buffers picked by the parity of a parameter that the body reassigns,
    a grid-stride loop, every unit writing element 0 of the output buffer."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    j = idx
    if j % 2 == 0:
        q_out = even
        q_in = odd
    else:
        q_out = odd
        q_in = even
    for i in range(start, q_out.shape[0], stride):
        if i > 0:
            q_out[i] = q_in[i - 1] + m * j
        q_out[0] = first[j]
        out[i] = q_out[i] * 2.0
        idx = i            # reassigned: the translator re-binds it per unit
        if idx < 0:
            out[i] = -1.0


def test_the_selection_is_printed_before_the_chunk_loop():
    """The generated chunk function picks the buffers once, before ``while __g < __gend``."""
    src = translate_source(pingpong.py_func)
    chunk = src[src.index("__chunk("):]
    assert chunk.index("if j % 2 == 0:") < chunk.index("while __g < __gend:")
    assert "j = idx__arg" in chunk


@pytest.mark.parametrize("variant", ["serial", "parallel"])
@pytest.mark.parametrize("idx", [4, 7])
def test_a_pingpong_kernel_matches_numpy(variant, idx):
    """Both parities, grids smaller than the data (the stride loop) and partial cubes: NumPy's
    numbers."""
    n, m = 300, 3
    rng = np.random.default_rng(idx)
    even, odd, first = rng.random(n), rng.random(n), rng.random(10)
    out = np.zeros(n)
    q_out, q_in = (even.copy(), odd.copy()) if idx % 2 == 0 else (odd.copy(), even.copy())
    expected_q = q_out.copy()
    expected_q[1:] = q_in[:-1] + m * idx
    expected_q[0] = first[idx]
    program = build_program(pingpong.py_func)
    getattr(program, variant)(3, 1, 1, 64, 1, 1, idx, even, odd, first, out, m)
    got_q = even if idx % 2 == 0 else odd
    np.testing.assert_array_equal(got_q, expected_q)
    np.testing.assert_array_equal(out, expected_q * 2.0)
