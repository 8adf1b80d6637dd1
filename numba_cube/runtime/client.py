"""The client: the issuing-thread side of every operation (CONTRACT.md section 1.1).

A ``Client`` is a thin, cheap object over a device's server: the server is per device, a client
adds compile options (``boundscheck``) and, optionally, a pinned stream. Everything that lives
only on the issuing thread (the current stream, the launch mode, observers' context) is decided
here and handed to the server as a value.

The gates of a launch, in this order:

0. a dynamic shared memory size (``shared_bytes``) must be an int from 0 to the device's limit
   (``server.max_dynamic_shared_bytes``), else ``LaunchArgumentError``, also for a zero grid;
1. a static grid with a zero dimension returns at once (nothing compiled, claimed or queued);
2. every buffer binding, and the dynamic count's, must belong to this device, else
   ``ForeignHandleError`` right here: memory coordinates of another device are garbage there;
   scalars get the types numba.cuda gives them (``arguments.py``);
3. the kernel id goes to this thread's launched log (``launch_log.py``, offered to tests as
   ``numba_cube.testing.launched``);
4. the launch mode is computed (``modes.launch_mode``); a skipped launch is announced to the
   dry runs open now, which wait for the server to have compiled it;
5. launch observers are notified, the last point at which the caller's context exists;
6. the launch is submitted, asynchronously (``launch``), or blocking, handing back its own
   outcome (``launch_and_wait``: the numba-style launch, which is synchronous by contract).

Inside ``with client.auto_graph():`` a launch meets this thread's tracer first (``auto_graph.py``):
a launch that continues a repeating sequence is deferred (the gates were passed when the sequence
was traced, with the same arguments), anything else goes through the gates as above.

A failure that no buffer can carry (the launch writes nothing) is reported as an
``UnrecordedFailureWarning`` by this thread's next ``read``/``read_many``/``sync_buffers`` and by
any thread's next ``sync()`` (``outcomes.py`` says why there).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..errors import ForeignHandleError, LaunchArgumentError
from ..kernel.kernel import Kernel, kernel as make_kernel
from . import auto_graph, observers, profiling
from .arguments import bind_arguments
from .geometry import CubeCount, CubeDim, dynamic_shared_bytes
from .array_like import set_host_reader
from .handle import Allocation, Binding, Handle, buffer_dtype, buffer_nbytes, buffer_shape
from .launch_log import note_launch
from .layout import f_strides
from .modes import LaunchMode, claim_skipped_launch, launch_mode
from .outcomes import LaunchOutcome
from .requests import LaunchRequest
from .streams import StreamId, stream_id_or_none
from .streams import thread_streams as _thread_streams
from .watchers import WATCHING

__all__ = ["Client", "entered_client"]

# warnings.warn's stacklevel, counted from UnrecordedFailures.report, that points at the user's
# call of the client method that reports (report <- _report_unrecorded <- method <- user).
_USER_FRAME = 3

# The clients of this thread's open `with client:` blocks, innermost last. Here, not in the
# registry: entering a client needs nothing else, and the registry (which makes clients) asks
# `entered_client()` first when it looks for the current one.
_entered = threading.local()


def entered_client() -> "Client | None":
    """The client of this thread's innermost ``with client:`` block, or None outside any."""
    stack = getattr(_entered, "stack", None)
    return stack[-1] if stack else None


