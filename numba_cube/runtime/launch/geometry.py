"""Launch geometry: ``CubeDim`` (the block shape) and ``CubeCount`` (the grid shape).

A ``CubeCount`` is either static (three integers known on the issuing thread) or dynamic: three
``uint32`` (x, y, z) read from a device buffer when the launch executes (CONTRACT.md section 5).
Ints and tuples are accepted wherever these are expected; ``coerce`` is the one place that turns
them into the value types, with a ``LaunchArgumentError`` (a ``TypeError``) for anything else.

CUDA's launch limits live here too, for every backend: a launch one backend refuses is refused by
all of them, the same way. A geometry beyond them is a valid *value* (it is not refused when
made): the server fails the launch's write set with a ``LaunchArgumentError`` naming the limit,
as the CUDA driver refuses such a launch when it is dispatched. Each value works out once, when
it is made, which limit it breaks (``beyond_limits``), so the launch path reads one attribute.

The third part of a launch's shape is its dynamic shared memory: ``shared_bytes`` bytes per cube,
which every ``cuda.shared.array(0, dtype)`` of the kernel views (``kernel[count, dim, stream,
nbytes]``, ``client.launch(..., shared_bytes=nbytes)``). Unlike a geometry beyond the limits, a
bad size is refused on the issuing thread, before anything is queued (``dynamic_shared_bytes``):
a negative or non-integer size is no launch at all, and the device's limit is known there
(``server.max_dynamic_shared_bytes``). What only the compiled kernel knows (its static shared
memory, which shares the same per-cube limit on CUDA) is checked by the backend.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from numba_cube.errors import LaunchArgumentError

__all__ = ["CubeDim", "CubeCount", "MAX_UNITS_PER_CUBE", "MAX_CUBE_DIM", "MAX_CUBE_COUNT",
           "MAX_DYNAMIC_SHARED_BYTES", "count_beyond_limits", "dynamic_shared_bytes"]

#: CUDA's launch limits (every GPU numba-cuda supports): units (threads) per cube, cube (block)
#: dimensions, cube count (grid) dimensions.
MAX_UNITS_PER_CUBE = 1024
MAX_CUBE_DIM = (1024, 1024, 64)
MAX_CUBE_COUNT = (2**31 - 1, 65535, 65535)
#: The most shared memory one cube can have on any GPU numba-cuda supports (227 KiB: sm_90 and
#: sm_100 with the opt-in attribute; sm_80 has 163 KiB). Host backends refuse a dynamic size above
#: it, so that a launch that runs on the CPU is one that can run on some GPU; a CUDA device
#: refuses what is above its own limit.
MAX_DYNAMIC_SHARED_BYTES = 227 * 1024

_DIM_CACHE: dict = {}
_COUNT_CACHE: dict = {}
_UINT32 = np.dtype(np.uint32)


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


def dynamic_shared_bytes(value: Any, limit: int, kernel_name: str, device: str) -> int:
    """``value`` as a dynamic shared memory size (an int, 0 to ``limit``), else
    ``LaunchArgumentError`` naming the kernel and what to do."""
    try:
        nbytes = operator.index(value)
    except TypeError:
        raise LaunchArgumentError(
            f"kernel {kernel_name}: the dynamic shared memory size must be an integer number of "
            f"bytes, got {value!r}") from None
    if nbytes < 0:
        raise LaunchArgumentError(
            f"kernel {kernel_name}: the dynamic shared memory size must not be negative, got {nbytes}")
    if nbytes > limit:
        if limit == 0:
            raise LaunchArgumentError(
                f"kernel {kernel_name}: device {device} does not support dynamic shared memory "
                f"(asked for {nbytes} bytes); size the shared array with a constant "
                "(cuda.shared.array(N, dtype)), or use another backend")
        raise LaunchArgumentError(
            f"kernel {kernel_name}: {nbytes} bytes of dynamic shared memory exceed the {limit} "
            f"bytes one cube can have on {device}")
    return nbytes


def _dim_beyond_limits(dims: tuple) -> str | None:
    units = dims[0] * dims[1] * dims[2]
    if units > MAX_UNITS_PER_CUBE:
        return f"a cube of {units} units {dims} exceeds the limit of {MAX_UNITS_PER_CUBE} units per cube"
    if any(d > m for d, m in zip(dims, MAX_CUBE_DIM)):
        return f"cube dim {dims} exceeds the per-dimension limits {MAX_CUBE_DIM}"
    return None


def count_beyond_limits(counts: tuple) -> str | None:
    """Which of CUDA's grid limits ``counts`` (x, y, z) breaks, or None (also for dynamic counts
    once they are read)."""
    if any(c > m for c, m in zip(counts, MAX_CUBE_COUNT)):
        return f"cube count {tuple(counts)} exceeds the grid limits {MAX_CUBE_COUNT}"
    return None


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
        # Not a field (no part of equality, hashing or repr): derived from the fields once.
        object.__setattr__(self, "beyond_limits", _dim_beyond_limits(dims))

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
        # Fix (tests/runtime/launch/test_geometry.py): a CubeCount made directly was not validated, so
        # CubeCount(-1) or CubeCount(1.5) passed the zero-grid gate and reached the backend.
        # Validate like coerce (and like CubeDim); a dynamic count's placeholder is (0, 0, 0).
        problem = None
        if self.handle is None:
            problem = count_beyond_limits(_three((self.x, self.y, self.z), "CubeCount"))
        # A dynamic count is checked when it is read (dispatch.resolve_count).
        object.__setattr__(self, "beyond_limits", problem)

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
        from numba_cube.runtime.memory.handle import Handle  # geometry is imported by handle's users; avoid a cycle

        if not isinstance(handle, Handle):
            raise LaunchArgumentError(
                f"CubeCount.dynamic needs a Handle holding three uint32, got {type(handle).__name__}")
        # Exactly three uint32, nothing else: the count is read as the bytes of three uint32 (on
        # the GPU by the device-count kernel as a uint32[3]), so another dtype would be read as
        # garbage (an int64 (2, 1, 1) reads as (2, 0, 1): a zero grid, silently nothing run) and
        # fewer elements would be read past the handle. Pad a shorter count with ones.
        if handle.dtype != _UINT32 or handle.size != 3:
            raise LaunchArgumentError(
                f"CubeCount.dynamic needs a handle of exactly three uint32 (x, y, z), got "
                f"{handle.size} element(s) of {handle.dtype} (e.g. client.empty(3, np.uint32), or a "
                f"three-element view h[i:i + 3] of a uint32 handle)")
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
