"""Reading a trace back: a text summary, and a PNG chart (matplotlib, extra ``png``).

Both take the trace as a JSON object or a path, so they work on files written by another
process. The chart draws what Perfetto would show, flattened: one row per stream lane, one bar
per dispatch, one arrow per inferred dependency, and a legend in its own row below. How bars look
(kernels distinct past ten, failures unmistakable) and where the legend goes is decided in
``chart_style.py``. matplotlib is used through its object API with the Agg canvas, never
``pyplot``: a library must not change the application's global plotting backend.
"""

from __future__ import annotations

import collections
import json
import os

from .chart_style import FAILED_EDGE, chart_layout, failed_style

__all__ = ["load", "check", "summary", "draw", "render_png"]


def load(trace_json) -> dict:
    """A trace as a JSON object: ``trace_json`` is one already, or a path to one."""
    if isinstance(trace_json, dict):
        return trace_json
    with open(os.fspath(trace_json)) as f:
        return json.load(f)


# The keys each kind of event needs, by the Trace Event Format's phase ("ph"): the complete
# events (dispatches), the flow starts and ends (dependencies), the metadata (lane names).
_REQUIRED = {"X": ("name", "pid", "tid", "ts", "dur"), "s": ("id", "pid", "tid", "ts"),
             "f": ("id", "pid", "tid", "ts"), "M": ("name", "pid", "args")}


def check(trace: dict) -> dict:
    """``trace`` itself if it is a trace these functions can read, else a ``ValueError`` naming
    the first event that is not (its index, its phase and the keys it lacks).

    A file edited by hand or written by another tool may lack keys; without this check the
    summary or the chart would stop half-way with a bare ``KeyError``.
    """
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        raise ValueError("no 'traceEvents' list")
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise ValueError(f"event {index} is a {type(event).__name__}, not an object")
        missing = [k for k in _REQUIRED.get(event.get("ph"), ()) if k not in event]
        # (only the lane-naming metadata is read; a sort index carries no name)
        if event.get("ph") == "M" and event.get("name") in ("process_name", "thread_name"):
            if event.get("name") == "thread_name" and "tid" not in event:
                missing.append("tid")
            if not isinstance(event.get("args"), dict) or "name" not in event["args"]:
                missing.append("args.name")
        if missing:
            raise ValueError(f"event {index} (ph {event.get('ph')!r}) lacks {', '.join(missing)}")
    return trace


def _lanes(trace: dict) -> tuple[dict, list]:
    """(pid, tid) -> label, and the dispatch lanes in display order."""
    processes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    used = sorted({(e["pid"], e["tid"]) for e in trace["traceEvents"] if e.get("ph") == "X"})
    labels = {key: f"{processes.get(key[0], key[0])} {threads.get(key, key[1])}" for key in used}
    return labels, used


def summary(trace_json) -> str:
    """Dispatches, busy time per stream lane and per kernel, dependencies: a few lines of text."""
    trace = check(load(trace_json))
    events = trace["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X"]
    flows = sum(1 for e in events if e.get("ph") == "s")
    labels, lanes = _lanes(trace)
    lines = [f"{len(xs)} dispatches on {len(lanes)} stream lanes, {flows} inferred dependencies"]
    if xs:
        t0 = min(e["ts"] for e in xs)
        t1 = max(e["ts"] + e["dur"] for e in xs)
        lines.append(f"span {(t1 - t0) / 1e3:.3f} ms")
    busy = collections.Counter()
    for e in xs:
        busy[(e["pid"], e["tid"])] += e["dur"]
    for key in lanes:
        lines.append(f"  {labels[key]:32} busy {busy[key] / 1e3:10.3f} ms")
    per_kernel: dict[str, list] = collections.defaultdict(list)
    for e in xs:
        per_kernel[e["name"]].append(e["dur"])
    for name, durs in sorted(per_kernel.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"  {name:32} x{len(durs):<6} total {sum(durs) / 1e3:10.3f} ms")
    failed = sum(1 for e in events if e.get("args", {}).get("failed"))
    if failed:
        lines.append(f"{failed} dispatches failed or did not run")
    return "\n".join(lines)


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModuleNotFoundError("the PNG chart needs matplotlib: pip install 'numba_cube_trace[png]'",
                                  name="matplotlib") from exc
    return FigureCanvasAgg, Figure, Patch


#: Inches: the timeline's fixed part (title, axis) and each lane; the legend's fixed part and rows.
_TIMELINE_BASE, _LANE, _LEGEND_BASE, _LEGEND_ROW = 1.3, 0.45, 0.25, 0.24


