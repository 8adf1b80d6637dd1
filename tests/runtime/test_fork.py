"""A process forked after its parent used a device (``registry.py``, ``channel.ForkedChannel``,
``backends/cpu/server.py``'s serial twins in a forked child).

Pinned (CONTRACT.md section 8, README's failure section), with real ``os.fork()`` and a real
``multiprocessing`` pool of the ``fork`` start method, each under a timeout so that a hang fails
the test: in the child, a client, handle or launch of a device started before the fork raises
``DeviceFault`` naming the fork at its first use (its worker threads stayed in the parent), never
waits; ``cube.client("cpu")`` there is a fresh device that launches (a grid large enough for the
parallel twin in the parent) and reads what NumPy computes.
"""

from __future__ import annotations

import multiprocessing
import os
import time

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

N = 100_000          # 391 cubes of 256: the parallel twin, in the parent


@cube.kernel
def _ramp(out, v):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = v + i


def _ramp_on(client, v) -> np.ndarray:
    out = client.empty(N, np.float64)
    client.launch(_ramp, (N + 255) // 256, 256, out, v)
    return client.read(out)


def _expected(v) -> np.ndarray:
    return v + np.arange(N, dtype=np.float64)


def _wait(pid: int, timeout: float = 120.0) -> int:
    """The child's exit code; a child still running after ``timeout`` is killed (a hang)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)        # polling a child's exit, not synchronizing with it
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung")


def test_a_forked_child_gets_a_typed_error_from_old_devices_and_fresh_ones_work():
    """After the parent launched and read: in the child, a read of the parent's handle and a
    launch on the parent's client raise ``DeviceFault`` naming the fork; a fresh client computes
    what NumPy does; the parent's device still works afterwards."""
    client = cube.client("cpu")
    assert np.array_equal(_ramp_on(client, 1.0), _expected(1.0))
    old = client.create(np.ones(4))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:        # the child: report through the pipe, never return into pytest
        code = 1
        try:
            answers = []
            for attempt in (lambda: client.read(old), lambda: _ramp_on(client, 2.0)):
                try:
                    attempt()
                    answers.append("ran")
                except cube.DeviceFault as exc:
                    answers.append("fork" if "fork" in str(exc) else str(exc))
            fresh = cube.client("cpu")
            right = fresh is not client and np.array_equal(_ramp_on(fresh, 3.0), _expected(3.0))
            os.write(write_end, f"{answers} {right}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    assert _wait(pid) == 0
    with os.fdopen(read_end) as pipe:
        assert pipe.read() == "['fork', 'fork'] True"
    assert np.array_equal(_ramp_on(client, 4.0), _expected(4.0))


def _pool_work(v):
    return float(_ramp_on(cube.client("cpu"), v).sum())


def _pool_work_on_parents_client(v):
    return float(_ramp_on(_PARENT[0], v).sum())


_PARENT: list = []


def test_a_fork_pool_returns_and_old_clients_raise_in_its_workers():
    """``multiprocessing.Pool`` with the ``fork`` start method, after the parent used a device:
    ``map`` returns what NumPy computes when workers make their own client, and raises
    ``DeviceFault`` when they use the parent's; both within the timeout."""
    client = cube.client("cpu")
    _PARENT[:] = [client]
    assert np.array_equal(_ramp_on(client, 1.0), _expected(1.0))
    with multiprocessing.get_context("fork").Pool(2) as pool:
        sums = pool.map_async(_pool_work, [1.0, 2.0, 3.0]).get(timeout=120)
        assert sums == [float(_expected(v).sum()) for v in (1.0, 2.0, 3.0)]
        with pytest.raises(cube.DeviceFault, match="fork"):
            pool.map_async(_pool_work_on_parents_client, [1.0]).get(timeout=120)
