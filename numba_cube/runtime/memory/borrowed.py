"""Borrowed memory: another library's arrays bound as launch arguments without a copy.

A launch argument that is no ``Handle`` but an array some other library owns (a numba-cuda
simulator device array, a CuPy array, ...) is *adopted*: the allocation that holds it becomes a
memory id of the server, marked borrowed, and the argument a ``Handle`` viewing it with its own
offset, shape, dtype and strides. This module is the policy of that, the same for every server:

- **one id per allocation.** Adoption is keyed by the allocation's base address, so every view of
  one buffer, and every launch that passes the same array again, maps to one memory id: the
  dependencies between launches that share a foreign buffer are inferred like those of handles,
  and a failure recorded on it is seen by the next reader;
- **bounds.** Every byte the view can reach (its strides included: stride 0, negative steps) must
  lie in that allocation, else the argument is a ``LaunchArgumentError``: a kernel would read or
  write bytes of no array;
- **lifetime.** An entry holds a strong reference to the foreign object until a launch has
  consumed the adoption (``consume``, at the launch) and every launch that used it has finished,
  so the other library cannot free the memory under a running kernel; after that only the
  bookkeeping stays, and idle entries are evicted when the table grows past ``MAX_ENTRIES``;
- **frees.** Borrowed bytes belong to the other library: when a borrowed id is freed, the server
  forgets the id (``take_freed``) and never hands the memory to its pool.

What depends on the device is the backend's: a ``HostBackend`` describes a foreign object as a
``ForeignMemory`` (``HostBackend.foreign_memory``; ``describe_host_array`` does it for NumPy
memory), and the runtime's ``HostMechanism`` (``launch/host_mechanism.py``) runs the steps here on the
server's channel: adoption, and the free path that keeps borrowed ids out of the pool
(``DeviceMechanism.before_free``). The GPU server
(``backends/cuda/memory/interop.py``) keeps the table with ``BorrowedTable`` and ``BorrowedEntry`` and
adds what only a GPU has: the driver's address ranges and ordering after the producer's stream.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numba_cube.errors import LaunchArgumentError
from numba_cube.runtime.launch.composite import composite_bindings
from numba_cube.runtime.memory.handle import Allocation, Handle
from numba_cube.runtime.memory.layout import byte_extent

__all__ = ["ForeignMemory", "describe_host_array", "BorrowedEntry", "BorrowedTable",
           "BorrowedMemory", "MAX_ENTRIES", "UNCONSUMED_SECONDS"]

#: Idle borrowed entries beyond this many are evicted (bookkeeping only; see the docstring).
MAX_ENTRIES = 256
#: An adoption that no launch consumed (the launch raised on the issuing thread) stops holding
#: the foreign object after this many seconds.
UNCONSUMED_SECONDS = 10.0


@dataclass(frozen=True)
class ForeignMemory:
    """A foreign array as a backend describes it: the allocation that holds it, and the view."""

    memory: Any           # the whole allocation, as the backend's ``array``/``strided_array`` view it
    base: int             # address of its first byte: the key of every view of it
    size: int             # its bytes
    ptr: int              # address of the view's element [0, ..., 0]
    shape: tuple
    dtype: np.dtype
    strides: tuple | None = None   # bytes; None: C-contiguous

    @property
    def nbytes(self) -> int:
        """The view's bytes (0 for an empty array, which reaches no byte)."""
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n

    @property
    def extent(self) -> tuple[int, int]:
        """``(low, high)``: the addresses of every byte the view can touch."""
        low, high = byte_extent(self.shape, self.strides, self.dtype.itemsize)
        return self.ptr + low, self.ptr + high


def describe_host_array(ary: np.ndarray, what: str = "a foreign array") -> ForeignMemory:
    """A NumPy array as borrowed host memory: the allocation is the whole NumPy buffer the view
    lies in (the root of its ``base`` chain), so every view of one array (F-ordered, transposed,
    strided, broadcast, as numba's ufunc machinery makes) shares one memory id. The memory is that
    buffer's bytes, lowest first, as ``HostBackend.array`` views it. ``what`` names the argument
    in the error for a buffer that is not one run of bytes."""
    root = ary
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not _is_compact(root):
        # (a root that is itself a view of non-NumPy memory, laid out with gaps)
        root = ary
    if not _is_compact(root):
        raise LaunchArgumentError(f"{what} whose memory is not one contiguous NumPy buffer cannot "
                                  f"be bound: pass a copy")
    memory = root.ravel(order="K").view(np.uint8)     # compact: a view, lowest byte first
    base = memory.__array_interface__["data"][0] if memory.size else root.__array_interface__["data"][0]
    return ForeignMemory(memory, base, memory.nbytes, ary.__array_interface__["data"][0],
                         ary.shape, ary.dtype, ary.strides)


def _is_compact(ary: np.ndarray) -> bool:
    """Are ``ary``'s bytes one run (C or F order)? Then its ``ravel(order="K")`` is a view."""
    return ary.flags.c_contiguous or ary.flags.f_contiguous


@dataclass
class BorrowedEntry:
    """One adopted foreign allocation: its memory id and what keeps it safe."""

    memory_id: int
    base: int             # key: base address of the foreign allocation
    size: int
    allocation: Any       # our Allocation object: held so the id is not released under us
    owners: list = field(default_factory=list)  # foreign objects kept alive (see docstring)
    adopted_at: float = 0.0
    consumed: bool = True


