"""The one exception tree of numba_cube.

Every error the runtime raises on purpose is a ``CubeError``; where a builtin exception already
names the situation, the class also derives from it, so ``except ValueError`` keeps working for
code that does not know about numba_cube (the httpx / attrs convention)::

    CubeError
     ├── LaunchFailure          a buffer was not written; .root (the original exception), .kernel_id
     ├── CompileError           the compile stage refused a kernel (wraps Numba's error)
     ├── ForeignHandleError     also a ValueError; raised on the issuing thread
     ├── CaptureError           raised by stop_capture / start_capture
     ├── DeviceFault            raised by sync(); the device or its thread is broken
     └── BackendNotFound        also a LookupError

Launch-time argument mistakes (wrong count or type of arguments) are ``LaunchArgumentError``,
a ``CubeError`` and a ``TypeError``: they are raised on the issuing thread, before the hand-off,
because the server has no channel to report them back.
"""

from __future__ import annotations

__all__ = [
    "CubeError",
    "LaunchFailure",
    "CompileError",
    "ForeignHandleError",
    "CaptureError",
    "DeviceFault",
    "BackendNotFound",
    "LaunchArgumentError",
]


class CubeError(Exception):
    """Base class of every error numba_cube raises on purpose."""


class CompileError(CubeError):
    """The compile stage refused a kernel.

    ``construct`` names what could not be compiled (e.g. ``"cuda.syncthreads() under a
    unit-dependent condition"``) and ``lineno`` the line in the kernel's source file, when known.
    ``__cause__`` carries Numba's own error where there is one.
    """

    def __init__(self, message: str, *, construct: str | None = None,
                 lineno: int | None = None, filename: str | None = None):
        self.construct = construct
        self.lineno = lineno
        self.filename = filename
        where = ""
        if filename and lineno:
            where = f" ({filename}, line {lineno})"
        elif lineno:
            where = f" (line {lineno})"
        super().__init__(message + where)


class LaunchFailure(CubeError):
    """A buffer was not written because a launch failed.

    ``root`` is the original exception (the first failure of the chain), ``kernel_id`` the kernel
    whose launch failed first, and ``chain`` the ids of the launches the failure travelled through
    to reach this buffer, root first.
    """

    def __init__(self, root: BaseException, kernel_id: str | None,
                 chain: tuple[str, ...] = ()):
        self.root = root
        self.kernel_id = kernel_id
        self.chain = tuple(chain)
        msg = f"kernel {kernel_id!r} failed: {type(root).__name__}: {root}"
        if len(self.chain) > 1:
            msg += "\n  reached this buffer through: " + " -> ".join(self.chain)
        super().__init__(msg)


class ForeignHandleError(CubeError, ValueError):
    """A handle of another device was passed to this client."""


class CaptureError(CubeError):
    """A graph capture was refused, or an operation inside its window was."""


class DeviceFault(CubeError):
    """The device (or the thread that owns it) is broken; raised by ``sync()``."""


class BackendNotFound(CubeError, LookupError):
    """No backend of that name is registered."""


class LaunchArgumentError(CubeError, TypeError):
    """A launch's arguments do not fit the kernel (count, type, geometry)."""
