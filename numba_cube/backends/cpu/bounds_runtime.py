"""The run-time half of the CPU backend's bounds checks: ``checked_index``, which generated
kernel modules import when they are compiled with ``boundscheck=True`` (``bounds.py`` rewrites
their subscripts to call it), and ``described``, which turns what it raises into the message.

``checked_index(array, index, site, cube, unit)`` returns ``index`` unchanged once every integer
component of it lies inside its axis (``-size <= i < size``: Numba wraps a negative index around,
as numba-cuda does). Otherwise it raises ``IndexError(MARK, site, axis, size, cube, unit,
components)``: integers only, and every overload inlined (``inline="always"``), because a
message built as a string inside the kernel costs every access, not only the failing one
(``benchmarks/bench_cpu.py --boundscheck``: that made the checked axpy 35x and the tiled matmul
about 350x their unchecked times; with integer arguments the axpy is back at Numba's own check). ``site`` numbers the subscript in the generated module's ``__bounds_sites`` table
(the array's name); ``cube`` and ``unit`` are the block and thread index, ``(x, y, z)``. The
backend's launch (``server.py``) hands that to ``described``, which makes it::

    kernel k: a[12] out of bounds for axis 0 with size 10 (cube (1, 0, 0), unit (2, 0, 0))

It is an overload: what it checks is decided from the types when the kernel compiles. A
component that is a slice takes up its axis and is shown as ``:``; an index of one to four
integers and slices of an array is checked here. Any other index of an array (``None``,
``...``, more components, an integer array) goes through ``_probe``, a function compiled with
Numba's own ``boundscheck=True``, which raises Numba's plain ``IndexError`` for it: the
functions that call the checker are compiled without Numba's flag (``bounds.relax``), so every
array index they use must be checked here, one way or the other. What is not an array (a tuple,
a record) is returned untouched: Numba checks a tuple's run-time index whatever its flag, and a
record takes only literal fields.

``checked_at(container, index, site, cube, unit)`` checks the same and returns ``container``:
it is how a literal index is checked (``out[0]`` becomes ``__checked_at(out, 0, ...)[0]``), the
literal staying in the subscript, where Numba needs it to type ``t[0]`` of a tuple.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.core import types
from numba.extending import overload, register_jitable

__all__ = ["checked_index", "checked_at", "described", "MARK", "prechecked", "in_bounds", "range_ends",
           "small"]

#: The first argument of the raw ``IndexError`` of a failed check.
MARK = "numba_cube.bounds"
#: What a slice component is reported as in the raw exception (no index can be this value).
_SLICE = -(1 << 63)
_MOST_COMPONENTS = 4


def checked_index(array, index, site, cube, unit):
    """``index``, after checking it against ``array``'s shape (nopython only; module docstring)."""
    raise NotImplementedError("checked_index runs inside generated kernels only")


def _check_axis(array, value, axis, index, site, cube, unit):
    """Raise the raw ``IndexError`` if ``value`` (a component of ``index``) is outside axis
    ``axis``; a slice component checks nothing."""
    raise NotImplementedError("nopython only")


def _as_int(component):
    raise NotImplementedError("nopython only")


def _components(index):
    """The index's components as integers (a slice as ``_SLICE``), for the exception."""
    raise NotImplementedError("nopython only")


@overload(_as_int, inline="always")
def _as_int_impl(component):
    if isinstance(component, types.Integer):
        return lambda component: component
    return lambda component: _SLICE


@overload(_components, inline="always")
def _components_impl(index):
    if not isinstance(index, types.BaseTuple):
        return lambda index: (_as_int(index),)
    return {1: lambda index: (_as_int(index[0]),),
            2: lambda index: (_as_int(index[0]), _as_int(index[1])),
            3: lambda index: (_as_int(index[0]), _as_int(index[1]), _as_int(index[2])),
            4: lambda index: (_as_int(index[0]), _as_int(index[1]), _as_int(index[2]),
                              _as_int(index[3]))}[len(index)]


