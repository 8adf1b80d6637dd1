"""The declared mechanism interface (``backends/base.py``): what the policy server asks a backend.

``DeviceMechanism`` is the interface a device backend implements instead of subclassing a server.
These tests pin it two ways: a minimal backend written here against the interface alone (host
memory, tasks run at once on the issuing thread, kernels as plain Python functions) runs
launches through the runtime's ``DeviceServer`` end to end, checked against NumPy; and the hooks
the server calls on its mechanism are exactly the interface's abstract methods (a proxy that
records every attribute the server reads off it).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.backends.base import DeviceMechanism
from numba_cube.errors import LaunchFailure
from numba_cube.runtime.graphs.capture import Graph
from numba_cube.runtime.streams.channel import InlineChannel
from numba_cube.runtime.launch.dispatch import Recorded, regions_of, run_recorded
from numba_cube.runtime.memory.handle import Binding
from numba_cube.runtime.streams.host_streams import Task
from numba_cube.runtime.registry import register_backend
from numba_cube.runtime.launch.requests import refusal_of
from numba_cube.runtime.server import DeviceServer


class _Bound:
    """A bound launch of the minimal backend."""

    def __init__(self, fn, reads, writes, error=None):
        self.fn, self.reads, self.writes, self.error = fn, reads, writes, error
        self.read_mems = {r[0] for r in reads}
        self.write_mems = {w[0] for w in writes}


class _EagerExecutor:
    """Runs every task at once, on the issuing thread (its dependencies ran before it did)."""

    def __init__(self):
        self.tails: dict = {}

    def enqueue(self, task: Task, deps: list) -> None:
        task.run()
        task.finish()
        self.tails[task.stream] = task

    def flush(self, stream) -> None:
        """Nothing queued: everything ran."""

    def flush_tasks(self, tasks) -> None:
        """Nothing queued: everything ran."""

    def flush_all(self) -> list:
        return list(self.tails.values())

    def stream_ids(self) -> list:
        return list(self.tails)


class EagerMechanism(DeviceMechanism):
    """A whole backend in a page, written against ``DeviceMechanism`` only: a kernel is the
    Python function ``kernel.py_func`` called once per launch with NumPy views (every parameter
    counted as read and written)."""

    name = "eager"

    def attach(self, server):
        self.server = server
        return _EagerExecutor()

    def known_options(self) -> frozenset:
        return frozenset({"boundscheck"})

    def warm_launcher(self):
        return None

    def fold_counts(self, counters) -> None:
        """Counts nothing apart."""

    def cache_sizes(self) -> dict:
        return {}

    def is_device_fault(self, exc) -> bool:
        return True

    def probe_fault(self) -> None:
        """Nothing to ask."""

    def allocate(self, nbytes: int):
        return _aligned(nbytes)

    def release(self, memory) -> None:
        """The garbage collector takes it."""

    def before_free(self, memory_id: int) -> bool:
        return True

    def view(self, memory, b: Binding):
        nbytes = b.dtype.itemsize * int(np.prod(b.shape))
        return memory[b.offset:b.offset + nbytes].view(b.dtype).reshape(b.shape)

    def initial_write(self, b: Binding, data) -> None:
        self.server.host_array(b)[...] = data

    def read_binding(self, b: Binding):
        return self.server.host_array(b).copy()

    def write_task(self, b: Binding, staged, stream) -> Task:
        view, region, ledger = self.server.host_array(b), b.region, self.server.ledger

        def copy():
            view[...] = staged
            ledger.record((region,), None)

        return Task(copy, stream, "host-write")

    def before_sync(self) -> None:
        """Nothing held."""

    def prepare(self) -> None:
        """No context."""

    def bound_launch_key(self, request):
        return None             # binds afresh every launch: the simplest correct choice

    def bind_launch(self, request) -> _Bound:
        access = tuple((type(a) is Binding,) * 2 for a in request.args)
        reads, writes = regions_of(request, access)
        return _Bound(request.kernel.py_func, reads, writes)

    def refusal(self, request, bound):
        return refusal_of(request)

    def dispatch(self, request, bound: _Bound, capturing: bool) -> Recorded:
        arrays = [self.server.host_array(a) if type(a) is Binding else a for a in request.args]
        fn = bound.fn
        return Recorded(request.kernel.id, lambda count, dim, args: fn(*args),
                        request.count.as_tuple(), request.dim.as_tuple(), arrays, None,
                        bound.reads, bound.writes, self.server.reporter(request, bound.writes))

    def not_capturable(self, request, bound, dispatch) -> str | None:
        return None

    def dispatch_task(self, request, bound, dispatch: Recorded) -> Task:
        ledger = self.server.ledger
        return Task(lambda: run_recorded(ledger, dispatch), request.stream, dispatch.kernel_id)

    def refused_task(self, request, run) -> Task:
        return Task(run, request.stream, request.kernel.id)

    def enqueue(self, task, deps, bound, blocking: bool) -> None:
        self.server.streams.enqueue(task, deps)

    def launched(self, request, bound) -> None:
        """No warm path."""

    def graph(self, stream, recorded, memory_ids) -> Graph:
        return Graph(self.server, stream, recorded, memory_ids)


def _aligned(nbytes: int) -> np.ndarray:
    """``nbytes`` zeroed bytes starting on the pool's 64-byte alignment."""
    raw = np.zeros(nbytes + 64, np.uint8)
    shift = (-raw.ctypes.data) % 64
    return raw[shift:shift + nbytes]


