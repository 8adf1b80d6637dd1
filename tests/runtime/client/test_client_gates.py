"""The gates of a launch on the issuing thread, and what travels with it (CONTRACT.md 1 and 2)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import numba_cube as cube
from numba_cube import (CubeCount, ForeignHandleError, LaunchArgumentError, LaunchFailure,
                        LaunchMode, dry_run, real_run)
from numba_cube.testing import clear_launched, launched

from .._util import drain, host_contents, run_in_thread

TIMEOUT = 10.0


@cube.kernel
def fill_ones(out):
    out[:] = 1.0


@cube.kernel
def scale_into(a, x, out):
    for i in range(out.shape[0]):
        out[i] = a * x[i]


@cube.kernel
def fail_into(x, out):
    out[:] = x
    raise ValueError("injected")



@pytest.fixture
def client(devices):
    clear_launched()
    return devices.fresh()


def test_kernels_io_as_assumed():
    """4.2 (precondition of this module): the IO analysis gives the read/write sets used here."""
    a = np.zeros(4)
    assert fill_ones.io(a) == {"out": "w"}
    assert scale_into.io(2.0, a, a) == {"a": "", "x": "r", "out": "w"}
    assert fail_into.io(a, a) == {"x": "r", "out": "w"}


def test_one_client_per_device(devices):
    """API.md: asking for a device twice returns the same client (one server per device)."""
    c = devices.fresh()
    assert cube.client(c.device) is c
    assert c.device.startswith(devices.name + ":")


# -- gate 1: zero grid ------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, (0,), (4, 0), (1, 1, 0), CubeCount(3, 0, 2)])
def test_zero_grid_returns_at_once(client, count):
    """1.1 gate 1: a static count with a zero dimension returns at once: nothing compiled,
    nothing claimed, nothing queued, not even noted in the launched log."""
    x = client.create(np.arange(4.0))
    out = client.create(np.full(4, 5.0))
    assert client.launch(fail_into, count, 1, x, out) is None
    drain(client)
    assert launched() == []
    assert client.server.mechanism.backend.compiled == []
    assert client.server.stats["compiles"] == 0 and client.server.stats["launched"] == 0
    assert client.server.streams.stream_ids() == []
    np.testing.assert_array_equal(client.read(out), np.full(4, 5.0))   # not claimed


def test_zero_grid_comes_before_every_other_gate(devices, client):
    """1.1: the gates run in order; a zero grid returns before arguments or devices are looked at."""
    other = devices.fresh()
    foreign = other.create(np.zeros(4))
    client.launch(fill_ones, 0, 1, foreign)          # would be a ForeignHandleError
    client.launch(fill_ones, 0, 1)                   # would be a LaunchArgumentError
    assert launched() == []


# -- gate 2: foreign handles ------------------------------------------------------------------------


def test_foreign_handle_is_refused_on_the_issuing_thread(devices):
    """1.1 gate 2: a handle of another device raises ForeignHandleError (a ValueError) right here,
    on the issuing thread, before anything is noted, compiled or queued on either device."""
    name = devices.name
    c0, c1 = cube.client(f"{name}:0"), cube.client(f"{name}:1")
    clear_launched()
    mine = c0.create(np.zeros(4))
    theirs = c1.create(np.zeros(4))
    drain(c0), drain(c1)
    before = (dict(c0.server.stats), dict(c1.server.stats))
    with pytest.raises(ForeignHandleError) as info:
        c0.launch(fill_ones, 1, 1, theirs)
    assert isinstance(info.value, ValueError)
    assert name + ":1" in str(info.value)
    with pytest.raises(ForeignHandleError):
        c0.launch(scale_into, 1, 1, 2.0, theirs, mine)
    drain(c0), drain(c1)
    assert launched() == []
    assert (dict(c0.server.stats), dict(c1.server.stats)) == before   # nothing compiled or queued


def test_foreign_handle_of_a_dynamic_count_is_refused(devices):
    """1.1 gate 2: the binding of a dynamic count must belong to this device too."""
    name = devices.name
    c0, c1 = cube.client(f"{name}:0"), cube.client(f"{name}:1")
    clear_launched()
    out = c0.create(np.zeros(4))
    counts = c1.create(np.ones(3, np.uint32))
    with pytest.raises(ForeignHandleError):
        c0.launch(fill_ones, CubeCount.dynamic(counts), 1, out)
    assert launched() == []


def test_foreign_handle_is_refused_by_every_client_call(devices):
    """1.1, API.md: read, write, check, sync_buffers of another device's handle are refused on the
    issuing thread too (its coordinates are garbage here)."""
    name = devices.name
    c0, c1 = cube.client(f"{name}:0"), cube.client(f"{name}:1")
    theirs = c1.create(np.zeros(4))
    for call in (lambda: c0.read(theirs), lambda: c0.write(theirs, np.ones(4)),
                 lambda: c0.check(theirs), lambda: c0.sync_buffers(theirs),
                 lambda: c0.read_many([theirs])):
        with pytest.raises(ForeignHandleError):
            call()
    np.testing.assert_array_equal(c1.read(theirs), np.zeros(4))


# -- arguments ----------------------------------------------------------------------------------------


def test_wrong_argument_count_is_a_launch_argument_error(client):
    """1.1/errors: a launch whose arguments do not fit the kernel raises LaunchArgumentError (a
    TypeError) on the issuing thread; nothing is noted or queued."""
    out = client.create(np.zeros(4))
    for args in [(), (out, out)]:
        with pytest.raises(LaunchArgumentError) as info:
            client.launch(fill_ones, 1, 1, *args)
        assert isinstance(info.value, TypeError)
    drain(client)
    assert launched() == []
    assert client.server.mechanism.backend.compiled == []


@pytest.mark.parametrize("bad", [np.zeros(4), "text", None, [1.0, 2.0], object()])
def test_wrong_argument_type_is_a_launch_argument_error(client, bad):
    """API.md: args are handles, views of handles, NumPy scalars or Python numbers; anything else
    (a NumPy array, a string, ...) is a LaunchArgumentError (a TypeError) on the issuing thread."""
    x = client.create(np.arange(4.0))
    with pytest.raises(LaunchArgumentError) as info:
        client.launch(scale_into, 1, 1, 2.0, bad, x)
    assert isinstance(info.value, TypeError)
    with pytest.raises(LaunchArgumentError):
        client.launch(scale_into, 1, 1, bad, x, x)
    assert launched() == []


@pytest.mark.parametrize("scalar, expected", [
    (2, 2.0), (2.5, 2.5), (True, 1.0), (np.float32(3.0), 3.0), (np.int16(-1), -1.0),
])
def test_scalar_arguments_are_accepted(client, scalar, expected):
    """API.md: NumPy scalars and Python numbers are accepted as arguments."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(scale_into, 1, 1, scalar, x, out)
    np.testing.assert_array_equal(client.read(out), expected * np.arange(4.0))


