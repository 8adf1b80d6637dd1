"""The numba-style launch: ``kernel[count, dim](*args)`` with host NumPy arrays.

Existing numba.cuda code passes NumPy arrays and expects them updated when the call returns. So:
host arrays are copied into fresh handles, the launch runs on the current client, and the arrays
the kernel writes (its write set, runtime.md 4.2) are read back into the caller's arrays. Handles
may be mixed in and are passed through untouched.

The call is synchronous, so its failure is raised right there, as ``LaunchFailure``, whether or
not the launch writes a buffer that could carry it (a kernel with only scalar or read-only
arguments that raises, reads out of bounds or does not compile): the launch is submitted blocking
and the server hands back *its own* outcome (``Client.launch_and_wait``), instead of the failure
being looked for on buffers, where a launch that writes none would leave no trace. The caller's
arrays are then left as they were.

numba's argument hints keep their meaning: ``cuda.In(a)`` is copied in and never back (whatever
the kernel writes into it stays on the device, as with numba.cuda), ``cuda.Out(a)`` and
``cuda.InOut(a)`` are copied back whether or not the analysis sees a write. A hint around
something that is not a host array (a device array) is passed through as its value.
"""

from __future__ import annotations

import sys

import numpy as np

from ..kernel.kernel import resolve_access

__all__ = ["launch_eager"]


#: where numba keeps its argument hint classes: on a GPU, and under the CUDA simulator
_HINT_MODULES = ("numba.cuda.args", "numba.cuda.simulator.args")

#: copy-back rule of a host array: only if written (no hint), never (In), always (Out, InOut)
_IF_WRITTEN, _NEVER, _ALWAYS = "if written", "never", "always"


def _unhint(arg):
    """``(value, copy-back rule)`` of a launch argument, looking through numba's hints. Only the
    hint modules already imported are asked: without numba.cuda there can be no hint."""
    for name in _HINT_MODULES:
        mod = sys.modules.get(name)
        if mod is not None and isinstance(arg, mod.ArgHint):
            return arg.value, (_NEVER if isinstance(arg, mod.In) else _ALWAYS)
    return arg, _IF_WRITTEN


def launch_eager(kernel, count, dim, *args) -> None:
    from .registry import current_client

    client = current_client()
    converted, host, values = [], [], []
    for i, a in enumerate(args):
        a, rule = _unhint(a)
        values.append(a)
        if isinstance(a, np.ndarray):
            h = client.create(a)
            converted.append(h)
            host.append((i, a, h, rule))
        else:
            converted.append(a)
    client.launch_and_wait(kernel, count, dim, *converted)    # raises the launch's own failure
    if not host:
        return
    ndims = tuple(a.ndim if isinstance(a, np.ndarray) else getattr(a, "ndim", None) if hasattr(a, "shape") else None
                  for a in values)
    access = resolve_access(kernel, ndims)
    written = [(i, a, h) for i, a, h, rule in host
               if rule == _ALWAYS or (rule == _IF_WRITTEN and access[i][1])]
    host = [(i, a, h) for i, a, h, _ in host]
    # Every host buffer is checked, written or not, so a failure that reached only a read-only input
    # (impossible today, cheap to cover) cannot pass silently.
    results = client.read_many([h for _, _, h in written]) if written else []
    for (_, a, _), data in zip(written, results):
        a[...] = data
    for answer in client.sync_buffers(*[h for _, _, h in host]):
        if answer is not None:
            raise answer
