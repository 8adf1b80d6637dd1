"""Handles and views (API.md "Clients and handles"; CONTRACT.md section 3 on freeing)."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import numba_cube as cube
from numba_cube import LaunchFailure

from .._util import drain

TIMEOUT = 10.0


@cube.kernel
def fill_ones(out):
    out[:] = 1.0


@cube.kernel
def copy_into(x, out):
    for i in range(out.shape[0]):
        out[i] = x[i]


@cube.kernel
def fail_into(x, out):
    out[:] = x
    raise ValueError("injected")


STARTED = threading.Event()
RELEASE = threading.Event()


@cube.kernel
def blocked_copy(x, out):
    STARTED.set()
    RELEASE.wait(10.0)
    for i in range(out.shape[0]):
        out[i] = x[i]





def test_kernels_io_as_assumed():
    """4.2 (precondition of this module): the IO analysis gives the read/write sets used here."""
    a = np.zeros(4)
    assert fill_ones.io(a) == {"out": "w"}
    assert copy_into.io(a, a) == {"x": "r", "out": "w"}
    assert fail_into.io(a, a) == {"x": "r", "out": "w"}
    assert blocked_copy.io(a, a) == {"x": "r", "out": "w"}


# -- descriptors ----------------------------------------------------------------------------------


def test_descriptors(client):
    """API.md: a Handle has .shape, .dtype, .nbytes, .device (the device's name)."""
    h = client.create(np.zeros((3, 5), np.float32))
    assert h.shape == (3, 5) and h.dtype == np.float32 and h.nbytes == 60
    assert h.device == client.device and h.ndim == 2 and len(h) == 3 and h.size == 15
    e = client.empty(7, np.int16)
    assert e.shape == (7,) and e.dtype == np.int16 and e.nbytes == 14
    assert isinstance(h, cube.Handle)


def test_create_copies_the_data(client):
    """API.md: create(array_like) makes a new buffer holding a copy (later changes to the
    source array do not reach it)."""
    src = np.arange(6.0)
    h = client.create(src)
    src[:] = -1
    np.testing.assert_array_equal(client.read(h), np.arange(6.0))
    np.testing.assert_array_equal(client.read(client.create([[1, 2], [3, 4]])), [[1, 2], [3, 4]])


def test_read_returns_a_copy(client):
    """API.md: read returns the contents; changing the returned array does not change the buffer."""
    h = client.create(np.arange(4.0))
    a = client.read(h)
    a[:] = 9
    np.testing.assert_array_equal(client.read(h), np.arange(4.0))


# -- views ------------------------------------------------------------------------------------------


def test_views_share_memory(client):
    """API.md: h[a:b] is a view sharing memory: a write through the view is seen through the
    parent and the other way round."""
    h = client.create(np.arange(8.0))
    v = h[2:5]
    assert v.shape == (3,) and v.offset == 16 and v.memory_id == h.memory_id
    client.write(v, [10.0, 11.0, 12.0])
    np.testing.assert_array_equal(client.read(h), [0, 1, 10, 11, 12, 5, 6, 7])
    client.write(h, np.zeros(8))
    np.testing.assert_array_equal(client.read(v), np.zeros(3))


def test_a_launch_through_a_view_writes_only_its_bytes(client):
    """API.md + 1.2: a view is a byte offset into the same buffer; a kernel writing the view
    changes exactly those bytes of the parent."""
    h = client.create(np.zeros(8))
    client.launch(fill_ones, 1, 1, h[4:])
    np.testing.assert_array_equal(client.read(h), [0, 0, 0, 0, 1, 1, 1, 1])


def test_views_of_views_accumulate_offsets(client):
    """API.md: slicing a view slices the same buffer further."""
    h = client.create(np.arange(10.0))
    vv = h[2:9][1:3]
    assert vv.offset == 24 and vv.shape == (2,)
    np.testing.assert_array_equal(client.read(vv), [3.0, 4.0])


def test_slicing_rules(client):
    """API.md: 1-D slicing along the first axis; an int index gives a one-row view (the axis is
    kept, so the result is still a buffer); negative indices count from the end; bounds clamp
    like Python slices; a step other than 1 gives a strided view with NumPy's elements (see
    tests/runtime/memory/test_handle_layout.py)."""
    h = client.create(np.arange(6.0))
    assert h[1].shape == (1,) and h[1].offset == 8
    assert h[-1].offset == 40
    np.testing.assert_array_equal(client.read(h[-2]), [4.0])
    assert h[4:100].shape == (2,)
    assert h[-2:].offset == 32
    assert h[4:2].shape == (0,)
    assert h[:].offset == 0 and h[:].shape == (6,)
    np.testing.assert_array_equal(client.read(h[::2]), np.arange(6.0)[::2])
    np.testing.assert_array_equal(client.read(h[::-1]), np.arange(6.0)[::-1])
    with pytest.raises(IndexError):
        h[6]
    with pytest.raises(IndexError):
        h[-7]
    with pytest.raises(TypeError):
        h[1.0]
    with pytest.raises(TypeError):
        h["a"]


def test_slicing_a_2d_handle_takes_rows(client):
    """API.md: slicing a multi-dimensional handle takes whole rows of the first axis."""
    h = client.create(np.arange(12.0).reshape(3, 4))
    v = h[1:3]
    assert v.shape == (2, 4) and v.offset == 32
    np.testing.assert_array_equal(client.read(v), np.arange(4.0, 12.0).reshape(2, 4))
    assert h[2].shape == (1, 4)


def test_zero_d_handles_cannot_be_sliced(client):
    """API.md: slicing is along the first axis, which a 0-d handle does not have."""
    h = client.empty((), np.float64)
    assert h.shape == () and h.nbytes == 8
    with pytest.raises(IndexError):
        h[0]


def test_view_as(client):
    """API.md: view_as reads the same bytes as another dtype and shape; sizes must match."""
    h = client.create(np.arange(4, dtype=np.uint32))
    b = h.view_as(np.uint8)
    assert b.shape == (16,) and b.dtype == np.uint8 and b.memory_id == h.memory_id
    np.testing.assert_array_equal(client.read(b), np.arange(4, dtype=np.uint32).view(np.uint8))
    m = h.view_as(np.uint16, (2, 4))
    assert m.shape == (2, 4)
    client.write(b, np.zeros(16, np.uint8))
    np.testing.assert_array_equal(client.read(h), np.zeros(4, np.uint32))
    with pytest.raises(ValueError):
        h.view_as(np.float64, (3,))
    with pytest.raises(ValueError):
        h[:3].view_as(np.float64)          # 12 bytes are not whole float64s


def test_failure_on_a_view_leaves_other_views_readable(client):
    """4.1 (views): a launch failing into h[0:4] fails those bytes only; h[4:8] stays readable and
    the whole buffer reads as failed."""
    h = client.create(np.arange(8.0))
    x = client.create(np.zeros(4))
    client.launch(fail_into, 1, 1, x, h[0:4])
    np.testing.assert_array_equal(client.read(h[4:8]), [4, 5, 6, 7])
    with pytest.raises(LaunchFailure):
        client.read(h[0:4])
    with pytest.raises(LaunchFailure):
        client.read(h)
    with pytest.raises(LaunchFailure):
        client.read(h[3:5])
    client.launch(fill_ones, 1, 1, h[0:4])          # a pure output: repairs exactly that view
    np.testing.assert_array_equal(client.read(h), [1, 1, 1, 1, 4, 5, 6, 7])


# -- freeing ------------------------------------------------------------------------------------------


def test_a_view_keeps_the_memory_alive(client):
    """API.md: the allocation is given back when the last handle *or view* of it is dropped."""
    h = client.create(np.arange(8.0))
    mem = h.memory_id
    v = h[2:4]
    del h
    gc.collect()
    drain(client)
    assert mem in client.server.memory
    np.testing.assert_array_equal(client.read(v), [2.0, 3.0])
    del v
    gc.collect()
    drain(client)
    assert mem not in client.server.memory


def test_dropping_a_handle_frees_it_for_reuse(client):
    """API.md: `del handle` frees it once no stream still uses it: with nothing queued, the same
    memory serves the next buffer of its size class."""
    h = client.create(np.arange(8.0))
    old = client.server.memory[h.memory_id][1]
    del h
    drain(client)
    h2 = client.empty(8)
    assert client.server.memory[h2.memory_id][1] is old


def test_dropping_a_handle_used_by_a_running_launch_quarantines_its_memory(eager_devices):
    """3: freeing a handle must not let its memory be reused while a launch still uses it. A
    launch is running (blocked inside the kernel) when its output handle is dropped: the memory
    is quarantined, a new buffer of the same size gets other memory, the launch still writes the
    old memory when released, and only after it finished is the memory reusable."""
    STARTED.clear(), RELEASE.clear()
    client = eager_devices.fresh()
    server = client.server
    x = client.create(np.arange(8.0))
    out = client.create(np.zeros(8))
    mem = server.memory[out.memory_id][1]
    try:
        client.launch(blocked_copy, 1, 1, x, out)
        assert STARTED.wait(TIMEOUT)
        del out
        gc.collect()
        drain(client)
        assert server.pool.quarantined == 1
        other = client.empty(8)
        assert server.memory[other.memory_id][1] is not mem
    finally:
        RELEASE.set()
    client.sync()
    np.testing.assert_array_equal(mem.view(np.float64), np.arange(8.0))   # nothing overwrote it
    again = client.empty(8)
    assert server.memory[again.memory_id][1] is mem
    assert server.pool.quarantined == 0


def test_dropping_inputs_of_a_queued_launch_does_not_free_them_before_it_runs(devices):
    """3: a launch still queued (not yet handed to a worker) keeps the memory it binds out of
    reuse: handles dropped right after the launch, and new buffers created in their place, do not
    change what the launch reads."""
    client = devices.fresh()
    x = client.create(np.arange(8.0))
    out = client.create(np.zeros(8))
    client.launch(copy_into, 1, 1, x, out)
    del x
    gc.collect()
    decoys = [client.create(np.full(8, -1.0)) for _ in range(4)]   # same size class as x
    drain(client)
    assert client.server.pool.quarantined == 1
    np.testing.assert_array_equal(client.read(out), np.arange(8.0))
    del decoys
