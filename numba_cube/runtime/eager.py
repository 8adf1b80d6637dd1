"""The numba-style launch: ``kernel[count, dim](*args)`` with host NumPy arrays.

Existing numba.cuda code passes NumPy arrays and expects them updated when the call returns. So:
host arrays are copied into fresh handles, the launch runs on the current client, and the arrays
the kernel writes (its write set, runtime.md 4.2) are read back into the caller's arrays. The read
is where a failure surfaces: it raises ``LaunchFailure`` right there. Handles may be mixed in and
are passed through untouched.
"""

from __future__ import annotations

import numpy as np

from ..kernel.kernel import resolve_access

__all__ = ["launch_eager"]


def launch_eager(kernel, count, dim, *args) -> None:
    from .registry import current_client

    client = current_client()
    converted, host = [], []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            h = client.create(a)
            converted.append(h)
            host.append((i, a, h))
        else:
            converted.append(a)
    client.launch(kernel, count, dim, *converted)
    if not host:
        return
    ndims = tuple(a.ndim if isinstance(a, np.ndarray) else getattr(a, "ndim", None) if hasattr(a, "shape") else None
                  for a in args)
    access = resolve_access(kernel, ndims)
    written = [(i, a, h) for i, a, h in host if access[i][1]]
    # Every host buffer is checked, written or not, so a failure that reached only a read-only input
    # (impossible today, cheap to cover) cannot pass silently.
    results = client.read_many([h for _, _, h in written]) if written else []
    for (_, a, _), data in zip(written, results):
        a[...] = data
    for answer in client.sync_buffers(*[h for _, _, h in host]):
        if answer is not None:
            raise answer
