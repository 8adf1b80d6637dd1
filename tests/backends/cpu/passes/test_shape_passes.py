"""The passes that decide how a kernel's shape is printed are named stages of the pipeline and
fill a typed record of their decisions, which the emitters only read (``passes/shape_passes.py``,
issue 31).

Pinned here: the pipeline runs the shape passes before the bounds checks and the region passes
after them; each pass fills its own fields of the record (a tiled matmul's edge guards give the
interior pass's decision, a block reduction's tree the guards pass's, an elementwise kernel's
``if i < n`` the flat guard hoisting's), and a pass switched off leaves its fields empty and
changes the printed code; no emitter imports a pass's function, only the types and names of its
decisions (``emit/module.py``, which runs the stages, excepted).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil

import pytest
from numba import cuda

from numba_cube.backends.cpu import emit as emit_package
from numba_cube.backends.cpu.emit.module import PIPELINE, Unit
from numba_cube.backends.cpu.passes.shape_passes import CubeDecisions, FlatDecisions

from kernels_cases import block_sum, matmul_tiled


@cuda.jit
def elementwise(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = 2.0 * x[i]


def decided(kernel, monkeypatch=None, disable: str = ""):
    """The record of the passes' decisions about ``kernel``, and its generated text."""
    if monkeypatch is not None:
        monkeypatch.setenv("NUMBA_CUBE_DISABLE_PASSES", disable)
    unit = Unit(kernel.py_func)
    text = unit.generate()
    return unit.ir.decisions, text


def test_the_shape_passes_run_before_the_bounds_checks_and_the_region_passes_after():
    """The stages' order: the shape, its passes, the bounds checks that rewrite its code, then
    the passes that decide about each region's code as checked, then the text."""
    assert PIPELINE.index("shape") < PIPELINE.index("shape_passes") < PIPELINE.index("bounds") \
        < PIPELINE.index("region_passes") < PIPELINE.index("module") == len(PIPELINE) - 1


def test_each_cube_pass_fills_its_own_decisions(monkeypatch):
    """A tiled matmul's edge guards are the interior pass's decision; a block reduction's tree
    (``if tid < s``) is the guards pass's; with the pass switched off by name its field stays
    empty and the printed code changes."""
    matmul, matmul_text = decided(matmul_tiled)
    assert isinstance(matmul, CubeDecisions) and matmul.interior
    flag, check, unguarded = next(iter(matmul.interior.values()))
    assert flag in matmul_text and check and unguarded
    tree, tree_text = decided(block_sum)
    assert tree.guards
    body, (lo, hi, stride) = next(iter(tree.guards.values()))
    assert body and (lo or hi)
    off, off_text = decided(matmul_tiled, monkeypatch, "interior")
    assert not off.interior and off_text != matmul_text
    off, off_text = decided(block_sum, monkeypatch, "guards")
    assert not off.guards and off_text != tree_text


def test_a_flat_kernel_hoists_its_guard_into_the_loop_range(monkeypatch):
    """An elementwise kernel's ``if i < n`` becomes an upper bound of the unit loop (the flat
    kernel's guard hoisting), and its body as printed is the record's."""
    flat, text = decided(elementwise)
    assert isinstance(flat, FlatDecisions)
    assert flat.hi and not flat.conds and not flat.swapped
    assert ast.unparse(flat.body[-1]) in text


def _emit_modules():
    for info in pkgutil.iter_modules(emit_package.__path__):
        if info.name != "module":       # the pass manager: it runs the stages
            yield importlib.import_module(f"{emit_package.__name__}.{info.name}")


@pytest.mark.parametrize("module", list(_emit_modules()), ids=lambda m: m.__name__.split(".")[-1])
def test_emitters_import_only_the_decisions_of_passes(module):
    """An emitter may read a pass's decision types and names (``Interchange``, prefixes, import
    lines), never import a function or a whole module of ``passes/``: deciding is the passes'
    stage, printing only reads what they decided."""
    tree = ast.parse(inspect.getsource(module))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module \
                and node.module.startswith("numba_cube.backends.cpu.passes"):
            source = importlib.import_module(node.module)
            for alias in node.names:
                value = getattr(source, alias.name)
                assert not inspect.isfunction(value) and not inspect.ismodule(value), \
                    f"{module.__name__} imports {alias.name} from {node.module}"
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("numba_cube.backends.cpu.passes") for a in node.names)
