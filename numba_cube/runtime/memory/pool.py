"""The memory pool: reuse of freed buffers, and no reuse while a stream may still use one.

Freed memory goes to *quarantine* with the tasks that may still touch it; it becomes reusable
(or is released) only once all of them are done (CONTRACT.md section 3, "Freeing":
a handle's memory is not reused while a task on any stream may still touch it).

Reuse is by size class: sizes are rounded up to a power of two (at least the 64-byte pool
alignment) below 1 MiB and to whole MiB above, so a loop that creates and frees handles of one
shape reaches a steady state after its first iteration. Idle memory above ``max_idle_bytes`` is
given back to the backend instead of kept.

Memory freed while queued work still uses it (a loop that creates a temporary, launches on it and
drops it, without waiting) is bounded by the same figure: when serving a request would need a
fresh block while quarantined and idle memory already reach ``max_idle_bytes``, the pool first
waits for the oldest quarantined blocks' users (``settle``: the server flushes their streams and
waits), then reuses what they freed. So such a loop holds at most its live buffers plus
``max_idle_bytes`` and one block, and stops allocating once it gets there.

The pool also serves graph capture. ``hold_idle()`` (``graph_prepare``) keeps freed blocks idle
beyond ``max_idle_bytes``, so that the capture window can reuse what the warm-up freed: per size
class, as many as were live at once since the hold began (a window that repeats the warm-up asks
for no more; a warm-up that frees ever new temporaries keeps one block per class, not each
temporary's); ``release_idle_hold()`` (the server calls it once the window is closed) ends that
and gives the idle memory above ``max_idle_bytes`` back. ``frozen`` pools refuse to allocate
from the backend (a capture window may only reuse what the warm-up left): the server turns that
refusal into a ``CaptureError`` raised by the allocation.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable

__all__ = ["MemoryPool", "size_class", "ALIGNMENT"]

ALIGNMENT = 64
_MIB = 1 << 20


def size_class(nbytes: int) -> int:
    n = max(int(nbytes), ALIGNMENT)
    if n <= _MIB:
        return 1 << (n - 1).bit_length()
    return -(-n // _MIB) * _MIB


class MemoryPool:
    """Size-class free lists over a backend allocator. Owned by the server's thread."""

    def __init__(self, allocate: Callable[[int], object], release: Callable[[object], None] | None = None,
                 max_idle_bytes: int = 256 * _MIB, settle: Callable[[list], None] | None = None):
        """``settle(tasks)``: return once every task of ``tasks`` is done (None: never wait)."""
        self._allocate = allocate
        self._release = release or (lambda mem: None)
        self._settle = settle
        self._free: dict[int, list] = defaultdict(list)
        self._quarantine: list[tuple[int, object, list]] = []
        self.quarantined_bytes = 0
        self.idle_bytes = 0
        self.live_bytes = 0
        self.peak_bytes = 0  # high-water mark of live + idle + quarantined (what the pool holds)
        self._held_bytes = 0
        self.max_idle_bytes = max_idle_bytes
        self.frozen = False
        self.holding_idle = False   # graph_prepare: keep freed blocks, see hold_idle
        self._live_blocks: dict[int, int] = defaultdict(int)    # size class -> blocks live now
        self._peak_blocks: dict[int, int] = {}      # size class -> most live at once, while held

    def allocate(self, nbytes: int) -> tuple[int, object]:
        """Return ``(capacity, memory)`` for at least ``nbytes``. Raises ``MemoryError`` when frozen
        and nothing fits."""
        self.sweep()
        cap = size_class(nbytes)
        free = self._free.get(cap)
        if not free and self._quarantine and self._settle is not None and not self.frozen:
            # Growing now would leave quarantined + idle memory above the bound: wait for the
            # oldest quarantined blocks instead (module docstring), then serve from what they
            # free. Each at most once: a block whose user was abandoned stays quarantined.
            for _, _, users in list(self._quarantine):
                if free or self.quarantined_bytes + self.idle_bytes + cap <= self.max_idle_bytes:
                    break
                self._settle(users)
                self.sweep()
                free = self._free.get(cap)
        if free:
            mem = free.pop()
            self.idle_bytes -= cap
        else:
            if self.frozen:
                raise MemoryError(f"no free block of {cap} bytes in the pool and allocation is frozen")
            mem = self._allocate(cap)
            self._held_bytes += cap
            self.peak_bytes = max(self.peak_bytes, self._held_bytes)
        self.live_bytes += cap
        live = self._live_blocks[cap] = self._live_blocks[cap] + 1
        if self.holding_idle and live > self._peak_blocks.get(cap, 0):
            self._peak_blocks[cap] = live
        return cap, mem

    def free(self, cap: int, mem: object, users: list) -> None:
        """Give ``mem`` back once every task in ``users`` is done."""
        self.live_bytes -= cap
        self._live_blocks[cap] -= 1
        self._quarantine.append((cap, mem, [t for t in users if not t.done]))
        self.quarantined_bytes += cap
        self.sweep()

    def sweep(self) -> None:
        """Move quarantined memory whose users have all finished to the free lists."""
        if not self._quarantine:
            return
        still = []
        for cap, mem, users in self._quarantine:
            if all(t.done for t in users):
                self.quarantined_bytes -= cap
                if self.idle_bytes + cap > self.max_idle_bytes and not (
                        self.holding_idle
                        and len(self._free[cap]) < self._peak_blocks.get(cap, 0)):
                    self._release(mem)
                    self._held_bytes -= cap
                else:
                    self._free[cap].append(mem)
                    self.idle_bytes += cap
            else:
                still.append((cap, mem, users))
        self._quarantine = still

    @property
    def quarantined(self) -> int:
        return len(self._quarantine)

    @property
    def held_bytes(self) -> int:
        """Everything the pool holds from the backend: live, idle and quarantined."""
        return self._held_bytes

    def hold_idle(self) -> None:
        """Until ``release_idle_hold``, keep blocks freed idle beyond ``max_idle_bytes``: per size
        class, as many as are live at once from now on (those live now count)."""
        self.holding_idle = True
        self._peak_blocks = {cap: n for cap, n in self._live_blocks.items() if n}

    def release_idle_hold(self) -> None:
        """End ``hold_idle``: give back idle memory above ``max_idle_bytes``, largest blocks first."""
        self.holding_idle = False
        self._peak_blocks = {}
        self.sweep()
        for cap in sorted(self._free, reverse=True):
            blocks = self._free[cap]
            while blocks and self.idle_bytes > self.max_idle_bytes:
                self._release(blocks.pop())
                self._held_bytes -= cap
                self.idle_bytes -= cap

    def trim(self) -> None:
        """Release every idle block to the backend."""
        for cap, blocks in self._free.items():
            for mem in blocks:
                self._release(mem)
                self._held_bytes -= cap
        self._free.clear()
        self.idle_bytes = 0
