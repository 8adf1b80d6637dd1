"""The shapes of shared and local arrays, as the constants they are, where uniformity is decided.

``cuda.shared.array`` and ``cuda.local.array`` have compile-time constant shapes (``constexpr``),
so ``sm.size``, ``sm.shape[0]``, ``sm.shape``, ``sm.ndim`` and ``len(sm)`` are the same number in
every unit of every cube. The uniformity rule (``analysis``: "array shapes are uniform") reaches an
array's shape through its *name*, and neither kind of name is uniform: a shared array's
declaration is not in the lowered body at all (the chunk allocates the array, ``emit/cube_kernel.py``), and a
local array's ``x = __local__('x')`` is per-unit code (each unit has its own array). So a loop
around a barrier over ``range(round(math.log2(sm.size)))`` -- a Blelloch scan's rounds -- was
refused as unit-dependent, or, where ``analyze/warp_loops.py`` could turn it into a ``while``, checked at run
time.

Making the names uniform would be wrong: the value of a local array's name differs per unit, and
neither a local array nor, in grid mode, a shared array is bound where cube-level code runs (a
shared array is then ``sm__g[__bid]`` inside each region's cube loop). What is uniform is the
shape, so ``fold_uniform_shapes`` replaces the shape queries by their values in the expressions
that the rule judges and that run at cube level when it accepts them: the tests and ranges of
cube-level control statements and the right-hand sides of name assignments in cube-level
statement lists (``analysis.cube_level_lists``). Those folds are kept only where they make the
expression uniform (a test or range the rule now accepts, an assignment to a name that is now
uniform); the others are undone, so per-unit code -- and the generated code of every kernel whose
uniformity the folds do not change -- stays as written.

Only arrays whose name nothing but its declaration binds are folded; a dynamic shared array
(``cuda.shared.array(0, dtype)``) is sized by the launch, not by its declaration, and is left alone.
"""

from __future__ import annotations

import ast
import copy
import math

from numba_cube.backends.cpu.analyze.dataflow import (
    Purity, assignment_sources, cube_level_lists, is_cube_control, store_counts,
    uniform_with_masks,
)
from numba_cube.backends.cpu.lower.hidden import LOCAL_MARKER


def constant_shapes(lowered) -> dict[str, tuple[int, ...]]:
    """``name -> shape`` of the kernel's shared and local arrays whose shape is a constant and
    whose name only their declaration binds (a rebound name may denote another array)."""
    counts = store_counts(lowered.body)
    markers = {s.targets[0].id for st in lowered.body for s in ast.walk(st)
               if isinstance(s, ast.Assign) and len(s.targets) == 1
               and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call)
               and isinstance(s.value.func, ast.Name) and s.value.func.id == LOCAL_MARKER}
    declared = [d.name for d in lowered.shared + lowered.local]
    out = {}
    for d in lowered.shared + lowered.local:
        if getattr(d, "dynamic", False) or declared.count(d.name) != 1:
            continue
        # a shared array's declaration left the body; a local array's is its one marker
        bound_once = counts[d.name] == 0 if d in lowered.shared else (
            counts[d.name] == 1 and d.name in markers)
        shape = _shape(d.shape)
        if bound_once and shape is not None:
            out[d.name] = shape
    return out


def _shape(text: str) -> tuple[int, ...] | None:
    """The declaration's shape (``ArrayDecl.shape``: the repr of an int or a tuple of ints)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    value = value if isinstance(value, tuple) else (value,)
    return value if value and all(type(v) is int for v in value) else None


class _Fold(ast.NodeTransformer):
    """Replaces ``x.size``, ``x.ndim``, ``x.shape``, ``x.shape[k]`` (``k`` a literal) and
    ``len(x)`` of the arrays in ``shapes`` by constants; counts the replacements."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], local_names: set[str]):
        self.shapes = shapes
        self.local_names = local_names
        self.count = 0

    def _array(self, node) -> tuple[int, ...] | None:
        return self.shapes.get(node.id) if isinstance(node, ast.Name) else None

    def _const(self, value, node) -> ast.expr:
        self.count += 1
        if isinstance(value, tuple):
            new = ast.Tuple([ast.Constant(v) for v in value], ast.Load())
        else:
            new = ast.Constant(value)
        return ast.fix_missing_locations(ast.copy_location(new, node))

    def visit_Attribute(self, node):
        shape = self._array(node.value)
        if shape is not None and isinstance(node.ctx, ast.Load):
            if node.attr == "size":
                return self._const(math.prod(shape), node)
            if node.attr == "ndim":
                return self._const(len(shape), node)
            if node.attr == "shape":
                return self._const(shape, node)
        return self.generic_visit(node)

    def visit_Subscript(self, node):
        v, k = node.value, node.slice
        shape = self._array(v.value) if isinstance(v, ast.Attribute) and v.attr == "shape" else None
        if shape is not None and isinstance(node.ctx, ast.Load):
            if (isinstance(k, ast.Constant) and type(k.value) is int
                    and -len(shape) <= k.value < len(shape)):
                return self._const(shape[k.value], node)
            # sm.shape[d]: a tuple indexed by a variable is no more uniform than before
            node.slice = self.visit(k)
            return node
        return self.generic_visit(node)

    def visit_Call(self, node):
        if (isinstance(node.func, ast.Name) and node.func.id == "len"
                and "len" not in self.local_names and len(node.args) == 1
                and not node.keywords):
            shape = self._array(node.args[0])
            if shape is not None:
                return self._const(shape[0], node)
        return self.generic_visit(node)


def fold_uniform_shapes(body: list[ast.stmt], shapes: dict[str, tuple[int, ...]],
                        seed: set[str], purity: Purity) -> int:
    """Fold the shape queries that make cube-level expressions of ``body`` uniform, in place (see
    the module docstring); ``seed`` and ``purity`` are those ``plan.build_cube_plan`` is given.
    Returns how many expressions were folded."""
    if not shapes:
        return 0
    # (statement, field, expression as written); every candidate is folded first, since one
    # fold can make a name uniform that another's expression reads
    folds = []
    for lst in cube_level_lists(body):
        for s in lst:
            if is_cube_control(s):
                field = "iter" if isinstance(s, ast.For) else "test"
            elif assignment_sources(s) and s.value is not None:
                field = "value"
            else:
                continue
            fold = _Fold(shapes, purity.local_names)
            new = fold.visit(copy.deepcopy(getattr(s, field)))
            if fold.count:
                folds.append((s, field, getattr(s, field)))
                setattr(s, field, new)
    if not folds:
        return 0
    uniform, _ = uniform_with_masks(body, seed, purity)
    kept = 0
    for s, field, original in folds:
        if field == "value":
            keep = all(name in uniform for name, _ in assignment_sources(s))
        else:
            keep = purity.expr(getattr(s, field), uniform)
        if keep:
            kept += 1
        else:       # undoing a fold that made nothing uniform changes no uniform name
            setattr(s, field, original)
    return kept
