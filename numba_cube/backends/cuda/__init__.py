"""The CUDA backend: numba.cuda kernels compiled by numba-cuda, launched through the driver.

Two mechanisms answer to the backend name ``cuda``:

- on a machine with a GPU, the runtime's ``DeviceServer`` over a ``CudaMechanism``
  (``server.py``, ``mechanism.py``), whose parts are in rooms: ``driver/`` (the driver's calls,
  the context, compiled warm calls), ``kernels/`` (numba-cuda compiles, exceptions, the disk
  cache), ``launch/`` (packed launches straight to ``cuLaunchKernel``, the warm path, error
  words, dynamic counts), ``streams/`` (CUDA streams mapped from numba_cube's stream ids,
  ordered by events; graphs) and ``memory/`` (pooled device memory, copies,
  ``__cuda_array_interface__`` and DLPack interop);
- under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``, how CI runs without a GPU), the
  registered ``cudasim`` backend (the plugin ``plugins/numba_cube_cudasim``: a ``HostBackend``
  under the runtime's ``DeviceServer``), whose factory makes the server under the name ``cuda``.
  Without that plugin, ``cuda`` is unavailable under the simulator and says how to install it
  (``driver/probe.py``); it never falls back to the driver or to another backend.

This module is the backend's plugin: it registers ``cuda`` through the same hook as third-party
backends. Importing it is cheap and never fails for want of numba-cuda or a driver: the
``available()`` probe (``driver/probe.py``) says why the backend cannot start instead.
"""

from __future__ import annotations

from ...errors import BackendNotFound
from ...hookspecs import hookimpl
from ..base import BACKEND_API_VERSION
from numba_cube.backends.cuda.driver.probe import available, simulating, simulator_backend

__all__ = ["numba_cube_register_backends", "make_cuda_server", "available", "devices"]

#: Above the CPU backend (0): ``cube.client()`` picks a GPU when one is present.
PRIORITY = 10


def make_cuda_server(index: int):
    """The server of device ``cuda:<index>``: the simulator's under ``NUMBA_ENABLE_CUDASIM=1``
    (made by the ``cudasim`` backend's factory), else the real device's."""
    if simulating():
        info, reason = simulator_backend()
        if info is None:
            raise BackendNotFound(f"backend 'cuda' is not available: {reason}")
        return info.factory(index, name="cuda")
    from numba_cube.backends.cuda.server import make_gpu_server

    return make_gpu_server(index)


def devices() -> list[str]:
    """The devices ``python -m numba_cube info`` lists: one per GPU (``cuda:0`` under the
    simulator, which accepts any index)."""
    if simulating():
        return ["cuda:0"]
    from numba_cube.backends.cuda.driver.probe import device_count

    return [f"cuda:{i}" for i in range(device_count())]


# tryfirst: the built-in backends register before any third party's, so their names stay theirs.
@hookimpl(tryfirst=True)
def numba_cube_register_backends(register):
    register("cuda", make_cuda_server, api_version=BACKEND_API_VERSION, available=available,
             priority=PRIORITY, devices=devices)
