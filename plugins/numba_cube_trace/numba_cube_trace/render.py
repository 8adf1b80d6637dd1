"""Reading a trace back: a text summary, and a PNG chart (matplotlib, extra ``png``).

Both take the trace as a JSON object or a path, so they work on files written by another
process. The chart draws what Perfetto would show, flattened: one row per stream lane, one bar
per dispatch (red-hatched when it failed), one arrow per inferred dependency. matplotlib is used
through its object API with the Agg canvas, never ``pyplot``: a library must not change the
application's global plotting backend.
"""

from __future__ import annotations

import collections
import json
import os

__all__ = ["load", "summary", "render_png"]


def load(trace_json) -> dict:
    """A trace as a JSON object: ``trace_json`` is one already, or a path to one."""
    if isinstance(trace_json, dict):
        return trace_json
    with open(os.fspath(trace_json)) as f:
        return json.load(f)


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
    trace = load(trace_json)
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


def render_png(trace_json, out_png, *, title: str | None = None, width: float = 12.0, dpi: int = 100) -> str:
    """Draw the trace's dispatches per stream and its dependencies into ``out_png``; return it."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("render_png needs matplotlib: pip install 'numba_cube_trace[png]'") from exc

    trace = load(trace_json)
    events = trace["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X"]
    labels, lanes = _lanes(trace)
    row = {key: i for i, key in enumerate(lanes)}
    fig = Figure(figsize=(width, 1.5 + 0.45 * max(1, len(lanes))), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    t0 = min((e["ts"] for e in xs), default=0.0)

    def ms(ts: float) -> float:
        return (ts - t0) / 1e3

    span = max((ms(e["ts"] + e["dur"]) for e in xs), default=1.0)
    thinnest = span / 500   # a 10 us dispatch next to a 4 s one must still show
    palette = [f"C{i}" for i in range(10)]
    colors: dict[str, str] = {}
    for e in xs:
        color = colors.setdefault(e["name"], palette[len(colors) % len(palette)])
        failed = bool(e.get("args", {}).get("failed"))
        ax.barh(row[(e["pid"], e["tid"])], max(e["dur"] / 1e3, thinnest), left=ms(e["ts"]), height=0.6,
                color=color, edgecolor="red" if failed else "black", linewidth=0.5,
                hatch="xx" if failed else None)
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
    ax.set_ylim(-0.6, max(0, len(lanes) - 1) + 0.6)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    if not xs:
        ax.text(0.5, 0.5, "no dispatches recorded", ha="center", va="center", transform=ax.transAxes)
    if colors:
        handles = [Patch(color=c, label=n) for n, c in list(colors.items())[:12]]
        ax.legend(handles=handles, loc="upper right", fontsize="small", framealpha=0.8)
    ax.set_title(title or f"{len(xs)} dispatches on {len(lanes)} streams, {arrows} dependencies")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.fspath(out_png), format="png")
    return os.fspath(out_png)
