"""What crosses from the issuing thread to the server for one launch (CONTRACT.md section 1).

A ``LaunchRequest`` carries everything the server needs, decided on the issuing thread (stream,
launch mode, options, who waits for the outcome), so the server never reads the caller's
thread-local state. ``refusal_of`` is the one launch-limit check of every backend: a launch whose
geometry is beyond CUDA's limits (``launch/geometry.py``) is refused the way the CUDA driver refuses it,
as a failure on the launch's write set.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from numba_cube.errors import CompileError, LaunchArgumentError
from numba_cube.runtime.memory.handle import Binding
from numba_cube.runtime.client.modes import LaunchMode

__all__ = ["LaunchRequest", "refusal_of", "refused_launch_text"]


class LaunchRequest(NamedTuple):
    """Everything a launch needs, decided on the issuing thread and passed as a value.

    A NamedTuple: one is made per launch, and it is the cheapest immutable record Python has."""

    kernel: Any
    count: Any            # CubeCount (static or dynamic)
    dim: Any              # CubeDim
    args: tuple           # Binding or scalar, in parameter order
    count_binding: Binding | None
    stream: Any           # StreamId
    mode: LaunchMode
    options: tuple        # client compile options, as sorted (key, value) pairs
    # The launch as the caller wrote it, (kernel object, count, dim, args), when the launch may
    # start a warm path: a server that has one (``DeviceServer.fast_launch``) matches the next
    # launches against it (backends/cuda/launch/fast_path.py); else None.
    as_called: tuple | None = None
    issuer: int = 0       # the issuing thread's ident (whom an unrecorded failure is reported to)
    outcome: Any = None   # outcomes.LaunchOutcome of a caller that waits for this launch, or None
    skipped: Any = None   # modes.SkippedLaunch of a launch dry runs skip (they wait for it), or None
    # Dynamic shared memory per cube, in bytes (``cuda.shared.array(0, dtype)`` views it): part of
    # the launch like its geometry, a run-time value, never part of a compile-cache key.
    shared_bytes: int = 0


def refusal_of(req: LaunchRequest) -> LaunchArgumentError | None:
    """The refusal of a launch whose geometry is beyond CUDA's launch limits (every backend
    refuses what the CUDA driver would), or None. Two attribute reads when within them."""
    problem = req.dim.beyond_limits or req.count.beyond_limits
    if problem is None:
        return None
    return LaunchArgumentError(f"kernel {req.kernel.name} cannot be launched: {problem}")


def refused_launch_text(kernel_id: str, error: BaseException) -> str:
    """How a capture window names a launch it refuses because the launch cannot run at all."""
    if isinstance(error, CompileError):
        return f"launch of {kernel_id} (its kernel does not compile: {error})"
    return f"launch of {kernel_id} ({error})"
