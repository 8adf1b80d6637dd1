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
integers and slices is checked, anything else (``None``, ``...``, more components, an index of a
tuple or a record) is returned untouched, and Numba's own check (the generated code keeps
``boundscheck=True``) still raises its plain ``IndexError`` for it.
"""

from __future__ import annotations

from numba.core import types
from numba.extending import overload

__all__ = ["checked_index", "described", "MARK"]

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


@overload(checked_index, inline="always")
def _checked_index(array, index, site, cube, unit):
    if not isinstance(array, types.Array):
        return _unchanged
    if isinstance(index, types.Integer):
        def check_one(array, index, site, cube, unit):
            _check_axis(array, index, 0, index, site, cube, unit)
            return index
        return check_one if array.ndim >= 1 else _unchanged
    if not isinstance(index, types.BaseTuple) or not 1 <= len(index) <= min(array.ndim,
                                                                             _MOST_COMPONENTS):
        return _unchanged
    components = list(index.types)
    if not all(isinstance(c, (types.Integer, types.SliceType)) for c in components) \
            or not any(isinstance(c, types.Integer) for c in components):
        return _unchanged

    return _CHECK_EACH[len(index)]


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