@overload(_check_axis, inline="always")
def _check_axis_impl(array, value, axis, index, site, cube, unit):
    if not isinstance(value, types.Integer):
        return lambda array, value, axis, index, site, cube, unit: None

    def check(array, value, axis, index, site, cube, unit):
        size = array.shape[axis]
        if value >= size or value < -size:
            raise IndexError(MARK, site, axis, size, cube, unit, _components(index))
    return check


def _unchanged(array, index, site, cube, unit):
    return index


@njit(boundscheck=True)
def _probe(array, index):
    """``array[index]`` under Numba's own bounds check: its plain ``IndexError`` for an index
    form the checks below do not take apart (the result is returned so that the access stays)."""
    return array[index]


def _probed(array, index, site, cube, unit):
    _probe(array, index)
    return index


@overload(checked_index, inline="always")
def _checked_index(array, index, site, cube, unit):
    if not isinstance(array, types.Buffer):
        return _unchanged       # a tuple (Numba checks it anyway), a record, a scalar
    if not isinstance(array, types.Array) or array.ndim == 0:
        return _probed
    if isinstance(index, types.Integer):
        def check_one(array, index, site, cube, unit):
            _check_axis(array, index, 0, index, site, cube, unit)
            return index
        return check_one
    if not isinstance(index, types.BaseTuple) or not 1 <= len(index) <= min(array.ndim,
                                                                             _MOST_COMPONENTS):
        return _probed
    components = list(index.types)
    if not all(isinstance(c, (types.Integer, types.SliceType)) for c in components):
        return _probed
    if not any(isinstance(c, types.Integer) for c in components):
        return _unchanged       # slices only: a slice is clipped to its axis, never outside it

    return _CHECK_EACH[len(index)]


def checked_at(container, index, site, cube, unit):
    """``container``, after checking ``index`` against it (nopython only; module docstring)."""
    raise NotImplementedError("checked_at runs inside generated kernels only")


@overload(checked_at, inline="always")
def _checked_at(container, index, site, cube, unit):
    if not isinstance(container, types.Buffer):
        return lambda container, index, site, cube, unit: container

    def check(container, index, site, cube, unit):
        checked_index(container, index, site, cube, unit)
        return container
    return check


# Written out per arity, like ``_components``: a tuple of mixed types is taken apart only with
# literal indices (and Numba does not inline a function that uses ``literal_unroll``).
def _check_1(array, index, site, cube, unit):
    _check_axis(array, index[0], 0, index, site, cube, unit)
    return index


def _check_2(array, index, site, cube, unit):
    _check_axis(array, index[0], 0, index, site, cube, unit)
    _check_axis(array, index[1], 1, index, site, cube, unit)
    return index


def _check_3(array, index, site, cube, unit):
    _check_axis(array, index[0], 0, index, site, cube, unit)
    _check_axis(array, index[1], 1, index, site, cube, unit)
    _check_axis(array, index[2], 2, index, site, cube, unit)
    return index


def _check_4(array, index, site, cube, unit):
    _check_axis(array, index[0], 0, index, site, cube, unit)
    _check_axis(array, index[1], 1, index, site, cube, unit)
    _check_axis(array, index[2], 2, index, site, cube, unit)
    _check_axis(array, index[3], 3, index, site, cube, unit)
    return index


_CHECK_EACH = {1: _check_1, 2: _check_2, 3: _check_3, 4: _check_4}


def described(exc: BaseException, kernel_name: str, sites: tuple) -> BaseException:
    """The ``IndexError`` with its message for the raw one of a failed check; any other
    exception as it is."""
    args = getattr(exc, "args", ())
    if not (isinstance(exc, IndexError) and len(args) == 7 and args[0] == MARK):
        return exc
    _, site, axis, size, cube, unit, components = args
    name = sites[site] if 0 <= site < len(sites) else "?"
    shown = ", ".join(":" if c == _SLICE else str(c) for c in components)
    return IndexError(f"kernel {kernel_name}: {name}[{shown}] out of bounds for axis {axis} with "
                      f"size {size} (cube {tuple(cube)}, unit {tuple(unit)})")


