"""The warm launch path (``backends/cuda/launch/fast_path.py``): a repeat of an armed launch.

The warm path is an optimization and must be invisible: every contract of the general path
holds for a launch that repeats an armed one (failures on inputs, capture windows, dry runs,
observers, profiles, cross-stream ordering, frees). Each test arms a launch first (two identical
launches), then changes one thing and checks the contract. ``stats["warm"]`` counts the launches
that took the warm path, so a test can also say which path it exercised; that counter exists on
the GPU path only (``CudaMechanism``), the simulator's backend has no warm path and the contracts
are checked there all the same.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.errors import LaunchFailure
from numba_cube.testing import launched

from _cuda_setup import KIND, only
from test_cuda_streams import SPIN, add_into, copy_into, slow_fill   # the same test kernels

TPB = 32
N = 32
GPU_PATH = KIND in ("fake", "gpu")


@cube.kernel
def add_scalar(x, value):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += value


def warm_count(client) -> int:
    return client.server.stats["warm"] if GPU_PATH else 0


def arm(client, kernel, *args):
    """Two identical launches: the first arms the warm path, the second takes it."""
    client.launch(kernel, 1, TPB, *args)
    client.launch(kernel, 1, TPB, *args)


def test_repeats_take_the_warm_path_and_honour_changing_scalars(client):
    """A launch that repeats the previous one (same handles, scalar types, geometry, stream)
    takes the warm path; new scalar *values* are packed every time."""
    x = client.create(np.zeros(N))
    before = warm_count(client)
    total = 0.0
    for k in range(20):
        client.launch(add_scalar, 1, TPB, x, float(k))
        total += k
    np.testing.assert_array_equal(client.read(x), np.full(N, total))
    if GPU_PATH:
        assert warm_count(client) - before == 19
    assert launched()[-20:] == [add_scalar.id] * 20   # gate 3 holds on both paths


def test_other_handles_or_geometry_take_the_general_path_and_stay_right(client):
    """Another handle, a view of the same buffer or another geometry does not match the armed
    launch: it is run by the general path, with its own arguments."""
    a, b = client.create(np.zeros(N)), client.create(np.zeros(N))
    arm(client, add_scalar, a, 1.0)
    client.launch(add_scalar, 1, TPB, b, 5.0)
    client.launch(add_scalar, 1, TPB, a[:16], 10.0)
    client.launch(add_scalar, 1, 16, a, 100.0)                 # half the units
    client.launch(add_scalar, 1, TPB, a, 3)                    # an int: another signature
    expect = np.full(N, 2.0 + 3)
    expect[:16] += 10.0 + 100.0
    np.testing.assert_array_equal(client.read(a), expect)
    np.testing.assert_array_equal(client.read(b), np.full(N, 5.0))


def test_an_input_failed_after_arming_is_inherited_then_repaired(client):
    """A failure recorded on an input after the launch was armed: the repeat is skipped and its
    output carries the same root cause; rewriting the input repairs the next repeat."""
    x, out = client.create(np.ones(N)), client.create(np.zeros(N))
    arm(client, copy_into, x, out)
    client.launch(add_scalar, 1, 2048, x, 1.0)                 # refused by the driver: x fails
    client.launch(copy_into, 1, TPB, x, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert info.value.kernel_id == add_scalar.id
    client.write(x, np.full(N, 7.0))
    client.launch(copy_into, 1, TPB, x, out)
    np.testing.assert_array_equal(client.read(out), np.full(N, 7.0))


def test_state_another_thread_changes_between_two_warm_launches_is_seen_by_the_second(client):
    """The state a warm launch checks per launch (failures in the ledger, capture windows,
    pending frees, the stream's CUDA stream) is read under the device lock, so a change another
    thread made before this one's next launch is seen by it: here an input failed by another
    thread's refused launch (on its own stream) is inherited by the warm repeat, and repaired by
    a rewrite; and while another thread holds a capture window open on this stream, the repeat
    is recorded there, not run."""
    x, out = client.create(np.ones(N)), client.create(np.zeros(N))
    arm(client, copy_into, x, out)
    warm = warm_count(client)

    def fail_x():
        with cube.stream():
            client.launch(add_scalar, 1, 2048, x, 1.0)         # refused by the driver: x fails
    run = threading.Thread(target=fail_x)
    run.start()
    run.join(30)
    client.launch(copy_into, 1, TPB, x, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert info.value.kernel_id == add_scalar.id
    client.write(x, np.full(N, 7.0))
    arm(client, copy_into, x, out)
    np.testing.assert_array_equal(client.read(out), np.full(N, 7.0))
    if GPU_PATH:
        assert warm_count(client) > warm                       # the path under test did fire
    pinned = client.set_stream(client.stream_id)
    pinned.graph_prepare()
    opened = threading.Thread(target=pinned.start_capture)
    opened.start()
    opened.join(30)
    client.launch(copy_into, 1, TPB, x, out)                   # recorded, not run
    graph = pinned.stop_capture()
    assert len(graph) == 1


def test_a_capture_window_opened_after_arming_records_the_repeat(client):
    """Inside a capture window a repeat is recorded, not run; the graph runs it on replay."""
    x = client.create(np.zeros(N))
    arm(client, add_scalar, x, 1.0)
    client.sync()
    client.graph_prepare()
    client.start_capture()
    client.launch(add_scalar, 1, TPB, x, 1.0)
    graph = client.stop_capture()
    np.testing.assert_array_equal(client.read(x), np.full(N, 2.0))   # not run by the capture
    graph.replay()
    graph.replay()
    np.testing.assert_array_equal(client.read(x), np.full(N, 4.0))


def test_a_dry_run_after_arming_runs_nothing(client):
    """A repeat inside ``cube.dry_run()`` is skipped like any launch there."""
    x = client.create(np.zeros(N))
    arm(client, add_scalar, x, 1.0)
    with cube.dry_run():
        client.launch(add_scalar, 1, TPB, x, 1.0)
    client.launch(add_scalar, 1, TPB, x, 1.0)
    np.testing.assert_array_equal(client.read(x), np.full(N, 3.0))


def test_observers_and_profiles_see_repeats(client):
    """An observer added after arming sees every repeat; a profile times each one."""
    x = client.create(np.zeros(N))
    arm(client, add_scalar, x, 1.0)
    seen = []
    observe = seen.append             # one bound method: remove_observer matches by identity
    cube.add_observer(observe)
    try:
        client.launch(add_scalar, 1, TPB, x, 1.0)
        client.launch(add_scalar, 1, TPB, x, 1.0)
    finally:
        cube.remove_observer(observe)
    assert [e.kernel_id for e in seen] == [add_scalar.id] * 2
    _, timings = client.profile(lambda: client.launch(add_scalar, 1, TPB, x, 1.0))
    assert [t.kernel_id for t in timings] == [add_scalar.id]
    np.testing.assert_array_equal(client.read(x), np.full(N, 5.0))


def test_ping_pong_launches_of_one_kernel_are_both_warm(client):
    """One kernel launched with two argument sets in turn (ping-pong buffers): both stay armed,
    so both take the warm path, and the chain of results is exact."""
    a, b = client.create(np.ones(N)), client.create(np.zeros(N))
    before = warm_count(client)
    for _ in range(10):
        client.launch(copy_into, 1, TPB, a, b)
        client.launch(add_scalar, 1, TPB, b, 1.0)
        client.launch(copy_into, 1, TPB, b, a)
    np.testing.assert_array_equal(client.read(a), np.full(N, 11.0))
    if GPU_PATH:
        assert warm_count(client) - before >= 3 * 10 - 3


def test_a_chain_alternating_two_streams_is_exact(client):
    """Each launch reads the previous one's output on the other stream: repeats are warm and
    still wait for the other stream's last launch on the device."""
    a, b = client.create(np.ones(N)), client.create(np.zeros(N))
    s1 = client.set_stream(cube.StreamId.new())
    s2 = client.set_stream(cube.StreamId.new())
    before = 0
    for round_ in range(10):
        # Two rounds first: giving the new stream ids CUDA streams may recycle the other's
        # stream if its work is done by then (streams/executor.py; timing-dependent), which re-arms it.
        if round_ == 2:
            before = warm_count(client)
        s1.launch(slow_fill, 1, TPB, b, 0.0, SPIN)
        s1.launch(add_into, 1, TPB, a, b)                # b = a
        s2.launch(add_scalar, 1, TPB, b, 1.0)            # b = a + 1, after s1
        s2.launch(copy_into, 1, TPB, b, a)               # a = a + 1
    np.testing.assert_array_equal(client.read(a), np.full(N, 11.0))
    if GPU_PATH:                  # once both streams are armed every launch repeats: all warm
        assert warm_count(client) - before == 4 * 8


def test_a_consumer_on_another_thread_waits_for_warm_producers(client):
    """Warm launches record no event of their own; a consumer on another stream still waits for
    the last of them (an event is recorded for it when the consumer needs one)."""
    x, out = client.create(np.zeros(N)), client.create(np.zeros(N))
    for v in range(1, 4):
        client.launch(slow_fill, 1, TPB, x, float(v), SPIN)    # warm from the second on
    result = {}

    def consumer():
        c = cube.client(client.device)
        c.launch(copy_into, 1, TPB, x, out)
        result["out"] = c.read(out)

    t = threading.Thread(target=consumer)
    t.start()
    t.join()
    np.testing.assert_array_equal(result["out"], np.full(N, 3.0))


def test_a_warm_repeat_waits_for_another_streams_write_in_between(client):
    """Another stream writes an input of the armed launch: the repeat's buffers are not 'solo'
    any more, and it waits for that write on the device."""
    x, out = client.create(np.zeros(N)), client.create(np.zeros(N))
    arm(client, copy_into, x, out)
    other = client.set_stream(cube.StreamId.new())
    other.launch(slow_fill, 1, TPB, x, 9.0, SPIN)
    client.launch(copy_into, 1, TPB, x, out)
    np.testing.assert_array_equal(client.read(out), np.full(N, 9.0))


def test_a_renewed_warm_repeat_still_waits_for_another_streams_read_in_between(client):
    """A warm entry repeating on one stream with nothing in between lets its last task stand for
    the next launch (WarmTask.renew); once another stream has read its output, the next repeat
    must wait for that read (write after read) and not renew, so the reader sees the value
    written before it. The writing stream is the newer one: the fake driver runs it first when
    it can, so a missing wait shows as the later value. Reference: the same steps in NumPy."""
    reader = client.set_stream(cube.StreamId.new())
    writer = client.set_stream(cube.StreamId.new())
    x, out = writer.create(np.full(N, 1.0)), writer.create(np.zeros(N))
    expect_x = np.full(N, 1.0)
    for _ in range(4):                   # arms, then repeats warm (renewed after the first)
        writer.launch(add_scalar, 1, TPB, x, 1.0)
        expect_x += 1.0
    reader.launch(copy_into, 1, TPB, x, out)
    expect_out = expect_x.copy()
    writer.launch(add_scalar, 1, TPB, x, 1.0)
    expect_x += 1.0
    np.testing.assert_array_equal(writer.read(out), expect_out)
    np.testing.assert_array_equal(writer.read(x), expect_x)
    if GPU_PATH:
        assert warm_count(client) >= 3


def test_a_warm_repeat_after_another_entry_on_its_stream_is_not_renewed(client):
    """Two warm entries on one stream: one reads ``x``, the other writes it. Once the writer has
    fired, the reader's next repeat is registered anew (its last task is not renewed: the
    writer's launch replaced it in ``x``'s state), so a later write of ``x`` on another stream
    waits for that read. The host read in between makes the stream's event cover the writer
    only, and the other stream is the newer one (run first by the fake driver): a write that
    waited for the writer alone would overtake the read. Reference: the same steps in NumPy."""
    stream = client.set_stream(cube.StreamId.new())
    other = client.set_stream(cube.StreamId.new())
    x, y = stream.create(np.full(N, 1.0)), stream.create(np.zeros(N))
    for _ in range(3):
        stream.launch(copy_into, 1, TPB, x, y)           # y = x, warm from the second on
    for _ in range(2):
        stream.launch(add_scalar, 1, TPB, x, 1.0)        # x = 3
    np.testing.assert_array_equal(stream.read(x), np.full(N, 3.0))
    stream.launch(copy_into, 1, TPB, x, y)               # y = 3
    other.launch(add_scalar, 1, TPB, x, 100.0)           # x = 103, after that read
    np.testing.assert_array_equal(stream.read(y), np.full(N, 3.0))
    np.testing.assert_array_equal(stream.read(x), np.full(N, 103.0))


def test_memory_of_a_freed_input_is_not_reused_while_warm_launches_read_it(client):
    """Dropping an input right after warm launches that read it: its memory goes back to the
    pool only after they are done (they get an event for that), so fresh buffers cannot
    overwrite what they still read."""
    out = client.create(np.zeros(N))
    src = client.create(np.full(N, 2.0))
    client.launch(slow_fill, 1, TPB, out, 0.0, SPIN)
    arm(client, add_scalar, out, 0.0)
    for _ in range(3):
        client.launch(copy_into, 1, TPB, src, out)
    del src
    gc.collect()
    fresh = [client.create(np.full(N, -1.0)) for _ in range(4)]
    np.testing.assert_array_equal(client.read(out), np.full(N, 2.0))
    for f in fresh:
        np.testing.assert_array_equal(client.read(f), np.full(N, -1.0))


def test_a_scalar_out_of_range_is_refused_as_on_the_general_path(client):
    """A scalar no kernel type can hold raises LaunchArgumentError (naming the argument) on the
    issuing thread, as the general path does; the armed launch and its buffers are unaffected."""
    x = client.create(np.zeros(N))
    arm(client, add_scalar, x, 1)
    with pytest.raises(cube.LaunchArgumentError, match="'value'"):
        client.launch(add_scalar, 1, TPB, x, 2**70)
    client.launch(add_scalar, 1, TPB, x, 1)
    np.testing.assert_array_equal(client.read(x), np.full(N, 3.0))


@only("fake", "gpu", why="the warm path and its bookkeeping are the CUDA mechanism's")
def test_a_loop_that_creates_and_frees_handles_reaches_a_steady_state(client):
    """Launch loops over fresh handles (each arms a new entry and frees the last) keep the armed
    entries, bound launches, hazard and ledger state bounded (freed buffers take their entries along),
    and on a GPU the memory pool holds no more after 10,000 iterations than after the warm-up.
    (The fake device runs nothing until the host waits, so there freed memory stays quarantined
    until the sync: only the bookkeeping is checked.)"""
    server = client.server
    keep = client.create(np.zeros(N))
    iterations = 10_000 if KIND == "gpu" else 200

    def state():
        sizes = server.cache_sizes()
        return (sizes["warm_launches"], sizes["bound_launches"], len(server.hazards),
                len(server.ledger))

    for _ in range(50):
        x = client.create(np.ones(N))
        arm(client, copy_into, x, keep)
        del x
    client.sync()
    first, held = state(), server.pool.held_bytes
    for _ in range(iterations):
        x = client.create(np.ones(N))
        arm(client, copy_into, x, keep)
        del x
    client.sync()
    assert state() <= tuple(v + 2 for v in first)
    if KIND == "gpu":
        assert server.pool.held_bytes <= held, (server.pool.held_bytes, held)
    np.testing.assert_array_equal(client.read(keep), np.ones(N))


@only("fake", why="counts driver calls of the fake driver")
def test_warm_launches_record_events_only_when_someone_waits(client, fake_api):
    """A loop of warm launches on one stream records no event; the read that follows records one
    marker and waits on it."""
    x = client.create(np.zeros(N))
    arm(client, add_scalar, x, 1.0)
    gc.collect()                      # earlier tests' buffers are freed now, not inside the loop
    client.sync()
    records = fake_api.calls["cuEventRecord"]
    for _ in range(10):
        client.launch(add_scalar, 1, TPB, x, 1.0)
    assert fake_api.calls["cuEventRecord"] == records
    np.testing.assert_array_equal(client.read(x), np.full(N, 12.0))
    assert fake_api.calls["cuEventRecord"] == records + 1     # one marker, for the read


@only("gpu", why="needs two real CUDA contexts")
def test_a_warm_launch_after_another_context_was_made_current(client, second_client):
    """The warm path does not check the current context before launching: a launch issued while
    another device's context is current (a library switched it on this thread) is refused by
    the driver, then made in our context. It runs once, on our device, and both devices keep
    working."""
    x = client.create(np.zeros(N))
    arm(client, add_scalar, x, 1.0)
    before = warm_count(client)
    second_client.server.mechanism.activate()   # cuda:1's context current on this thread
    client.launch(add_scalar, 1, TPB, x, 1.0)
    assert warm_count(client) == before + 1
    np.testing.assert_array_equal(client.read(x), np.full(N, 3.0))
    y = second_client.create(np.zeros(N))
    second_client.launch(add_scalar, 1, TPB, y, 5.0)
    np.testing.assert_array_equal(second_client.read(y), np.full(N, 5.0))


@only("gpu", why="needs a thread without a CUDA context")
def test_a_warm_launch_from_a_thread_without_a_context(client):
    """A pinned client shares its stream, so its armed launches fire from any thread, also from
    one that never made a context current: the refused first try is made again in ours."""
    x = client.create(np.zeros(N))
    pinned = client.set_stream(cube.StreamId.new())
    arm(pinned, add_scalar, x, 1.0)
    t = threading.Thread(target=lambda: pinned.launch(add_scalar, 1, TPB, x, 1.0))
    t.start()
    t.join()
    np.testing.assert_array_equal(client.read(x), np.full(N, 3.0))


@only("fake", why="counts driver calls of the fake driver")
def test_one_wait_covers_the_producers_earlier_warm_launches(client, fake_api):
    """A consumer stream that waited for the first of two warm launches of the producer waited on
    a record made after both (warm launches are recorded only when waited for), so it does not
    wait again for the second, and reads the bytes both wrote."""
    x, y = client.create(np.zeros(N)), client.create(np.zeros(N))
    out_x, out_y = client.create(np.zeros(N)), client.create(np.zeros(N))
    producer = client.set_stream(cube.StreamId.new())
    consumer = client.set_stream(cube.StreamId.new())
    arm(producer, slow_fill, x, 1.0, SPIN)
    arm(producer, slow_fill, y, 1.0, SPIN)
    before = warm_count(client)
    producer.launch(slow_fill, 1, TPB, x, 3.0, SPIN)
    producer.launch(slow_fill, 1, TPB, y, 4.0, SPIN)
    assert warm_count(client) - before == 2
    waits = fake_api.calls["cuStreamWaitEvent"]
    consumer.launch(copy_into, 1, TPB, x, out_x)        # waits on a record after both launches
    assert fake_api.calls["cuStreamWaitEvent"] == waits + 1
    consumer.launch(copy_into, 1, TPB, y, out_y)        # covered by that wait already
    assert fake_api.calls["cuStreamWaitEvent"] == waits + 1
    np.testing.assert_array_equal(client.read(out_x), np.full(N, 3.0))
    np.testing.assert_array_equal(client.read(out_y), np.full(N, 4.0))


def test_work_issued_after_a_wait_is_waited_for_again(client):
    """The skip of a covered wait never covers later work: the producer's warm launch issued
    after the consumer's first wait is waited for by the consumer's next read, although the
    producer's one reusable event is recorded again for it; a host read of the first launch's
    buffer, whose event was recorded again meanwhile, still sees its bytes."""
    x, y = client.create(np.zeros(N)), client.create(np.zeros(N))
    out = client.create(np.zeros(N))
    producer = client.set_stream(cube.StreamId.new())
    consumer = client.set_stream(cube.StreamId.new())
    arm(producer, slow_fill, x, 1.0, SPIN)
    arm(producer, slow_fill, y, 1.0, SPIN)
    producer.launch(slow_fill, 1, TPB, y, 2.0, SPIN)
    consumer.launch(copy_into, 1, TPB, y, out)          # waits for the producer
    producer.launch(slow_fill, 1, TPB, y, 5.0, SPIN)    # warm, after the consumer's read of y
    producer.launch(slow_fill, 1, TPB, x, 6.0, SPIN)    # warm
    consumer.launch(add_into, 1, TPB, y, out)           # must wait again: 2 + 5
    np.testing.assert_array_equal(client.read(out), np.full(N, 7.0))
    consumer.launch(copy_into, 1, TPB, x, out)
    np.testing.assert_array_equal(client.read(out), np.full(N, 6.0))
    np.testing.assert_array_equal(client.read(x), np.full(N, 6.0))


@only("gpu", why="the compiled driver calls exist only over a real libcuda")
def test_a_hot_warm_launch_and_its_cross_stream_waits_switch_to_compiled_calls(client):
    """Past its first ``COMPILE_AFTER`` launches a warm entry fires libcuda's cuLaunchKernel
    through its thunk (``thunks.py``: LLVM makes one on any host Numba runs on), and a pair of
    streams waiting on each other records and waits through its thunks: every launch still runs,
    in order."""
    from numba_cube.backends.cuda.driver.launch_call import COMPILE_AFTER
    from numba_cube.backends.cuda.driver.thunks import Thunk

    x = client.create(np.zeros(N))
    for _ in range(COMPILE_AFTER + 10):
        client.launch(add_scalar, 1, TPB, x, 1.0)
    np.testing.assert_array_equal(client.read(x), np.full(N, COMPILE_AFTER + 10.0))
    (entry,) = client.server.mechanism.warm.armed_for(add_scalar)
    assert type(entry.fire) is Thunk
    a, b = client.create(np.ones(N)), client.create(np.zeros(N))
    s1 = client.set_stream(cube.StreamId.new())
    s2 = client.set_stream(cube.StreamId.new())
    rounds = COMPILE_AFTER + 10
    for _ in range(rounds):
        s1.launch(copy_into, 1, TPB, a, b)            # b = a, after s2's last launch
        s2.launch(add_scalar, 1, TPB, b, 1.0)         # b += 1, after s1's
        s2.launch(copy_into, 1, TPB, b, a)            # a = b
    np.testing.assert_array_equal(client.read(a), np.full(N, 1.0 + rounds))
    streams = client.server.streams
    cs1, cs2 = streams.serving(s1.stream_id), streams.serving(s2.stream_id)
    assert all(type(call) is Thunk for call in cs1.waiters[cs2] + cs2.waiters[cs1])