def test_bad_geometry_is_refused_before_anything_happens(client):
    """1.1, API.md geometry: a bad count or dim is a LaunchArgumentError on the issuing thread."""
    out = client.create(np.zeros(4))
    with pytest.raises(LaunchArgumentError):
        client.launch(fill_ones, 1, 0, out)
    with pytest.raises(LaunchArgumentError):
        client.launch(fill_ones, -1, 1, out)
    assert launched() == []


# -- gate 3: the launched log ----------------------------------------------------------------------------


def test_launched_log_records_kernel_ids_per_thread(client):
    """1.1 gate 3: each launch's kernel id goes to the issuing thread's launched log, in order;
    another thread's launches are in its own log, not this one's."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(fill_ones, 1, 1, out)
    client.launch(scale_into, 1, 1, 2.0, x, out)

    def other():
        clear_launched()
        client.launch(fill_ones, 1, 1, out)
        return launched()

    assert run_in_thread(other) == [fill_ones.id]
    assert launched() == [fill_ones.id, scale_into.id]
    clear_launched()
    assert launched() == []


def test_launched_log_notes_failing_and_dry_launches(client):
    """1.1 gate 3: the note is always on and comes before the mode: launches that fail later, and
    launches skipped by a dry run, are noted too."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    client.launch(fail_into, 1, 1, x, out)
    with dry_run():
        client.launch(fill_ones, 1, 1, out)
    assert launched() == [fail_into.id, fill_ones.id]


