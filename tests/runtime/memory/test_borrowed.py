"""The runtime's borrowed memory (``runtime/memory/borrowed.py``) through ``DeviceServer``, with a backend
of this file that adopts NumPy arrays wrapped in ``HostBuffer``: what a backend's
``foreign_memory`` describes is bound in place, one memory id per allocation, its failures and
dependencies are those of a buffer, bad descriptions are typed errors, and the server forgets
borrowed memory without ever giving it to its pool."""

from __future__ import annotations

import gc
import itertools
import weakref

import numpy as np
import pytest

import numba_cube as cube
from numba_cube.runtime.memory.borrowed import MAX_ENTRIES, ForeignMemory, describe_host_array
from numba_cube.runtime.streams.channel import ThreadChannel
from numba_cube.runtime.registry import register_backend, unregister_backend
from numba_cube.runtime.server import DeviceServer
from numba_cube.testing import PythonBackend

_indices = itertools.count()


class HostBuffer:
    """Another library's array: a NumPy array it owns, optionally declaring its own view
    (``shape``/``strides``) of that array's bytes, as a device array's interface does."""

    def __init__(self, array: np.ndarray, shape=None, strides=None):
        self.array = array
        self.shape = array.shape if shape is None else shape
        self.strides = array.strides if strides is None else strides


class AdoptingBackend(PythonBackend):
    """``PythonBackend`` (kernels are Python functions of NumPy views) that adopts ``HostBuffer``s."""

    def foreign_memory(self, obj):
        if not isinstance(obj, HostBuffer):
            return None
        described = describe_host_array(obj.array, "a HostBuffer")
        return ForeignMemory(described.memory, described.base, described.size, described.ptr,
                             tuple(obj.shape), obj.array.dtype, tuple(obj.strides))


@pytest.fixture(scope="module")
def backend_name():
    name = "rt_borrowed"

    def factory(index):
        device = f"{name}:{index}"
        return DeviceServer(device, AdoptingBackend(), ThreadChannel(device))

    register_backend(name, factory, source="tests/runtime/memory/test_borrowed.py")
    yield name
    unregister_backend(name)


@pytest.fixture
def client(backend_name):
    """A fresh device per test (its own server, memory table and borrowed table)."""
    return cube.client(f"{backend_name}:{next(_indices)}")


def scale_into(x, out):
    out[...] = 2.0 * x


def fail(x):
    x[0] = 1.0          # a write: the analysis puts x in the write set
    raise ValueError("injected")


def test_foreign_buffer_is_bound_in_place(client):
    """A launch writes the foreign array's own bytes (no copy in or out): the caller's NumPy
    array holds the result, strided views included, as NumPy computes it."""
    src = np.arange(12.0).reshape(3, 4)
    dst = np.zeros((4, 3))
    client.launch(scale_into, 1, 1, client.create(src.T), HostBuffer(dst))
    client.sync()
    np.testing.assert_array_equal(dst, 2.0 * src.T)
    column = np.zeros((3, 4))
    client.launch(scale_into, 1, 1, client.create(np.ones(3)), HostBuffer(column[:, 1]))
    client.sync()
    expected = np.zeros((3, 4))
    expected[:, 1] = 2.0
    np.testing.assert_array_equal(column, expected)


def test_views_of_one_allocation_share_one_memory_id(client):
    """Every view of one NumPy buffer (a slice, its transpose, the array passed again) maps to one
    memory id; another buffer gets another."""
    a = np.zeros((4, 4))
    server = client.server
    ids = {server.adopt_foreign(HostBuffer(v)).binding().memory_id for v in (a, a[1:], a.T, a)}
    assert len(ids) == 1
    assert server.adopt_foreign(HostBuffer(np.zeros(4))).binding().memory_id not in ids


def test_failure_lives_on_the_foreign_buffer(client):
    """A launch that fails writing a foreign buffer records the failure on it: a later launch
    that reads the same array (adopted again) is skipped and its output inherits the root."""
    shared = np.zeros(8)
    client.launch(fail, 1, 1, HostBuffer(shared))
    out = client.empty(8)
    client.launch(scale_into, 1, 1, HostBuffer(shared), out)
    with pytest.raises(cube.LaunchFailure) as info:
        client.read(out)
    assert isinstance(info.value.root, ValueError)


