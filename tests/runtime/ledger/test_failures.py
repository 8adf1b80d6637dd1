"""Failure is a state of a buffer, not a return value (CONTRACT.md section 4), through a client
on the fake Python backend."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import numba_cube as cube
from numba_cube import CompileError, DeviceFault, LaunchFailure, dry_run
from numba_cube.runtime.ledger.ledger import IncompleteLaunch

from .._util import drain, host_contents

TIMEOUT = 10.0


@cube.kernel
def fail_into(x, out):
    out[:] = x
    raise ValueError("injected")


@cube.kernel
def double_into(x, out):
    for i in range(out.shape[0]):
        out[i] = 2.0 * x[i]


@cube.kernel
def add_into(x, y, out):
    out[:] = x + y


@cube.kernel
def fill_ones(out):
    out[:] = 1.0


@cube.kernel
def increment(x):
    for i in range(x.shape[0]):
        x[i] = x[i] + 1.0


def _refused(x, out):
    out[:] = x


_refused.refuse_compile = True
refused = cube.kernel(_refused)


class Broken(BaseException):
    """Not an Exception: escapes the kernel's error handling, like a runtime bug would."""


@cube.kernel
def breaks_device(out):
    out[:] = 0.0
    raise Broken("the stream worker's task blew up")


STARTED = threading.Event()
RELEASE = threading.Event()
FILLED = threading.Event()


@cube.kernel
def gated_fill(out):
    STARTED.set()
    RELEASE.wait(10.0)
    out[:] = 1.0
    FILLED.set()


def reset_gate():
    STARTED.clear(), RELEASE.clear(), FILLED.clear()





def test_kernels_io_as_assumed():
    """4.2 (precondition of this module): the IO analysis gives the read/write sets used here."""
    a = np.zeros(4)
    assert fail_into.io(a, a) == {"x": "r", "out": "w"}
    assert double_into.io(a, a) == {"x": "r", "out": "w"}
    assert add_into.io(a, a, a) == {"x": "r", "y": "r", "out": "w"}
    assert fill_ones.io(a) == {"out": "w"}
    assert increment.io(a) == {"x": "rw"}
    assert refused.io(a, a) == {"x": "r", "out": "w"}
    assert breaks_device.io(a) == {"out": "w"}
    assert gated_fill.io(a) == {"out": "w"}


# -- 4.1 / 4.3: a failed launch and its readers ----------------------------------------------------------


def test_a_launch_that_raises_records_its_failure_on_its_write_set(client):
    """4.1 enter / 4.3 read: a kernel that raises leaves its write set failed with the error as
    the root cause (.root, the same exception every time it is read) and the kernel as its origin;
    read raises LaunchFailure; the read set stays clean."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(fail_into, 1, 1, x, out)
    with pytest.raises(LaunchFailure) as first:
        client.read(out)
    err = first.value
    assert isinstance(err.root, ValueError) and str(err.root) == "injected"
    assert err.kernel_id == fail_into.id
    assert err.chain == (fail_into.id,)
    assert err.__cause__ is err.root
    with pytest.raises(LaunchFailure) as again:
        client.read(out)
    assert again.value.root is err.root
    np.testing.assert_array_equal(client.read(x), np.arange(4.0))


def test_downstream_launches_are_skipped_and_inherit_the_same_root(client):
    """4.1 skip: a launch whose read set holds a failed buffer does not run; its outputs point at
    the same root cause (the same exception object), and the chain names the launches it went
    through, root first."""
    x = client.create(np.arange(4.0))
    a = client.empty(4)
    b = client.create(np.full(4, 7.0))
    c = client.create(np.full(4, 8.0))
    client.launch(fail_into, 1, 1, x, a)
    client.launch(double_into, 1, 1, a, b)
    client.launch(add_into, 1, 1, x, b, c)
    client.sync()
    errors = []
    for h in (a, b, c):
        with pytest.raises(LaunchFailure) as info:
            client.read(h)
        errors.append(info.value)
    assert errors[1].root is errors[0].root and errors[2].root is errors[0].root
    assert all(e.kernel_id == fail_into.id for e in errors)
    assert errors[1].chain == (fail_into.id, double_into.id)
    assert errors[2].chain == (fail_into.id, double_into.id, add_into.id)
    assert double_into.id in str(errors[2]) and add_into.id in str(errors[2])
    # Skipped launches did not run: their outputs keep the old bytes.
    np.testing.assert_array_equal(host_contents(client, b), np.full(4, 7.0))
    np.testing.assert_array_equal(host_contents(client, c), np.full(4, 8.0))


def test_unrelated_buffers_stay_readable(client):
    """4: a failure lives on the buffers the failed launch did not write, and nowhere else."""
    x = client.create(np.arange(4.0))
    bad = client.empty(4)
    good = client.empty(4)
    client.launch(fail_into, 1, 1, x, bad)
    client.launch(double_into, 1, 1, x, good)
    np.testing.assert_array_equal(client.read(good), 2.0 * np.arange(4.0))
    np.testing.assert_array_equal(client.read(x), np.arange(4.0))
    assert client.read_many([x, good])[1].tolist() == [0.0, 2.0, 4.0, 6.0]
    with pytest.raises(LaunchFailure):
        client.read_many([good, bad])


def test_relaunching_into_a_failed_pure_output_repairs_it(client):
    """4.2: a pure output (written, never read) is not in the read set, so launching into a failed
    buffer as a pure output runs (is not skipped) and repairs it."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(fail_into, 1, 1, x, out)
    client.launch(double_into, 1, 1, x, out)
    np.testing.assert_array_equal(client.read(out), 2.0 * np.arange(4.0))


