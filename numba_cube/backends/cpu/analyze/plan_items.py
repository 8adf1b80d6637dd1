"""The items of a cube kernel's fission plan (``analyze/plan.py`` builds them, the passes and
the cube kernel's emitter read them): regions, the statements that run once per cube between
them, the control around them, warp exchanges and run-time checks; and ``CubePlan``, the whole.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

__all__ = ["Region", "Uniform", "Ctrl", "MaskedIf", "MaskedWhile", "Exchange", "Check", "Flow",
           "CubePlan", "Ctx"]

#: the run-time mask a region or exchange runs under: ``(mask array name, selector)``, or None
Ctx = "tuple[str, int] | None"


@dataclass
class Region:
    """Split-free per-unit code; executed for every unit of the cube in turn."""

    code: list[ast.stmt]
    index: int
    ctx: tuple[str, int] | None = None
    live_in: set[str] = field(default_factory=set)
    live_out: set[str] = field(default_factory=set)


@dataclass
class Uniform:
    stmt: ast.stmt


@dataclass
class Ctrl:
    node: ast.If | ast.While | ast.For       # test / iter / target come from here
    body: list
    orelse: list


@dataclass
class MaskedIf:
    """An ``if`` with a run-time mask: the body runs for units with ``mask == 1``, the ``else``
    for those with ``mask == 2``."""

    mask: str
    node: ast.If
    body: list
    orelse: list


@dataclass
class MaskedWhile:
    """A ``while`` with a run-time mask: runs while some live unit has ``mask == 1``; the last
    region of the body re-evaluates the test into the mask."""

    mask: str
    node: ast.While
    body: list


@dataclass
class Exchange:
    """A warp intrinsic ``op`` (``warps.WARP_OPS``): reads ``inputs``, writes ``outputs``."""

    op: str
    k: int
    ctx: tuple[str, int] | None
    node: ast.stmt
    inputs: list[str]
    outputs: list[str]


@dataclass
class Check:
    """A barrier (``kind == "barrier"``) or grid sync (``"grid"``) under a run-time mask, or a
    ``break``/``continue`` of a cube-level loop under one (``"flow"``): all live units of the
    cube must reach it, or none."""

    kind: str
    ctx: tuple[str, int]
    node: ast.stmt


@dataclass
class Flow:
    stmt: ast.Break | ast.Continue


@dataclass
class CubePlan:
    """Everything ``cube_kernel.CubeKernel`` needs besides the lowered kernel."""

    items: list
    regions: list[Region]
    uniform: set[str]
    masks: list[str]
    exchanges: list[Exchange]
    checks: list[Check]
    grid: bool                  # the kernel syncs the grid: fission's grid mode
