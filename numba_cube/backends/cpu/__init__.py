"""The CPU backend: numba.cuda kernels compiled by Numba's CPU compiler through loop fission.

``translate.py`` and friends turn a kernel into a generated ``njit`` module; ``server.py`` is the
mechanism the runtime's ``HostServer`` drives. This module is the backend's plugin: it registers
``cpu`` (devices ``cpu:0``, ``cpu:1``, ... each with its own server, memory and threads).
"""

from ...hookspecs import hookimpl
from ..base import BACKEND_API_VERSION


@hookimpl
def numba_cube_register_backends(register):
    from .server import make_cpu_server

    register("cpu", make_cpu_server, api_version=BACKEND_API_VERSION, priority=0)