def _py_axpy(a, x, y):
    y[:] = a * x + y


def _py_fail(x):
    raise ValueError("the kernel's own failure")


_registered = threading.Lock()
_done: set = set()


def _eager_client(name: str):
    with _registered:
        if name not in _done:
            register_backend(name, lambda i: DeviceServer(f"{name}:{i}", EagerMechanism(),
                                                          InlineChannel(f"{name}:{i}")),
                             source="tests/backends/test_base.py")
            _done.add(name)
    return cube.client(f"{name}:0")


def test_a_backend_written_against_the_interface_runs_launches_end_to_end():
    """A mechanism that implements ``DeviceMechanism`` and nothing else (no server subclass)
    serves ``create``, ``launch``, ``write``, ``read`` and ``sync`` through the policy server:
    the results are NumPy's, and a kernel's own exception is a failure recorded on its write
    set (``LaunchFailure`` on read), as on every backend."""
    client = _eager_client("eagertest")
    assert isinstance(client.server, DeviceServer) and type(client.server) is DeviceServer
    kernel = cube.kernel(_py_axpy)
    x, y = np.arange(8.0), np.ones(8)
    hx, hy = client.create(x), client.create(y)
    client.launch(kernel, 1, 8, 2.0, hx, hy)
    client.launch(kernel, 1, 8, 3.0, hx, hy)
    np.testing.assert_array_equal(client.read(hy), 3.0 * x + (2.0 * x + y))
    client.write(hy, np.zeros(8))
    client.launch(kernel, 1, 8, 1.0, hx, hy)
    client.sync()
    np.testing.assert_array_equal(client.read(hy), x)
    bad = client.create(np.zeros(4))
    client.launch(cube.kernel(_py_fail), 1, 4, bad)
    with pytest.raises(LaunchFailure):
        client.read(bad)


class _SeenEager(EagerMechanism):
    """``EagerMechanism`` that records the name of every public attribute read off it."""

    def __getattribute__(self, name):
        if not name.startswith("_"):
            object.__getattribute__(self, "_seen").add(name)
        return object.__getattribute__(self, name)


def test_the_server_calls_exactly_the_declared_hooks():
    """Everything the policy server reads off its mechanism over a run of every operation
    (construction, launches, a refused launch, a dry run, a capture and its replay, writes,
    reads, check, sync, stats, frees) is a member of ``DeviceMechanism``: its abstract methods
    and the attributes it declares with defaults; and that run reaches every abstract method
    but the one called only for a broken device (no declared hook is dead)."""
    declared = set(DeviceMechanism.__abstractmethods__)
    attributes = {"max_dynamic_shared_bytes", "strided_host_writes", "adopt_foreign",
                  "cuda_array_interface", "synchronize_foreign"}
    mechanism = _SeenEager()
    object.__setattr__(mechanism, "_seen", set())
    register_backend("eagerhooks", lambda i: DeviceServer(f"eagerhooks:{i}", mechanism,
                                                          InlineChannel(f"eagerhooks:{i}")),
                     source="tests/backends/test_base.py")
    client = cube.client("eagerhooks:0")
    kernel = cube.kernel(_py_axpy)
    hx, hy = client.create(np.arange(4.0)), client.create(np.zeros(4))
    client.launch(kernel, 1, 4, 1.0, hx, hy)
    client.launch(kernel, 1, (2048, 1, 1), 1.0, hx, hy)       # beyond CUDA's limits: refused
    with pytest.raises(LaunchFailure):
        client.read(hy)
    with cube.dry_run():
        client.launch(kernel, 1, 4, 1.0, hx, hy)
    client.write(hx, np.arange(4.0))          # full writes repair what the refusal failed
    client.write(hy, np.ones(4))
    client.graph_prepare()
    client.launch(kernel, 1, 4, 1.0, hx, hy)
    client.start_capture()
    client.launch(kernel, 1, 4, 1.0, hx, hy)
    client.stop_capture().replay()
    client.check(hy)
    np.testing.assert_array_equal(client.read(hy), np.ones(4) + 2 * np.arange(4.0))
    client.sync()
    client.server.stats
    client.server.cache_sizes()
    del hx
    client.sync()
    # What the mechanism reads of its own (``server``, kept by ``attach``) is not the server's.
    seen = mechanism._seen - {"server"}
    assert seen <= declared | attributes, sorted(seen - declared - attributes)
    assert declared - seen == {"is_device_fault"}, sorted(declared - seen)
