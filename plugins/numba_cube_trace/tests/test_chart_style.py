"""``numba_cube_trace/chart_style.py``: the PNG chart's decisions as data (no matplotlib needed):
kernels keep distinct styles well past ten, a failed dispatch looks like no kernel's bar, and the
legend has its own row below the lanes."""

from __future__ import annotations

from numba_cube_trace.chart_style import (FAILED_HATCH, KERNEL_HATCHES, KERNEL_LINEWIDTH,
                                          LEGEND_MAX_KERNELS, chart_layout, failed_style, kernel_style)


def test_fifteen_kernels_have_fifteen_distinct_styles():
    """15 kernels get 15 distinct (colour, hatch) pairs, 15 distinct colours among them, in the
    order they first appear; a kernel seen again keeps its style."""
    names = [f"k{i}" for i in range(15)]
    layout = chart_layout(names + names[::-1], any_failed=False)
    assert list(layout.kernel_styles) == names
    styles = list(layout.kernel_styles.values())
    assert len({(s.facecolor, s.hatch) for s in styles}) == 15
    assert len({s.facecolor for s in styles}) == 15


def test_styles_stay_distinct_up_to_a_hundred_kernels():
    """(colour, hatch) pairs repeat only after 100 kernels: colours cycle over 20, hatches
    change every ten."""
    pairs = [(kernel_style(i).facecolor, kernel_style(i).hatch) for i in range(100)]
    assert len(set(pairs)) == 100
    assert pairs[0] == (kernel_style(100).facecolor, kernel_style(100).hatch)


def test_failure_looks_like_no_kernel():
    """A failed dispatch keeps its kernel's colour but has the cross hatch and a thick black edge,
    which no kernel's bar has; the legend gets a "failed" entry drawn the same way, last."""
    kernel = kernel_style(3)                  # tab10's red: a failure must not be just "red"
    failed = failed_style(kernel)
    assert failed.facecolor == kernel.facecolor
    assert failed.hatch == FAILED_HATCH and FAILED_HATCH not in KERNEL_HATCHES
    assert failed.edgecolor == "black" and failed.linewidth >= 4 * KERNEL_LINEWIDTH
    assert all(kernel_style(i).linewidth == KERNEL_LINEWIDTH for i in range(100))
    layout = chart_layout(["a", "b"], any_failed=True)
    label, style = layout.legend_entries[-1]
    assert "failed" in label and style.hatch == FAILED_HATCH and style.linewidth == failed.linewidth
    assert not any("failed" in lbl for lbl, _ in chart_layout(["a"], any_failed=False).legend_entries)


def test_legend_is_a_row_below_the_lanes():
    """The legend is placed below the timeline (never over the lanes), in at most 4 columns,
    with enough rows for every entry; past ``LEGEND_MAX_KERNELS`` kernels one entry says how many
    more there are."""
    layout = chart_layout([f"k{i}" for i in range(15)], any_failed=True)
    assert layout.legend_placement == "below"
    assert layout.legend_columns == 4 and layout.legend_rows == 4      # 15 kernels + "failed"
    many = chart_layout([f"k{i}" for i in range(LEGEND_MAX_KERNELS + 5)], any_failed=False)
    assert len(many.legend_entries) == LEGEND_MAX_KERNELS + 1
    assert many.legend_entries[-1][0] == "and 5 more kernels"
