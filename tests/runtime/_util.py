"""Small helpers shared by the runtime tests (not tests themselves)."""

from __future__ import annotations

import itertools
import threading

import numba_cube as cube
from numba_cube.runtime.registry import unregister_backend
from numba_cube.testing import register_python_backend

_indices = itertools.count(100)   # indices below 100 are left for tests that name devices


class PythonDevices:
    """One registered fake backend; each ``fresh()`` is a new device (its own server and state)."""

    def __init__(self, name: str, **options):
        self.name = name
        register_python_backend(name, **options)

    def fresh(self) -> cube.Client:
        return cube.client(f"{self.name}:{next(_indices)}")

    def close(self) -> None:
        unregister_backend(self.name)


def threaded_cpu_client(index: int) -> cube.Client:
    """A client of a CPU-backend device whose server runs on its own device thread
    (``ThreadChannel``), for tests of what a device thread does: the built-in ``cpu`` backend
    runs its server on the issuing thread (``InlineChannel``)."""
    from numba_cube.backends.cpu.server import CpuBackend, select_threading_layer
    from numba_cube.runtime.streams.channel import ThreadChannel
    from numba_cube.runtime.registry import register_backend
    from numba_cube.runtime.server import DeviceServer

    select_threading_layer()
    register_backend("cpu_threaded", lambda i: DeviceServer(f"cpu_threaded:{i}", CpuBackend(),
                                                          ThreadChannel(f"cpu_threaded:{i}")))
    return cube.client(f"cpu_threaded:{index}")


def drain(client) -> None:
    """Wait until the device thread has handled everything submitted before (FIFO channel)."""
    client.server.channel.call(lambda: None)


def run_in_thread(fn, *args, timeout: float = 10.0):
    """Run ``fn(*args)`` on a new thread; return its result or re-raise its exception here."""
    box = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "helper thread did not finish"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def host_contents(client, handle):
    """The bytes of ``handle`` as they are in memory, bypassing the failure check of ``read``."""
    return client.server.host_array(handle.binding()).copy()
