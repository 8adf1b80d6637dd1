"""numba_cube plugin: a timeline of launches per stream, for Chrome's trace viewer and Perfetto.

Two ways to switch it on:

- ``NUMBA_CUBE_TRACE=trace.json python app.py``: the entry-point plugin (``plugin.py``) records
  the whole run and writes the file at exit; ``numba_cube_trace.save()`` writes it on demand
  (e.g. from a long-running service). ``{pid}`` in the path becomes the process id; ``1`` means
  ``numba_cube_trace-{pid}.json``.
- ``with numba_cube_trace.tracing("trace.json") as rec:``: records the launches inside the block
  and writes the file when it ends (``rec.save()`` writes it at any time, ``rec.trace()`` returns
  the JSON object). Works without the entry point (``NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD=1``).

Each dispatch is one complete event (``"ph": "X"``) on a lane per device (process) and stream
(thread), from the ``numba_cube_task_done`` hook's start and end. Each inferred dependency is a
flow arrow (``"ph": "s"`` at the end of the task waited for, ``"ph": "f"`` at the start of the
task that waited). Launches as the issuing thread made them (``numba_cube_launch``) are instant
events on a lane per issuing thread, dry-run launches included. A dispatch that did not run
(skipped for a failed input) is an instant event on its stream's lane.

``render_png(trace_json, out_png)`` (extra ``png``: matplotlib) draws the same as a chart
(``draw`` returns it as a matplotlib figure): a legend in its own row below the lanes, kernels in
distinct colours and hatches past ten, failed dispatches cross-hatched with a thick black edge
and an "x" (``chart_style.py``); the command ``numba-cube-trace trace.json -o trace.png`` does it
from a shell.
"""

from __future__ import annotations

from .recorder import Recorder, active, save, tracing
from .render import draw, render_png, summary

__all__ = ["Recorder", "tracing", "save", "active", "render_png", "draw", "summary", "ENV_VAR"]

__version__ = "0.1.0"

ENV_VAR = "NUMBA_CUBE_TRACE"
