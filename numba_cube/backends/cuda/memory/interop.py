"""Interop: other libraries' GPU arrays as launch arguments, and our handles as theirs.

**Export.** On the real GPU a ``Handle`` exposes ``__cuda_array_interface__`` version 3 (through
``Handle.__cuda_array_interface__``, which asks the handle's server): the device pointer of its
view (of its element ``[0, ..., 0]``), its shape and dtype, its byte ``strides`` (``None`` for a
C-contiguous handle) and ``stream``: the CUDA stream of the *last writer* of the buffer if that
write may still be running, else ``None``. A consumer that honours the protocol (CuPy,
numba-cuda, PyTorch) then orders its work after ours. A buffer whose writer failed (the failure
is settled on the host) is not exported: its ``LaunchFailure`` is raised, as a read raises it.
The pointer is reported writable (``data[1]`` is ``False``), as numba-cuda's own arrays report
theirs: CuPy and PyTorch consumers write into exported arrays, and a consumer's write is ordered
for later launches only through the consumer's own synchronization.

**Import (adoption).** A launch argument that is not a ``Handle`` but exposes
``__cuda_array_interface__`` (CuPy arrays, PyTorch tensors, numba-cuda device arrays) is bound
without a copy, with its strides (F-ordered, transposed, strided, broadcast: stride 0, negative
steps), as numba-cuda binds it: the server *adopts* the allocation that holds it as borrowed
memory, after checking that every byte the view can reach lies in that allocation. Adoption is
keyed by the base of the allocation (``cuMemGetAddressRange``), so every view of one buffer, and
every launch that passes the same array again, maps to one memory id: dependencies between
launches that share a foreign buffer are inferred like those of handles. Sub-allocating pools
(CuPy's) put several arrays in one base allocation; they then share an id, which can only
over-synchronize.

Lifetime: a borrowed entry holds a strong reference to the foreign object until every launch
that used it has finished on the device and a launch has consumed the adoption (so the foreign
library cannot free and reuse the memory under a running kernel); after that only the
bookkeeping stays (memory id, ledger, hazards), and idle entries are evicted when the table grows
past ``MAX_ENTRIES`` (the table is the runtime's: ``runtime/memory/borrowed.py``). Borrowed memory never
enters the memory pool.

Ordering with the producer: if the interface names a stream (CuPy exports the legacy default
stream, numba-cuda an array's stream), an event is recorded on that stream at adoption and
registered as the buffer's last writer, so the launch waits for it on the device, never on the
host. PyTorch exports no stream (``None``: no synchronization needed, per the protocol).

Under numba-cuda's simulator, numba "device arrays" are ``FakeCUDAArray`` objects wrapping NumPy
arrays; the simulator backend (the ``cudasim`` plugin) describes those as host memory and the
runtime adopts them the same way (``runtime/memory/borrowed.py``, no copy).

An argument without the interface but with DLPack (``__dlpack__``/``__dlpack_device__`` on a CUDA
device) is described by ``dlpack.parse_dlpack`` and adopted the same way.
"""

from __future__ import annotations

import sys

import numpy as np

from numba_cube.errors import ForeignHandleError, LaunchArgumentError
from numba_cube.runtime.memory.borrowed import BorrowedEntry, BorrowedTable
from numba_cube.runtime.memory.handle import Allocation, Binding, Handle
from numba_cube.runtime.memory.layout import layout_strides
from numba_cube.backends.cuda.memory.dlpack import parse_dlpack
from numba_cube.backends.cuda.driver.errors import CudaError
from numba_cube.backends.cuda.memory.foreign_array import ForeignArray
from numba_cube.backends.cuda.memory.memory import DeviceMemory
from numba_cube.backends.cuda.streams.tasks import CudaTask

__all__ = ["ForeignArray", "parse_cai", "BorrowedEntry", "BorrowedTable", "export_cai", "CudaInterop"]