def test_a_failed_buffer_passed_only_as_an_output_does_not_skip_the_launch(client):
    """4.2: a launch with a failed argument that it only writes is not skipped, even when its
    other inputs are clean and it writes other buffers too."""
    x = client.create(np.arange(4.0))
    failed = client.empty(4)
    client.launch(fail_into, 1, 1, x, failed)
    assert client.sync_buffers(failed)[0] is not None
    client.launch(fill_ones, 1, 1, failed)
    np.testing.assert_array_equal(client.read(failed), np.ones(4))


def test_a_failed_buffer_read_and_written_skips_and_stays_failed(client):
    """4.1/4.2: a buffer the kernel reads and writes is in the read set: if it is failed, the
    launch is skipped and the buffer keeps the root cause (the chain grows)."""
    x = client.create(np.arange(4.0))
    acc = client.empty(4)
    client.launch(fail_into, 1, 1, x, acc)
    client.launch(increment, 1, 1, acc)
    with pytest.raises(LaunchFailure) as info:
        client.read(acc)
    assert isinstance(info.value.root, ValueError)
    assert info.value.chain == (fail_into.id, increment.id)


def test_last_writer_in_program_order_wins(client):
    """4.1: updates to a buffer's ledger entry happen in program order: a good launch after a
    failing one leaves it clean, a failing one after a good one leaves it failed."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(double_into, 1, 1, x, out)
    client.launch(fail_into, 1, 1, x, out)
    with pytest.raises(LaunchFailure):
        client.read(out)
    client.launch(fail_into, 1, 1, x, out)
    client.launch(double_into, 1, 1, x, out)
    np.testing.assert_array_equal(client.read(out), 2.0 * np.arange(4.0))


def test_a_launch_that_raises_on_another_stream_is_seen_by_a_reader(client):
    """4/3: the failure is recorded where a later reader looks, whichever stream ran the launch."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    with cube.stream():
        client.launch(fail_into, 1, 1, x, out)
    with cube.stream():
        down = client.empty(4)
        client.launch(double_into, 1, 1, out, down)
    with pytest.raises(LaunchFailure) as info:
        client.read(down)
    assert info.value.chain == (fail_into.id, double_into.id)


# -- host writes ---------------------------------------------------------------------------------------------


def test_a_host_write_repairs_a_failed_buffer(client):
    """4.1, API.md: writing host data into the whole of a failed buffer repairs it (the caller asked
    for new contents and got them)."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(fail_into, 1, 1, x, out)
    client.write(out, [9.0, 8.0, 7.0, 6.0])
    np.testing.assert_array_equal(client.read(out), [9.0, 8.0, 7.0, 6.0])


def test_a_host_write_into_a_view_repairs_only_that_view(client):
    """4.1 (views): a host write into part of a failed buffer repairs exactly those bytes."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(fail_into, 1, 1, x, out)
    client.write(out[2:], [1.0, 2.0])
    np.testing.assert_array_equal(client.read(out[2:]), [1.0, 2.0])
    with pytest.raises(LaunchFailure):
        client.read(out)


