"""NVTX ranges around CUDA launches, so that Nsight Systems shows which kernel each launch is.

Numba-cuda names a kernel on the GPU timeline by its mangled symbol; an NVTX range named after
the kernel's id (``<name>-<12 hex digits>``, the key of every cache) around the host side of each
launch puts the readable name on the calling thread's row, and Nsight projects it onto the
kernel it enqueued. The ranges belong to the NVTX domain ``numba_cube``, so a trace can show or
hide them apart from the user's own.

They are on when ``NUMBA_CUBE_NVTX`` is true *and* the ``nvtx`` package imports (``pip install
numba_cube[nvtx]``). The variable is read once per device, when its server is made
(``launch_ranges``); asked for without the package, the device warns once and runs without
ranges. Off, nothing is wrapped: the mechanism's launch paths are the very functions they are
without this module, so the warm path pays nothing, not even a test of a flag.

Each range covers what the host does for one launch: on the warm path the whole
``fast_launch`` call (a repeat that turns out not to match returns at once, and the general path
then opens its own range of the same name), on the general path the enqueue of the launch's
task (the dependency waits and the driver call). Launches that run nothing (a refused geometry,
a compile failure) get none; nor do launches recorded into a capture window, whose replay is one
graph launch.
"""

from __future__ import annotations

import functools
import importlib
import warnings

from numba_cube import config
from numba_cube.errors import CubeWarning

__all__ = ["NVTX_VARIABLE", "NVTX_DOMAIN", "LaunchRanges", "launch_ranges"]

NVTX_VARIABLE = "NUMBA_CUBE_NVTX"
#: The NVTX domain of every range this module opens.
NVTX_DOMAIN = "numba_cube"
_COLOR = "green"


class LaunchRanges:
    """Opens and closes the ranges of one device's launches through ``nvtx`` (the module)."""

    def __init__(self, nvtx):
        self._push = functools.partial(nvtx.push_range, color=_COLOR, domain=NVTX_DOMAIN)
        self._pop = functools.partial(nvtx.pop_range, domain=NVTX_DOMAIN)

    def around_warm(self, fast_launch):
        """``WarmPath.fast_launch`` inside a range named after the kernel."""
        push, pop = self._push, self._pop

        def fast_launch_in_range(kernel, count, dim, args, stream, options, shared_bytes=0):
            push(kernel.id)
            try:
                return fast_launch(kernel, count, dim, args, stream, options, shared_bytes)
            finally:
                pop()

        return fast_launch_in_range

    def around_enqueue(self, enqueue):
        """``CudaMechanism.enqueue`` inside a range named after the task's kernel, for tasks that
        launch one (``task.ran``)."""
        push, pop = self._push, self._pop

        def enqueue_in_range(task, deps, bound, blocking):
            if not task.ran:
                return enqueue(task, deps, bound, blocking)
            push(task.label)
            try:
                return enqueue(task, deps, bound, blocking)
            finally:
                pop()

        return enqueue_in_range


def launch_ranges(device: str) -> LaunchRanges | None:
    """The launch ranges of ``device`` if ``NUMBA_CUBE_NVTX`` asks for them and ``nvtx`` imports;
    else None (with a ``CubeWarning`` when they were asked for)."""
    if not config.get_bool(NVTX_VARIABLE, False):
        return None
    try:
        nvtx = importlib.import_module("nvtx")
    except ImportError as exc:
        warnings.warn(f"{NVTX_VARIABLE} is set but the nvtx package does not import ({exc}): "
                      f"{device} launches get no NVTX ranges; pip install 'numba_cube[nvtx]'",
                      CubeWarning, stacklevel=2)
        return None
    return LaunchRanges(nvtx)
