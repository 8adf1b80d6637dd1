"""numba_cube plugin: the ``cudasim`` debug backend (kernels on numba-cuda's CUDA simulator).

This module is the plugin object named by the entry point (``pyproject.toml``)::

    [project.entry-points.numba_cube]
    cudasim = "numba_cube_cudasim"

It implements one hook, ``numba_cube_register_backends``. Everything it registers is cheap to
register: the simulator is imported by the factory, the first time ``cube.client("cudasim")``
asks for a device, so ``import numba_cube`` and ``cube.backends()`` never pay for it.

The backend itself is ``backend.py`` (a ``HostBackend`` under numba_cube's ``DeviceServer``) and
``isolation.py`` (what the simulator needs to know of a kernel's function). numba_cube's own
``cuda`` backend runs on it under ``NUMBA_ENABLE_CUDASIM=1``: it asks the registry for this
backend and calls its factory with ``name="cuda"``. ``cudasim`` differs from that in needing no
environment variable: it can run next to the real ``cuda`` backend in one process, as a
debugging twin.
"""

from __future__ import annotations

import importlib.util

import numba_cube

__all__ = ["available", "devices", "make_server", "numba_cube_register_backends"]

__version__ = "0.1.0"

INSTALL_HINT = "pip install numba-cuda 'numpy<2.5'"


def available() -> str | None:
    """``None`` when the simulator can run, else why not. Cheap: finds, does not import."""
    if importlib.util.find_spec("numba_cuda") is None:
        return f"numba-cuda is not installed (the CUDA simulator comes with it): {INSTALL_HINT}"
    return None


def devices() -> list[str]:
    """The devices ``python -m numba_cube info`` lists (any index works, as with ``cpu``)."""
    return ["cudasim:0"]


def make_server(index: int, name: str = "cudasim"):
    """The factory: the server of device ``<name>:<index>``, made the first time a client asks
    for it (numba_cube's ``cuda`` backend asks with ``name="cuda"`` under the simulator)."""
    from .backend import make_simulator_server   # here: the simulator pulls in numba-cuda

    return make_simulator_server(index, name)


@numba_cube.hookimpl
def numba_cube_register_backends(register):
    register("cudasim", make_server, api_version=numba_cube.BACKEND_API_VERSION,
             available=available, priority=-10, devices=devices)
