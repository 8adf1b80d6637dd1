"""The entry-point plugin object: a ``Recorder`` if ``NUMBA_CUBE_TRACE`` is set, else an idle
object with no hooks.

numba_cube imports this module when it loads its plugins (the first use of a backend or a
client), so the variable is read then. Being hook-less when tracing is off matters: numba_cube
installs its task-observer dispatcher only while some plugin implements ``numba_cube_task_done``,
so an idle tracer costs nothing per launch.
"""

from __future__ import annotations

import atexit
import os

from numba_cube import config

from .recorder import Recorder, _register_active

__all__ = ["plugin", "trace_path"]

config.declare("NUMBA_CUBE_TRACE", "numba_cube_trace")


def trace_path() -> str | None:
    """Where ``NUMBA_CUBE_TRACE`` says to write the trace, or ``None`` when tracing is off."""
    raw = config.get_str("NUMBA_CUBE_TRACE")
    if raw is None or raw.strip().lower() in ("0", "false", "no", "off"):
        return None
    if raw.strip().lower() in ("1", "true", "yes", "on"):
        raw = "numba_cube_trace-{pid}.json"
    return raw.replace("{pid}", str(os.getpid()))


class _Idle:
    """Tracing is off: a plugin with no hook implementations (listed, costs nothing)."""

    def __repr__(self) -> str:
        return "<numba_cube_trace: idle (set NUMBA_CUBE_TRACE=path.json to record)>"


def _make():
    path = trace_path()
    if path is None:
        return _Idle()
    rec = Recorder(path)
    _register_active(rec)
    atexit.register(rec.save)
    return rec


plugin = _make()
