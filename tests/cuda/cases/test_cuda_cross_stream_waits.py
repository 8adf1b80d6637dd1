"""Cross-stream dependencies of warm launches: the wait each one needs, on the right record.

A chain of launches alternating two streams, each reading the previous one's output, is what
``bench_cuda.py`` times (issue 18, goal 3): every launch is warm (``backends/cuda/launch/fast_path.py``)
and every one waits on the device for the other stream's last launch, through that stream's own
event recorded again after it (``CudaStreams.wait_for``). These tests pin that the wait is made
for every dependent launch, is bound to a record of the *producer's* event made *after* the
producer's launch, and is not made twice for one dependency.

The fake driver runs the newest CUDA stream first whenever it may, so a wait the newer stream
forgot shows as a stale read there; a wait the older stream forgot does not (the newer one never
runs ahead of it), so the chain is run both ways round: each stream is the newer one once. On a
GPU the kernels are slow for the same reason (``SPIN``).
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

from _cuda_setup import KIND, only
from test_cuda_streams import SPIN, add_into, slow_fill   # the same test kernels

TPB = 32
N = 32
ROUNDS = 12
GPU_PATH = KIND in ("fake", "gpu")


@cube.kernel
def slow_plus_one(x, out, spin):
    # Burns time before writing, so a consumer that does not wait reads the old bytes.
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for k in range(spin):
            acc += k * 1e-30
        out[i] = x[i] + 1.0 + acc * 0.0


def two_streams(client, newer_first: bool):
    """Two pinned clients on new streams, the one whose CUDA stream is newer first (or second).
    On the simulator there are no CUDA streams to order: the order they were made."""
    first = client.set_stream(cube.StreamId.new())
    second = client.set_stream(cube.StreamId.new())
    if GPU_PATH:
        streams = client.server.streams
        # The handle values of the fake driver grow with each stream it creates (a pooled stream
        # can be older than its stream id): the newer CUDA stream is the larger one.
        newer = streams.stream(first.stream_id).ptr > streams.stream(second.stream_id).ptr
        if newer != newer_first:
            first, second = second, first
    return first, second


def warm_count(client) -> int:
    return client.server.stats["warm"] if GPU_PATH else 0


@pytest.mark.parametrize("newer_first", [True, False], ids=["newer-stream-first", "older-stream-first"])
def test_every_launch_of_a_chain_alternating_streams_waits_for_the_other(client, fake_api, newer_first):
    """Contract (CONTRACT.md section 3): a launch that reads a buffer the other stream's last
    launch wrote runs after it, also when both are warm repeats. Each launch of the chain adds 1
    to the previous one's output; the result is exact only if every launch waited. On the fake
    driver each warm dependent launch makes exactly one ``cuStreamWaitEvent`` (none dropped, none
    repeated for the same dependency)."""
    a, b = client.create(np.zeros(N)), client.create(np.zeros(N))
    first, second = two_streams(client, newer_first)
    for _ in range(2):                       # arms both entries and both streams' waiters
        first.launch(slow_plus_one, 1, TPB, a, b, SPIN)
        second.launch(slow_plus_one, 1, TPB, b, a, SPIN)
    # (No read here: it would wait for the chain, and the next launch would have nothing left
    # to wait for.)
    warm = warm_count(client)
    waits = fake_api.calls["cuStreamWaitEvent"] if KIND == "fake" else 0
    for _ in range(ROUNDS):
        first.launch(slow_plus_one, 1, TPB, a, b, SPIN)     # b = a + 1, after second's last
        second.launch(slow_plus_one, 1, TPB, b, a, SPIN)    # a = b + 1, after first's last
    if KIND == "fake":
        assert fake_api.calls["cuStreamWaitEvent"] - waits == 2 * ROUNDS
    np.testing.assert_array_equal(client.read(a), np.full(N, 4.0 + 2 * ROUNDS))
    np.testing.assert_array_equal(client.read(b), np.full(N, 3.0 + 2 * ROUNDS))
    if GPU_PATH:
        assert warm_count(client) - warm == 2 * ROUNDS


@pytest.mark.parametrize("newer_first", [True, False], ids=["writer-newer", "reader-newer"])
def test_a_warm_writer_and_reader_on_two_streams_wait_for_each_other(client, fake_api, newer_first):
    """Contract (CONTRACT.md section 3): read after write and write after read, each alone. A
    writer stream fills ``x`` with a new value, a reader stream adds ``x`` into its own
    accumulator, in turn, all warm: the reader's launch waits for the write (and nothing
    else), the writer's next launch for the read (and nothing else). The sum is exact only if
    both wait; the newer stream of the two is the one the fake driver would run ahead."""
    x, acc = client.create(np.zeros(N)), client.create(np.zeros(N))
    writer, reader = two_streams(client, newer_first)
    total = 0.0
    for k in range(ROUNDS):
        writer.launch(slow_fill, 1, TPB, x, float(k + 1), SPIN)
        reader.launch(add_into, 1, TPB, x, acc)
        total += k + 1
    np.testing.assert_array_equal(client.read(acc), np.full(N, total))
    np.testing.assert_array_equal(client.read(x), np.full(N, float(ROUNDS)))
    if GPU_PATH:
        assert warm_count(client) >= 2 * (ROUNDS - 1)


def _fake_ops(fake_api, client, stream_id) -> list:
    """The operations queued (not run yet) on the fake CUDA stream that serves ``stream_id``."""
    cs = client.server.streams.serving(stream_id)
    return list(fake_api.streams[int(cs.handle)].ops)


@only("fake", why="reads the fake driver's queued operations")
@pytest.mark.parametrize("newer_first", [True, False], ids=["newer-stream-first", "older-stream-first"])
def test_a_warm_cross_stream_wait_is_bound_to_a_record_after_the_producers_launch(
        client, fake_api, newer_first):
    """Contract (streams/executor.py, step 2; tasks.WarmTask): the consumer's wait is on the producer
    stream's event, bound to a record of it enqueued on the producer's stream right after the
    producer's launch, and the consumer's kernel is queued right after that wait. A wait on the
    consumer's own event, or on an older record of the producer's, would let the consumer run
    first."""
    a, b = client.create(np.zeros(N)), client.create(np.zeros(N))
    first, second = two_streams(client, newer_first)
    for _ in range(3):
        first.launch(slow_plus_one, 1, TPB, a, b, SPIN)
        second.launch(slow_plus_one, 1, TPB, b, a, SPIN)
    warm = warm_count(client)
    for producer, consumer, src, dst in ((first, second, a, b), (second, first, b, a)):
        producer.launch(slow_plus_one, 1, TPB, src, dst, SPIN)
        consumer.launch(slow_plus_one, 1, TPB, dst, src, SPIN)
        made = _fake_ops(fake_api, client, producer.stream_id)
        waited = _fake_ops(fake_api, client, consumer.stream_id)
        assert [op[0] for op in made[-2:]] == ["kernel", "record"]
        assert [op[0] for op in waited[-2:]] == ["wait", "kernel"]
        (_, event, generation), (_, rec_event, rec_generation) = waited[-2], made[-1]
        assert event is rec_event and generation == rec_generation
    assert warm_count(client) - warm == 4
    np.testing.assert_array_equal(client.read(a), np.full(N, 8.0))
    np.testing.assert_array_equal(client.read(b), np.full(N, 9.0))