def parse_cai(obj) -> ForeignArray | None:
    """The ``__cuda_array_interface__`` of ``obj`` as a ``ForeignArray``; ``None`` if it has none.

    Raises ``LaunchArgumentError`` for arrays a kernel argument cannot describe (masked, or
    strides that do not fit the shape)."""
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        return None
    except Exception as exc:  # noqa: BLE001 - a broken producer is an argument error here
        raise LaunchArgumentError(f"{type(obj).__name__}.__cuda_array_interface__ failed: {exc}") from exc
    try:
        shape = tuple(int(s) for s in cai["shape"])
        dtype = _dtype_of(obj, cai)
        ptr = int(cai["data"][0] or 0)
    except (KeyError, TypeError, ValueError) as exc:
        raise LaunchArgumentError(f"malformed __cuda_array_interface__ on {type(obj).__name__}: {exc}") from exc
    if cai.get("mask") is not None:
        raise LaunchArgumentError("masked CUDA arrays are not supported as launch arguments")
    strides = cai.get("strides")
    if strides is None:
        strides = _numba_strides(obj)
    try:
        strides = layout_strides(shape, strides, dtype.itemsize)
    except (TypeError, ValueError) as exc:
        raise LaunchArgumentError(f"malformed strides in the __cuda_array_interface__ of "
                                  f"{type(obj).__name__}: {exc}") from exc
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    if stream is not None:
        stream = int(stream)
        if stream == 0:
            # The protocol disallows 0 (legacy or per-thread default?), but numba-cuda exports it
            # for an array bound to its default Stream object, and takes it back itself as the
            # legacy default stream: so do we (ordering after it is never too little).
            stream = 1
    return ForeignArray(ptr, shape, dtype, stream, obj, strides)


def _dtype_of(obj, cai: dict) -> np.dtype:
    """The array's dtype. ``typestr`` alone loses a structured dtype's fields (``|V16``): the
    producer's ``descr`` says them, and where there is none, the object's own ``dtype`` does when
    it is a NumPy dtype of that very typestr (a numba-cuda device array of records, such as
    the states of ``create_xoroshiro128p_states``)."""
    typestr = cai["typestr"]
    dtype = np.dtype(typestr)
    if dtype.kind != "V" or dtype.fields is not None:
        return dtype
    descr = cai.get("descr")
    if descr and not (len(descr) == 1 and not descr[0][0]):
        described = np.dtype([tuple(d) for d in descr])
        if described.itemsize == dtype.itemsize:
            return described
    own = getattr(obj, "dtype", None)
    if isinstance(own, np.dtype) and own.str == dtype.str and own.itemsize == dtype.itemsize:
        return own
    return dtype


def _numba_strides(obj) -> tuple | None:
    """A numba device array's own strides. Its interface says ``strides: None`` for a
    *broadcast* array too (numba's ``is_contiguous`` skips stride-0 dimensions: a scalar that a
    ufunc broadcast over ten elements reads as ten contiguous elements), which a kernel bound to
    it as contiguous would read past; numba's kernels get the real strides, and so must a
    kernel bound here."""
    devicearray = sys.modules.get("numba.cuda.cudadrv.devicearray")
    cls = getattr(devicearray, "DeviceNDArray", None)
    if cls is not None and isinstance(obj, cls):
        return tuple(int(s) for s in obj.strides)
    return None


def export_cai(ptr: int, shape: tuple, dtype: np.dtype, stream: int | None,
               strides: tuple | None = None) -> dict:
    """A version-3 ``__cuda_array_interface__`` dict for a device buffer whose element
    ``[0, ..., 0]`` is at ``ptr``; ``strides`` in bytes, ``None`` for a C-contiguous one."""
    return {"shape": tuple(shape), "typestr": dtype.str, "data": (int(ptr), False),
            "version": 3, "strides": None if strides is None else tuple(strides), "stream": stream}


