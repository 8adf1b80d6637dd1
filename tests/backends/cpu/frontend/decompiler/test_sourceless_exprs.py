"""``frontend/decompiler/exprs.py``: bytecode constants and slices spelled as Python expressions.

The reference is Python itself: evaluating the emitted expression gives back the constant, and a
subscript rebuilt from ``slice(...)`` calls selects what the slice objects select in NumPy.
"""

import ast
import math

import numpy as np
import pytest

from numba_cube.backends.cpu.frontend.decompiler.exprs import as_slices, constant_node


def evaluate(node):
    return eval(compile(ast.fix_missing_locations(ast.Expression(node)), "<test>", "eval"))


@pytest.mark.parametrize("value", [0, -7, 2**70, 1.5, -0.0, 1e308, math.inf, -math.inf, 3j,
                                   "s", b"b", None, True, (1, (2.5, "x")), Ellipsis])
def test_constants_evaluate_to_themselves(value):
    """Every bytecode constant kind a kernel can hold is spelled so that it evaluates back to
    an equal value of the same type (infinities included)."""
    got = evaluate(constant_node(value))
    assert type(got) is type(value) and got == value
    if isinstance(value, float):
        assert math.copysign(1.0, got) == math.copysign(1.0, value)


def test_nan_constant_is_nan():
    """A NaN constant evaluates to a float NaN."""
    got = evaluate(constant_node(math.nan))
    assert isinstance(got, float) and math.isnan(got)


def test_constant_without_literal_is_none():
    """Objects with no literal spelling (a frozenset, say) are reported as None."""
    assert constant_node(frozenset({1})) is None
    assert constant_node((1, frozenset())) is None


@pytest.mark.parametrize("index", ["slice(1, 5)", "slice(None, 3)", "slice(2, None, 2)",
                                   "(slice(1, 3), 0)", "slice(4)", "(1, slice(None))"])
def test_slice_calls_become_slices(index):
    """``slice(...)`` calls in a subscript (how the IR spells ``a:b``) become slice syntax that
    selects what the slice objects select."""
    a = np.arange(60).reshape(6, 10)
    node = ast.parse(f"a[{index}]", mode="eval").body
    node.slice = as_slices(node.slice)
    text = ast.unparse(node)
    assert "slice(" not in text
    np.testing.assert_array_equal(eval(text, {"a": a}), a[eval(index)])
