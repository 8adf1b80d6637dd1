"""Mechanisms of the GPU path (``CudaMechanism`` under the policy server) that the contract
tests do not see directly: the server's composition, event and stream pools, memory quarantine
on device events, context activation, the export stream of ``__cuda_array_interface__``,
ordering with a foreign library's stream.

Most run on the fake driver, which counts driver calls and runs stream work only when the host
blocks; the ones that also hold on a GPU say so.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
from numba import cuda

import numba_cube as cube

from _cuda_setup import only

TPB = 32


@cube.kernel
def bump(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0


@cube.kernel
def copy_into(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@only("fake", "gpu")
def test_the_gpu_server_is_the_policy_server_over_a_cuda_mechanism(client):
    """The GPU path is no server of its own: ``cube.client`` hands out the runtime's
    ``DeviceServer`` itself (not a subclass) holding a ``CudaMechanism``, whose warm path is what
    the server offers the client (bound once: no layer in between), and a launch through it
    computes what NumPy does."""
    from numba_cube.backends.base import DeviceMechanism
    from numba_cube.backends.cuda.mechanism import CudaMechanism
    from numba_cube.runtime.server import DeviceServer

    server = client.server
    assert type(server) is DeviceServer
    assert isinstance(server.mechanism, CudaMechanism)
    assert isinstance(server.mechanism, DeviceMechanism)
    assert server.fast_launch == server.mechanism.warm.fast_launch
    x = client.create(np.arange(64.0))
    client.launch(bump, 2, TPB, x)
    np.testing.assert_array_equal(client.read(x), np.arange(64.0) + 1)


@only("fake", "gpu")
def test_events_are_pooled(client):
    """A long loop of launches records into a bounded number of events (tasks give theirs back
    when they are garbage; warm launches record none until somebody waits)."""
    events = client.server.streams.events
    gc.collect()
    client.sync()
    created = events.created          # the server is shared with earlier tests
    x = client.create(np.zeros(32))
    for _ in range(200):
        client.launch(bump, 1, TPB, x)
    client.sync()
    gc.collect()
    assert events.created - created < 64, events.created - created
    np.testing.assert_array_equal(client.read(x), np.full(32, 200.0))


@only("fake", "gpu")
def test_cuda_streams_are_pooled(client):
    """Many short-lived stream ids reuse a bounded set of CUDA streams."""
    from numba_cube.backends.cuda.streams.executor import STREAM_POOL_LIMIT

    x = client.create(np.zeros(32))
    streams = client.server.streams
    for _ in range(3 * STREAM_POOL_LIMIT):
        with cube.stream():
            cube.client(client.device).launch(bump, 1, TPB, x)
        client.sync()
    assert len(streams.stream_ids()) <= STREAM_POOL_LIMIT + 1
    np.testing.assert_array_equal(client.read(x), np.full(32, 3.0 * STREAM_POOL_LIMIT))


@only("fake", why="the fake device runs nothing until the host waits: memory stays in use")
def test_memory_in_use_on_the_device_is_quarantined(client):
    """A buffer freed while a launch that uses it has not run on the device goes to quarantine,
    not back to the free lists; it is reused only once the launch's event completed."""
    server = client.server
    out = client.create(np.zeros(64))
    src = client.create(np.full(64, 3.0))
    client.launch(copy_into, 2, TPB, src, out)
    before = server.pool.quarantined
    del src
    gc.collect()
    server.channel.call(server.drain_frees)
    assert server.pool.quarantined == before + 1
    np.testing.assert_array_equal(client.read(out), np.full(64, 3.0))   # the device ran: done
    server.channel.call(server.pool.sweep)
    assert server.pool.quarantined == before


@only("fake", "gpu")
def test_a_fresh_thread_gets_the_context(client):
    """A thread that never touched CUDA can create, launch and read: every operation makes the
    device's context current first."""
    box = {}

    def work():
        c = cube.client(client.device)
        h = c.create(np.arange(8.0))
        c.launch(bump, 1, 8, h)
        box["out"] = c.read(h)

    t = threading.Thread(target=work)
    t.start()
    t.join(60)
    np.testing.assert_array_equal(box["out"], np.arange(8.0) + 1.0)


@only("fake", why="inspects the exported stream against the fake's streams")
def test_export_names_the_writers_stream_or_a_join_stream(client, fake_api):
    """While its writer may still run, a handle exports that writer's CUDA stream; with users
    on two streams, a private stream that waits for both; once done, None."""
    h = client.create(np.zeros(32))
    # Made before the launches: create() blocks the host, which lets the fake run s1's launch,
    # and s2's new stream could then recycle s1's finished CUDA stream (with 32 streams alive).
    reader_out = client.create(np.zeros(32))
    s1 = client.set_stream(cube.StreamId.new())
    s1.launch(bump, 1, TPB, h)
    cs1 = client.server.streams.stream(s1.stream_id)
    assert h.__cuda_array_interface__["stream"] == cs1.ptr
    s2 = client.set_stream(cube.StreamId.new())
    s2.launch(copy_into, 1, TPB, h, reader_out)
    stream = h.__cuda_array_interface__["stream"]
    assert stream not in (None, cs1.ptr)
    client.sync()
    assert h.__cuda_array_interface__["stream"] is None


@only("fake", why="checks the waits enqueued on the foreign stream")
def test_foreign_stream_waits_for_our_launch(client, fake_api):
    """After a launch that binds a foreign array, the array's own stream waits for that launch
    on the device (the foreign library's next operation sees our write without a host sync)."""
    from _cuda_fake import LEGACY, ForeignArray

    arr = ForeignArray(fake_api, np.zeros(16), stream=LEGACY)
    client.sync()
    waits = fake_api.calls["cuStreamWaitEvent"]
    client.launch(bump, 1, 16, arr)
    legacy_ops = [op for op in fake_api.streams[LEGACY].ops if op[0] == "wait"]
    assert fake_api.calls["cuStreamWaitEvent"] > waits and legacy_ops
    np.testing.assert_array_equal(arr.get(), np.ones(16))


@only("fake", "gpu")
def test_bound_launches_are_dropped_with_their_buffers(client):
    """A bound launch holds device pointers of the buffers it binds: it is dropped when one of
    them is freed, so a new buffer at the same address never runs through a stale one."""
    server = client.server

    def binding(mid):
        return [b for b in server.channel.call(server.bound_launches)
                if mid in b.read_mems | b.write_mems]

    x = client.create(np.zeros(32))
    client.launch(bump, 1, TPB, x)
    mid = x.memory_id
    assert binding(mid)
    del x
    gc.collect()
    client.sync()
    assert not binding(mid)
    assert mid not in server.memory
