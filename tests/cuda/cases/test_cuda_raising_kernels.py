"""Kernels that raise without ``debug=True`` (CONTRACT.md section 4.1, "Pending"; issue 30).

A ``raise`` or failed ``assert`` in a kernel fails the launch's write set with that exception
class and message, as on the CPU, although the launch is asynchronous and nothing waits per
launch: the kernel stores its exception in the launch's own error word
(``backends/cuda/kernels/exception_codegen.py``, ``error_slots.py``), and the write set stays *pending*
until somebody reads, checks or syncs it (``runtime/ledger/pending.py``). Launches downstream run (the
device does not know) but their outputs carry the same root cause: a read never returns the
garbage they computed.

On the simulator the exceptions are the simulator's own (its message starts with the unit's
coordinates); on the fake driver and a GPU they are what numba_cube's compiled code reports, with
the message as written. Tests that pin the mechanism itself (error words, driver calls, graphs)
run on the fake driver and the GPU only.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import numba_cube as cube
from numba_cube.errors import CaptureError, LaunchFailure, UnrecordedFailureWarning

from _cuda_setup import KIND, only
from _raising_kernels import (KernelError, accumulate, add_one, asserted_copy, bounded_fill,
                              checked_double, count_up, raise_bare, raise_writing_nothing,
                              through_device_function)

N = 32
GPU_PATH = KIND in ("fake", "gpu")


def _message_is(root: BaseException, text: str) -> bool:
    """The message as written (the simulator prefixes the unit's coordinates)."""
    return str(root) == text if GPU_PATH else str(root).endswith(text)


def _launch_raising(client):
    x = client.create(np.array([1, -1] + [1] * (N - 2), dtype=np.int64))
    out = client.create(np.zeros(N, dtype=np.int64))
    client.launch(checked_double, 1, N, out, x)
    return x, out


def test_a_raise_fails_the_write_set_with_its_class_and_message(client):
    """The output of a launch whose unit raised reads as ``LaunchFailure[ValueError]``: root
    class and message as written, the kernel's id, a chain of one; the input stays readable."""
    x, out = _launch_raising(client)
    with pytest.raises(ValueError) as info:
        client.read(out)
    err = info.value
    assert isinstance(err, LaunchFailure) and type(err.root) is ValueError
    assert _message_is(err.root, "negative input")
    assert err.kernel_id == checked_double.id and err.chain == (checked_double.id,)
    assert client.read(x)[1] == -1
    with pytest.raises(LaunchFailure) as again:       # the same failure, every time
        client.read(out)
    assert again.value.root is err.root


def test_downstream_launches_carry_the_root_cause(client):
    """A launch that reads the failed output, and one that reads its output, report the raising
    launch's exception as their root, with the chain of launches it travelled through; a launch
    on unrelated buffers in between computes and reads as usual."""
    _, out = _launch_raising(client)
    mid, last = client.create(np.zeros(N, dtype=np.int64)), client.create(np.zeros(N, dtype=np.int64))
    other_in = client.create(np.arange(N, dtype=np.int64))
    other_out = client.create(np.zeros(N, dtype=np.int64))
    client.launch(add_one, 1, N, mid, out)
    client.launch(add_one, 1, N, other_out, other_in)
    client.launch(add_one, 1, N, last, mid)
    with pytest.raises(LaunchFailure) as info:
        client.read(last)
    err = info.value
    assert type(err.root) is ValueError and err.kernel_id == checked_double.id
    assert err.chain == (checked_double.id, add_one.id, add_one.id)
    with pytest.raises(LaunchFailure) as first:
        client.read(out)
    assert first.value.root is err.root
    np.testing.assert_array_equal(client.read(other_out), np.arange(N) + 1)


def test_a_failed_assert_is_an_assertion_error(client):
    """``assert cond, msg`` failing in one unit: ``LaunchFailure[AssertionError]`` with msg."""
    out = client.create(np.zeros(N, dtype=np.int64))
    client.launch(asserted_copy, 1, N, out, client.create(np.arange(N, dtype=np.int64)))
    with pytest.raises(AssertionError) as info:
        client.read(out)
    assert _message_is(info.value.root, "seven is not allowed")


def test_a_launch_that_raises_nothing_computes_and_repairs(client):
    """The same kernel without a raising unit gives NumPy's answer, also right after a failed
    launch into the same output (a relaunch into a pure output repairs it)."""
    _, out = _launch_raising(client)
    data = np.arange(N, dtype=np.int64)
    client.launch(checked_double, 1, N, out, client.create(data))
    np.testing.assert_array_equal(client.read(out), 2 * data)


def test_sync_buffers_and_check(client):
    """``sync_buffers`` waits and answers the exception; ``check`` (which never waits) reports
    it once it is known."""
    _, out = _launch_raising(client)
    answer, = client.sync_buffers(out)
    assert isinstance(answer, LaunchFailure) and type(answer.root) is ValueError
    with pytest.raises(LaunchFailure):
        client.check(out)


def test_numba_style_launch_raises_at_the_call(client):
    """``kernel[count, dim](host arrays)`` is synchronous: it raises the kernel's exception, as
    numba.cuda does with debug=True (here without it)."""
    out = np.zeros(N, dtype=np.int64)
    cube.use(client)
    try:
        with pytest.raises(ValueError) as info:
            checked_double[1, N](out, np.array([-5] + [1] * (N - 1), dtype=np.int64))
        assert isinstance(info.value, LaunchFailure)
        assert _message_is(info.value.root, "negative input")
        fine = np.zeros(N, dtype=np.int64)
        checked_double[1, N](fine, np.ones(N, dtype=np.int64))
        np.testing.assert_array_equal(fine, np.full(N, 2))
    finally:
        cube.use(None)


def test_a_raise_in_a_device_function_is_reported(client):
    """A device function's ``raise`` reaches the kernel's launch with its own class and message
    (numba-cuda itself mixes them up: numba issue 8036)."""
    out = client.create(np.zeros(N, dtype=np.int64))
    client.launch(through_device_function, 1, N, out,
                  client.create(np.array([1] * (N - 1) + [0], dtype=np.int64)))
    with pytest.raises(KeyError) as info:
        client.read(out)
    assert type(info.value.root) is KeyError
    assert "from the device function" in str(info.value.root)


def test_a_bare_raise_of_a_user_class(client):
    """``raise KernelError`` (no arguments, a class of the test module)."""
    out = client.create(np.zeros(N, dtype=np.int64))
    client.launch(raise_bare, 1, N, out)
    with pytest.raises(KernelError) as info:
        client.read(out)
    assert type(info.value.root) is KernelError


def test_repeated_launches_of_a_self_reading_kernel(client):
    """A loop of one kernel that reads what it writes (the warm path renews one pending state
    for all of them): the first launch that raised is the root, every later one inherited it."""
    x = client.create(np.zeros(N, dtype=np.int64))
    for _ in range(8):
        client.launch(count_up, 1, N, x, 5)
    with pytest.raises(LaunchFailure) as info:
        client.read(x)
    err = info.value
    assert type(err.root) is ValueError
    assert err.chain == (count_up.id,) * 3        # launch 6 raised; 7 and 8 were "skipped"


def test_repeated_launches_into_a_pure_output_count_the_last(client):
    """A pure output rewritten by the next identical launch: a raise in an earlier launch is
    superseded, as on the CPU; the last launch decides."""
    out = client.create(np.zeros(N))
    for value in (9.0, 1.0):
        client.launch(bounded_fill, 1, N, out, value, 5.0)
    np.testing.assert_array_equal(client.read(out), np.full(N, 1.0))
    for value in (1.0, 9.0):
        client.launch(bounded_fill, 1, N, out, value, 5.0)
    with pytest.raises(ValueError):
        client.read(out)


def test_launches_on_two_streams_are_told_apart(client):
    """The same kernel in flight on two streams, one launch raising: only its output fails."""
    bad_in = client.create(np.array([-1] * N, dtype=np.int64))
    good_in = client.create(np.ones(N, dtype=np.int64))
    bad_out = client.create(np.zeros(N, dtype=np.int64))
    good_out = client.create(np.zeros(N, dtype=np.int64))
    a, b = client.set_stream(cube.StreamId()), client.set_stream(cube.StreamId())
    a.launch(checked_double, 1, N, bad_out, bad_in)
    b.launch(checked_double, 1, N, good_out, good_in)
    np.testing.assert_array_equal(client.read(good_out), np.full(N, 2))
    with pytest.raises(ValueError):
        client.read(bad_out)


def test_a_launch_that_writes_nothing_warns_at_sync(client):
    """Its failure has no buffer to live on: ``sync()`` reports it once, as any such failure."""
    client.launch(raise_writing_nothing, 1, N, client.create(np.full(N, -1.0)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnrecordedFailureWarning)
        client.sync()
    found = [w for w in caught if issubclass(w.category, UnrecordedFailureWarning)]
    assert len(found) == 1 and "no buffer to carry this" in str(found[0].message)


@only("fake", "gpu", why="the warm path's pending states")
def test_a_loop_reading_a_pending_buffer_keeps_one_state(client):
    """A loop of a kernel that cannot raise, reading what a kernel that can raise wrote: its
    warm launches renew one pending state (the ledger does not grow with the loop), the result
    is right when nothing raised, and a raise upstream reaches the loop's output."""
    x, y = client.create(np.zeros(N, dtype=np.int64)), client.create(np.zeros(N, dtype=np.int64))
    client.launch(checked_double, 1, N, x, client.create(np.ones(N, dtype=np.int64)))
    for _ in range(3):
        client.launch(accumulate, 1, N, y, x)
    entries = len(client.server.ledger)
    for _ in range(47):
        client.launch(accumulate, 1, N, y, x)
    assert len(client.server.ledger) == entries
    np.testing.assert_array_equal(client.read(y), np.full(N, 100))
    client.launch(checked_double, 1, N, x, client.create(np.full(N, -1, dtype=np.int64)))
    for _ in range(5):
        client.launch(accumulate, 1, N, y, x)
    with pytest.raises(ValueError) as info:
        client.read(y)
    assert info.value.chain[0] == checked_double.id and info.value.chain[1] == accumulate.id


@only("fake", "gpu", why="the warm path's pending states")
def test_a_pipeline_of_warm_launches_keeps_its_states_and_decides_per_iteration(client):
    """A producer that can raise and a consumer of its output, in a loop: both renew their
    states (the consumer reads a frozen copy of the producer's), so the ledger does not grow;
    the consumer's output follows the producer's last iteration (a raise in an earlier one is
    superseded, as on the CPU), and a raise in the last one reaches it with the chain
    producer -> consumer."""
    mid = client.create(np.zeros(N))
    out = client.create(np.zeros(N))
    for value in (1.0, 1.0, 1.0):
        client.launch(bounded_fill, 1, N, mid, value, 5.0)
        client.launch(add_one, 1, N, out, mid)
    entries = len(client.server.ledger)
    for value in (2.0, 9.0, 3.0):
        client.launch(bounded_fill, 1, N, mid, value, 5.0)
        client.launch(add_one, 1, N, out, mid)
        assert len(client.server.ledger) == entries
    np.testing.assert_array_equal(client.read(out), np.full(N, 4.0))
    for value in (1.0, 9.0):
        client.launch(bounded_fill, 1, N, mid, value, 5.0)
        client.launch(add_one, 1, N, out, mid)
    with pytest.raises(ValueError) as info:
        client.read(out)
    assert info.value.chain == (bounded_fill.id, add_one.id)


@only("fake", "gpu", why="the error words are the GPU path's")
def test_check_does_not_wait_for_a_pending_launch(client, kind):
    """``check`` right after the launch says nothing (on the fake driver nothing has run yet:
    the launch is pending, not failed); the read finds the exception."""
    _, out = _launch_raising(client)
    if kind == "fake":
        client.check(out)
    with pytest.raises(ValueError):
        client.read(out)


@only("fake", "gpu", why="graph capture of the GPU path")
def test_a_kernel_that_can_raise_is_not_recorded_into_a_graph(client):
    """A capture window refuses it (each launch needs its own error word); an automatic graph
    runs such launches eagerly and still reports their exceptions."""
    x = client.create(np.array([-1] * N, dtype=np.int64))
    out = client.create(np.zeros(N, dtype=np.int64))
    client.graph_prepare()
    client.launch(checked_double, 1, N, out, x)
    client.sync()
    client.start_capture()
    client.launch(checked_double, 1, N, out, x)
    with pytest.raises(CaptureError, match="can raise"):
        client.stop_capture()
    with client.auto_graph():
        for _ in range(6):
            client.launch(checked_double, 1, N, out, x)
    with pytest.raises(ValueError):
        client.read(out)


@only("fake", why="counts the fake driver's calls")
def test_kernels_that_cannot_raise_pay_nothing(client, fake_api):
    """A kernel without raise or assert has no error word: its launches make no extra driver
    call and pass no word; one that can raise passes a different word to each launch."""
    x = client.create(np.arange(N, dtype=np.int64))
    out = client.create(np.zeros(N, dtype=np.int64))
    client.launch(add_one, 1, N, out, x)
    client.sync()
    words = len(fake_api.word_launches)

    def calls_of(launches: int) -> dict:
        before = dict(fake_api.calls)
        for _ in range(launches):
            client.launch(add_one, 1, N, out, x)
        client.sync()
        return {k: v - before.get(k, 0) for k, v in fake_api.calls.items()}

    assert calls_of(3) == calls_of(12)      # the same calls (sync's), none per launch
    assert len(fake_api.word_launches) == words
    for _ in range(4):
        client.launch(checked_double, 1, N, out, x)
    assert len(set(fake_api.word_launches[words:])) == 4
    np.testing.assert_array_equal(client.read(out), 2 * np.arange(N))


@only("fake", "gpu", why="the dynamic count's device-side form")
def test_a_dynamic_count_launch_that_raises(client):
    """The device-count form of a kernel that can raise reports its exception too."""
    count = client.create(np.array([1, 1, 1], dtype=np.uint32))
    _, out = client.create(np.zeros(N)), client.create(np.zeros(N, dtype=np.int64))
    client.launch(checked_double, cube.CubeCount.dynamic(count), N, out,
                  client.create(np.array([-1] * N, dtype=np.int64)))
    with pytest.raises(ValueError):
        client.read(out)
