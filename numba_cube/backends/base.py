"""What a backend supplies: the mechanism the runtime's policy brackets (CONTRACT.md section 8).

The runtime (``numba_cube/runtime/``) decides *what* happens and in which order: the gates, the
launch mode, the read and write sets, the ledger, the capture window rules and the stream
ordering, in one policy server (``runtime/server.py``, ``DeviceServer``) for every backend. A
backend only says *how*, through one of the two interfaces declared here; it never subclasses the
server and never re-implements the ledger, the gates or the mode decision:

- ``HostBackend``: for backends whose kernels run on host threads (the built-in CPU backend, the
  CUDA-simulator plugin): allocate bytes, view them as arrays, compile a kernel for an argument
  signature, run a compiled kernel. The runtime adapts it (``runtime/launch/host_mechanism.py``) with
  per-stream worker threads, a two-level compile cache and software graphs.
- ``DeviceMechanism``: the whole mechanism of a device, for backends whose work runs elsewhere
  (the CUDA backend, ``backends/cuda/mechanism.py``): bind a launch (compile, read and write sets),
  dispatch it, memory and copies, the executor of streams and events, graphs, faults. Its
  abstract methods are exactly the hooks ``DeviceServer`` calls (tests/backends/test_base.py).
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

from numba_cube.runtime.memory.pool import ALIGNMENT

__all__ = ["HostBackend", "DeviceMechanism", "BACKEND_API_VERSION"]

#: Version of this interface. A plugin declares the version it was built for; a mismatch is
#: refused with a clear message (see plugins.py).
BACKEND_API_VERSION = 1


class HostBackend(abc.ABC):
    """Mechanism of a backend whose kernels run on the host."""

    #: short backend name, e.g. "cpu"
    name: str = "?"

    #: The client options (``cube.client(device, **options)``) ``compile`` understands; a client
    #: with any other option is refused (``OptionError``) rather than compiling as if it were
    #: not there. ``boundscheck`` is the runtime's portable one; a plugin adds its own here.
    compile_options: frozenset = frozenset({"boundscheck"})

    #: The most dynamic shared memory (bytes per cube, ``cuda.shared.array(0, dtype)``) a launch
    #: may ask for. 0 (the default): none; a launch asking for some is refused on the issuing
    #: thread (``LaunchArgumentError``). A backend that sets it gets the size of every launch that
    #: asks for some as a fourth argument of its artifact: ``artifact(count, dim, args,
    #: shared_bytes)`` (a launch without any calls ``artifact(count, dim, args)``, as before).
    max_dynamic_shared_bytes: int = 0

    def allocate(self, nbytes: int) -> Any:
        """Fresh memory of ``nbytes`` bytes, 64-byte aligned. The default is host memory: NumPy
        bytes, over-allocated and sliced so every buffer starts on the pool alignment (the
        compile-cache key's alignment, CONTRACT.md 1.2, is only true if the base is aligned)."""
        raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
        shift = (-raw.ctypes.data) % ALIGNMENT
        return raw[shift:shift + nbytes]

    def release(self, memory: Any) -> None:
        """Give memory back (the default lets the garbage collector do it)."""

    def array(self, memory: Any, offset: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """A NumPy view of ``memory`` (no copy): how kernels and host copies see the bytes."""
        nbytes = dtype.itemsize
        for s in shape:
            nbytes *= s
        return memory[offset:offset + nbytes].view(dtype).reshape(shape)

    def strided_array(self, memory: Any, offset: int, shape: tuple, dtype: np.dtype,
                      strides: tuple) -> np.ndarray:
        """A NumPy view of ``memory`` with byte ``strides`` (not C-contiguous: an F-ordered,
        transposed, strided or broadcast view), element ``[0, ..., 0]`` at byte ``offset``. The
        default works for the default memory; NumPy itself refuses a view that would reach
        outside it."""
        return np.ndarray(shape, dtype, memory, offset, strides)

    def foreign_memory(self, obj: Any) -> Any:
        """How to bind ``obj``, a launch argument that is no ``Handle`` but another library's
        array, without a copy: a ``numba_cube.runtime.memory.borrowed.ForeignMemory`` describing the
        allocation that holds it and the view (``describe_host_array`` makes one for NumPy
        memory), or ``None``: the backend does not adopt ``obj`` and the launch refuses it as
        unsupported. The runtime does the rest (``runtime/memory/borrowed.py``: one memory id per
        allocation, bounds, lifetime, frees). Called on the issuing thread, so it only reads
        ``obj``. The default adopts nothing."""
        return None

    @abc.abstractmethod
    def arg_type(self, value: Any) -> Any:
        """The hashable compile-time type of one argument (an array view or a scalar)."""

    def cache_extras(self, count, dim) -> tuple:
        """What the backend bakes into a compiled artifact beyond the argument types."""
        return ()

    @abc.abstractmethod
    def compile(self, kernel, arg_types: tuple, extras: tuple, options: dict) -> Any:
        """Compile ``kernel`` for ``arg_types``; return a callable
        ``artifact(count_xyz, dim_xyz, args)`` (and ``shared_bytes`` as a fourth argument, see
        ``max_dynamic_shared_bytes``). Raise ``CompileError`` when it cannot."""

    def forget(self, kernel) -> None:
        """Drop whatever ``compile`` kept of ``kernel`` (generated modules, compiler state): a
        compile of it was interrupted (Ctrl-C), and what the interrupted compile left half built
        must not serve the next one. The default keeps nothing, so forgets nothing."""


class DeviceMechanism(abc.ABC):
    """The mechanism of one device, as the policy server (``runtime/server.py``) drives it.

    The server builds its own state first (ledger, hazard tracker, memory table, capture windows,
    counters) and then calls ``attach(server)`` once; everything else is called on the device's
    channel (one operation at a time), except what the executor's tasks run later. A mechanism
    reads the server's public attributes (``ledger``, ``hazards``, ``streams``, ``channel``,
    ``memory``, ``captures``, ``counters``, ``task_ids``) and public methods, never its private
    ones. The objects a launch goes through:

    - a *bound launch* (``bind_launch``): one launch of one kernel on these bindings, worked out
      once: the compile failure or what to run, ``reads``/``writes`` (ledger regions) and
      ``read_mems``/``write_mems`` (memory ids), and ``error`` (the compile failure or None). The
      server caches it under ``bound_launch_key`` and drops it when a buffer it binds is freed;
    - a *dispatch* (``runtime/launch/dispatch.py``'s ``Recorded``): a bound launch resolved for one launch
      (its scalars, geometry, stream), what a task runs and a capture records;
    - a *task* (the executor's): what the hazard tracker orders and the executor runs.
    """

    #: short backend name, e.g. "cuda"
    name: str = "?"

    #: The most dynamic shared memory (bytes per cube) a launch may ask for (see ``HostBackend``).
    max_dynamic_shared_bytes: int = 0

    #: Whether a host write may target a view whose extent holds bytes that are not its
    #: elements (a step, a column); the client refuses one on the issuing thread if not.
    strided_host_writes: bool = True

    #: Interop seams, None where the device has none (set by ``attach``): ``adopt_foreign(obj)
    #: -> Handle | None`` binds another library's array without a copy (``runtime/launch/arguments.py``
    #: asks it for an argument that is not a handle), ``cuda_array_interface(handle) -> dict``
    #: exports a handle (``Handle.__cuda_array_interface__``); ``dlpack_exporter`` (``device()``,
    #: ``check_request(...)``, ``export(handle, max_version)``: ``backends/cuda/memory/dlpack_export.py``)
    #: is ``Handle.__dlpack__`` of a device whose memory is not host memory.
    adopt_foreign = None
    cuda_array_interface = None
    dlpack_exporter = None

    def synchronize_foreign(self, synchronize) -> None:
        """Run another library's stream synchronization (``synchronize``, a callable: a numba,
        CuPy or cuda.core stream's ``synchronize``/``sync``) on the calling thread, which may be
        one the device has never seen. A device with a per-thread context makes it current
        first (CUDA: a cuda.core default stream synchronizes the *current* context's legacy
        stream, and a fresh thread has none)."""
        synchronize()

    # -- construction and options ------------------------------------------------------------------
    @abc.abstractmethod
    def attach(self, server) -> Any:
        """Bind the server's public state; return the executor of the device's streams: an object
        with ``enqueue(task, deps)``, ``flush(stream)``, ``flush_tasks(tasks)``, ``flush_all() ->
        tails`` and ``stream_ids()`` (``runtime/streams/host_streams.py`` is the reference). Called once,
        from the server's constructor."""

    @abc.abstractmethod
    def known_options(self) -> frozenset:
        """The client options (``cube.client(device, **options)``) the compile stage understands;
        a client with any other is refused (``OptionError``)."""

    @abc.abstractmethod
    def warm_launcher(self):
        """The warm launch path, ``fast(kernel, count, dim, args, stream, options, shared_bytes)
        -> kernel id or None`` (None: nothing was done, take the general path), which the client
        tries first when nothing observes launches; or None when the device has none. Bound once:
        the client calls it directly, with no layer of the server's in between."""

    @abc.abstractmethod
    def fold_counts(self, counters) -> None:
        """Add what the mechanism counted apart (warm launches, counted without the server) to
        the server's ``counters`` (a ``collections.Counter``), as ``server.stats`` is read."""

    @abc.abstractmethod
    def cache_sizes(self) -> dict:
        """Sizes of the mechanism's own per-buffer caches (name -> entries), for
        ``server.cache_sizes()``."""

    # -- faults --------------------------------------------------------------------------------------
    @abc.abstractmethod
    def is_device_fault(self, exc: BaseException) -> bool:
        """Does ``exc`` (raised by a task or a driver call) break the whole device? If not, it
        was already recorded on the buffers it concerns."""

    @abc.abstractmethod
    def probe_fault(self) -> None:
        """Before ``sync()`` reports the device healthy: ask the hardware (waiting for its work)
        and report what it says through ``server.record_fault``."""

    # -- memory and copies ---------------------------------------------------------------------------
    @abc.abstractmethod
    def allocate(self, nbytes: int) -> Any:
        """Fresh device memory of ``nbytes`` bytes, aligned to the pool alignment (the pool,
        ``runtime/memory/pool.py``, is the only caller)."""

    @abc.abstractmethod
    def release(self, memory: Any) -> None:
        """Give memory from ``allocate`` back."""

    @abc.abstractmethod
    def before_free(self, memory_id: int) -> bool:
        """A freed buffer is about to be forgotten: drop what the mechanism holds for it (and let
        the tasks that still use it finish as the executor needs). Return False when the pool
        must not take the memory (borrowed from another library)."""

    @abc.abstractmethod
    def view(self, memory: Any, binding) -> Any:
        """The array a kernel or a host copy sees for ``binding`` in ``memory``; raise
        ``TypeError`` when the device has no host view."""

    @abc.abstractmethod
    def initial_write(self, binding, data) -> None:
        """Fill fresh memory (``create``, on the issuing thread), complete when this returns."""

    @abc.abstractmethod
    def read_binding(self, binding):
        """A host copy of ``binding``'s bytes (its writers are done), in the binding's layout."""

    @abc.abstractmethod
    def write_task(self, binding, staged, stream) -> Any:
        """The task of a host write of ``staged`` into ``binding`` on ``stream``: it copies and
        records the outcome on the binding's region in the ledger (a full write repairs it)."""

    @abc.abstractmethod
    def before_sync(self) -> None:
        """At ``sync()``, before waiting: give back what finished work no longer needs."""

    # -- launches ------------------------------------------------------------------------------------
    @abc.abstractmethod
    def prepare(self) -> None:
        """Before an operation touches the device (a CUDA context is made current)."""

    @abc.abstractmethod
    def bound_launch_key(self, request) -> Any:
        """The key under which the server caches ``bind_launch(request)``, or None: do not cache
        (the key must not hold buffers alive: bindings, not handles)."""

    @abc.abstractmethod
    def bind_launch(self, request) -> Any:
        """The bound launch of ``request`` (see the class docstring): compiled or failed."""

    @abc.abstractmethod
    def refusal(self, request, bound) -> BaseException | None:
        """Why this launch cannot run although it compiled (``requests.refusal_of``: a geometry
        beyond CUDA's limits; a mechanism adds its own), or None."""

    @abc.abstractmethod
    def dispatch(self, request, bound, capturing: bool):
        """The dispatch (``Recorded``) of this launch, reporting to ``server.reporter(...)``."""

    @abc.abstractmethod
    def not_capturable(self, request, bound, dispatch) -> str | None:
        """What a capture window must refuse about this dispatch, or None."""

    @abc.abstractmethod
    def dispatch_task(self, request, bound, dispatch) -> Any:
        """The task that runs ``dispatch`` inside the ledger's execute scope
        (``dispatch.run_recorded``)."""

    @abc.abstractmethod
    def refused_task(self, request, run) -> Any:
        """The task of a launch that cannot run: ``run`` fails its write set in stream order."""

    @abc.abstractmethod
    def enqueue(self, task, deps: list, bound, blocking: bool) -> None:
        """Hand a registered task to the executor after ``deps`` (with ``blocking``: the caller
        will wait for it and read its time)."""

    @abc.abstractmethod
    def launched(self, request, bound) -> None:
        """After a dispatch was queued (a warm path arms itself here)."""

    @abc.abstractmethod
    def graph(self, stream, recorded: list, memory_ids: frozenset):
        """The graph (``runtime/graphs/capture.py``'s ``Graph`` or a subclass) a sealed recording of
        dispatches becomes."""
