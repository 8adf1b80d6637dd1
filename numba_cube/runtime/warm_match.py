"""What a warm launch matches: the part of the warm paths every backend shares.

A warm path (``warm_host.py`` for host backends, ``backends/cuda/fast_path.py`` for CUDA) keeps
*armed* launches and fires one when a launch repeats it: the same kernel, geometry, options and
stream, the same handles (by the identity of their bindings) and the same scalar types. This
module says what can be matched that cheaply (``match_of``, ``PLAIN_GEOMETRY``) and builds the
matcher that compares an argument tuple against an armed one (``matcher``).
"""

from __future__ import annotations

import numpy as np

from .handle import Handle

__all__ = ["matcher", "match_of", "PLAIN_GEOMETRY", "PLAIN_SCALAR_TYPES"]

#: Scalar argument types an entry matches by type: those the client binds by value. Anything
#: else (a Handle subclass, a foreign array adopted without a copy) is never armed, because a
#: type match would not say *which* buffer it is.
PLAIN_SCALAR_TYPES = frozenset({int, float, bool, complex})

#: Raw count/dim types an entry matches with ``==`` cheaply (a CubeCount object takes the general
#: path: it may be dynamic, and its equality is a Python-level dataclass ``__eq__``).
PLAIN_GEOMETRY = (int, tuple)

_MATCHERS: dict = {}


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
        n = len(shape)
        if n == 0:
            src = "def match(args, expect):\n    return not args\n"
        else:
            tail = "," if n == 1 else ""
            tests = " and ".join(f"a{i}._binding is e{i}" if is_handle else f"type(a{i}) is e{i}"
                                 for i, is_handle in enumerate(shape))
            src = (f"def match(args, expect):\n"
                   f"    {', '.join(f'a{i}' for i in range(n))}{tail} = args\n"
                   f"    {', '.join(f'e{i}' for i in range(n))}{tail} = expect\n"
                   f"    return {tests}\n")
        namespace: dict = {}
        exec(compile(src, f"<numba_cube warm-launch matcher {shape}>", "exec"), namespace)
        fn = _MATCHERS[shape] = namespace["match"]
    return fn


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
