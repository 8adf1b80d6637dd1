"""A Numba typing error in a CPU kernel points to the user's file and line (``linemarks``), not
into the generated module in the cache directory; lines the translator made up get no pointer."""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.backends.cpu.emit import linemarks
from numba_cube.backends.cpu.frontend.source import load_function


def line_of(fn, text: str) -> int:
    """The file line of ``fn``'s source line containing ``text`` (the reference: inspect)."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@cube.kernel
def adds_a_string(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = "a string" + 1.5


@cuda.jit(device=True)
def bad_helper(x):
    return x + "a string"


@cube.kernel
def calls_a_bad_helper(out):
    i = cuda.grid(1)
    out[i] = bad_helper(out[i])


@pytest.mark.parametrize("kernel,where,text", [
    (adds_a_string, adds_a_string.py_func, '"a string" + 1.5'),
    (calls_a_bad_helper, bad_helper.py_func, 'x + "a string"'),
])
def test_a_typing_error_names_the_users_file_and_line(kernel, where, text):
    """The CompileError (also a TypingError) says where in the user's file the statement Numba
    could not type is, in its message and in ``filename``/``lineno``; Numba's own references to
    that line read the user's file too, not the generated module."""
    from numba.core.errors import TypingError

    with pytest.raises(TypingError) as info:
        kernel[1, 4](np.zeros(4))
    err = info.value
    line = line_of(where, text)
    assert isinstance(err, cube.CompileError)
    assert (err.filename, err.lineno) == (__file__, line)
    assert f"at {__file__}, line {line}:" in str(err)
    assert f'File "{__file__}", line {line}' in str(err)


def test_made_up_statements_get_no_pointer():
    """A statement the translator parsed from its own snippet (line numbers of the snippet) takes
    its enclosing user statement's line, and a top-level one gets none; user statements keep
    theirs, nested ones included."""
    source_fn = load_function(adds_a_string.py_func)
    body = source_fn.node.body                          # i = ...; if i < out.size: ...
    made_up = ast.parse("__hidden = 0").body            # line 1 of a snippet
    nested = ast.parse("if True:\n    __t = 1").body[0].body[0]
    body[1].body.append(nested)
    stmts = made_up + body
    text = ast.unparse(ast.Module(body=stmts, type_ignores=[]))
    lines = linemarks.annotate(text, stmts, source_fn)
    assert lines[0] == "__hidden = 0"                   # no pointer
    expected = {"i = cuda.grid(1)": "i = cuda.grid(1)", "if i < out.size": "if i < out.size",
                "out[i] = 'a string' + 1.5": '"a string" + 1.5', "__t = 1": "if i < out.size"}
    for generated, user_text in expected.items():
        line = next(l for l in lines if l.strip().startswith(generated))
        assert line.endswith(f"  # {__file__}:{line_of(adds_a_string.py_func, user_text)}"), line


def test_user_location_reads_only_marked_lines():
    """``user_location`` maps a generated line to the marked file and line, and says nothing for
    a line the translator wrote itself or a line out of range."""
    source = "def f():\n    x = 1  # /a/b.py:12\n    y = 2\n"
    assert linemarks.user_location(source, 2) == ("/a/b.py", 12)
    assert linemarks.user_location(source, 3) is None
    assert linemarks.user_location(source, 9) is None
