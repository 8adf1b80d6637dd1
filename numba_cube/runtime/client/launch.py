"""The client's launches: the gates of the issuing thread, then the submission (CONTRACT.md 1.1).

``LaunchOps`` is the half of ``Client`` (``client/client.py``) that launches; ``client/buffers.py``'s
``BufferOps`` is the half that moves bytes, and lends this one ``binding_of``.

The gates of a launch, in this order:

0. a dynamic shared memory size (``shared_bytes``) must be an int from 0 to the device's limit
   (``server.max_dynamic_shared_bytes``), else ``LaunchArgumentError``, also for a zero grid;
1. a static grid with a zero dimension returns at once (nothing compiled, claimed or queued);
2. every buffer binding, and the dynamic count's, must belong to this device, else
   ``ForeignHandleError`` right here: memory coordinates of another device are garbage there;
   scalars get the types numba.cuda gives them (``launch/arguments.py``);
3. the kernel id goes to this thread's launched log (``client/launch_log.py``, offered to tests as
   ``numba_cube.testing.launched``);
4. the launch mode is computed (``modes.launch_mode``); a skipped launch is announced to the
   dry runs open now, which wait for the server to have compiled it;
5. launch observers are notified, the last point at which the caller's context exists;
6. the launch is submitted, asynchronously (``launch``), or blocking, handing back its own
   outcome (``launch_and_wait``: the numba-style launch, which is synchronous by contract).

A server may offer a warm path (``server.fast_launch``): a launch that repeats an armed one
exactly passes the gates by construction, so while nothing watches launches and nobody holds the
device it is tried first (``launch``).

Inside ``with client.auto_graph():`` a launch meets this thread's tracer first (``graphs/auto_graph.py``):
a launch that continues a repeating sequence is deferred (the gates were passed when the sequence
was traced, with the same arguments), anything else goes through the gates as above. The tracer
this thread used last is matched here, before anything else is looked up (``auto_graph.HELD``:
the held launch, the hot path of a scope); anything it does not hold goes to ``auto_graph.launch``.
"""

from __future__ import annotations

import threading

from numba_cube.errors import LaunchArgumentError
from numba_cube.kernel.kernel import Kernel, kernel as make_kernel
from numba_cube.runtime.graphs import auto_graph
from numba_cube.runtime.client import observers, profiling
from numba_cube.runtime.graphs.auto_graph import AUTO_SCOPES, HELD
from numba_cube.runtime.launch.arguments import bind_arguments
from numba_cube.runtime.launch.geometry import CubeCount, CubeDim, dynamic_shared_bytes
from numba_cube.runtime.client.launch_log import THREAD_LOG, note_launch
from numba_cube.runtime.client.modes import LaunchMode, claim_skipped_launch, launch_mode
from numba_cube.runtime.ledger.outcomes import LaunchOutcome
from numba_cube.runtime.launch.requests import LaunchRequest
from numba_cube.runtime.streams.identity import StreamId
from numba_cube.runtime.streams.identity import thread_streams as _thread_streams
from numba_cube.runtime.client.watchers import WATCHING

__all__ = ["LaunchOps"]


