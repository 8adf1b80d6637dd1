"""Buffers a worker thread reuses from chunk to chunk, so that launches repeat exactly.

Each chunk's launch needs its NumPy input chunks on the device and new output buffers. Made
fresh every time, every launch binds new buffers and takes the runtime's general launch path
(measured 120-250 us a launch on the CPU backend inside a Dask worker); a launch binding the
very buffers of an earlier one takes the warm path (about 20 us) and, being short, runs on the
issuing thread, with no hand-off to a stream thread (CONTRACT.md section 1.1). So each Dask
worker thread keeps, per (device, kernel, role and slot, shape, dtype), one buffer (per kernel:
in a fused chain each kernel's launch then repeats its own previous one):

- **input staging**: a NumPy input chunk is written into its slot's buffer (``client.write``),
  not copied into a new one. The write is in stream order, after every launch still reading the
  buffer's previous contents (the runtime orders a write after the earlier readers), so reuse
  never changes what an earlier launch reads;
- **outputs**: the pooled buffer is reused only while nothing but the pool holds its handle
  (CPython's reference count): the previous chunk written there was read and dropped within its
  task (Dask fused the launch and its read). A handle Dask keeps (a chain's intermediate chunk,
  a persisted array, a chunk moving to another worker) is never reused: the launch gets a new
  buffer, which replaces it in the pool. Only *pure* outputs are pooled (written, never read,
  by the IO analysis: CONTRACT.md section 4.2): a launch into a pure output never reads what a
  previous chunk left there, not even its failure, which it repairs. Trimmed halos
  (``map_overlap``) are views of their buffer and are never pooled. A view holds its buffer, not
  the handle it was made from, so a view made by user code would not show in that count: handle
  chunks handed to user code (``handles_of``) are marked ``exposed`` and never reused.

Only chunks up to ``MAX_POOLED_BYTES`` are pooled, and at most ``MAX_ENTRIES`` buffers per
thread: the launch path's cost matters for small chunks, and a pool must not hold memory that
Dask's accounting does not see beyond a few MiB per thread.
"""

from __future__ import annotations

import math
import sys
import threading
import weakref

import numpy as np

MAX_POOLED_BYTES = 1 << 20
MAX_ENTRIES = 16

_local = threading.local()
# Handle chunks user code got (handles_of): never handed out again, whoever holds them or views
_exposed: weakref.WeakSet = weakref.WeakSet()
_exposed_lock = threading.Lock()


def expose(handle):
    """Mark a handle chunk as handed to user code: its buffer is never reused (module
    docstring). Returns it."""
    with _exposed_lock:
        _exposed.add(handle)
    return handle


def _is_exposed(handle) -> bool:
    with _exposed_lock:
        return handle in _exposed


def _pool() -> dict:
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = {}
    return pool


def _remember(pool: dict, key, handle) -> None:
    pool.pop(key, None)
    pool[key] = handle                       # most recent last: the oldest goes first
    while len(pool) > MAX_ENTRIES:
        del pool[next(iter(pool))]


def staged_input(client, owner: str, slot: int, chunk: np.ndarray):
    """``chunk`` on ``client``'s device: written into this thread's buffer for input ``slot``
    of kernel ``owner`` (its id), shape and dtype (a new copy if the chunk is large, or its
    layout is not C)."""
    if chunk.nbytes > MAX_POOLED_BYTES or not chunk.flags.c_contiguous:
        return client.create(chunk)
    pool = _pool()
    key = (client.device, owner, "in", slot, chunk.shape, chunk.dtype.str)
    handle = pool.get(key)
    if handle is None:
        handle = client.create(chunk)
        _remember(pool, key, handle)
    else:
        client.write(handle, chunk)
    return handle


def pooled_output(client, owner: str, slot: int, shape: tuple, dtype: np.dtype):
    """A buffer for output ``slot`` of kernel ``owner``: this thread's pooled one if nothing
    else holds it, else a new one (kept in the pool from now on)."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_POOLED_BYTES:
        return client.empty(shape, dtype)
    pool = _pool()
    key = (client.device, owner, "out", slot, tuple(shape), dtype.str)
    # two references when only the pool holds it: the pool's and getrefcount's argument
    if key in pool and sys.getrefcount(pool[key]) == 2 and not _is_exposed(pool[key]):
        handle = pool[key]
        _remember(pool, key, handle)
        return handle
    handle = client.empty(shape, dtype)
    _remember(pool, key, handle)
    return handle
