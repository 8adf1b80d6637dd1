"""The CPU backend: numba.cuda kernels compiled by Numba's CPU compiler through loop fission.

``translate.py`` turns a kernel into a generated ``njit`` module through the stages in this
package's folders (``frontend/``, ``lower/``, ``analyze/``, ``passes/``, ``emit/``; what generated
code imports: ``kernel_runtime/``; what is kept on disk: ``cache/``); ``server.py`` is the
mechanism the runtime's ``DeviceServer`` drives, ``twin_choice.py`` its choice between a
kernel's serial and parallel twins, ``twin_runners.py`` the calls of either. This module is the backend's plugin: it registers
``cpu`` (devices ``cpu:0``, ``cpu:1``, ... each with its own server, memory and threads), and
says which client option the environment sets (``default_options``).
"""

from ... import config
from ...hookspecs import hookimpl
from ..base import BACKEND_API_VERSION

__all__ = ["numba_cube_register_backends", "default_options"]


def default_options() -> dict:
    """The options a ``cpu`` client takes from the environment when its caller does not give
    them: ``boundscheck`` from Numba's ``NUMBA_BOUNDSCHECK``, else ``NUMBA_CUBE_BOUNDSCHECK``
    (``config.boundscheck_forced``); nothing when neither is set."""
    forced = config.boundscheck_forced()
    return {} if forced is None else {"boundscheck": forced}


# tryfirst: the built-in backends register before any third party's, so their names stay theirs.
@hookimpl(tryfirst=True)
def numba_cube_register_backends(register):
    from numba_cube.backends.cpu.server import make_cpu_server

    register("cpu", make_cpu_server, api_version=BACKEND_API_VERSION, priority=0,
             default_options=default_options)
