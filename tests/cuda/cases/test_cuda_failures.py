"""Failure is a state of a buffer on the CUDA backend too (CONTRACT.md section 4), and dry runs.

What the driver refuses is a launch failure recorded on the write set; a kernel fault that
breaks the CUDA context is a ``DeviceFault`` from ``sync()``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import CompileError, DeviceFault, LaunchFailure

from _cuda_setup import DEVICE, only


@cube.kernel
def copy_into(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@cube.kernel
def add_one(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + 1.0


@cube.kernel
def fill(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


@cube.kernel
def out_of_bounds(out):
    i = cuda.grid(1)
    out[i + 1000] = 1.0


def _does_not_compile(out):
    out[0] = undefined_name_in_kernel  # noqa: F821 - the point of the test


_does_not_compile.refuse_compile = True   # the fake driver's compiler refuses it like numba-cuda
does_not_compile = cube.kernel(_does_not_compile)


def test_refused_launch_fails_its_write_set_only(client):
    """A launch beyond CUDA's launch limits (a cube of 2048 units), which the driver would refuse,
    is refused before it is dispatched, the same way on every backend: it fails the buffers it
    should have written, with a LaunchArgumentError naming the limit as root cause; its inputs
    and the device are unaffected."""
    x = client.create(np.arange(32.0))
    out = client.create(np.zeros(32))
    client.launch(copy_into, 1, 2048, x, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    root = info.value.root
    assert isinstance(root, cube.LaunchArgumentError), root
    assert "2048 units" in str(root) and "1024" in str(root)
    assert info.value.kernel_id == copy_into.id
    np.testing.assert_array_equal(client.read(x), np.arange(32.0))
    client.sync()   # no DeviceFault: a refusal does not break the device
    client.launch(copy_into, 1, 32, x, out)   # a pure output: relaunching repairs it
    np.testing.assert_array_equal(client.read(out), np.arange(32.0))


def test_failure_propagates_to_downstream_launches(client):
    """A launch that reads a failed buffer is skipped and its outputs carry the *same* root."""
    x = client.create(np.arange(32.0))
    mid, out = client.create(np.zeros(32)), client.create(np.zeros(32))
    client.launch(copy_into, 1, 2048, x, mid)
    client.launch(add_one, 1, 32, mid, out)
    with pytest.raises(LaunchFailure) as a:
        client.read(mid)
    with pytest.raises(LaunchFailure) as b:
        client.read(out)
    assert a.value.root is b.value.root
    assert b.value.chain == (copy_into.id, add_one.id)
    assert client.sync_buffers(x, out)[0] is None


def test_compile_failure_is_a_failure_of_the_write_set(client, kind):
    """A kernel that does not compile fails its outputs; on the GPU path the failure is known at
    enqueue time (check() reports it without waiting), under the simulator it surfaces when the
    kernel runs (the simulator compiles nothing)."""
    out = client.create(np.zeros(4))
    client.launch(does_not_compile, 1, 1, out)
    if kind != "sim":
        with pytest.raises(LaunchFailure) as info:
            client.check(out)
        assert isinstance(info.value.root, CompileError)
    with pytest.raises(LaunchFailure):
        client.read(out)


@only("sim", why="the simulator checks bounds; a GPU does not")
def test_out_of_bounds_is_an_index_error_under_the_simulator(client):
    """Under the simulator an out-of-bounds index raises IndexError in the kernel: a launch
    failure on the write set, reported by read, not a broken device."""
    out = client.create(np.zeros(8))
    client.launch(out_of_bounds, 1, 4, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert isinstance(info.value.root, IndexError)
    client.sync()


def test_dry_run_compiles_and_runs_nothing(client):
    """Under dry_run a launch compiles (and caches) but claims, queues and writes nothing; the
    first real launch afterwards compiles nothing."""
    out = client.create(np.zeros(8))

    @cube.kernel
    def fresh_fill(o, v):
        i = cuda.grid(1)
        if i < o.size:
            o[i] = v

    stats = client.server.stats
    before = stats["compiles"]
    with cube.dry_run():
        client.launch(fresh_fill, 1, 8, out, 5.0)
    client.server.channel.call(lambda: None)   # the simulator's device thread handled it
    assert stats["compiles"] == before + 1
    np.testing.assert_array_equal(client.read(out), np.zeros(8))
    client.launch(fresh_fill, 1, 8, out, 5.0)
    assert stats["compiles"] == before + 1
    np.testing.assert_array_equal(client.read(out), np.full(8, 5.0))


@only("fake", why="a real fault breaks the context for the rest of the session (see the GPU "
                  "subprocess test below)")
def test_sticky_fault_is_a_device_fault_from_sync(fake_api):
    """A kernel fault that breaks the context (an illegal address) is a DeviceFault from sync();
    later launches fail their outputs, reads raise instead of returning garbage."""
    from _cuda_fake import register_fake_cuda

    api = register_fake_cuda("fakecudafault", devices=1)
    c = cube.client("fakecudafault:0")
    out = c.create(np.zeros(8))
    c.launch(out_of_bounds, 1, 4, out)
    with pytest.raises(DeviceFault):
        c.sync()
    c.launch(fill, 1, 8, out, 1.0)
    with pytest.raises((LaunchFailure, DeviceFault)):
        c.read(out)
    assert api.broken is not None


@only("gpu", why="needs a real device fault")
def test_illegal_address_is_a_device_fault_in_a_fresh_process():
    """On a GPU an illegal address breaks the CUDA context: sync() raises DeviceFault. (Run in a
    subprocess: the broken context cannot be used again in this one.)"""
    code = textwrap.dedent(f"""
        import numpy as np, numba_cube as cube
        from numba import cuda

        @cube.kernel
        def wild(out):
            out[(1 << 40) + cuda.grid(1)] = 1.0

        c = cube.client("{DEVICE}:0")
        out = c.create(np.zeros(8))
        c.launch(wild, 1, 32, out)
        try:
            c.sync()
        except cube.DeviceFault as exc:
            print("DEVICEFAULT", exc)
        else:
            print("NO FAULT")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert "DEVICEFAULT" in proc.stdout, proc.stdout + proc.stderr
