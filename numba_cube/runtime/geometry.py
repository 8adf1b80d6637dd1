"""Launch geometry: ``CubeDim`` (the block shape) and ``CubeCount`` (the grid shape).

A ``CubeCount`` is either static (three integers known on the issuing thread) or dynamic: three
``uint32`` (x, y, z) read from a device buffer when the launch executes (runtime.md section 5).
Ints and tuples are accepted wherever these are expected; ``coerce`` is the one place that turns
them into the value types, with a ``LaunchArgumentError`` (a ``TypeError``) for anything else.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from ..errors import LaunchArgumentError

__all__ = ["CubeDim", "CubeCount"]

_DIM_CACHE: dict = {}
_COUNT_CACHE: dict = {}


def _plain_ints(value) -> bool:
    """An int or a tuple of ints (exact types: 1.0 == 1 must not hit the cache of 1)."""
    return type(value) is int or (type(value) is tuple and all(type(v) is int for v in value))


def _three(value: Any, what: str) -> tuple[int, int, int]:
    if isinstance(value, (tuple, list)):
        items = list(value)
    else:
        items = [value]
    if not 1 <= len(items) <= 3:
        raise LaunchArgumentError(f"{what} takes 1 to 3 dimensions, got {value!r}")
    try:
        ints = [operator.index(v) for v in items]
    except TypeError:
        raise LaunchArgumentError(f"{what} dimensions must be integers, got {value!r}") from None
    if any(v < 0 for v in ints):
        raise LaunchArgumentError(f"{what} dimensions must not be negative, got {value!r}")
    while len(ints) < 3:
        ints.append(1)
    return ints[0], ints[1], ints[2]


@dataclass(frozen=True)
class CubeDim:
    """The shape of one cube (a CUDA block): how many units (threads) it has along x, y, z."""

    x: int
    y: int = 1
    z: int = 1

    def __post_init__(self):
        dims = _three((self.x, self.y, self.z), "CubeDim")
        if 0 in dims:
            raise LaunchArgumentError(f"CubeDim must be at least 1 in every dimension, got {dims}")

    @classmethod
    def coerce(cls, value: Any) -> "CubeDim":
        if isinstance(value, CubeDim):
            return value
        if _plain_ints(value):
            # Launch loops pass the same few ints or tuples again and again: reuse the values.
            hit = _DIM_CACHE.get(value)
            if hit is None:
                hit = cls(*_three(value, "CubeDim"))
                if len(_DIM_CACHE) < 4096:
                    _DIM_CACHE[value] = hit
            return hit
        return cls(*_three(value, "CubeDim"))

    @property
    def num_elems(self) -> int:
        return self.x * self.y * self.z

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.x, self.y, self.z)


@dataclass(frozen=True)
class CubeCount:
    """How many cubes a launch runs, along x, y, z; or, when ``handle`` is set, where to read it.

    ``CubeCount.dynamic(handle)`` reads three ``uint32`` from ``handle`` (a handle or a view of one)
    when the launch executes, after the work that wrote them.
    """

    x: int = 1
    y: int = 1
    z: int = 1
    handle: Any = None

    def __post_init__(self):
        # Fix (tests/runtime/test_geometry.py): a CubeCount made directly was not validated, so
        # CubeCount(-1) or CubeCount(1.5) passed the zero-grid gate and reached the backend.
        # Validate like coerce (and like CubeDim); a dynamic count's placeholder is (0, 0, 0).
        if self.handle is None:
            _three((self.x, self.y, self.z), "CubeCount")

    @classmethod
    def coerce(cls, value: Any) -> "CubeCount":
        if isinstance(value, CubeCount):
            return value
        if _plain_ints(value):
            # Launch loops pass the same few ints or tuples again and again: reuse the values.
            hit = _COUNT_CACHE.get(value)
            if hit is None:
                hit = cls(*_three(value, "CubeCount"))
                if len(_COUNT_CACHE) < 4096:
                    _COUNT_CACHE[value] = hit
            return hit
        return cls(*_three(value, "CubeCount"))

    @classmethod
    def dynamic(cls, handle: Any) -> "CubeCount":
        from .handle import Handle  # geometry is imported by handle's users; avoid a cycle

        if not isinstance(handle, Handle):
            raise LaunchArgumentError(
                f"CubeCount.dynamic needs a Handle holding three uint32, got {type(handle).__name__}")
        if handle.nbytes < 12:
            raise LaunchArgumentError(
                f"CubeCount.dynamic needs at least 12 bytes (three uint32), the handle has {handle.nbytes}")
        return cls(0, 0, 0, handle)

    @property
    def is_dynamic(self) -> bool:
        return self.handle is not None

    @property
    def is_zero(self) -> bool:
        return not self.is_dynamic and 0 in (self.x, self.y, self.z)

    @property
    def num_elems(self) -> int:
        return self.x * self.y * self.z

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.x, self.y, self.z)