def test_dependencies_are_inferred_across_streams(client):
    """A write into a foreign buffer on one stream and a read of it on another are ordered like
    those of a handle: the reader sees the writer's values."""
    data = np.zeros(1 << 16)
    out = client.empty(1 << 16)
    with cube.stream():
        client.launch(scale_into, 1, 1, client.create(np.ones(1 << 16)), HostBuffer(data))
    with cube.stream():
        client.launch(scale_into, 1, 1, HostBuffer(data), out)
    np.testing.assert_array_equal(client.read(out), np.full(1 << 16, 4.0))


def test_strides_outside_the_allocation_are_refused(client):
    """A description whose strides reach past the allocation is a LaunchArgumentError on the
    issuing thread, and the device keeps working."""
    a = np.zeros(4)
    with pytest.raises(cube.LaunchArgumentError, match="strides do not fit"):
        client.launch(scale_into, 1, 1, client.create(np.ones(4)), HostBuffer(a, strides=(16,)))
    out = client.empty(4)
    client.launch(scale_into, 1, 1, client.create(np.ones(4)), out)
    np.testing.assert_array_equal(client.read(out), np.full(4, 2.0))


def test_memory_with_gaps_is_refused(client):
    """A NumPy array that is no run of bytes of any NumPy buffer (``as_strided`` with gaps) is a
    LaunchArgumentError saying to pass a copy."""
    gappy = np.lib.stride_tricks.as_strided(np.zeros(8), (4,), (16,))
    with pytest.raises(cube.LaunchArgumentError, match="pass a copy"):
        client.launch(scale_into, 1, 1, client.create(np.ones(4)), HostBuffer(gappy))


def test_unadoptable_argument_is_still_unsupported(client):
    """An argument the backend does not describe (``foreign_memory`` answers None) is refused as
    an unsupported type, as on a backend that adopts nothing."""
    with pytest.raises(cube.LaunchArgumentError, match="unsupported type"):
        client.launch(scale_into, 1, 1, client.create(np.ones(4)), object())


def test_evicted_memory_is_forgotten_and_never_pooled(client):
    """Past MAX_ENTRIES idle allocations, the oldest are evicted: the server forgets their memory
    ids and no longer holds their bytes (the foreign array can be garbage), and none of it went
    to the server's pool."""
    server = client.server
    src = client.create(np.ones(4))
    pooled_before = server.pool.held_bytes
    first = np.zeros(4)
    first_id = server.adopt_foreign(HostBuffer(first)).binding().memory_id
    client.launch(scale_into, 1, 1, src, HostBuffer(first))
    client.sync()
    assert first_id in server.memory and first[0] == 2.0
    gone = weakref.ref(first)
    del first
    for _ in range(MAX_ENTRIES + 40):
        client.launch(scale_into, 1, 1, src, HostBuffer(np.zeros(4)))
        client.sync()
    client.sync()
    gc.collect()
    client.sync()                    # drains the frees the collection queued
    assert first_id not in server.memory
    assert gone() is None
    assert server.pool.held_bytes == pooled_before


def test_foreign_object_is_held_until_its_launch_finished(client):
    """The foreign object stays alive while a launch that uses it may still run, although the
    caller dropped it, and is let go once that launch finished (sweeps run every 32 adoptions)."""
    import threading

    gate = threading.Event()

    def wait_then_write(x):
        gate.wait(10)
        x[0] = 1.0

    server = client.server
    data = np.zeros(4)
    foreign = HostBuffer(data)
    held = weakref.ref(foreign)
    client.launch(wait_then_write, 1, 1, foreign)
    del foreign

    def sweep():
        for _ in range(33):
            server.adopt_foreign(HostBuffer(np.zeros(1)))
        gc.collect()

    sweep()
    assert held() is not None        # its launch is still running
    gate.set()
    client.sync()
    sweep()
    assert held() is None
    assert data[0] == 1.0
