"""Launch observers: callables told about each launch on the issuing thread, before the hand-off.

This is the last point at which the caller's context (thread, stream, launch mode) exists, so
profilers and tracers hook in here (CONTRACT.md 1.1, gate 5). Plugins reach it through the
``numba_cube_launch`` hook (see ``plugins.py``); code can also add an observer directly.

An observer that raises is removed from the hot path's concerns: the error is logged and the
launch goes on, because an observer must never change what a program computes.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable

from numba_cube.runtime.client.watchers import watch

__all__ = ["LaunchEvent", "TaskEvent", "add_observer", "remove_observer", "active", "notify_launch",
           "add_task_observer", "remove_task_observer", "tasks_observed", "notify_task"]

log = logging.getLogger("numba_cube")

_lock = threading.Lock()
_observers: tuple = ()  # replaced, never mutated: the hot path reads it without a lock
_task_observers: tuple = ()


@dataclass(frozen=True)
class LaunchEvent:
    """What an observer learns about one launch."""

    device: str
    kernel_id: str
    kernel_name: str
    count: Any
    dim: Any
    args: tuple
    stream: Any
    mode: Any
    thread: str


def add_observer(fn: Callable[[LaunchEvent], None]) -> None:
    global _observers
    with _lock:
        _observers = _observers + (fn,)
        watch(1)


def remove_observer(fn: Callable[[LaunchEvent], None]) -> None:
    global _observers
    with _lock:
        kept = tuple(o for o in _observers if o is not fn)
        watch(len(kept) - len(_observers))
        _observers = kept


def active() -> bool:
    return bool(_observers)


def notify_launch(client, kernel, count, dim, args, stream, mode) -> None:
    event = LaunchEvent(client.device, kernel.id, kernel.name, count, dim, args, stream, mode,
                        threading.current_thread().name)
    for fn in _observers:
        try:
            fn(event)
        except Exception:  # noqa: BLE001 - an observer must not change what the program computes
            log.exception("numba_cube: launch observer %r failed", fn)


@dataclass(frozen=True)
class TaskEvent:
    """What a task observer learns when a dispatch finished (on the thread that ran it).

    ``task_id`` is unique per device; ``deps`` are the ids of the tasks on *other* streams it
    waited for (the inferred dependencies); ``start``/``end`` are ``time.perf_counter()`` values,
    ``None`` when the dispatch did not run (skipped for a failed input, zero count).
    """

    device: str
    task_id: int
    kernel_id: str
    stream: Any
    deps: tuple
    start: float | None
    end: float | None
    failed: bool


def add_task_observer(fn: Callable[[TaskEvent], None]) -> None:
    global _task_observers
    with _lock:
        _task_observers = _task_observers + (fn,)
        watch(1)


def remove_task_observer(fn: Callable[[TaskEvent], None]) -> None:
    global _task_observers
    with _lock:
        kept = tuple(o for o in _task_observers if o is not fn)
        watch(len(kept) - len(_task_observers))
        _task_observers = kept


def tasks_observed() -> bool:
    return bool(_task_observers)


def notify_task(event: TaskEvent) -> None:
    for fn in _task_observers:
        try:
            fn(event)
        except Exception:  # noqa: BLE001 - an observer must not change what the program computes
            log.exception("numba_cube: task observer %r failed", fn)