class LaunchOps:
    """Launches on ``self.server`` (mixed into ``Client``, which sets ``server``, ``pinned``,
    ``device`` and ``stream_id``, and calls ``__init__`` here with its options)."""

    def __init__(self, server, options: dict):
        self._fast = server.fast_launch     # bound once: the warm path, or None
        self._options_key = tuple(sorted(options.items()))
        self._exclusive = server.exclusive  # bound once too: a server keeps its gate for life

    # -- launch ---------------------------------------------------------------------------------------
    def launch(self, kernel, count, dim, *args, shared_bytes: int = 0) -> None:
        """Launch ``kernel`` on ``count`` cubes of ``dim`` units. Returns nothing: a failure is
        recorded on the buffers the launch should have written (one that writes none is reported
        as an ``UnrecordedFailureWarning``).

        ``shared_bytes`` sizes the dynamic shared memory of each cube, which every
        ``cuda.shared.array(0, dtype)`` of the kernel views (numba's ``kernel[count, dim, stream,
        shared_bytes]``); a negative size, or one above the device's limit, is
        ``LaunchArgumentError`` here, before anything is queued."""
        stream = self.pinned
        if stream is None:
            try:
                stream = _thread_streams.current     # StreamId.current(), inlined
            except AttributeError:
                stream = StreamId.current()
        fast = self._fast
        if fast is not None and not WATCHING[0] and self._exclusive.owner is None:
            # Nothing watches single launches (no observer, profile or dry run: client/watchers.py) and
            # nobody holds the device: a repeat of an armed launch (backends/cuda/launch/fast_path.py)
            # passes the gates by construction (a count that was not zero, handles of this
            # device matched by identity, mode EXECUTE), so what is left is the launched log.
            kernel_id = fast(kernel, count, dim, args, stream, self._options_key, shared_bytes)
            if kernel_id is not None:
                try:
                    THREAD_LOG.log.append(kernel_id)        # gate 3: note_launch, inlined
                except AttributeError:
                    note_launch(kernel_id)                  # (this thread's first launch)
                return
            as_called = (kernel, count, dim, args)
        elif AUTO_SCOPES[0]:
            # An auto_graph scope is open somewhere (it counts in WATCHING): its tracer may defer
            # this launch, and what it deferred goes out before anything else (graphs/auto_graph.py).
            try:
                tracer = HELD.tracer    # this thread's last armed tracer (graphs/auto_graph.py, "Held")
            except AttributeError:
                tracer = None
            # The held launch (graphs/auto_graph.py, "Held launches"): the checks of auto_graph.launch in
            # the order it makes them, each miss going there (which makes them all again).
            # WATCHING, AUTO_SCOPES and the gate's owner are read without a lock, as the warm
            # path above reads them: a watcher or an owner that another thread installed is seen
            # by every launch ordered after that install (its lock's release), and a launch
            # that is not ordered after it may take effect before it.
            if tracer is not None and tracer.server is self.server \
                    and WATCHING[0] == AUTO_SCOPES[0] and self._exclusive.owner is None \
                    and (stream is tracer.stream or stream == tracer.stream):
                channel = tracer.channel
                kernel_id = None
                lock = channel.lock
                lock.acquire()      # (``with`` costs twice the two calls: a held launch's)
                try:
                    # Under the lock every other thread's flush of this tracer takes
                    # (graphs/auto_channel.py): armed, no capture window open on the device,
                    # and nothing deferred but this tracer's own launches (the tracer is in
                    # ``pending`` exactly while it holds any: its position is not 0).
                    position = tracer.position
                    pending = channel.pending
                    if tracer.graph is not None and not tracer.server.captures \
                            and len(pending) == (1 if position else 0) \
                            and tracer.matchers[position](kernel, count, dim, args,
                                                          shared_bytes, self._options_key):
                        if position < tracer.last:
                            if not position:
                                pending[tracer] = None
                            tracer.position = position + 1
                            tracer.held.append(args)
                            kernel_id = tracer.kernel_ids[position]
                        else:
                            kernel_id = tracer.complete()
                finally:
                    lock.release()
                if kernel_id is not None:
                    try:
                        THREAD_LOG.log.append(kernel_id)    # gate 3: note_launch, inlined
                    except AttributeError:
                        note_launch(kernel_id)
                    return
            if auto_graph.launch(self, kernel, count, dim, args, shared_bytes, self._options_key,
                                 stream):
                return
            quiet = fast is not None and WATCHING[0] == AUTO_SCOPES[0]
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
        if outcome.failure is None and outcome.pending is not None:
            # A GPU launch that may raise (or that read what one wrote): its outcome is known
            # now that it completed (ledger/pending.py).
            outcome.failure = self.server.outcome_of(outcome.pending)
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
        bound = bind_arguments(server, self.binding_of, kernel, args)            # gate 2
        count_binding = self.binding_of(count.handle) if count.is_dynamic else None
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

    # -- what automatic graphs (graphs/auto_graph.py) drive a launch with ----------------------------------
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