# -- gate 4: the launch mode travels with the launch -------------------------------------------------------


def test_dry_run_launch_compiles_but_does_not_run(client):
    """2/1.2 step 3: a SKIP launch compiles and caches, then is dropped: the buffer keeps its
    contents, stats count it as skipped, and the first real launch afterwards compiles nothing."""
    out = client.create(np.full(4, 5.0))
    with dry_run():
        client.launch(fill_ones, 1, 1, out)
    drain(client)
    stats = client.server.stats
    assert client.server.mechanism.backend.compiled == [fill_ones.id]
    assert stats["skipped"] == 1 and stats["launched"] == 0
    np.testing.assert_array_equal(client.read(out), np.full(4, 5.0))
    client.launch(fill_ones, 1, 1, out)
    np.testing.assert_array_equal(client.read(out), np.ones(4))
    assert client.server.mechanism.backend.compiled == [fill_ones.id]      # reused, not compiled again
    assert stats["compiles"] == 1 and stats["cache_hits"] == 1


def test_dry_run_launch_claims_nothing_and_registers_no_dependency(client):
    """1.2 step 3: a SKIP launch of a kernel that would fail claims nothing and queues nothing."""
    x = client.create(np.arange(4.0))
    out = client.create(np.full(4, 5.0))
    with dry_run():
        client.launch(fail_into, 1, 1, x, out)
    drain(client)
    assert client.server.streams.stream_ids() == []
    assert client.server.hazards.users_of(out.memory_id) == []
    assert client.sync_buffers(out) == [None]
    np.testing.assert_array_equal(client.read(out), np.full(4, 5.0))


def test_real_run_inside_a_dry_run_executes(client):
    """2: launches issued by a thread inside a real run execute even while a dry run is open."""
    out = client.create(np.full(4, 5.0))
    with dry_run():
        with real_run():
            client.launch(fill_ones, 1, 1, out)
    np.testing.assert_array_equal(client.read(out), np.ones(4))
    assert client.server.stats["skipped"] == 0


def test_a_thread_spawned_inside_a_dry_run_skips(client):
    """2: the dry-run depth is process-wide: a thread started inside a dry run issues SKIP
    launches (even if the spawning thread holds a real run: that is thread-local)."""
    out = client.create(np.full(4, 5.0))
    with dry_run():
        with real_run():
            run_in_thread(client.launch, fill_ones, 1, 1, out)
    drain(client)
    assert client.server.stats["skipped"] == 1
    np.testing.assert_array_equal(client.read(out), np.full(4, 5.0))


def test_the_mode_is_decided_on_the_issuing_thread_before_the_hand_off(client):
    """1/2: the launch mode is computed on the issuing thread and passed as a value: a launch
    issued inside a dry run stays skipped even if the dry run ends before the server handles it,
    and one issued outside stays executed even if a dry run opens before the server handles it."""
    out_dry = client.create(np.full(4, 5.0))
    out_real = client.create(np.full(4, 5.0))
    hold = threading.Event()
    client.server.channel.submit(hold.wait, TIMEOUT)     # the device thread is busy
    try:
        with dry_run():
            client.launch(fill_ones, 1, 1, out_dry)
        client.launch(fill_ones, 1, 1, out_real)
        with dry_run():
            hold.set()
            drain(client)           # the server handles both launches inside this dry run
    finally:
        hold.set()
    np.testing.assert_array_equal(client.read(out_dry), np.full(4, 5.0))
    np.testing.assert_array_equal(client.read(out_real), np.ones(4))
    assert client.server.stats["skipped"] == 1


