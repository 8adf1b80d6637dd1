"""The runtime's default mechanism (``runtime/launch/host_mechanism.py``): a ``HostBackend`` adapted.

A host-executing backend writes only ``HostBackend``; the policy server adapts it with
``HostMechanism``. These tests pin what the adapter adds, over ``testing.PythonBackend`` (kernels
are plain Python functions, results checked against NumPy): the server holds the adapter with
the backend given to it and no warm path; launches of one signature on other buffers compile
once (the two-level compile cache), another dtype compiles again; and a bound launch leaves the
server's cache with the buffer it binds.
"""

from __future__ import annotations

import gc
import itertools

import numpy as np

import numba_cube as cube
from numba_cube.runtime.launch.host_mechanism import HostMechanism
from numba_cube.testing import PythonBackend, register_python_backend

_names = itertools.count()


def _client():
    name = f"hostmech{next(_names)}"
    register_python_backend(name)
    return cube.client(f"{name}:0")


def _scale(a, x, out):
    out[:] = a * x


def test_a_host_backend_is_adapted_by_the_host_mechanism():
    """``DeviceServer`` given a ``HostBackend`` holds a ``HostMechanism`` over that very backend,
    and offers no warm path (a launch on a host backend is a queue hop anyway)."""
    client = _client()
    mechanism = client.server.mechanism
    assert isinstance(mechanism, HostMechanism)
    assert isinstance(mechanism.backend, PythonBackend)
    assert client.server.fast_launch is None


def test_one_signature_compiles_once_and_another_dtype_again():
    """Launches of one kernel on different buffers of the same dtype and rank share one compiled
    entry (the signature key, then the compile key); a float32 buffer is another signature and
    compiles again. Every result is NumPy's."""
    client = _client()
    kernel = cube.kernel(_scale)
    backend = client.server.mechanism.backend
    xs = [np.arange(8.0) + k for k in range(3)]
    outs = []
    for k, x in enumerate(xs):
        out = client.empty(8, np.float64)
        client.launch(kernel, 1, 8, float(k), client.create(x), out)
        outs.append(out)
    for k, (x, out) in enumerate(zip(xs, outs)):
        np.testing.assert_array_equal(client.read(out), k * x)
    assert backend.compiled == [kernel.id]
    x32 = np.arange(8, dtype=np.float32)
    out32 = client.empty(8, np.float32)
    client.launch(kernel, 1, 8, 2.0, client.create(x32), out32)
    np.testing.assert_array_equal(client.read(out32), 2 * x32)
    assert backend.compiled == [kernel.id, kernel.id]


def test_a_bound_launch_leaves_the_cache_with_its_buffer():
    """The bound launch of a launch on a buffer is cached (a repeat is a cache hit) and dropped
    once that buffer is freed, so dropped handles do not grow the server's caches."""
    client = _client()
    server = client.server
    kernel = cube.kernel(_scale)
    keep = client.empty(4, np.float64)
    client.launch(kernel, 1, 4, 1.0, client.create(np.ones(4)), keep)   # warm the compile cache
    client.sync()
    gc.collect()
    client.sync()
    before = server.cache_sizes()["bound_launches"]
    x = client.create(np.ones(4))
    client.launch(kernel, 1, 4, 3.0, x, keep)
    client.sync()                   # the device thread has run the launch's server operation
    hits = server.stats["cache_hits"]
    client.launch(kernel, 1, 4, 3.0, x, keep)
    client.sync()
    assert server.stats["cache_hits"] == hits + 1
    assert server.cache_sizes()["bound_launches"] == before + 1
    np.testing.assert_array_equal(client.read(keep), np.full(4, 3.0))
    del x
    gc.collect()
    client.sync()
    assert server.cache_sizes()["bound_launches"] == before
