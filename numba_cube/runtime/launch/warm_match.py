"""What a warm launch matches: the part of the warm paths every backend shares.

A warm path (``launch/warm_host.py`` for host backends, ``backends/cuda/launch/fast_path.py`` for CUDA) keeps
*armed* launches and fires one when a launch repeats it: the same kernel, geometry, options and
stream, the same handles (by the identity of their bindings) and the same scalar types. This
module says what can be matched that cheaply (``match_of``, ``PLAIN_GEOMETRY``) and builds the
matcher that compares an argument tuple against an armed one (``matcher``).
"""

from __future__ import annotations

import numpy as np

from numba_cube.runtime.memory.handle import Handle

__all__ = ["entry_matcher", "matcher", "match_of", "declared_scalars", "convert_declared",
           "PLAIN_GEOMETRY", "PLAIN_SCALAR_TYPES"]

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

#: Scalar argument types an entry matches by type: those the client binds by value. Anything
#: else (a Handle subclass, a foreign array adopted without a copy) is never armed, because a
#: type match would not say *which* buffer it is.
PLAIN_SCALAR_TYPES = frozenset({int, float, bool, complex})

#: Raw count/dim types an entry matches with ``==`` cheaply (a CubeCount object takes the general
#: path: it may be dynamic, and its equality is a Python-level dataclass ``__eq__``).
PLAIN_GEOMETRY = (int, tuple)

_MATCHERS: dict = {}
_ENTRY_FACTORIES: dict = {}


def matcher(shape: tuple):
    """``match(args, expect) -> bool`` for argument lists of one *shape* (per argument True for a
    handle, matched by the identity of its binding, False for a scalar, matched by its type),
    generated once per shape, as ``collections.namedtuple`` generates its classes.

    Why generated: the general loop over ``zip(args, expect)`` with a type test per argument was
    a visible share of the warm launch when profiled on an H200 host; the unrolled form (``a0, a1,
    a2, a3 = args`` then ``a0._binding is e0 and ... and type(a3) is e3``) is a few C-level
    operations. The caller catches the ``AttributeError`` of a scalar where a handle was (it has
    no ``_binding``) and the ``ValueError`` of another number of arguments: both mean "no match"."""
    fn = _MATCHERS.get(shape)
    if fn is None:
        src = "def match(args, expect):\n"
        if shape:
            tail = "," if len(shape) == 1 else ""
            src += f"    {', '.join(f'e{i}' for i in range(len(shape)))}{tail} = expect\n"
        namespace: dict = {}
        exec(compile(src + _argument_tests(shape, "    "),
                     f"<numba_cube warm-launch matcher {shape}>", "exec"), namespace)
        fn = _MATCHERS[shape] = namespace["match"]
    return fn


def _argument_tests(shape: tuple, indent: str) -> str:
    """The lines that unpack ``args`` and return whether it matches ``e0, e1, ...`` (names in
    scope): per argument, by the identity of its binding (a handle) or by its type (a scalar)."""
    n = len(shape)
    if n == 0:
        return f"{indent}return not args\n"
    tail = "," if n == 1 else ""
    tests = " and ".join(f"a{i}._binding is e{i}" if is_handle else f"type(a{i}) is e{i}"
                         for i, is_handle in enumerate(shape))
    return (f"{indent}{', '.join(f'a{i}' for i in range(n))}{tail} = args\n"
            f"{indent}return {tests}\n")


def entry_matcher(stream, count, dim, options, shared_bytes, match: tuple):
    """``match(args, count, dim, stream, options, shared_bytes) -> bool`` for one armed launch:
    the launch's stream (by identity), geometry, options and dynamic shared memory size (an int
    equal to ``shared_bytes``: 64.0 == 64 is no match, the general path refuses it) first, then
    its arguments as ``matcher`` compares them, with the same ``AttributeError``/``ValueError``
    for the caller to catch. What the CUDA warm path compares per entry, in one call: each
    compared value is a closure constant instead of an attribute of the entry read per launch.

    Generated once per argument shape (a factory of closures), so that arming an entry is a
    closure made, not code compiled."""
    shape = tuple(type(m) is not type for m in match)
    make = _ENTRY_FACTORIES.get(shape)
    if make is None:
        names = "".join(f", e{i}" for i in range(len(shape)))
        src = (f"def make(S, C, D, O, B{names}):\n"
               "    def match(args, count, dim, stream, options, shared_bytes):\n"
               "        if stream is not S or not (count is C or count == C) or not (dim is D or "
               "dim == D) or not (options is O or options == O) or type(shared_bytes) is not int "
               "or shared_bytes != B:\n"
               "            return False\n"
               f"{_argument_tests(shape, '        ')}"
               "    return match\n")
        namespace: dict = {}
        exec(compile(src, f"<numba_cube warm-launch entry matcher {shape}>", "exec"), namespace)
        make = _ENTRY_FACTORIES[shape] = namespace["make"]
    return make(stream, count, dim, options, shared_bytes, *match)


def match_of(raw_args) -> tuple | None:
    """What an entry matches per argument (a handle's binding, a scalar's type), or None when an
    argument cannot be matched so cheaply (anything but a handle or a plain number)."""
    match = []
    for a in raw_args:
        kind = type(a)
        if kind is Handle:
            match.append(a._binding)
        elif kind in PLAIN_SCALAR_TYPES or (isinstance(a, np.generic) and a.dtype.kind in "biufc"):
            match.append(kind)
        else:
            return None
    return tuple(match)


def declared_scalars(raw_args, converted, scalars) -> tuple | None:
    """For a kernel declared with signatures (``kernel/signatures.py``): per scalar position, the
    NumPy type the general path converted it to, as ``((position, type), ...)``; None when a
    launch like this one cannot take a warm path (a Python int outside int64, which binds as
    uint64 and may resolve to another signature).

    Why the type alone is enough: an entry matches scalars by their type, and numba's overload
    resolution depends on the argument types alone, so a matching launch resolves to the same
    signature; ``type(v)`` of the declared type converts it as the general path's
    ``astype`` does wherever it succeeds (an int in range, a float, a bool), and raises where it
    would differ (an int out of the declared type's range, which the general path wraps around;
    NaN to an int), which ``convert_declared`` sends to the general path."""
    for i in scalars:
        if type(raw_args[i]) is int and not _INT64_MIN <= raw_args[i] <= _INT64_MAX:
            return None
    return tuple((i, type(converted[i])) for i in scalars)


class NotWarm(Exception):
    """A scalar of this launch must take the general path (``convert_declared``)."""


def convert_declared(declared: tuple, args, arrays: list) -> None:
    """Put ``args``' scalars into ``arrays`` converted to their declared types (``declared`` from
    ``declared_scalars``), or raise ``NotWarm`` where only the general path converts exactly."""
    try:
        for i, to_type in declared:
            value = args[i]
            if type(value) is int and not _INT64_MIN <= value <= _INT64_MAX:
                raise NotWarm
            arrays[i] = to_type(value)
    except (OverflowError, ValueError, TypeError):
        raise NotWarm from None
