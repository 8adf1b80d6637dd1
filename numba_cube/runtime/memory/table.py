"""The server's memory table (mixed into ``DeviceServer``): memory ids, allocation, frees, views.

Each buffer is a memory id mapped to ``(capacity, backend memory)`` from the pool
(``pool.py``). Everything here runs on the device's channel, one operation at a time:

- ``op_alloc`` allocates through the pool; inside a capture window only what the pool already
  holds may be used, and a request it cannot serve raises ``CaptureError`` on the caller;
- ``release_memory`` is how a dropped handle gives its memory back, in channel order, and
  ``drain_frees`` hands it to the pool's quarantine with the tasks that still use it (after the
  mechanism let go of it: ``DeviceMechanism.before_free``; borrowed memory never enters the pool);
- ``host_array`` is the mechanism's (cached) view of a binding's bytes, what kernels and host
  copies use on host backends;
- ``initial_write`` and ``read_binding`` are the mechanism's copies (``create``, ``read``).
"""

from __future__ import annotations

import numpy as np

from numba_cube.runtime.memory.handle import Binding

__all__ = ["MemoryTable"]


class MemoryTable:
    """The memory operations of ``DeviceServer`` (see the module docstring for what it relies on)."""

    def op_alloc(self, nbytes: int, stream=None) -> int:
        self.drain_frees()
        self.mechanism.prepare()
        capture = self.captures.get(stream) if self.captures else None
        if capture is not None:
            # Nothing may be allocated inside a window: only what the warm-up left in the pool. A
            # request it cannot serve raises here, on the caller (nothing allocated), and dooms
            # the capture, like every refused operation.
            self.pool.frozen = True
            try:
                cap, mem = self.pool.allocate(nbytes)
            except MemoryError:
                raise capture.refuse(f"allocation of {nbytes} bytes (the pool holds no free block that "
                                     f"fits; run the warm-up after graph_prepare())") from None
            finally:
                self.pool.frozen = False
        else:
            cap, mem = self.pool.allocate(nbytes)
        memory_id = next(self.memory_ids)
        self.memory[memory_id] = (cap, mem)
        return memory_id

    def add_memory(self, nbytes: int, memory) -> int:
        """A new memory id for ``memory`` that the pool did not allocate (borrowed bytes,
        ``memory/borrowed.py``); freed like any other, but never handed to the pool (the mechanism's
        ``before_free`` says so)."""
        memory_id = next(self.memory_ids)
        self.memory[memory_id] = (nbytes, memory)
        return memory_id

    def release_memory(self, memory_id: int) -> None:
        """A handle's finalizer sends this through the channel, so it runs after every operation
        submitted before the handle was dropped (a launch that binds the handle registers as a user
        of the memory first, and the free then waits for it).

        Frees are drained at the start of operations rather than wherever a finalizer happens to
        fire: the garbage collector can run in the middle of a server operation, and the server's
        state is not re-entrant (the channels defer such nested submissions, see streams/channel.py).
        """
        self.pending_frees.append(memory_id)
        self.drain_frees()

    def drain_frees(self) -> None:
        """Forget the memory of dropped handles (``pending_frees``): called at the start of the
        operations that look memory up (a warm path too, before it matches buffers)."""
        while self.pending_frees:
            memory_id = self.pending_frees.popleft()
            pooled = self.mechanism.before_free(memory_id)
            cap, mem = self.memory.pop(memory_id)
            self._views.pop(memory_id, None)
            self.forget_bound_launches(memory_id)
            users = self.hazards.users_of(memory_id)
            self.hazards.forget(memory_id)
            if pooled:
                self.pool.free(cap, mem, users)
            self.ledger.forget(memory_id)
            if users:
                # A task still running may close its scope on this id after the forget above; ids
                # are never reused, so that entry is harmless, but forget it again once they end
                # so a loop of failing launches into dropped buffers does not grow the ledger.
                self._late_forget.append((memory_id, users))
        if self._late_forget:
            still = []
            for memory_id, users in self._late_forget:
                if all(t.done for t in users):
                    self.ledger.forget(memory_id)
                else:
                    still.append((memory_id, users))
            self._late_forget = still

    def host_array(self, b: Binding) -> np.ndarray:
        """The backend's view of a binding's bytes (a NumPy view on host backends).

        Views are cached per binding while the memory lives: a loop that launches on the same
        handles makes each view once (dropped with the memory in ``drain_frees``); the mechanism
        says what a view is (``DeviceMechanism.view``)."""
        views = self._views.get(b.memory_id)
        if views is None:
            views = self._views[b.memory_id] = {}
        view = views.get(b)
        if view is None:
            view = self.mechanism.view(self.memory[b.memory_id][1], b)
            if len(views) < 64:   # bounded: a program that makes many distinct views of one buffer
                views[b] = view
        return view

    def initial_write(self, b: Binding, data: np.ndarray) -> None:
        """Fill fresh memory (called on the issuing thread by ``create``), complete on return."""
        self.mechanism.initial_write(b, data)

    def read_binding(self, b: Binding) -> np.ndarray:
        """A host copy of a binding's bytes, once the caller has waited for its writers, in the
        binding's layout (an F-ordered handle reads as an F-ordered array)."""
        return self.mechanism.read_binding(b)
