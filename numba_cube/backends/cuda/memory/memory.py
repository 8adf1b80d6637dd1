"""Device memory and pinned host staging for the CUDA backend.

Device memory goes through the runtime's ``MemoryPool`` (``runtime/memory/pool.py``) over
``cuMemAlloc``/``cuMemFree``: size classes for reuse, and *quarantine*: a freed buffer is reused
only once every task that may still touch it has completed on the device (the tasks' events), on
whichever stream they ran. That is the guarantee CuPy's per-stream arenas and PyTorch's caching
allocator leave to the user (``record_stream``); here the hazard tracker knows the
users, so nobody has to declare them.

Why not stream-ordered allocation (``cuMemAllocAsync``/``cuMemFreeAsync``): a free is ordered on
*one* stream, while a numba_cube buffer is used by launches on several; the pool's quarantine
already waits for all of them, without a device-side free per stream. ``cuMemAlloc`` is slow
(tens of microseconds) but the pool makes it rare: a loop that creates and frees buffers of one
shape allocates in its first iteration only.

Out of memory: the allocator gives the pool's idle blocks back to the driver and tries once more
before raising ``MemoryError`` (with the driver's error as its cause).

Host copies *in stream order* (``client.write``) stage the data in page-locked host memory, so
``cuMemcpyHtoDAsync`` is really asynchronous (from pageable memory the driver may synchronize the
stream first). The staging buffer is kept until the copy's task is done (``PinnedPool``).
"""

from __future__ import annotations

import ctypes
from collections import defaultdict

import numpy as np

from numba_cube.runtime.memory.pool import size_class
from numba_cube.backends.cuda.driver.errors import CudaError

__all__ = ["DeviceMemory", "DeviceAllocator", "PinnedPool", "host_view"]


class DeviceMemory:
    """One device allocation (or a borrowed foreign one): its address and size."""

    __slots__ = ("ptr", "size", "owned")

    def __init__(self, ptr: int, size: int, owned: bool = True):
        self.ptr = ptr
        self.size = size
        self.owned = owned

    def __repr__(self) -> str:
        return f"<DeviceMemory 0x{self.ptr:x} {self.size} bytes{'' if self.owned else ' borrowed'}>"


class DeviceAllocator:
    """``allocate``/``release`` callbacks for the runtime's ``MemoryPool``."""

    def __init__(self, driver, activate, trim=None):
        self._driver = driver
        self._activate = activate   # makes the device's context current on this thread
        self._trim = trim           # gives idle pool blocks back (set by the server)
        self.allocated_bytes = 0

    def allocate(self, nbytes: int) -> DeviceMemory:
        self._activate()
        nbytes = max(int(nbytes), 1)
        try:
            ptr = self._driver.mem_alloc(nbytes)
        except CudaError as exc:
            if not exc.out_of_memory or self._trim is None:
                raise
            self._trim()
            try:
                ptr = self._driver.mem_alloc(nbytes)
            except CudaError as exc2:
                if exc2.out_of_memory:
                    raise MemoryError(f"device out of memory allocating {nbytes} bytes "
                                      f"(after giving {self.allocated_bytes} idle bytes back)") from exc2
                raise
        self.allocated_bytes += nbytes
        return DeviceMemory(ptr, nbytes)

    def release(self, memory: DeviceMemory) -> None:
        if not memory.owned:
            return
        self._activate()
        self._driver.mem_free(memory.ptr)
        self.allocated_bytes -= memory.size


def host_view(ptr: int, nbytes: int) -> np.ndarray:
    """A ``uint8`` NumPy array over ``nbytes`` of host memory at ``ptr`` (no copy)."""
    if nbytes == 0:
        return np.empty(0, np.uint8)
    buf = (ctypes.c_uint8 * nbytes).from_address(ptr)
    return np.frombuffer(buf, dtype=np.uint8)


class _Pinned:
    __slots__ = ("ptr", "cap", "array")

    def __init__(self, ptr: int, cap: int):
        self.ptr = ptr
        self.cap = cap
        self.array = host_view(ptr, cap)


class PinnedPool:
    """Page-locked host buffers by size class, lent to copies until their task is done."""

    def __init__(self, driver, activate, max_idle_bytes: int = 64 << 20):
        self._driver = driver
        self._activate = activate
        self._free: dict[int, list[_Pinned]] = defaultdict(list)
        self._lent: list[tuple[object, _Pinned]] = []   # (task, buffer)
        self.idle_bytes = 0
        self.max_idle_bytes = max_idle_bytes

    def get(self, nbytes: int) -> _Pinned:
        self.sweep()
        cap = size_class(nbytes)
        free = self._free.get(cap)
        if free:
            self.idle_bytes -= cap
            return free.pop()
        self._activate()
        return _Pinned(self._driver.mem_alloc_host(cap), cap)

    def lend(self, task, buf: _Pinned) -> None:
        """``buf`` is in use until ``task`` is done."""
        self._lent.append((task, buf))

    def give_back(self, buf: _Pinned) -> None:
        if self.idle_bytes + buf.cap > self.max_idle_bytes:
            try:
                self._activate()
                self._driver.mem_free_host(buf.ptr)
            except CudaError:
                pass   # a broken context: the memory goes with the process
            return
        self._free[buf.cap].append(buf)
        self.idle_bytes += buf.cap

    def sweep(self) -> None:
        if not self._lent:
            return
        still = []
        for task, buf in self._lent:
            if task.done:
                self.give_back(buf)
            else:
                still.append((task, buf))
        self._lent = still

    @property
    def lent(self) -> int:
        return len(self._lent)
