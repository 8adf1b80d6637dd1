"""The recorder: a pluggy plugin object that keeps task and launch events and turns them into a
Chrome trace / Perfetto JSON object.

What is kept is small and copied out of the events: a ``LaunchEvent`` holds the launch's
arguments (handles), and keeping those would keep the user's buffers alive for as long as the
trace. Events go into bounded deques (``max_events``): a service traced for days must not grow
without bound; how many were dropped is written into the trace.

The hooks run on hot paths (the issuing thread for launches, a stream worker for tasks): each is
one ``deque.append`` of a tuple, which is thread-safe in CPython without a lock.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
import tempfile
import threading
import time

import numba_cube

__all__ = ["Recorder", "tracing", "save", "active"]

_active_lock = threading.Lock()
_active: list["Recorder"] = []


def _register_active(rec: "Recorder") -> None:
    with _active_lock:
        _active.append(rec)


def _unregister_active(rec: "Recorder") -> None:
    with _active_lock:
        if rec in _active:
            _active.remove(rec)


def active() -> list["Recorder"]:
    """The recorders recording now (the ``NUMBA_CUBE_TRACE`` one, open ``tracing()`` blocks)."""
    with _active_lock:
        return list(_active)


def save() -> list[str]:
    """Write every active recorder that has a path, now; return the paths written."""
    return [rec.save() for rec in active() if rec.path is not None]


def _stream_value(stream) -> int | str:
    value = getattr(stream, "value", stream)
    return value if isinstance(value, int) else str(value)


def _kernel_name(kernel_id: str) -> str:
    return kernel_id.rsplit("-", 1)[0] if "-" in kernel_id else kernel_id


_ISSUE_LANE_BASE = 1_000_000  # thread ids of the issuing-thread lanes, after every stream's


class Recorder:
    """Records dispatches (``numba_cube_task_done``) and launches (``numba_cube_launch``)."""

    def __init__(self, path: str | os.PathLike | None = None, *, max_events: int = 1_000_000):
        self.path = os.fspath(path) if path is not None else None
        self.origin = time.perf_counter()      # ts 0 of the trace (TaskEvent times are perf_counter)
        self.wall_origin = time.time()
        self._tasks: collections.deque = collections.deque(maxlen=max_events)
        self._launches: collections.deque = collections.deque(maxlen=max_events)
        self._max = max_events
        self.dropped = 0   # events pushed out of a full deque (approximate under contention)

    def __repr__(self) -> str:
        return f"<numba_cube_trace.Recorder {self.path or '(in memory)'}: {len(self._tasks)} dispatches>"

    # -- hooks ------------------------------------------------------------------------------------
    @numba_cube.hookimpl
    def numba_cube_task_done(self, event) -> None:
        if len(self._tasks) == self._max:
            self.dropped += 1
        self._tasks.append((event, time.perf_counter()))

    @numba_cube.hookimpl
    def numba_cube_launch(self, event) -> None:
        if len(self._launches) == self._max:
            self.dropped += 1
        self._launches.append((event.device, event.kernel_id, event.kernel_name, str(event.count),
                               str(event.dim), _stream_value(event.stream),
                               getattr(event.mode, "value", str(event.mode)), event.thread,
                               time.perf_counter()))

    # -- output -----------------------------------------------------------------------------------
    def trace(self) -> dict:
        """The Chrome trace JSON object (``{"traceEvents": [...], ...}``) of what was recorded."""
        tasks = list(self._tasks)
        launches = list(self._launches)
        origin = self.origin

        def us(t: float) -> float:
            return round((t - origin) * 1e6, 3)

        names = {kid: name for (_, kid, name, *_rest) in launches}
        pids: dict[str, int] = {}
        lanes: dict[tuple, int] = {}
        meta: list[dict] = []

        def pid_of(device: str) -> int:
            pid = pids.get(device)
            if pid is None:
                pid = pids[device] = len(pids) + 1
                meta.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": device}})
                meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
            return pid

        def lane(device: str, key, label: str, tid: int) -> tuple[int, int]:
            pid = pid_of(device)
            if (device, key) not in lanes:
                lanes[(device, key)] = tid
                meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}})
                meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                             "args": {"sort_index": tid}})
            return pid, lanes[(device, key)]

        def stream_lane(device: str, stream) -> tuple[int, int]:
            value = _stream_value(stream)
            tid = value if isinstance(value, int) else _ISSUE_LANE_BASE - 1 - len(lanes)
            return lane(device, ("stream", value), f"stream {value}", tid)

        events: list[dict] = []
        by_task: dict[tuple, tuple] = {}   # (device, task id) -> (event, pid, tid)
        for ev, received in tasks:
            pid, tid = stream_lane(ev.device, ev.stream)
            name = names.get(ev.kernel_id) or _kernel_name(ev.kernel_id)
            args = {"kernel_id": ev.kernel_id, "task_id": ev.task_id, "stream": _stream_value(ev.stream),
                    "deps": list(ev.deps), "failed": bool(ev.failed)}
            if ev.start is None or ev.end is None:
                events.append({"name": f"{name} (did not run)", "cat": "dispatch", "ph": "i", "s": "t",
                               "ts": us(received), "pid": pid, "tid": tid, "args": args})
                continue
            x = {"name": name, "cat": "dispatch", "ph": "X", "ts": us(ev.start),
                 "dur": round((ev.end - ev.start) * 1e6, 3), "pid": pid, "tid": tid, "args": args}
            if ev.failed:
                x["cname"] = "terrible"   # Chrome's trace viewer: red
            events.append(x)
            by_task[(ev.device, ev.task_id)] = (ev, pid, tid)

        flow_ids = itertools.count(1)
        for ev, pid, tid in list(by_task.values()):
            for dep_id in ev.deps:
                dep = by_task.get((ev.device, dep_id))
                if dep is None:
                    continue  # the task waited for did not run (or was dropped): nothing to point at
                dep_ev, dep_pid, dep_tid = dep
                fid = next(flow_ids)
                dur = (dep_ev.end - dep_ev.start) * 1e6
                # The arrow leaves the dependency's slice where it ends; a hair before the end so
                # that viewers bind it to that slice rather than to nothing.
                events.append({"name": "dependency", "cat": "dependency", "ph": "s", "id": fid,
                               "ts": round(us(dep_ev.end) - min(1.0, dur / 2), 3),
                               "pid": dep_pid, "tid": dep_tid})
                events.append({"name": "dependency", "cat": "dependency", "ph": "f", "bp": "e", "id": fid,
                               "ts": us(ev.start), "pid": pid, "tid": tid})

        issue_lanes: dict[tuple, int] = {}
        for device, kid, name, count, dim, stream, mode, thread, received in launches:
            key = (device, thread)
            if key not in issue_lanes:
                issue_lanes[key] = _ISSUE_LANE_BASE + len(issue_lanes)
            pid, tid = lane(device, ("issue", thread), f"launches from {thread}", issue_lanes[key])
            events.append({"name": f"launch {name}", "cat": "launch", "ph": "i", "s": "t", "ts": us(received),
                           "pid": pid, "tid": tid,
                           "args": {"kernel_id": kid, "count": count, "dim": dim, "stream": stream, "mode": mode}})

        return {
            "traceEvents": meta + events,
            "displayTimeUnit": "ms",
            "otherData": {
                "producer": "numba_cube_trace",
                "numba_cube": numba_cube.__version__,
                "origin_unix_time": self.wall_origin,
                "dropped_events": self.dropped,
            },
        }

    def save(self, path: str | os.PathLike | None = None) -> str:
        """Write the trace to ``path`` (default: the recorder's) atomically; return the path."""
        target = os.fspath(path) if path is not None else self.path
        if target is None:
            raise ValueError("this recorder has no path: pass one to save()")
        data = self.trace()
        directory = os.path.dirname(os.path.abspath(target))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".numba_cube_trace-", suffix=".json", dir=directory)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, default=str)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return target


def _sync_devices(devices) -> None:
    """Wait for the work of every device that launched inside the block, so that the trace holds
    each dispatch launched there (launches are asynchronous). A broken device is not our error."""
    for device in sorted(devices):
        with contextlib.suppress(Exception):
            numba_cube.client(device).sync()


@contextlib.contextmanager
def tracing(path: str | os.PathLike | None = None, *, sync: bool = True, max_events: int = 1_000_000):
    """Record the launches made inside the block; write ``path`` (if given) when it ends.

    With ``sync`` (the default) the block's end waits for the devices launched on, so every
    dispatch launched inside is in the trace. Yields the ``Recorder``.
    """
    from numba_cube.plugins import get_plugin_manager

    rec = Recorder(path, max_events=max_events)
    pm = get_plugin_manager()
    name = pm.register(rec, name=f"numba_cube_trace.tracing-{id(rec):x}")
    _register_active(rec)
    try:
        yield rec
    finally:
        try:
            if sync:
                _sync_devices({launch[0] for launch in list(rec._launches)})
        finally:
            pm.unregister(name=name)
            _unregister_active(rec)
        if path is not None:
            rec.save()
