"""The client's buffer operations: allocate, write, read, check and synchronize (CONTRACT.md 4.3).

``BufferOps`` is the half of ``Client`` (``client/client.py``) that moves bytes and answers for
failures; ``client/launch.py``'s ``LaunchOps`` is the half that launches. Both run on the issuing
thread and hand the server everything as values. What the launch half needs from here is public:
``binding_of`` (a handle's binding, refused when it is another device's) and
``refuse_in_capture`` (the operations a capture window cannot record).

A failure that no buffer can carry (the launch wrote nothing) is reported as an
``UnrecordedFailureWarning`` by this thread's next ``read``/``read_many``/``sync_buffers`` and by
any thread's next ``sync()`` (``ledger/outcomes.py`` says why there).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from numba_cube.errors import ForeignHandleError, LaunchArgumentError
from numba_cube.runtime.memory.handle import (
    Allocation, Binding, Handle, buffer_dtype, buffer_nbytes, buffer_shape,
)
from numba_cube.runtime.memory.layout import f_strides

__all__ = ["BufferOps"]

# warnings.warn's stacklevel, counted from UnrecordedFailures.report, that points at the user's
# call of the client method that reports (report <- report_unrecorded <- method <- user).
_USER_FRAME = 3


class BufferOps:
    """Buffers and synchronization on ``self.server`` (mixed into ``Client``, which sets
    ``server`` and ``stream_id``)."""

    def empty(self, shape, dtype=np.float64, order: str = "C") -> Handle:
        """A new buffer of ``shape`` and ``dtype``, contents undefined; ``order="F"`` lays it out
        column-major (numba.cuda's ``device_array(..., order="F")``). ``ShapeError`` for a negative
        or non-integer dimension or a byte size no buffer can address, ``DTypeError`` for a dtype
        of Python objects; nothing is allocated then. Inside a capture window, ``CaptureError``
        when the pool has no free block that fits."""
        if order not in ("C", "F"):
            raise ValueError(f"order is 'C' or 'F', got {order!r}")
        shape = buffer_shape(shape)
        dtype = buffer_dtype(dtype)
        nbytes = buffer_nbytes(shape, dtype)
        memory_id = self.server.channel.call(self.server.op_alloc, nbytes, self.stream_id)
        strides = f_strides(shape, dtype.itemsize) if order == "F" else None
        return Handle(Allocation(self.server, memory_id, nbytes), 0, shape, dtype, strides)

    def create(self, data) -> Handle:
        """A new buffer holding a copy of ``data`` (anything ``numpy.asarray`` takes, but not an
        array of Python objects: ``DTypeError``).

        An F-contiguous array (``np.asfortranarray``, a transpose ``a.T``) stays F-ordered: its
        bytes are copied as they are and the handle has its strides, so a kernel is typed
        ``Array(..., "F")`` for it as numba.cuda's ``to_device`` would type it. Any other layout is
        made C-contiguous (a copy is a copy: ``to_device`` itself refuses those)."""
        arr = np.asarray(data)
        buffer_dtype(arr.dtype)
        if arr.flags.c_contiguous:
            handle = self.empty(arr.shape, arr.dtype)
        elif arr.flags.f_contiguous:
            handle = self.empty(arr.shape, arr.dtype, order="F")
        else:
            arr = np.ascontiguousarray(arr)  # (ascontiguousarray alone would make 0-d arrays 1-d)
            handle = self.empty(arr.shape, arr.dtype)
        self.server.initial_write(handle.binding(), arr)
        return handle

    def write(self, handle: Handle, data) -> None:
        """Copy ``data`` into ``handle`` in stream order (after earlier work on it, before later).

        The data is staged now, so the caller may reuse its array at once. A write of the whole
        handle repairs a failed buffer.
        """
        b = self.binding_of(handle)
        if not b.compact and not getattr(self.server, "strided_host_writes", True):
            raise LaunchArgumentError(
                f"{self.device} cannot write a non-contiguous view (shape {handle.shape}, strides "
                f"{handle.strides}) from the host: write the whole buffer, or a contiguous view")
        self.refuse_in_capture("a host write into a handle")
        staged = np.array(data, dtype=handle.dtype, copy=True, order="C")
        if staged.size != handle.size:
            raise ValueError(f"write of {staged.size} elements into a handle of {handle.size}")
        # (reshaped in C order: the elements are the handle's in index order, whatever its
        # layout; the server lays them out as its strides say)
        staged = staged.reshape(handle.shape)
        self.server.channel.submit(self.server.op_write, b, staged, self.stream_id)

    def read(self, handle: Handle) -> np.ndarray:
        """Wait for the work that writes ``handle``, then return a copy of its contents.

        Raises ``LaunchFailure`` (with the root cause) if the buffer was not written.
        """
        b = self.wait_for_writers(handle, "a read")
        # (here, not in the helper: the warning's stacklevel counts from this method)
        self.report_unrecorded(every_thread=False)
        self.raise_failure_of(b)
        return self.server.read_binding(b)

    def wait_for_writers(self, handle: Handle, what: str) -> Binding:
        """``handle``'s binding, once the work that writes it is done (a read, a DLPack export;
        ``what`` names it if a capture window refuses it)."""
        b = self.binding_of(handle)
        self.refuse_in_capture(what)
        for task in self.server.channel.call(self.server.op_wait_read, (b,)):
            task.wait()
        return b

    def raise_failure_of(self, b: Binding) -> None:
        """Raise the ``LaunchFailure`` the ledger holds for binding ``b``, if any."""
        failure = self.server.failure_of(b)
        if failure is not None:
            raise failure.to_exception()

    def read_many(self, handles) -> list[np.ndarray]:
        bindings = tuple(self.binding_of(h) for h in handles)
        self.refuse_in_capture("a read")
        for task in self.server.channel.call(self.server.op_wait_read, bindings):
            task.wait()
        self.report_unrecorded(every_thread=False)
        out = []
        for b in bindings:
            failure = self.server.failure_of(b)
            if failure is not None:
                raise failure.to_exception()
            out.append(self.server.read_binding(b))
        return out

    def check(self, *handles: Handle) -> None:
        """Raise ``LaunchFailure`` for a failure already known on any handle; never waits."""
        bindings = tuple(self.binding_of(h) for h in handles)
        for failure in self.server.channel.call(self.server.op_known_failures, bindings):
            if failure is not None:
                raise failure.to_exception()

    def sync_buffers(self, *handles: Handle) -> list:
        """Wait for all work on ``handles``; then, per handle, ``None`` or its ``LaunchFailure``."""
        bindings = tuple(self.binding_of(h) for h in handles)
        self.refuse_in_capture("sync_buffers")
        for task in self.server.channel.call(self.server.op_wait_all_users, bindings):
            task.wait()
        self.report_unrecorded(every_thread=False)
        answers = []
        for b in bindings:
            failure = self.server.failure_of(b)
            answers.append(None if failure is None else failure.to_exception())
        return answers

    def sync(self) -> None:
        """Wait for all work on the device. Raises ``DeviceFault`` only (launch failures live on
        buffers, and no buffer could carry a broken device); a failure no buffer carries, of any
        thread's launch, is reported as an ``UnrecordedFailureWarning`` here."""
        self.refuse_in_capture("sync")
        fault = self.server.device_fault()
        if fault is None:
            for task in self.server.channel.call(self.server.op_sync):
                task.wait()
            fault = self.server.device_fault()
        if fault is not None:
            raise fault
        self.report_unrecorded(every_thread=True)

    def report_unrecorded(self, every_thread: bool) -> None:
        """Warn of the failures no buffer carries: this thread's launches', or every thread's.
        Call it from the public method itself (the warning points one frame above it)."""
        unrecorded = self.server.unrecorded
        if unrecorded:          # the common case: one truth test
            unrecorded.report(None if every_thread else threading.get_ident(), _USER_FRAME)

    # -- what every operation on a handle goes through --------------------------------------------
    def binding_of(self, handle: Any) -> Binding:
        """``handle``'s binding; ``LaunchArgumentError`` for anything but a handle,
        ``ForeignHandleError`` for a handle of another device (its memory coordinates would be
        garbage here)."""
        if type(handle) is Handle and handle.server is self.server:
            return handle.binding()         # the common case
        if not isinstance(handle, Handle):
            raise LaunchArgumentError(f"expected a Handle, got {type(handle).__name__}")
        if handle.server is not self.server:
            raise ForeignHandleError(
                f"handle of device {handle.device} passed to a client of device {self.device}; "
                f"copy it first (client.create(other_client.read(handle)))")
        return handle.binding()

    def refuse_in_capture(self, what: str) -> None:
        """``CaptureError`` (and a doomed recording) if a capture window is open on this client's
        stream: ``what`` is an operation it cannot record (CONTRACT.md section 6)."""
        # A cheap look first (a dict lookup): the hot paths pay nothing when no capture is open.
        if self.server.captures:
            err = self.server.channel.call(self.server.op_refuse, self.stream_id, what)
            if err is not None:
                raise err
