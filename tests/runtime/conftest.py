"""Fixtures shared by the runtime tests: fake-backend devices (``numba_cube.testing``).

Each test module gets its own registered fake backend, named after the module, so modules never
share device state; ``eager_devices`` hands every launch to its stream worker at once
(``max_tasks=1``); ``client`` is a fresh device of ``devices`` per test.
"""

from __future__ import annotations

import pytest

from ._util import PythonDevices


def _backend_name(request, suffix: str = "") -> str:
    return "rt_" + request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_") + suffix


@pytest.fixture(scope="module")
def devices(request):
    d = PythonDevices(_backend_name(request))
    yield d
    d.close()


@pytest.fixture(scope="module")
def eager_devices(request):
    d = PythonDevices(_backend_name(request, "_eager"), max_tasks=1)
    yield d
    d.close()


@pytest.fixture
def client(devices):
    return devices.fresh()
