"""Which subscripts the bounds checks cover, and where Numba's own check may go
(``backends/cpu/passes/bounds/coverage.py``).

Pinned on generated-module text: ``relax`` turns ``boundscheck=True`` off only in a function whose
every subscript is checked or cannot go out of bounds (a slice, a shape tuple, a literal index
checked by the statement in front of it); one unchecked subscript keeps Numba's check.
"""

import ast

from numba_cube.backends.cpu.passes.bounds.coverage import all_checked, relax

MODULE = '''
@__njit(boundscheck=True)
def covered(a, i):
    a[__checked(a, i, 0, (0, 0, 0), (0, 0, 0))] = a.shape[0]
    __checked(a, 0, 0, (0, 0, 0), (0, 0, 0))
    a[0] = 1.0
    b = a[1:]

@__njit(boundscheck=True)
def uncovered(a, i):
    a[i] = 1.0
'''


def test_relax_drops_numbas_check_only_where_every_subscript_is_covered():
    """``covered`` (a checked index, a shape tuple, a literal checked just before, a slice)
    loses Numba's check; ``uncovered`` (one raw index) keeps it."""
    decorators = {fn.name: ast.unparse(fn.decorator_list[0])
                  for fn in ast.parse(relax(MODULE)).body}
    assert decorators == {"covered": "__njit(boundscheck=False)",
                          "uncovered": "__njit(boundscheck=True)"}


def test_a_literal_check_covers_only_the_next_statement():
    """The check of ``a[0]`` in front of a statement covers that statement, not a later one."""
    body = ast.parse("__checked(a, 0, 0, (0, 0, 0), (0, 0, 0))\nx = 1\na[0] = 2.0\n").body
    assert not all_checked(body)
    body = ast.parse("__checked(a, 0, 0, (0, 0, 0), (0, 0, 0))\na[0] = 2.0\n").body
    assert all_checked(body)
