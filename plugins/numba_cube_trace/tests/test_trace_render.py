"""``numba_cube_trace/render.py``: the PNG of a recorded trace with 15 kernels and a failed
dispatch, drawn with matplotlib's Agg canvas: the legend does not cover the lanes, the 15
kernels' bars look different, and the failure is marked as the style module decides."""

from __future__ import annotations

import numpy as np
import pytest

import numba_cube as cube
import numba_cube_trace
from numba_cube.testing import register_python_backend
from numba_cube_trace.chart_style import FAILED_HATCH, FAILED_LINEWIDTH

pytest.importorskip("matplotlib")

KERNELS = 15


def _adder(i):
    def add(x, out):
        out[:] = x + i
    add.__name__ = f"add_{i:02d}"
    return cube.kernel(add, reads=("x",), writes=("out",))


def _boom(out):
    if out.size:
        raise RuntimeError("boom")
    out[:] = 0.0       # written (as far as the IO analysis can tell): the failure lands on out


@pytest.fixture(scope="module")
def trace():
    """A real trace: 15 kernels over three streams on the Python backend, then one that fails."""
    if "render_py" not in cube.backends():
        register_python_backend("render_py")
    client = cube.client("render_py")
    kernels = [_adder(i) for i in range(KERNELS)]
    boom = cube.kernel(_boom, writes=("out",))
    streams = [cube.StreamId.new() for _ in range(3)]
    x = client.create(np.ones(8))
    with numba_cube_trace.tracing() as rec:
        for i, k in enumerate(kernels):
            with cube.stream(streams[i % 3]):
                client.launch(k, 1, 1, x, client.empty(8))
        client.launch(boom, 1, 1, client.empty(8))
    return rec.trace()


def test_png_of_fifteen_kernels_and_a_failure(trace, tmp_path):
    """``render_png`` writes a valid PNG of the trace."""
    data = open(numba_cube_trace.render_png(trace, tmp_path / "t.png"), "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_legend_is_below_the_lanes_and_inside_the_figure(trace):
    """The legend, with one entry per kernel and a "failed" one, lies wholly below the timeline
    (axes, tick labels and axis label included) and inside the figure."""
    fig = numba_cube_trace.render.draw(trace)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    timeline, legend_axes = fig.axes
    legend = legend_axes.get_legend()
    labels = [t.get_text() for t in legend.get_texts()]
    assert len(labels) == KERNELS + 2 and "failed" in labels[-1]      # 15 adders, _boom, failed
    box = legend.get_window_extent(renderer)
    lanes = timeline.get_tightbbox(renderer)
    assert box.y1 <= lanes.y0, (box, lanes)                            # below, not overlapping
    assert 0 <= box.x0 and box.x1 <= fig.bbox.x1 and 0 <= box.y0


def test_kernel_bars_differ_and_the_failure_is_marked(trace):
    """The 16 kernels' bars have 16 distinct (face colour, hatch) pairs; the failed dispatch's bar
    has the cross hatch and the thick black edge, and an "x" marker sits above it."""
    from matplotlib.colors import to_hex

    fig = numba_cube_trace.render.draw(trace)
    timeline = fig.axes[0]
    bars = [p for p in timeline.patches if p.get_gid() == "dispatch"]
    failed = [p for p in timeline.patches if p.get_gid() == "failed"]
    assert len(bars) == KERNELS and len(failed) == 1
    styles = {(to_hex(p.get_facecolor()), p.get_hatch()) for p in bars + failed}
    assert len(styles) == KERNELS + 1
    (bar,) = failed
    assert bar.get_hatch() == FAILED_HATCH and bar.get_linewidth() == FAILED_LINEWIDTH
    assert to_hex(bar.get_edgecolor()) == "#000000"
    markers = [line for line in timeline.lines if line.get_gid() == "failed"]
    assert len(markers) == 1 and markers[0].get_marker() == "x"


def test_a_recorded_trace_passes_the_check_and_a_damaged_one_is_a_value_error(trace):
    """``check`` accepts what the recorder writes; a dispatch without its duration is a
    ``ValueError`` naming the event from ``summary`` and ``draw`` alike, not a ``KeyError``."""
    from numba_cube_trace.render import check

    assert check(trace) is trace
    events = [dict(e) for e in trace["traceEvents"]]
    index = next(i for i, e in enumerate(events) if e.get("ph") == "X")
    del events[index]["dur"]
    damaged = {**trace, "traceEvents": events}
    for read in (numba_cube_trace.summary, numba_cube_trace.draw):
        with pytest.raises(ValueError, match=f"event {index} \\(ph 'X'\\) lacks dur"):
            read(damaged)
