"""Handles crossing Dask workers: host bytes when Dask must move one, its failure when it failed.

A chunk of a ``numba_cube.dask`` array stays a ``Handle`` in its worker's memory between tasks.
When Dask moves one to another worker (or to the client), this serializer, registered with
Dask's own serialization family (``dask_serialize``), waits for the buffer's writers and reads
its bytes (``Client.read``); the receiving side gets a NumPy array, which the next numba_cube
task there copies onto its own device.

A handle whose buffer carries a launch failure does not become bytes: it travels as its
``LaunchFailure`` (kernel, root cause, chain, which pickle intact) inside a ``FailedChunk``, and
the task that receives it raises that very failure as its own error, so Dask blames it and its
dependents with the root cause of the worker where the first launch failed. Serializing never
raises on a failed buffer: an error there would be a transfer error, and lose the cause.

A handle's size for Dask (``dask.sizeof``) is its buffer's bytes, not the few bytes of the
Python object: the worker's memory limits and spilling, and the scheduler's transfer costs,
then count the device memory a chunk holds (host memory, on the CPU backend).
"""

from __future__ import annotations

import pickle

import numpy as np
from dask.sizeof import sizeof
from distributed.protocol import dask_deserialize, dask_serialize

from numba_cube.errors import LaunchFailure
from numba_cube.runtime.memory.handle import Handle


class FailedChunk:
    """A chunk whose handle carried ``failure`` (a ``LaunchFailure``) when it was moved."""

    def __init__(self, failure: LaunchFailure, worker: str | None):
        self.failure = failure
        self.worker = worker

    def __repr__(self) -> str:
        return f"<FailedChunk from {self.worker}: {self.failure}>"


def raise_failure(chunk: FailedChunk):
    """Raise the chunk's ``LaunchFailure``, noting the worker where the buffer failed."""
    failure = chunk.failure
    if chunk.worker and not any("Dask worker" in n for n in getattr(failure, "__notes__", ())):
        failure.add_note(f"the buffer failed on Dask worker {chunk.worker}")
    raise failure


@sizeof.register(Handle)
def _sizeof_handle(handle: Handle) -> int:
    return handle.nbytes


@dask_serialize.register(Handle)
def _serialize_handle(handle: Handle):
    from .plugin import client_of, worker_of

    try:
        host = client_of(handle).read(handle)
    except LaunchFailure as failure:
        # the worker by its device: Dask serializes outside any task, where get_worker() fails
        return {"failed": True}, [pickle.dumps(FailedChunk(failure, worker_of(handle)))]
    host = np.ascontiguousarray(host) if not host.flags.f_contiguous else host
    order = "F" if (host.flags.f_contiguous and not host.flags.c_contiguous) else "C"
    header = {"failed": False, "dtype": host.dtype.str, "shape": host.shape, "order": order}
    return header, [host.ravel(order="K").data]


@dask_deserialize.register(Handle)
def _deserialize_handle(header: dict, frames: list):
    if header["failed"]:
        return pickle.loads(frames[0])
    data = frames[0] if len(frames) == 1 else b"".join(frames)
    flat = np.frombuffer(data, dtype=np.dtype(header["dtype"]))
    # frombuffer of a transport buffer may be read-only; a chunk is a value, and copying it here
    # lets NumPy consumers of the chunk write their own results freely.
    return flat.reshape(header["shape"], order=header["order"]).copy(order="K")
