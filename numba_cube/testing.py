"""Helpers for tests of code that uses numba_cube.

``launched()`` is the issuing thread's log of kernel ids it launched (gate 3 of runtime.md 1.1):
cheap, always on, and per thread so parallel tests do not see each other's launches.
"""

from __future__ import annotations

import collections
import contextlib
import threading

from .backends.base import HostBackend as _HostBackend

__all__ = ["launched", "clear_launched", "record_launches", "take_turns"]

_local = threading.local()
_LOG_LENGTH = 1024  # bounded: a long-running program must not grow a log nobody reads


def _log() -> collections.deque:
    log = getattr(_local, "log", None)
    if log is None:
        log = _local.log = collections.deque(maxlen=_LOG_LENGTH)
    return log


def note_launch(kernel_id: str) -> None:
    try:
        _local.log.append(kernel_id)      # every launch comes here: the short way first
    except AttributeError:
        _log().append(kernel_id)


def launched() -> list[str]:
    """The kernel ids this thread launched (most recent last, the last 1024)."""
    return list(_log())


def clear_launched() -> None:
    _log().clear()


@contextlib.contextmanager
def record_launches():
    """``with record_launches() as ids:``: on exit, ``ids`` lists every kernel id this thread
    launched inside the block, in order (not only the last 1024), and ``launched()`` shows them
    too, as if nothing had watched. Costs nothing per launch (the block gets its own unbounded
    log, appended to the outer one on exit); blocks nest. Autotune uses it to learn which
    kernels a candidate launches."""
    outer = _log()
    inner = _local.log = collections.deque()
    ids: list[str] = []
    try:
        yield ids
    finally:
        ids.extend(inner)
        outer.extend(inner)
        _local.log = outer


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
    from .runtime.channel import InlineChannel, ThreadChannel
    from .runtime.registry import register_backend
    from .runtime.server import HostServer

    def factory(index):
        device = f"{name}:{index}"
        channel = InlineChannel(device) if inline else ThreadChannel(device)
        return HostServer(device, PythonBackend(), channel, max_tasks=max_tasks,
                          baseline_rule=baseline_rule)

    register_backend(name, factory, source="numba_cube.testing")