class _ExternalStream:
    """A foreign CUDA stream (from ``__cuda_array_interface__``), as the hazard tracker's
    "stream" of the pseudo task that stands for the foreign producer."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __eq__(self, other):
        return isinstance(other, _ExternalStream) and other.ptr == self.ptr

    def __hash__(self):
        return hash(("cuda-stream", self.ptr))

    def __repr__(self):
        return f"<foreign CUDA stream 0x{self.ptr:x}>"


class CudaInterop:
    """The device side of interop on the GPU: export, adoption, and ordering with the foreign
    library's stream. Runs under the device lock like every server operation. ``server``: the
    policy server (its public memory table, hazard tracker, ledger, executor and channel);
    ``context``: the device's ``CudaContext``."""

    def __init__(self, server, context, raised):
        self._server = server
        self._context = context
        self._driver = context.driver
        self._raised = raised
        self.borrowed = BorrowedTable()
        self.borrowed_ids: set = set()
        self._empty_foreign = None                 # the Allocation all empty foreign arrays view
        self._export_stream = None
        self._foreign_streams: dict = {}           # borrowed memory id -> CAI stream (1: legacy)

    def _pointer(self, b: Binding) -> int:
        return self._server.memory[b.memory_id][1].ptr + b.offset

    def cuda_array_interface(self, handle: Handle) -> dict:
        """``__cuda_array_interface__`` of a handle (see ``interop.py``)."""
        return self._server.channel.call(self.op_export, handle.binding())

    def op_export(self, b: Binding) -> dict:
        # A buffer whose writer failed holds no result: exporting its pointer would let the
        # consumer read garbage that looks right. Its settled failure is raised, as a read
        # raises it. A write still running is exported with its stream (the protocol is
        # stream-ordered, without a host wait); a failure that settles on the device later is
        # the next read's to report.
        failure = self._server.failure_of(b, waited=False)
        if failure is not None:
            raise failure.to_exception()
        self._context.activate()
        users = self._server.hazards.users_of(b.memory_id)
        stream = None
        if users:
            streams = {u.cs.ptr: u for u in users if u.cs is not None}
            if len(streams) == 1:
                stream = next(iter(streams))
            elif streams:
                # Several streams still use the buffer: a private stream waits for all of them,
                # and the consumer orders after that one.
                if self._export_stream is None:
                    self._export_stream = self._driver.stream_create()
                for u in streams.values():
                    event = self._server.streams.event_of(u)
                    if event is not None:
                        self._driver.stream_wait_event(self._export_stream, event)
                stream = int(self._export_stream)
        return export_cai(self._pointer(b), b.shape, b.dtype, stream, b.strides)

    def adopt_foreign(self, obj) -> Handle | None:
        """Seam used by ``Client._bind``: a foreign CUDA array as a borrowed handle, or None."""
        fa = parse_cai(obj)
        if fa is None:
            fa = parse_dlpack(obj, self._context.index)
            if fa is None:
                return None
        return self._server.channel.call(self.op_adopt, fa)

    def forget(self, memory_id: int) -> bool:
        """A freed memory id: True if it was borrowed (then it is forgotten here, and its bytes
        belong to another library: never to the pool)."""
        if memory_id not in self.borrowed_ids:
            return False
        self.borrowed_ids.discard(memory_id)
        self.borrowed.forget_id(memory_id)
        self._foreign_streams.pop(memory_id, None)
        return True

    def sweep(self) -> None:
        """At ``sync``: let go of finished foreign arrays."""
        if self.borrowed:
            self.borrowed.sweep(self._server.hazards, self._server.ledger)

    def op_adopt(self, fa) -> Handle:
        server = self._server
        self._context.activate()
        self.borrowed.maybe_sweep(server.hazards, server.ledger)
        if fa.nbytes == 0:
            # Every empty foreign array (numba's has data pointer 0) is a view of one empty buffer
            # that the server keeps for good: nothing else would hold it between this adoption and
            # the launch that binds it (a dropped handle's release, submitted first, would free
            # its id before the launch looked it up).
            if self._empty_foreign is None:
                memory_id = next(server.memory_ids)
                server.memory[memory_id] = (0, DeviceMemory(0, 0, owned=False))
                self.borrowed_ids.add(memory_id)
                self._empty_foreign = Allocation(server, memory_id, 0)
            return Handle(self._empty_foreign, 0, fa.shape, fa.dtype, fa.strides)
        # The owning device first: with unified addressing it is answered for any context, while
        # the address range of another device's memory is not found in this device's context
        # (seen on two H200s: CUDA_ERROR_NOT_FOUND), so the range is asked only for our own.
        try:
            device = self._driver.pointer_device(fa.ptr)
        except CudaError as exc:
            raise LaunchArgumentError(f"{type(fa.owner).__name__} argument at 0x{fa.ptr:x} is not device "
                                      f"memory the CUDA driver knows: {exc}") from exc
        if device != self._context.index:
            raise ForeignHandleError(f"{type(fa.owner).__name__} argument lives on cuda:{device}, passed "
                                     f"to a client of {server.device}; copy it to this device first")
        try:
            base, size = self._driver.address_range(fa.ptr)
        except CudaError as exc:
            # The driver knows the pointer (it named a device) but this device's context cannot
            # resolve it: it belongs to another context, i.e. another device's memory. Seen on two
            # H200s, where the ordinal query answered 0 for numba memory made under cuda.gpus[1].
            raise ForeignHandleError(f"{type(fa.owner).__name__} argument at 0x{fa.ptr:x} is not memory "
                                     f"of {server.device}'s context ({exc}); copy it to this device "
                                     f"first") from exc
        low, high = fa.extent
        if low < base or high > base + size:
            # The strides reach bytes of no allocation of ours (a stride past its end, a
            # negative step before its start): a kernel would read or write them blindly.
            raise LaunchArgumentError(
                f"{type(fa.owner).__name__} argument (shape {fa.shape}, strides {fa.strides}) "
                f"reaches bytes {low - base}..{high - base} of an allocation of {size} bytes: its "
                f"strides do not fit the memory that holds it")
        entry = self.borrowed.get(base)
        if entry is not None and entry.size != size:
            self.borrowed.evict(entry)   # the foreign allocation was freed and the range reused
            entry = None
        if entry is None:
            memory_id = next(server.memory_ids)
            server.memory[memory_id] = (size, DeviceMemory(base, size, owned=False))
            self.borrowed_ids.add(memory_id)
            entry = BorrowedEntry(memory_id, base, size, None)
            entry.allocation = Allocation(server, memory_id, size)
            self.borrowed.add(entry)
        self.borrowed.touch(entry, fa.owner)
        entry_stream = fa.stream if fa.stream is not None else 1   # see after_foreign
        self._foreign_streams[entry.memory_id] = entry_stream
        if fa.stream is not None:
            self._order_after_foreign(entry.memory_id, fa.stream)
        return Handle(entry.allocation, fa.ptr - base, fa.shape, fa.dtype, fa.strides)

    def _order_after_foreign(self, memory_id: int, stream_ptr: int) -> None:
        """The foreign producer's stream, as a pseudo task that last wrote the buffer: our next
        user waits for it on the device. The foreign stream first waits for our own users of the
        buffer (it may write it)."""
        driver = self._driver
        streams = self._server.streams
        foreign = driver.api.CUstream(stream_ptr)
        ext = CudaTask(None, _ExternalStream(stream_ptr), "foreign-stream")
        deps = self._server.hazards.register(ext, (), (memory_id,))
        for dep in deps:
            event = streams.event_of(dep)
            if event is not None:
                driver.stream_wait_event(foreign, event)
        event = streams.events.get()
        driver.event_record(event, foreign)
        streams.stand_for_foreign(ext, foreign, event)

    def after_foreign(self, task: CudaTask, memory_ids: tuple) -> None:
        """Courtesy to the foreign library: its stream (the one its array named, else the legacy
        default stream) waits for our launch, so its next operation on the array sees our work
        without a host sync."""
        for memory_id in memory_ids:
            self.borrowed.consume(memory_id)
        if task.event is None:
            return
        done = set()
        for memory_id in memory_ids:
            sp = self._foreign_streams.get(memory_id, 1)
            if sp in done:
                continue
            done.add(sp)
            try:
                self._driver.stream_wait_event(self._driver.api.CUstream(sp), task.event)
            except CudaError as exc:
                self._raised(exc)

