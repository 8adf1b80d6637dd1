"""NVTX ranges around CUDA launches (backends/cuda/driver/nvtx.py), on the fake driver.

Without Nsight attached the real ``nvtx`` package records nothing anyone can read back, so the
ranges are checked through a stand-in ``nvtx`` module put in ``sys.modules`` that records the
calls it gets. That is a seam, not a fault: the stand-in has the two functions of nvtx's
documented API the module uses (``push_range(message, color, domain)``, ``pop_range(domain)``).
Where the real package is installed, a device with it runs its launches correctly too.

Each test makes its own fake device (a backend of its own name, unregistered afterwards): the
variable is read when a device's server is made.
"""

from __future__ import annotations

import itertools
import sys
import types
import warnings

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

from _cuda_setup import only

pytestmark = only("fake", why="a fresh fake device per test, made with the variable set")

_names = itertools.count()


@cube.kernel
def add_one(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + 1


@pytest.fixture
def fresh_device(monkeypatch):
    """``make(nvtx=..., enabled=...)``: a client of a new fake device whose server is made with
    ``NUMBA_CUBE_NVTX`` and ``sys.modules["nvtx"]`` as given (``None``: the import fails)."""
    from _cuda_fake import register_fake_cuda
    from numba_cube.runtime.registry import unregister_backend

    made = []

    def make(nvtx="keep", enabled="1"):
        if nvtx != "keep":
            monkeypatch.setitem(sys.modules, "nvtx", nvtx)
        monkeypatch.setenv("NUMBA_CUBE_NVTX", enabled)
        name = f"fakecudanvtx{next(_names)}"
        register_fake_cuda(name, devices=1)
        made.append(name)
        return cube.client(f"{name}:0")

    yield make
    for name in made:
        unregister_backend(name)


class RecordingNvtx(types.ModuleType):
    """The stand-in ``nvtx``: records ``("push", message, domain)`` and ``("pop", domain)``."""

    def __init__(self):
        super().__init__("nvtx")
        self.calls = []

    def push_range(self, message=None, color="blue", domain=None, category=None, payload=None):
        self.calls.append(("push", message, domain))

    def pop_range(self, domain=None):
        self.calls.append(("pop", domain))


def _launch_repeatedly(client, times):
    a = client.create(np.arange(64.0))
    out = client.empty(64)
    for _ in range(times):
        client.launch(add_one, 1, 64, a, out)
    np.testing.assert_array_equal(client.read(out), np.arange(64.0) + 1)
    return client


def test_every_launch_is_a_range_named_after_its_kernel(fresh_device):
    """With NUMBA_CUBE_NVTX=1 every launch, the first (general path) and its warm repeats, pushes
    a range named after the kernel id in domain numba_cube and pops it before the next one, and
    nothing else opens ranges; the results are NumPy's."""
    recorder = RecordingNvtx()
    client = _launch_repeatedly(fresh_device(nvtx=recorder), 5)
    assert client.server.stats["warm"] >= 3            # the warm path was taken, and wrapped
    pushes = [c for c in recorder.calls if c[0] == "push"]
    assert len(pushes) >= 5
    assert set(pushes) == {("push", add_one.id, "numba_cube")}
    depth = 0
    for call in recorder.calls:
        depth += 1 if call[0] == "push" else -1
        assert depth in (0, 1)                          # never nested, never popped unopened
    assert depth == 0 and recorder.calls[-1] == ("pop", "numba_cube")


def test_off_by_default_and_off_wraps_nothing(fresh_device):
    """Unset (or 0), no range is opened even with nvtx importable, and the device's warm launcher
    is the warm path's own function (nothing stands between the client and it)."""
    recorder = RecordingNvtx()
    client = _launch_repeatedly(fresh_device(nvtx=recorder, enabled="0"), 3)
    assert recorder.calls == []
    assert client.server.fast_launch.__name__ == "fast_launch"


def test_asked_for_without_the_package_warns_and_runs(fresh_device):
    """NUMBA_CUBE_NVTX=1 without the nvtx package is a CubeWarning naming the extra to install;
    the device runs its launches without ranges."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = fresh_device(nvtx=None)
        _launch_repeatedly(client, 2)
    messages = [str(w.message) for w in caught if issubclass(w.category, cube.CubeWarning)]
    assert any("numba_cube[nvtx]" in m for m in messages), messages


def test_the_real_nvtx_package_takes_the_calls(fresh_device):
    """With the real nvtx package (no profiler attached) ranged launches run and give NumPy's
    results."""
    pytest.importorskip("nvtx")
    _launch_repeatedly(fresh_device(), 4)
