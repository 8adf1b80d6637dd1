"""The PNG chart's visual decisions, as data: how each kernel's bars look, how a failed dispatch
is marked, and where the legend goes (``render.py`` draws what this module decides).

Kept apart from the drawing, and free of matplotlib, so that the decisions can be checked where
matplotlib is not installed, and so that they are made in one place:

- **Kernels stay distinct past ten.** Twenty qualitative colours (matplotlib's ``tab10``, then the
  light variants of ``tab20``), and from the eleventh kernel on a hatch per group of ten, so that
  kernel 10 (light blue, striped) is not read as kernel 0 (blue, plain), nor kernel 20 (blue,
  dotted): kernel ``i`` gets colour ``i % 20`` and hatch ``(i // 10) % 5``, a pair that repeats
  only after 100 kernels.
- **A failure is unmistakable.** A failed dispatch keeps its kernel's colour (which kernel failed
  is the point) and gets a cross hatch and a thick black edge that no kernel's bar has; the
  legend has a "failed" entry drawn the same way. Red alone would be just another kernel's colour.
- **The legend never covers the lanes.** It has its own row under the timeline, as many columns
  as fit, at most ``LEGEND_MAX_KERNELS`` kernels (then one "and N more" entry).
"""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["BarStyle", "ChartLayout", "chart_layout", "kernel_style", "failed_style",
           "KERNEL_COLORS", "KERNEL_HATCHES", "FAILED_HATCH", "FAILED_LINEWIDTH", "KERNEL_LINEWIDTH",
           "LEGEND_PLACEMENT", "LEGEND_MAX_KERNELS", "LEGEND_MAX_COLUMNS", "LEGEND_LABEL_CHARS"]

#: tab10, then tab20's light variants (the same hues, paler): 20 colours told apart at a glance.
KERNEL_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
    "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)
#: One hatch per group of ten kernels; none is a cross, which marks failures.
KERNEL_HATCHES = ("", "//", "..", "\\\\", "oo")
KERNEL_EDGE = "black"
KERNEL_LINEWIDTH = 0.5

FAILED_HATCH = "xx"
FAILED_EDGE = "black"
FAILED_LINEWIDTH = 2.5     # five times a kernel bar's edge: visible even on a 1-pixel-wide bar
FAILED_LABEL = "failed (x, thick edge)"

#: The legend has its own row below the timeline's axes.
LEGEND_PLACEMENT = "below"
LEGEND_MAX_KERNELS = 40
LEGEND_MAX_COLUMNS = 4
LEGEND_LABEL_CHARS = 32    # a longer kernel name is cut, so that four columns fit 12 inches


class BarStyle(NamedTuple):
    """How one bar (or legend swatch) is filled and edged, in matplotlib's terms."""

    facecolor: str
    hatch: str
    edgecolor: str
    linewidth: float


class ChartLayout(NamedTuple):
    """Everything the renderer needs to know about a chart beyond the events themselves."""

    #: kernel name -> its bars' style, in the order the kernels first appear
    kernel_styles: dict
    #: (label, style) per legend entry, in order: the kernels, "and N more", "failed"
    legend_entries: list
    legend_placement: str
    legend_columns: int
    legend_rows: int


def kernel_style(index: int) -> BarStyle:
    """The style of the ``index``-th kernel to appear in a chart."""
    return BarStyle(KERNEL_COLORS[index % len(KERNEL_COLORS)],
                    KERNEL_HATCHES[(index // 10) % len(KERNEL_HATCHES)], KERNEL_EDGE, KERNEL_LINEWIDTH)


def failed_style(kernel: BarStyle) -> BarStyle:
    """A failed dispatch of a kernel drawn as ``kernel``: its colour, a cross, a thick black edge."""
    return BarStyle(kernel.facecolor, FAILED_HATCH, FAILED_EDGE, FAILED_LINEWIDTH)


def _label(name: str) -> str:
    return name if len(name) <= LEGEND_LABEL_CHARS else name[:LEGEND_LABEL_CHARS - 1] + "\u2026"


def chart_layout(kernel_names, any_failed: bool) -> ChartLayout:
    """The layout of a chart of ``kernel_names`` (in the order they first appear, repeats
    ignored), with a "failed" legend entry when ``any_failed``."""
    styles: dict = {}
    for name in kernel_names:
        if name not in styles:
            styles[name] = kernel_style(len(styles))
    entries = [(_label(name), style) for name, style in list(styles.items())[:LEGEND_MAX_KERNELS]]
    if len(styles) > LEGEND_MAX_KERNELS:
        entries.append((f"and {len(styles) - LEGEND_MAX_KERNELS} more kernels",
                        BarStyle("white", "", "white", 0.0)))
    if any_failed:
        entries.append((FAILED_LABEL, BarStyle("white", FAILED_HATCH, FAILED_EDGE, FAILED_LINEWIDTH)))
    columns = max(1, min(LEGEND_MAX_COLUMNS, len(entries)))
    rows = math.ceil(len(entries) / columns)
    return ChartLayout(styles, entries, LEGEND_PLACEMENT, columns, rows)