class BorrowedTable:
    """Adopted foreign allocations of one server, by base address. Server-thread only."""

    def __init__(self):
        self.by_base: dict[int, BorrowedEntry] = {}
        self.by_id: dict[int, BorrowedEntry] = {}
        self._touches = 0

    def __len__(self) -> int:
        return len(self.by_base)

    def __contains__(self, memory_id: int) -> bool:
        return memory_id in self.by_id

    def get(self, base: int) -> BorrowedEntry | None:
        return self.by_base.get(base)

    def add(self, entry: BorrowedEntry) -> None:
        self.by_base[entry.base] = entry
        self.by_id[entry.memory_id] = entry

    def touch(self, entry: BorrowedEntry, owner) -> None:
        """A new adoption of ``entry`` for ``owner``: hold it until a launch consumed it and
        its users finished."""
        entry.owners.append(owner)
        entry.adopted_at = time.monotonic()
        entry.consumed = False
        self._touches += 1

    def maybe_sweep(self, hazards, ledger) -> None:
        """``sweep`` every 32 adoptions, or at once when the table is full (a sweep walks it)."""
        if self._touches >= 32 or len(self.by_base) > MAX_ENTRIES:
            self._touches = 0
            self.sweep(hazards, ledger)

    def consume(self, memory_id: int) -> None:
        entry = self.by_id.get(memory_id)
        if entry is not None:
            entry.consumed = True

    def sweep(self, hazards, ledger) -> None:
        """Drop foreign references that are no longer needed; evict idle entries past the cap."""
        if not self.by_base:
            return
        now = time.monotonic()
        idle = []
        for entry in list(self.by_base.values()):
            busy = bool(hazards.users_of(entry.memory_id))
            settled = entry.consumed or now - entry.adopted_at > UNCONSUMED_SECONDS
            if entry.owners and settled and not busy:
                entry.owners = []
            if settled and not busy and not entry.owners:
                if ledger.failure_of((entry.memory_id, 0, entry.size)) is None:
                    idle.append(entry)
        excess = len(self.by_base) - MAX_ENTRIES
        if excess > 0:
            idle.sort(key=lambda e: e.adopted_at)
            for entry in idle[:excess]:
                self.evict(entry)

    def evict(self, entry: BorrowedEntry) -> None:
        """Forget ``entry``: dropping our Allocation releases the memory id (through the
        server's ordinary free path, which knows borrowed ids never go to the pool)."""
        self.by_base.pop(entry.base, None)
        self.by_id.pop(entry.memory_id, None)
        entry.allocation = None

    def forget_id(self, memory_id: int) -> None:
        entry = self.by_id.pop(memory_id, None)
        if entry is not None:
            self.by_base.pop(entry.base, None)


class BorrowedMemory:
    """One server's borrowed memory: the table of adopted allocations and the ids that are
    borrowed (an evicted entry's id stays borrowed until its last handle is dropped).
    Server-thread only, like the server's memory table."""

    def __init__(self):
        self.table = BorrowedTable()
        self.ids: set[int] = set()

    def __bool__(self) -> bool:
        """Whether anything is borrowed: the launch and free paths skip this module otherwise."""
        return bool(self.ids)

    def __contains__(self, memory_id: int) -> bool:
        return memory_id in self.ids

    def adopt(self, server, foreign: ForeignMemory, owner) -> Handle:
        """``owner`` (the foreign object ``foreign`` describes) as a borrowed ``Handle`` of
        ``server``: its allocation's id, made with ``server.add_memory`` on first sight."""
        self.table.maybe_sweep(server.hazards, server.ledger)
        low, high = foreign.extent
        if foreign.nbytes and (low < foreign.base or high > foreign.base + foreign.size):
            raise LaunchArgumentError(
                f"{type(owner).__name__} argument (shape {foreign.shape}, strides {foreign.strides}) "
                f"reaches bytes {low - foreign.base}..{high - foreign.base} of an allocation of "
                f"{foreign.size} bytes: its strides do not fit the memory that holds it")
        entry = self.table.get(foreign.base)
        if entry is not None and entry.size != foreign.size:
            self.table.evict(entry)   # the foreign allocation was freed and its address reused
            entry = None
        if entry is None:
            memory_id = server.add_memory(foreign.size, foreign.memory)
            self.ids.add(memory_id)
            entry = BorrowedEntry(memory_id, foreign.base, foreign.size,
                                  Allocation(server, memory_id, foreign.size))
            self.table.add(entry)
        self.table.touch(entry, owner)
        return Handle(entry.allocation, foreign.ptr - foreign.base, foreign.shape, foreign.dtype,
                      foreign.strides)

    def consume(self, args) -> None:
        """A launch binds ``args``: the adoptions of the borrowed ones among them (inside tuples
        too) are consumed: from now on the launch, a user of their ids, keeps them from being swept."""
        for binding in composite_bindings(args):
            self.table.consume(binding.memory_id)

    def release_id(self, memory_id: int) -> bool:
        """Memory ``memory_id`` is being freed: forget it here if it is borrowed and say so (the
        server then forgets its bookkeeping without giving its bytes to its pool)."""
        if memory_id not in self.ids:
            return False
        self.ids.discard(memory_id)
        self.table.forget_id(memory_id)
        return True