class Client:
    """Launches, buffers and synchronization on one device."""

    def __init__(self, server, *, options: dict | None = None, pinned: StreamId | None = None):
        self.server = server
        self._fast = server.fast_launch     # bound once: the warm path, or None
        self.options = dict(options or {})
        self._options_key = tuple(sorted(self.options.items()))
        self.pinned = pinned

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

    # -- buffers ---------------------------------------------------------------------------------------
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
        b = self._own(handle)
        if not b.compact and not getattr(self.server, "strided_host_writes", True):
            raise LaunchArgumentError(
                f"{self.device} cannot write a non-contiguous view (shape {handle.shape}, strides "
                f"{handle.strides}) from the host: write the whole buffer, or a contiguous view")
        self._refuse_in_capture("a host write into a handle")
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
        b = self._wait_for_writers(handle, "a read")
        # (here, not in the helper: the warning's stacklevel counts from this method)
        self._report_unrecorded(every_thread=False)
        self._raise_failure_of(b)
        return self.server.read_binding(b)

    def _wait_for_writers(self, handle: Handle, what: str) -> Binding:
        """``handle``'s binding, once the work that writes it is done (a read, a DLPack export)."""
        b = self._own(handle)
        self._refuse_in_capture(what)
        for task in self.server.channel.call(self.server.op_wait_read, (b,)):
            task.wait()
        return b

    def _raise_failure_of(self, b: Binding) -> None:
        failure = self.server.failure_of(b)
        if failure is not None:
            raise failure.to_exception()

    def read_many(self, handles) -> list[np.ndarray]:
        bindings = tuple(self._own(h) for h in handles)
        self._refuse_in_capture("a read")
        for task in self.server.channel.call(self.server.op_wait_read, bindings):
            task.wait()
        self._report_unrecorded(every_thread=False)
        out = []
        for b in bindings:
            failure = self.server.failure_of(b)
            if failure is not None:
                raise failure.to_exception()
            out.append(self.server.read_binding(b))
        return out

    def check(self, *handles: Handle) -> None:
        """Raise ``LaunchFailure`` for a failure already known on any handle; never waits."""
        bindings = tuple(self._own(h) for h in handles)
        for failure in self.server.channel.call(self.server.op_known_failures, bindings):
            if failure is not None:
                raise failure.to_exception()

    def sync_buffers(self, *handles: Handle) -> list:
        """Wait for all work on ``handles``; then, per handle, ``None`` or its ``LaunchFailure``."""
        bindings = tuple(self._own(h) for h in handles)
        self._refuse_in_capture("sync_buffers")
        for task in self.server.channel.call(self.server.op_wait_all_users, bindings):
            task.wait()
        self._report_unrecorded(every_thread=False)
        answers = []
        for b in bindings:
            failure = self.server.failure_of(b)
            answers.append(None if failure is None else failure.to_exception())
        return answers

    def sync(self) -> None:
        """Wait for all work on the device. Raises ``DeviceFault`` only (launch failures live on
        buffers, and no buffer could carry a broken device); a failure no buffer carries, of any
        thread's launch, is reported as an ``UnrecordedFailureWarning`` here."""
        self._refuse_in_capture("sync")
        fault = self.server.device_fault()
        if fault is None:
            for task in self.server.channel.call(self.server.op_sync):
                task.wait()
            fault = self.server.device_fault()
        if fault is not None:
            raise fault
        self._report_unrecorded(every_thread=True)

    def _report_unrecorded(self, every_thread: bool) -> None:
        unrecorded = self.server.unrecorded
        if unrecorded:          # the common case: one truth test
            unrecorded.report(None if every_thread else threading.get_ident(), _USER_FRAME)

    # -- launch ---------------------------------------------------------------------------------------
    def launch(self, kernel, count, dim, *args, shared_bytes: int = 0) -> None:
        """Launch ``kernel`` on ``count`` cubes of ``dim`` units. Returns nothing: a failure is
        recorded on the buffers the launch should have written (one that writes none is reported
        as an ``UnrecordedFailureWarning``).

        ``shared_bytes`` sizes the dynamic shared memory of each cube, which every
        ``cuda.shared.array(0, dtype)`` of the kernel views (numba's ``kernel[count, dim, stream,
        shared_bytes]``); a negative size, or one above the device's limit, is
        ``LaunchArgumentError`` here, before anything is queued."""
        server = self.server
        fast = self._fast
        if fast is not None and not WATCHING[0] and server.exclusive.owner is None:
            # Nothing watches single launches (no observer, profile or dry run: watchers.py) and
            # nobody holds the device: a repeat of an armed launch (backends/cuda/fast_path.py)
            # passes the gates by construction (a count that was not zero, handles of this
            # device matched by identity, mode EXECUTE), so what is left is the launched log.
            stream = self.pinned
            if stream is None:
                try:
                    stream = _thread_streams.current     # StreamId.current(), inlined
                except AttributeError:
                    stream = StreamId.current()
            kernel_id = fast(kernel, count, dim, args, stream, self._options_key, shared_bytes)
            if kernel_id is not None:
                note_launch(kernel_id)                      # gate 3
                return
            as_called = (kernel, count, dim, args)
        elif auto_graph.AUTO_SCOPES[0]:
            # An auto_graph scope is open somewhere (it counts in WATCHING): its tracer may defer
            # this launch, and what it deferred goes out before anything else (auto_graph.py).
            if auto_graph.launch(self, kernel, count, dim, args, shared_bytes, self._options_key,
                                 self.pinned):
                return
            quiet = fast is not None and WATCHING[0] == auto_graph.AUTO_SCOPES[0]
            as_called = (kernel, count, dim, args) if quiet else None
        else:
            as_called = None
        req = self._request(kernel, count, dim, args, as_called, None, shared_bytes)
        if req is None:
            return
        prof = profiling.active_profile(req.stream) if profiling.ACTIVE[0] else None
        if prof is None:
            self._submit(req, blocking=False)               # gate 6
            return
        # Profiled: submit blocking and carry the timing back. If the server records the launch
        # into a capture instead (a capture opened inside the profile), no task comes back: the
        # launch was recorded, not lost.
        profiling.note_duration(prof, req.kernel.id, self._submit(req, blocking=True))

    def launch_and_wait(self, kernel, count, dim, *args, shared_bytes: int = 0,
                        extensions_done: bool = False) -> None:
        """Launch, wait for this launch (not for other work), and raise its ``LaunchFailure`` if it
        failed (its own failure, or the one it inherited from an input), whether or not it writes
        a buffer: what a numba-style ``kernel[count, dim](...)`` does. Inside a dry run it is
        compiled and skipped (the dry run lists a failure); on a stream that is capturing, it is
        recorded. ``shared_bytes`` as for ``launch``. ``extensions_done``: the caller ran the
        kernel's numba-cuda extensions on ``args`` (the numba-style launch does)."""
        outcome = LaunchOutcome()
        req = self._request(kernel, count, dim, args, None, outcome, shared_bytes,
                            extensions_done)
        if req is None:
            return
        prof = profiling.active_profile(req.stream) if profiling.ACTIVE[0] else None
        task = self._submit(req, blocking=True)
        if task is None:
            return          # skipped (a dry run) or recorded (a capture window)
        task.wait()
        if prof is not None:
            profiling.note_duration(prof, req.kernel.id, task)
        if outcome.failure is not None:
            raise outcome.failure.to_exception()

    def _request(self, kernel, count, dim, args, as_called, outcome, shared_bytes=0,
                 extensions_done=False) -> LaunchRequest | None:
        """Gates 0-5 (module docstring): the request to submit, or None for a zero grid."""
        if shared_bytes or type(shared_bytes) is not int:   # gate 0 (the int 0 needs no check)
            shared_bytes = dynamic_shared_bytes(
                shared_bytes, self.server.max_dynamic_shared_bytes,
                getattr(kernel, "name", None) or getattr(kernel, "__name__", "?"), self.device)
        count = CubeCount.coerce(count)
        if count.is_zero:                                   # gate 1
            return None
        dim = CubeDim.coerce(dim)
        if not isinstance(kernel, Kernel):
            try:
                kernel = make_kernel(kernel)
            except TypeError as exc:
                raise LaunchArgumentError(f"client.launch needs a kernel: {exc}") from None
        if kernel.extensions and not extensions_done:
            # numba-cuda runs them on the host values of a numba-style launch; run on device
            # buffers they would see other objects (and a launch without them computes otherwise).
            raise LaunchArgumentError(
                f"kernel {kernel.name} has numba-cuda extensions (cuda.jit(extensions=...)), which "
                "convert a numba-style launch's host arguments: launch it as "
                "kernel[count, dim](...), which runs them as numba.cuda does")
        server = self.server
        bound = bind_arguments(server, self._own, kernel, args)            # gate 2
        count_binding = self._own(count.handle) if count.is_dynamic else None
        note_launch(kernel.id)                              # gate 3
        mode = launch_mode()                                # gate 4
        stream = self.stream_id
        server.exclusive.wait_if_held()
        if observers.active():                              # gate 5
            observers.notify_launch(self, kernel, count, dim, args, stream, mode)
            as_called = None
        # Last, so that nothing can raise between the claim and the submission (_submit).
        skipped = claim_skipped_launch(server, kernel.id) if mode is LaunchMode.SKIP else None
        return LaunchRequest(kernel, count, dim, bound, count_binding, stream, mode, self._options_key,
                             as_called, threading.get_ident(), outcome, skipped, shared_bytes)

    # -- what automatic graphs (auto_graph.py) drive a launch with ----------------------------------
    def launch_request(self, kernel, count, dim, args, shared_bytes=0) -> LaunchRequest | None:
        """Gates 0-5 of an asynchronous launch, armable by the warm path: its request (None for a
        zero grid), to hand to ``submit_launch``."""
        return self._request(kernel, count, dim, args, (kernel, count, dim, args), None,
                             shared_bytes)

    def submit_launch(self, req: LaunchRequest) -> None:
        """Gate 6 of an asynchronous launch made by ``launch_request``."""
        self._submit(req, blocking=False)

    def fire_warm(self, kernel, count, dim, args, shared_bytes, stream=None,
                  note: bool = False) -> bool:
        """The warm path alone (``server.fast_launch``): True when it ran the launch; ``note``
        appends it to the launched log (gate 3) then. ``stream`` defaults to the client's."""
        fast = self._fast
        if fast is None or self.server.exclusive.owner is not None:
            return False
        kernel_id = fast(kernel, count, dim, args, self.stream_id if stream is None else stream,
                         self._options_key, shared_bytes)
        if kernel_id is None:
            return False
        if note:
            note_launch(kernel_id)
        return True

    def _submit(self, req: LaunchRequest, blocking: bool):
        server = self.server
        try:
            if not blocking:
                server.channel.submit(server.op_launch, req)
                return None
            return server.channel.call(server.op_launch, req, True)
        except BaseException:
            # The launch may never have reached the server (its thread is gone): the dry runs
            # that skipped it must not wait for it. (Idempotent if the server got to it.)
            if req.skipped is not None:
                req.skipped.handled(None)
            raise

    def _own(self, handle: Any) -> Binding:
        if type(handle) is Handle and handle.server is self.server:
            return handle.binding()         # the common case
        if not isinstance(handle, Handle):
            raise LaunchArgumentError(f"expected a Handle, got {type(handle).__name__}")
        if handle.server is not self.server:
            raise ForeignHandleError(
                f"handle of device {handle.device} passed to a client of device {self.device}; "
                f"copy it first (client.create(other_client.read(handle)))")
        return handle.binding()

    # -- capture, profiling, exclusive use ------------------------------------------------------------
    def _refuse_in_capture(self, what: str) -> None:
        # A cheap look first (a dict lookup): the hot paths pay nothing when no capture is open.
        if self.server.captures:
            err = self.server.channel.call(self.server.op_refuse, self.stream_id, what)
            if err is not None:
                raise err

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
        launches holds (CONTRACT.md section 6.1, ``auto_graph.py``)."""
        return auto_graph.AutoGraphScope(self.server)

    def profile(self, fn):
        """Run ``fn()``; return ``(result, durations)``, one ``KernelTiming`` per launch it issued
        on this stream, as a ``ProfileResult`` (a named tuple that prints as a per-kernel table
        of calls, mean, std, min and median). Inside a capture window on this stream the profile is refused: it raises
        ``CaptureError`` without running ``fn`` (timings are no work a graph can carry), and the
        capture is doomed like by any refused operation."""
        stream = self.stream_id
        self._refuse_in_capture("profiling")
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
    b = client._wait_for_writers(handle, "a DLPack export")
    client._report_unrecorded(every_thread=False)
    client._raise_failure_of(b)


# What np.asarray(handle), handle.copy_to_host() and DLPack exports run: through a client of the
# handle's own server (a handle has no client; any client of its device reads it the same way).
set_host_reader(lambda handle: Client(handle.server).read(handle), _wait_for_export)
