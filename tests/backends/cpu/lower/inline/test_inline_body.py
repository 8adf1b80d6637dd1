"""The rewrites of an inlined body (``lower/inline/body.py``) keep Python's meaning: the body with
its returns moved to the tail and turned into assignments computes what the function returns,
checked by running both with CPython on every input combination.
"""

import ast
import inspect
import itertools
import textwrap

import pytest

from numba_cube.backends.cpu.lower.inline import body as ib


def early_returns(a, b):
    x = a * 2
    if a > b:
        if b < 0:
            return x
        x = x + 1
    elif a == b:
        return -1
    else:
        x = x - b
    if x > 3:
        return x * 10
    y = x + b
    return y


def falls_through(a, b):
    if a:
        return b
    b = b + 1


def with_raise(a, b):
    if a < 0:
        raise ValueError("negative")
    if b:
        return a
    return a + 100


def as_assignments(fn):
    """``fn``'s body rewritten as ``lower/inline/inliner.py`` does, as a function returning the
    result."""
    node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    body = ib.tail_returns_to_assign(ib.returns_to_tail(node.body), "result")
    node.body = body + [ast.Return(ast.Name("result", ast.Load()))]
    node.name = "rewritten"
    module = ast.fix_missing_locations(ast.Module([node], []))
    namespace = {}
    exec(compile(module, "<rewritten>", "exec"), namespace)
    return namespace["rewritten"]


def outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except ValueError as exc:
        return ("raise", str(exc))


@pytest.mark.parametrize("fn", [early_returns, falls_through, with_raise])
def test_returns_moved_to_the_tail_keep_the_result(fn):
    """Every path returns (or raises) what the original function does, None included."""
    rewritten = as_assignments(fn)
    for a, b in itertools.product(range(-2, 4), range(-2, 4)):
        assert outcome(rewritten, a, b) == outcome(fn, a, b), (a, b)


def test_return_inside_a_loop_is_found():
    """return_in_loop names the return nested in a loop (the one inlining cannot move)."""
    src = "for i in range(3):\n    if i:\n        return i\nreturn 0\n"
    stmts = ast.parse(src).body
    found = ib.return_in_loop(stmts)
    assert isinstance(found, ast.Return) and found.lineno == 3


def test_constant_branches_are_pruned():
    """``if`` statements with constant tests keep only the branch they take, nested ones
    included; the others are kept."""
    src = ("if 1 == 2:\n    a = 1\nelif not False:\n    if 3 >= 3:\n        a = 2\n"
           "    else:\n        a = 3\nelse:\n    a = 4\nif x:\n    b = 1\n")
    pruned = ib.prune_constant_branches(ast.parse(src).body)
    assert ast.unparse(ast.Module(pruned, [])) == "a = 2\nif x:\n    b = 1"


def test_renamer_and_relocate():
    """Renamer maps variables and local-array markers; relocate moves every node to the
    call's position."""
    stmts = ast.parse("x = __local__('x')\ny = x + z\n").body
    stmts = [ib.Renamer({"x": "x__i1", "y": "y__i1"}).visit(s) for s in stmts]
    assert ast.unparse(ast.Module(stmts, [])) == "x__i1 = __local__('x__i1')\ny__i1 = x__i1 + z"
    call = ast.parse("\n\nf(1)").body[0].value
    ib.relocate(stmts, call)
    assert {n.lineno for s in stmts for n in ast.walk(s) if hasattr(n, "lineno")} == {3}