# ---- checks hoisted out of a loop (bounds.py, "Loops") ----------------------------------------

#: A hoisted check takes a loop whose range's ends are at most this far from 0 ...
_MOST_END = 1 << 40
#: ... and indices whose coefficient of the loop variable is at most this: then no index of the
#: loop wraps around int64 unless one at an end does, and that one is far outside any array.
_MOST_COEFFICIENT = 1 << 20


def prechecked(index):
    """``index``: the mark of a subscript whose every index in its loop was checked before the
    loop ran (nopython only)."""
    raise NotImplementedError("nopython only")


@overload(prechecked, inline="always")
def _prechecked(index):
    return lambda index: index


def in_bounds(array, index):
    """Whether ``index`` lies inside ``array`` (as ``checked_index`` decides it), without raising;
    False for an index form it does not take apart (nopython only)."""
    raise NotImplementedError("nopython only")


@overload(in_bounds, inline="always")
def _in_bounds(array, index):
    if not isinstance(array, types.Buffer):
        return lambda array, index: True        # not an array: nothing a wild index reaches
    components = list(index.types) if isinstance(index, types.BaseTuple) else [index]
    if (not isinstance(array, types.Array) or not 1 <= len(components) <= array.ndim
            or not all(isinstance(c, types.Integer) for c in components)
            or len(components) > _MOST_COMPONENTS):
        return lambda array, index: False
    if not isinstance(index, types.BaseTuple):
        return lambda array, index: _inside(index, array.shape[0])
    return _INSIDE_EACH[len(components)]


# Branch-free (``&``, no chained comparison): these run once per loop entry, often once per unit
# in a unit loop, where branches cost more than the compares (and Numba's inlining of ``and``
# chains leaves variables it warns about).
@register_jitable(inline="always")
def _inside(value, size):
    return (value >= -size) & (value < size)


def _inside_1(array, index):
    return _inside(index[0], array.shape[0])


def _inside_2(array, index):
    return _inside(index[0], array.shape[0]) & _inside(index[1], array.shape[1])


def _inside_3(array, index):
    return (_inside(index[0], array.shape[0]) & _inside(index[1], array.shape[1])
            & _inside(index[2], array.shape[2]))


def _inside_4(array, index):
    return (_inside(index[0], array.shape[0]) & _inside(index[1], array.shape[1])
            & _inside(index[2], array.shape[2]) & _inside(index[3], array.shape[3]))


_INSIDE_EACH = {1: _inside_1, 2: _inside_2, 3: _inside_3, 4: _inside_4}


def range_ends(start, stop, step):
    """``(ok, first, last)`` of ``range(start, stop, step)`` as int64: ``ok`` when the range is
    not empty, its arguments are signed integers and its ends are within ``_MOST_END`` of 0
    (nopython only)."""
    raise NotImplementedError("nopython only")


@overload(range_ends, inline="always")
def _range_ends(start, stop, step):
    if not all(isinstance(t, types.Integer) and t.signed for t in (start, stop, step)):
        return lambda start, stop, step: (False, 0, 0)

    def ends(start, stop, step):
        a, b, s = np.int64(start), np.int64(stop), np.int64(step)
        if not (-_MOST_END <= a <= _MOST_END and -_MOST_END <= b <= _MOST_END
                and -_MOST_END <= s):       # -s of the most negative step would overflow
            return False, a, a
        if s > 0 and a < b:
            return True, a, a + (b - a - 1) // s * s
        if s < 0 and a > b:
            return True, a, a - (a - b - 1) // (-s) * (-s)
        return False, a, a      # empty (or step 0, which the loop's range() raises for)
    return ends


def small(coefficient):
    """Whether an index's coefficient of a loop variable is at most ``_MOST_COEFFICIENT``
    (nopython only)."""
    raise NotImplementedError("nopython only")


@overload(small, inline="always")
def _small(coefficient):
    if not (isinstance(coefficient, types.Integer) and coefficient.signed):
        return lambda coefficient: False
    return lambda coefficient: (coefficient >= -_MOST_COEFFICIENT) & (coefficient <= _MOST_COEFFICIENT)