def test_the_stream_is_decided_on_the_issuing_thread_before_the_hand_off(client):
    """1.1: the stream of a launch is taken from the issuing thread at the launch, not later."""
    out = client.create(np.zeros(4))
    hold = threading.Event()
    client.server.channel.submit(hold.wait, TIMEOUT)
    try:
        with cube.stream() as sid:
            client.launch(fill_ones, 1, 1, out)
    finally:
        hold.set()
    drain(client)
    assert client.server.streams.stream_ids() == [sid]


# -- gate 5: observers ------------------------------------------------------------------------------------------


def test_observers_see_the_issuing_context(client):
    """1.1 gate 5: observers are told on the issuing thread, before the hand-off, with the
    launch's stream and mode; an observer that raises does not change what the program computes."""
    events = []

    def observer(ev):
        events.append((ev, threading.current_thread().name))

    def broken(ev):
        raise RuntimeError("observer bug")

    out = client.create(np.zeros(4))
    cube.add_observer(observer)
    cube.add_observer(broken)
    try:
        with cube.stream() as sid:
            client.launch(fill_ones, 1, 1, out)
            with dry_run():
                client.launch(fill_ones, 1, 1, out)
    finally:
        cube.remove_observer(observer)
        cube.remove_observer(broken)
    me = threading.current_thread().name
    assert [(e.kernel_id, e.mode, e.stream, e.thread, t) for e, t in events] == [
        (fill_ones.id, LaunchMode.EXECUTE, sid, me, me),
        (fill_ones.id, LaunchMode.SKIP, sid, me, me),
    ]
    assert events[0][0].device == client.device
    np.testing.assert_array_equal(client.read(out), np.ones(4))


# -- 1.2: cache key ---------------------------------------------------------------------------------------------


def test_cache_key_includes_types_and_alignment(client):
    """1.2 step 1: the compile cache key is (kernel id, argument types, alignment, ...): the same
    types and alignment reuse the artifact; another dtype or a less aligned view compiles again;
    the alignment is the pool's 64 bytes lowered to each view's lowest set offset bit."""
    h = client.create(np.zeros(64))
    stats = client.server.stats
    client.launch(fill_ones, 1, 1, h)
    client.launch(fill_ones, 1, 1, h[8:16])          # offset 64: still 64-aligned -> hit
    drain(client)
    assert (stats["compiles"], stats["cache_hits"]) == (1, 1)
    client.launch(fill_ones, 1, 1, h[1:9])           # offset 8: alignment 8 -> new key
    client.launch(fill_ones, 1, 1, h[3:9])           # offset 24: alignment 8 -> hit
    drain(client)
    assert (stats["compiles"], stats["cache_hits"]) == (2, 2)
    client.launch(fill_ones, 1, 1, client.create(np.zeros(4, np.float32)))   # another dtype
    drain(client)
    assert stats["compiles"] == 3
    np.testing.assert_array_equal(client.read(h), np.ones(64))


def test_launch_returns_none_and_does_not_wait(client):
    """1: client.launch returns None at once; the work runs later (a launch of a kernel blocked
    on an event returns while the kernel has not finished)."""
    gate = threading.Event()
    finished = threading.Event()

    def body(out):
        gate.wait(TIMEOUT)
        out[:] = 3.0
        finished.set()

    blocked = cube.kernel(body)
    out = client.create(np.zeros(4))
    try:
        assert client.launch(blocked, 1, 1, out) is None
        assert not finished.is_set()
    finally:
        gate.set()
    np.testing.assert_array_equal(client.read(out), np.full(4, 3.0))
    assert finished.is_set()


def test_failed_launch_is_not_raised_by_launch(client):
    """1/4: launches return nothing; a failure is recorded on buffers, not raised by launch."""
    x = client.create(np.arange(4.0))
    out = client.empty(4)
    assert client.launch(fail_into, 1, 1, x, out) is None
    with pytest.raises(LaunchFailure):
        client.read(out)
    np.testing.assert_array_equal(host_contents(client, x), np.arange(4.0))
