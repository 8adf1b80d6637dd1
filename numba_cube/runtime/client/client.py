"""The client: the issuing-thread side of every operation (CONTRACT.md section 1.1).

A ``Client`` is a thin, cheap object over a device's server: the server is per device, a client
adds compile options (``boundscheck``) and, optionally, a pinned stream. Everything that lives
only on the issuing thread (the current stream, the launch mode, observers' context) is decided
here and handed to the server as a value.

It is put together from the three kinds of thing a user does with a device:

- buffers: allocate, write, read, check, synchronize (``client/buffers.py``, ``BufferOps``);
- launches: the gates of CONTRACT.md section 1.1 and the submission, the warm path and the
  automatic graph's tracer first (``client/launch.py``, ``LaunchOps``);
- scopes around those, here: which client is current (``with client:``), which stream it is
  pinned to, capture windows, automatic graphs, profiles and exclusive use.

Reading a handle as a NumPy array (``np.asarray(handle)``, a DLPack export) goes through a client
of the handle's own device too: this module installs that reader (``array_like.set_host_reader``).
"""

from __future__ import annotations

import threading

from numba_cube.runtime.graphs import auto_graph
from numba_cube.runtime.client import profiling
from numba_cube.runtime.memory.array_like import set_host_reader
from numba_cube.runtime.client.buffers import BufferOps
from numba_cube.runtime.client.launch import LaunchOps
from numba_cube.runtime.memory.handle import Handle
from numba_cube.runtime.streams.identity import StreamId, stream_id_or_none

__all__ = ["Client", "entered_client"]

# The clients of this thread's open `with client:` blocks, innermost last. Here, not in the
# registry: entering a client needs nothing else, and the registry (which makes clients) asks
# `entered_client()` first when it looks for the current one.
_entered = threading.local()


def entered_client() -> "Client | None":
    """The client of this thread's innermost ``with client:`` block, or None outside any."""
    stack = getattr(_entered, "stack", None)
    return stack[-1] if stack else None


class Client(BufferOps, LaunchOps):
    """Launches, buffers and synchronization on one device."""

    def __init__(self, server, *, options: dict | None = None, pinned: StreamId | None = None):
        self.server = server
        self.options = dict(options or {})
        self.pinned = pinned
        LaunchOps.__init__(self, server, self.options)

    # -- identity -----------------------------------------------------------------------------------
    @property
    def device(self) -> str:
        return self.server.device

    @property
    def stream_id(self) -> StreamId:
        """The stream this client's launches go to now: the pinned one, else the thread's."""
        return self.pinned if self.pinned is not None else StreamId.current()

    def set_stream(self, stream_id: StreamId | None) -> "Client":
        """A client pinned to ``stream_id`` (``None`` unpins); the original is unchanged.

        Returning a new client rather than pinning in place keeps ``cube.client("cpu")`` (one object
        per device, shared by every thread) from being re-pinned under another thread's feet.
        Anything but a ``StreamId`` or ``None`` is ``StreamIdError`` (a ``TypeError``).
        """
        stream_id_or_none(stream_id, "set_stream()")
        return Client(self.server, options=self.options, pinned=stream_id)

    def __repr__(self) -> str:
        pin = f" pinned={self.pinned}" if self.pinned is not None else ""
        return f"<cube.Client {self.device}{pin}>"

    # -- `with client:` makes it current for kernel[...] launches on this thread --------------------
    def __enter__(self) -> "Client":
        stack = getattr(_entered, "stack", None)
        if stack is None:
            stack = _entered.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc) -> bool:
        _entered.stack.pop()
        return False

    # -- capture, profiling, exclusive use ------------------------------------------------------------
    def graph_prepare(self) -> None:
        """Call before the warm-up run: the capture window may only reuse what it leaves."""
        self.server.channel.call(self.server.op_graph_prepare)

    def start_capture(self) -> None:
        """Open a capture window on this client's stream. Refused (``CaptureError``) if one is
        already open there or ``graph_prepare`` was not called; an open capture stays as it was."""
        self.server.channel.call(self.server.op_start_capture, self.stream_id)

    def stop_capture(self):
        """Close the window and return the ``Graph``; ``CaptureError`` names the first refused
        operation if anything inside the window was refused."""
        return self.server.channel.call(self.server.op_stop_capture, self.stream_id)

    def auto_graph(self) -> "auto_graph.AutoGraphScope":
        """``with client.auto_graph():`` -- on this thread, a sequence of ``launch`` calls that
        repeats (same kernels, bindings, scalars, geometry, stream) is recorded once and replayed
        as one graph; anything else flushes what was deferred first, so every guarantee of eager
        launches holds (CONTRACT.md section 6.1, ``graphs/auto_graph.py``)."""
        return auto_graph.AutoGraphScope(self.server)

    def profile(self, fn):
        """Run ``fn()``; return ``(result, durations)``, one ``KernelTiming`` per launch it issued
        on this stream, as a ``ProfileResult`` (a named tuple that prints as a per-kernel table
        of calls, mean, std, min and median). Inside a capture window on this stream the profile is refused: it raises
        ``CaptureError`` without running ``fn`` (timings are no work a graph can carry), and the
        capture is doomed like by any refused operation."""
        stream = self.stream_id
        self.refuse_in_capture("profiling")
        prof = profiling.open_profile(stream)
        try:
            result = fn()
        finally:
            profiling.close_profile(prof)
        return profiling.ProfileResult(result, list(prof.durations))

    def exclusive(self, fn):
        """Run ``fn()`` with the device to itself: other work is drained first, and launches from
        other threads wait at the gate until ``fn`` returns (autotune measures this way)."""
        with self.server.exclusive:
            self.sync()
            try:
                return fn()
            finally:
                self.sync()


def _wait_for_export(handle: Handle) -> None:
    """What a DLPack export of ``handle`` waits for: its writers, as a read does, and the failure
    they left (the export hands out the memory itself, so there is no copy to make)."""
    client = Client(handle.server)
    b = client.wait_for_writers(handle, "a DLPack export")
    client.report_unrecorded(every_thread=False)
    client.raise_failure_of(b)


# What np.asarray(handle), handle.copy_to_host() and DLPack exports run: through a client of the
# handle's own server (a handle has no client; any client of its device reads it the same way).
set_host_reader(lambda handle: Client(handle.server).read(handle), _wait_for_export)