def test_a_host_write_is_in_stream_order(client):
    """API.md write: the data is staged at the call (the caller may reuse its array at once) and
    lands after earlier work on the buffer: a failing launch queued before the write does not
    overwrite the repair."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    data = np.full(4, 3.0)
    client.launch(fail_into, 1, 1, x, out)
    client.write(out, data)
    data[:] = -1
    np.testing.assert_array_equal(client.read(out), np.full(4, 3.0))


# -- compile failures -----------------------------------------------------------------------------------------


def test_a_compile_failure_claims_the_write_set_and_leaves_contents(client):
    """1.2 step 2 / 4.1 failed_writing: a kernel that does not compile never runs, but its outputs
    are claimed with the CompileError (the contents stay as they were); its inputs stay clean."""
    x = client.create(np.arange(4.0))
    out = client.create(np.full(4, 5.0))
    client.launch(refused, 1, 1, x, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert isinstance(info.value.root, CompileError)
    assert info.value.kernel_id == refused.id
    np.testing.assert_array_equal(host_contents(client, out), np.full(4, 5.0))
    np.testing.assert_array_equal(client.read(x), np.arange(4.0))


def test_a_compile_failure_is_remembered_not_retried(client):
    """2: the compile failure is remembered with the cache entry; a second launch does not compile
    again but is recorded again."""
    x = client.create(np.arange(4.0))
    out1, out2 = client.empty(4), client.empty(4)
    client.launch(refused, 1, 1, x, out1)
    client.launch(refused, 1, 1, x, out2)
    errors = [client.sync_buffers(h)[0] for h in (out1, out2)]
    assert all(isinstance(e, LaunchFailure) and isinstance(e.root, CompileError) for e in errors)
    assert errors[0].root is errors[1].root      # the remembered error
    assert client.server.stats["compiles"] == 1


def test_check_reports_a_compile_failure_right_after_launch(client):
    """4.3 check: compile failures are known at enqueue time; check raises for them right after the
    launch, although the work is still queued behind a launch that cannot finish yet."""
    reset_gate()
    x = client.create(np.arange(4.0))
    first = client.create(np.zeros(4))
    out = client.create(np.zeros(4))
    try:
        client.launch(gated_fill, 1, 1, first)       # same stream, ahead of the refused launch
        client.launch(refused, 1, 1, x, out)
        with pytest.raises(LaunchFailure) as info:
            client.check(out)
        assert isinstance(info.value.root, CompileError)
        assert info.value.kernel_id == refused.id
        with pytest.raises(LaunchFailure):
            client.check(x, out)                     # any failed handle among several
        client.check(x)                              # clean: no error
        assert not FILLED.is_set()
    finally:
        RELEASE.set()
    client.sync()


def test_check_does_not_wait_for_work_in_flight(client):
    """4.3 check: the read check without the read: it answers at once for a buffer whose queued
    launch cannot finish yet (it waits for nothing), and reports no failure for it."""
    reset_gate()
    out = client.create(np.zeros(4))
    try:
        client.launch(gated_fill, 1, 1, out)
        client.check(out)                            # returns: does not wait for the launch
        assert not FILLED.is_set()
    finally:
        RELEASE.set()
    np.testing.assert_array_equal(client.read(out), np.ones(4))


def test_check_does_not_report_a_running_launch_as_failed(eager_devices):
    """4.3 check: it raises for failures *already known*; a launch that is running (its scope
    holds the provisional claim) has not failed, so check must not raise for its output."""
    reset_gate()
    client = eager_devices.fresh()
    out = client.create(np.zeros(4))
    try:
        client.launch(gated_fill, 1, 1, out)
        assert STARTED.wait(TIMEOUT)
        client.check(out)
    finally:
        RELEASE.set()
        client.sync()


def test_check_raises_for_failures_already_recorded(client):
    """4.3 check: a failure already on the ledger is reported."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(fail_into, 1, 1, x, out)
    client.sync()
    with pytest.raises(LaunchFailure) as info:
        client.check(out)
    assert isinstance(info.value.root, ValueError)
    client.check(x)


