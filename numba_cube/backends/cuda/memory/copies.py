"""Host copies to and from device memory, for the CUDA mechanism (``mechanism.py``).

- ``initial_write`` (``create``): an asynchronous copy on a private upload stream and a wait for
  that stream, complete when it returns (see the method for why not ``cuMemcpyHtoD``);
- ``write_task`` (``write``): a task that copies from pinned staging asynchronously, in stream
  order; the staging buffer is lent to the task until it is done (``memory.PinnedPool``);
- ``read_binding`` (``read``): a device-to-host copy, after the caller waited for the writers.

A strided binding (an F-ordered handle) is copied over its extent with one copy; where the extent
holds bytes that are not the view's elements (a step, a column), a host write is refused with a
typed error: one copy would overwrite them, and the device has no host view to copy element by
element (the client refuses it first: ``DeviceMechanism.strided_host_writes``).
"""

from __future__ import annotations

import threading

import numpy as np

from numba_cube.errors import LaunchArgumentError
from numba_cube.runtime.memory.handle import Binding
from numba_cube.runtime.memory.layout import from_extent, host_staging
from numba_cube.runtime.ledger.ledger import Failure
from numba_cube.backends.cuda.driver.errors import CudaError
from numba_cube.backends.cuda.streams.tasks import CudaTask

__all__ = ["DeviceCopies"]


class DeviceCopies:
    """The copies of one device. ``base_of(memory_id)`` is the device address of a buffer;
    ``raised(exc)`` what an operation raises for a driver error (``CudaContext.raised``)."""

    def __init__(self, driver, context, pinned, ledger, base_of, raised):
        self._driver = driver
        self._context = context
        self._pinned = pinned
        self._ledger = ledger
        self._base_of = base_of
        self._raised = raised
        self._upload = None                        # private stream of create()'s copies
        self._upload_lock = threading.Lock()

    def _target(self, b: Binding, data, dtype=None) -> tuple:
        """``(bytes, device address)`` of one copy of ``data`` (as ``dtype``) into ``b``."""
        if b.strides is None:
            raw = np.ascontiguousarray(data, dtype=dtype).reshape(-1).view(np.uint8)
            return raw, self._base_of(b.memory_id) + b.offset
        return self._staged_extent(b, data), self._base_of(b.memory_id) + b.extent[0]

    def initial_write(self, b: Binding, data: np.ndarray) -> None:
        """Fill fresh memory (``create``, on the issuing thread), complete when this returns.

        Not ``cuMemcpyHtoD``: from pageable memory it may return before the DMA has landed, and
        it is ordered on the legacy default stream, which our non-blocking streams do not wait
        for; a kernel launched right after ``create`` could read the old bytes. So: an
        asynchronous copy on a private upload stream, and a wait for that stream."""
        src, dst = self._target(b, data, b.dtype)
        if src.nbytes == 0:
            return
        self._context.activate()
        try:
            upload = self._upload_stream()
            self._driver.memcpy_htod_async(dst, src.ctypes.data, src.nbytes, upload)
            self._driver.stream_synchronize(upload)
        except CudaError as exc:
            raise self._raised(exc) from exc

    def _upload_stream(self):
        stream = self._upload
        if stream is None:
            with self._upload_lock:
                if self._upload is None:
                    self._upload = self._driver.stream_create()
                stream = self._upload
        return stream

    def read_binding(self, b: Binding) -> np.ndarray:
        """A host copy of a binding's bytes; the caller waited for its writers' events. A strided
        binding reads the bytes of its extent and views them with its strides (an F-ordered
        handle reads as an F-ordered array)."""
        if b.strides is None:
            out = np.empty(b.shape, b.dtype)
            src = self._base_of(b.memory_id) + b.offset
        else:
            low, high = b.extent
            out = np.empty(high - low, np.uint8)
            src = self._base_of(b.memory_id) + low
        if out.nbytes:
            self._context.activate()
            try:
                self._driver.memcpy_dtoh(out.ctypes.data, src, out.nbytes)
            except CudaError as exc:
                raise self._raised(exc) from exc
        return out if b.strides is None else from_extent(b, out)

    @staticmethod
    def _staged_extent(b: Binding, data) -> np.ndarray:
        """The bytes one copy writes over a strided binding's extent (refused where the extent
        holds bytes that are not the view's elements: see the module docstring)."""
        if not b.compact:
            raise LaunchArgumentError(
                f"a host write into a non-contiguous view (shape {b.shape}, strides {b.strides}) "
                f"of {b.dtype} on a CUDA device: write the whole buffer, or a contiguous view")
        return host_staging(b, data)

    def write_task(self, b: Binding, staged: np.ndarray, stream) -> CudaTask:
        """A host write into a handle in stream order: pinned staging, an asynchronous copy."""
        raw, dst = self._target(b, staged)
        nbytes = raw.nbytes
        region = b.region
        pinned = None
        if nbytes:
            pinned = self._pinned.get(nbytes)
            pinned.array[:nbytes] = raw
        ledger = self._ledger
        driver = self._driver
        raised = self._raised
        task = CudaTask(None, stream, "host-write")

        def copy():
            try:
                if nbytes:
                    driver.memcpy_htod_async(dst, pinned.ptr, nbytes, task.cs.handle)
            except CudaError as exc:
                ledger.record((region,), Failure(exc, "host-write", ("host-write",)))
                raised(exc)
            else:
                ledger.record((region,), None)

        task.run = copy
        if pinned is not None:
            # Lent before the task is queued: nothing sweeps the pool in between, and the task's
            # event, recorded when it is queued, is what says the staging buffer is free again.
            self._pinned.lend(task, pinned)
        return task
