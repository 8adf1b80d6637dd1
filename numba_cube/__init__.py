"""numba_cube: a kernel runtime for numba.cuda-style kernels.

Add ``@cube.kernel`` to a numba.cuda kernel and run it on the CPU (Numba's CPU compiler, by loop
fission) or on a GPU, through a client that records failures on buffers, infers stream
dependencies from the buffers launches bind, and offers dry runs, graphs and autotuning::

    import numba_cube as cube
    from numba import cuda

    @cube.kernel
    def axpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    client = cube.client("cpu")
    x, y = client.create(np.ones(1000)), client.create(np.ones(1000))
    out = client.empty(1000, np.float64)
    client.launch(axpy, (1000 + 255) // 256, 256, 2.0, x, y, out)
    client.read(out)

Every public name is re-exported here explicitly; ``__all__`` is the contract (API.md lists them).
"""

from __future__ import annotations

import logging as _logging

from .autotune import Tuner, TuneResult, autotune, pow2_bucket
from .backends.base import BACKEND_API_VERSION
from .dropin import install, uninstall
from .errors import (BackendNotFound, CaptureError, CompileError, CubeError, CubeWarning, DeviceFault,
                     DivergenceError, DTypeError, ForeignHandleError, LaunchArgumentError, LaunchFailure,
                     LaunchModeError, LayoutError, OptionError, ShapeError, StreamIdError,
                     UnrecordedFailureWarning, UnsupportedAPIError)
from .hookspecs import hookimpl
from .kernel.kernel import Kernel, kernel, set_numba_style_launch as _set_numba_style_launch
from numba_cube.runtime.client.client import Client
from numba_cube.runtime.launch.geometry import CubeCount, CubeDim
from numba_cube.runtime.memory.handle import Handle
from numba_cube.runtime.client.modes import LaunchMode, dry_run, launch_mode, real_run
from numba_cube.runtime.client.observers import (
    LaunchEvent, TaskEvent, add_observer, add_task_observer, remove_observer,
    remove_task_observer,
)
from numba_cube.runtime.registry import backends, client, connect_plugins as _connect_plugins, use
from numba_cube.runtime.streams.identity import StreamId, stream

__version__ = "0.1.0"


# -- wiring -----------------------------------------------------------------------------------
# Two layers call up into a layer above them, which hands itself in here instead of being imported
# from below (tests/test_layering.py keeps the import graph free of cycles). Both imports are
# deferred to the first call, so `import numba_cube` loads neither Numba nor the plugins.
def _launch_numba_style(kernel_, count, dim, *args, shared_bytes=0, stream=None) -> None:
    """``kernel[count, dim](*args)``: the runtime's numba-style launch (``runtime/client/eager.py``)."""
    from numba_cube.runtime.client.eager import launch_eager

    launch_eager(kernel_, count, dim, *args, shared_bytes=shared_bytes, stream=stream)


def _start_plugins() -> None:
    """The registry's first use of backends or clients starts the plugin manager."""
    from .plugins import get_plugin_manager

    get_plugin_manager()


def _announce_client(new_client) -> None:
    """The registry made a client: the ``numba_cube_client_created`` hook."""
    from .plugins import notify_client_created

    notify_client_created(new_client)


_set_numba_style_launch(_launch_numba_style)
_connect_plugins(_start_plugins, _announce_client)

# A library logs, it does not configure logging: the application decides where records go.
_logging.getLogger("numba_cube").addHandler(_logging.NullHandler())

__all__ = [
    "__version__",
    # kernels and geometry
    "kernel", "Kernel", "CubeDim", "CubeCount",
    # clients, handles, streams
    "client", "use", "backends", "Client", "Handle", "StreamId", "stream",
    # launch modes and autotune
    "LaunchMode", "launch_mode", "dry_run", "real_run", "Tuner", "TuneResult", "autotune",
    "pow2_bucket",
    # numba.cuda programs served by numba_cube (numba_cube/dropin/)
    "install", "uninstall",
    # observers and plugins
    "LaunchEvent", "TaskEvent", "add_observer", "remove_observer", "add_task_observer",
    "remove_task_observer", "hookimpl", "BACKEND_API_VERSION",
    # errors
    "CubeError", "LaunchFailure", "CompileError", "DivergenceError", "ForeignHandleError", "CaptureError",
    "DeviceFault", "BackendNotFound", "LaunchArgumentError", "DTypeError", "ShapeError",
    "LayoutError", "StreamIdError", "OptionError", "LaunchModeError", "UnsupportedAPIError",
    # warnings
    "CubeWarning", "UnrecordedFailureWarning",
]