def draw(trace_json, *, title: str | None = None, width: float = 12.0, dpi: int = 100):
    """The chart of a trace as a matplotlib ``Figure`` (Agg canvas): the timeline's axes first,
    the legend's row second. Each dispatch's bar has the gid ``"dispatch"`` or ``"failed"``, and
    each failed one an "x" marker (a line, gid ``"failed"``) above it."""
    FigureCanvasAgg, Figure, Patch = _matplotlib()
    trace = check(load(trace_json))
    events = trace["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X"]
    labels, lanes = _lanes(trace)
    row = {key: i for i, key in enumerate(lanes)}
    layout = chart_layout((e["name"] for e in xs), any(e.get("args", {}).get("failed") for e in xs))
    timeline_height = _TIMELINE_BASE + _LANE * max(1, len(lanes))
    legend_height = _LEGEND_BASE + _LEGEND_ROW * layout.legend_rows if layout.legend_entries else 0.0
    # Constrained layout keeps each axes' decorations (tick labels, the legend in its own row)
    # clear of the other axes, which tight_layout does not promise for an axes drawn without axis.
    fig = Figure(figsize=(width, timeline_height + legend_height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 1, height_ratios=[timeline_height, max(legend_height, 1e-3)])
    ax = fig.add_subplot(grid[0])
    legend_ax = fig.add_subplot(grid[1])
    legend_ax.set_axis_off()
    t0 = min((e["ts"] for e in xs), default=0.0)

    def ms(ts: float) -> float:
        return (ts - t0) / 1e3

    span = max((ms(e["ts"] + e["dur"]) for e in xs), default=1.0)
    thinnest = span / 500   # a 10 us dispatch next to a 4 s one must still show
    for e in xs:
        failed = bool(e.get("args", {}).get("failed"))
        style = layout.kernel_styles[e["name"]]
        if failed:
            style = failed_style(style)
        (bar,) = ax.barh(row[(e["pid"], e["tid"])], max(e["dur"] / 1e3, thinnest), left=ms(e["ts"]),
                         height=0.6, color=style.facecolor, edgecolor=style.edgecolor,
                         linewidth=style.linewidth, hatch=style.hatch or None)
        bar.set_gid("failed" if failed else "dispatch")
        if failed:
            bar.set_zorder(3)      # above its neighbours, so that the thick edge is not hidden
            # And an "x" just above the lane: a dispatch too short for its hatch to show is
            # still marked (the y axis is inverted: above is a smaller row number).
            ax.plot([ms(e["ts"]) + max(e["dur"] / 1e3, thinnest) / 2], [row[(e["pid"], e["tid"])] - 0.42],
                    marker="x", markersize=7, markeredgewidth=2, color=FAILED_EDGE, zorder=4,
                    gid="failed")
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    arrows = 0
    for f in (e for e in events if e.get("ph") == "f"):
        s = starts.get(f["id"])
        if s is None or (s["pid"], s["tid"]) not in row or (f["pid"], f["tid"]) not in row:
            continue
        ax.annotate("", xy=(ms(f["ts"]), row[(f["pid"], f["tid"])]),
                    xytext=(ms(s["ts"]), row[(s["pid"], s["tid"])]),
                    arrowprops={"arrowstyle": "->", "color": "black", "lw": 0.8})
        arrows += 1
    ax.set_yticks(range(len(lanes)), [labels[k] for k in lanes])
    ax.set_ylim(-0.65, max(0, len(lanes) - 1) + 0.6)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    if not xs:
        ax.text(0.5, 0.5, "no dispatches recorded", ha="center", va="center", transform=ax.transAxes)
    if layout.legend_entries:
        handles = [Patch(facecolor=st.facecolor, edgecolor=st.edgecolor, hatch=st.hatch or None,
                         linewidth=st.linewidth, label=label) for label, st in layout.legend_entries]
        legend_ax.legend(handles=handles, loc="center", ncol=layout.legend_columns,
                         fontsize="small", frameon=False, handlelength=2.5, handleheight=1.2)
    ax.set_title(title or f"{len(xs)} dispatches on {len(lanes)} streams, {arrows} dependencies")
    ax.grid(axis="x", alpha=0.3)
    return fig


def render_png(trace_json, out_png, *, title: str | None = None, width: float = 12.0, dpi: int = 100) -> str:
    """Draw the trace's dispatches per stream and its dependencies into ``out_png``; return it."""
    draw(trace_json, title=title, width=width, dpi=dpi).savefig(os.fspath(out_png), format="png")
    return os.fspath(out_png)
