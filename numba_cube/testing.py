"""Helpers for tests of code that uses numba_cube.

``launched()`` is the issuing thread's log of kernel ids it launched (gate 3 of a launch, kept by
``runtime/client/launch_log.py`` and re-exported here): cheap, always on, and per thread so parallel
tests do not see each other's launches. ``take_turns`` issues a multi-threaded program in one
global order; ``PythonBackend`` and ``register_python_backend`` give tests a backend whose
kernels are plain Python functions.
"""

from __future__ import annotations

import threading

from .backends.base import HostBackend as _HostBackend
from numba_cube.runtime.client.launch_log import (
    clear_launched, launched, note_launch, record_launches,
)

__all__ = ["launched", "clear_launched", "note_launch", "record_launches", "take_turns",
           "PythonBackend", "register_python_backend"]


def take_turns(steps, issue, threads: int = 4, timeout: float = 120.0) -> None:
    """Issue a multi-threaded program in one global order: ``steps[k][0]`` names the thread (0 to
    ``threads - 1``) that calls ``issue(k, steps[k])``, and step k starts only after step k-1 has
    returned. The threads are real and each keeps its own stream (and ``with cube.stream()``
    scopes), so what they issue runs concurrently; only the *issue order* is fixed, which gives
    the program one sequential meaning to compare with (the property tests of the scheduler).

    Raises the first exception a step raised (the other threads stop at their next turn), and
    ``AssertionError`` if a thread did not finish within ``timeout`` seconds (a deadlock)."""
    turn = [0]
    cond = threading.Condition()
    errors: list = []

    def thread_main(tid):
        try:
            for k, step in enumerate(steps):
                if step[0] != tid:
                    continue
                with cond:
                    cond.wait_for(lambda: turn[0] >= k)
                    if turn[0] > k:
                        return              # another thread failed: the program is over
                try:
                    issue(k, step)
                finally:
                    with cond:
                        turn[0] += 1
                        cond.notify_all()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            errors.append(exc)
            with cond:
                turn[0] = len(steps) + 1
                cond.notify_all()

    workers = [threading.Thread(target=thread_main, args=(t,), name=f"take_turns-{t}")
               for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout)
    assert not any(w.is_alive() for w in workers), "deadlock: a thread did not finish its turns"
    if errors:
        raise errors[0]


class PythonBackend(_HostBackend):
    """A fake host backend for tests of runtime policy: a "kernel" is a plain Python function of
    its arguments (NumPy views), called once per launch; no compile, no translation.

    It exercises the real runtime (gates, ledger, hazards, stream workers, memory) with launches
    that cost microseconds, and lets a test inject a failure by raising from the function.
    ``count`` and ``dim`` are ignored. Register it with ``register_python_backend()``.
    """

    name = "pytest"

    def __init__(self):
        self.compiled: list[str] = []

    def arg_type(self, value):
        import numpy as np

        if isinstance(value, np.ndarray):
            return ("array", value.dtype.str, value.ndim)
        return ("scalar", type(value).__name__)

    def cache_extras(self, count, dim):
        return ()

    def compile(self, kernel, arg_types, extras, options):
        from .errors import CompileError

        if getattr(kernel.py_func, "refuse_compile", False):
            raise CompileError(f"kernel {kernel.name} refused by the test backend")
        self.compiled.append(kernel.id)
        fn = kernel.py_func

        def run(count, dim, args):
            fn(*args)

        return run


def register_python_backend(name: str = "pytest", *, inline: bool = False, max_tasks: int = 32,
                            baseline_rule: bool = False) -> None:
    """Register ``PythonBackend`` as backend ``name`` (devices ``name:0``, ``name:1``, ...)."""
    from numba_cube.runtime.streams.channel import InlineChannel, ThreadChannel
    from numba_cube.runtime.registry import register_backend
    from numba_cube.runtime.server import DeviceServer

    def factory(index):
        device = f"{name}:{index}"
        channel = InlineChannel(device) if inline else ThreadChannel(device)
        return DeviceServer(device, PythonBackend(), channel, max_tasks=max_tasks,
                            baseline_rule=baseline_rule)

    register_backend(name, factory, source="numba_cube.testing")