def test_a_compile_failure_under_a_dry_run_claims_nothing_but_a_real_launch_records_it(client):
    """2: a SKIP launch claims nothing even when its compile fails (the buffer stays readable);
    the failure is remembered with the cache entry (no second compile) and recorded on the buffers
    when a real launch of that kernel happens."""
    x = client.create(np.arange(4.0))
    out = client.create(np.full(4, 5.0))
    with dry_run():
        client.launch(refused, 1, 1, x, out)
    drain(client)
    assert client.server.stats["compiles"] == 1 and client.server.stats["skipped"] == 1
    client.check(out)
    np.testing.assert_array_equal(client.read(out), np.full(4, 5.0))
    client.launch(refused, 1, 1, x, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert isinstance(info.value.root, CompileError)
    assert client.server.stats["compiles"] == 1 and client.server.stats["cache_hits"] == 1


def test_downstream_of_a_compile_failure_inherits_it(client):
    """4.1: a compile failure is a root cause like any other: readers downstream are skipped and
    carry it."""
    x = client.create(np.arange(4.0))
    a, b = client.empty(4), client.empty(4)
    client.launch(refused, 1, 1, x, a)
    client.launch(double_into, 1, 1, a, b)
    with pytest.raises(LaunchFailure) as info:
        client.read(b)
    assert isinstance(info.value.root, CompileError)
    assert info.value.chain == (refused.id, double_into.id)


# -- sync_buffers / sync ------------------------------------------------------------------------------------------


def test_sync_buffers_waits_then_answers_per_handle(client):
    """4.3 sync_buffers: a barrier (wait for the work on those buffers), then one answer per
    handle, in order: None or the LaunchFailure."""
    x = client.create(np.arange(4.0))
    good, bad = client.empty(4), client.empty(4)
    client.launch(double_into, 1, 1, x, good)
    client.launch(fail_into, 1, 1, x, bad)
    answers = client.sync_buffers(good, bad, x)
    assert len(answers) == 3
    assert answers[0] is None and answers[2] is None
    assert isinstance(answers[1], LaunchFailure) and isinstance(answers[1].root, ValueError)
    assert answers[1].kernel_id == fail_into.id
    assert client.sync_buffers() == []


def test_sync_buffers_waits_for_readers_too(client):
    """4.3 sync_buffers: the barrier covers all work on the buffers, including a queued launch that
    only reads them (it is flushed and waited for, not just the last writer)."""
    done = threading.Event()

    def body(x, out):
        out[:] = x
        done.set()

    reader = cube.kernel(body)
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(reader, 1, 1, x, out)
    assert client.sync_buffers(x) == [None]
    assert done.is_set()


def test_sync_raises_nothing_for_launch_failures(client):
    """4.3 sync: waits for all work and does not report launch failures (they live on buffers)."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(fail_into, 1, 1, x, out)
    client.launch(refused, 1, 1, x, client.empty(4))
    assert client.sync() is None
    with pytest.raises(LaunchFailure):
        client.check(out)       # the work was waited for: the failure is recorded


def test_sync_raises_device_fault_for_a_broken_stream_worker(devices):
    """4.3 sync: a device fault (a stream task that blew up outside the kernel's error handling)
    is reported by sync as DeviceFault with the cause; the output keeps its claim (not written)."""
    client = devices.fresh()
    out = client.create(np.zeros(4))
    client.launch(breaks_device, 1, 1, out)
    with pytest.raises(DeviceFault) as info:
        client.sync()
    assert isinstance(info.value.__cause__, Broken)
    with pytest.raises(LaunchFailure) as failure:
        client.read(out)
    assert isinstance(failure.value.root, IncompleteLaunch)
    with pytest.raises(DeviceFault):
        client.sync()           # a broken device stays broken


def test_sync_raises_device_fault_when_the_device_thread_died(devices):
    """4.3 sync: the device thread died -> DeviceFault from sync (and from calls that need it)."""
    client = devices.fresh()
    h = client.create(np.zeros(4))
    client.server.channel.close()
    client.server.channel._thread.join(TIMEOUT)
    with pytest.raises(DeviceFault):
        client.sync()
    with pytest.raises(DeviceFault):
        client.read(h)


def test_sync_raises_device_fault_when_the_server_has_a_fault(devices):
    """4.3 sync: whatever broke the server (its fault) comes out of sync as DeviceFault."""
    client = devices.fresh()
    client.server.fault = RuntimeError("context lost")
    with pytest.raises(DeviceFault) as info:
        client.sync()
    assert isinstance(info.value.__cause__, RuntimeError)


# -- the numba-style launch surfaces failures at once ---------------------------------------------------------------


def test_eager_launch_raises_launch_failure_at_once(client):
    """API.md kernel[count, dim](arrays): host arrays are copied in and written ones copied back,
    synchronously; a failure raises LaunchFailure right there (it is the read)."""
    x = np.arange(4.0)
    out = np.zeros(4)
    with client:
        double_into[1, 1](x, out)
        np.testing.assert_array_equal(out, 2.0 * x)
        with pytest.raises(LaunchFailure) as info:
            fail_into[1, 1](x, np.zeros(4))
    assert isinstance(info.value.root, ValueError)
