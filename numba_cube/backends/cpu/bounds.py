"""Bounds checks whose ``IndexError`` says where: which array, which index, which axis and
size, and which unit went out of bounds.

With ``boundscheck=True`` (``cube.client("cpu", boundscheck=True)``, ``NUMBA_BOUNDSCHECK=1``)
Numba checks every subscript, but its ``IndexError`` says only "index is out of bounds". So, for
those compiles only, every subscript of a kernel parameter, a shared array or a local array in
the kernel's own code has its index passed through ``bounds_runtime.checked_index`` with the
array's site (its name's place in the module's ``__bounds_sites``) and the unit's block and
thread index::

    out[i] = a[i + 2]
    # becomes
    out[__checked(out, i, 0, (__bx, __by, __bz), (__tx, __ty, __tz))] = \
        a[__checked(a, i + 2, 1, (__bx, __by, __bz), (__tx, __ty, __tz))]
    # with __bounds_sites = ('out', 'a') at module level

The rewrite runs on the finished shape (``codegen`` calls ``add_checks`` after ``flatten`` or
``fission`` has planned the loops), so no analysis sees the calls: the plan and every
optimisation are the ones the kernel gets without them; only the text of the unit loops may
differ (fission prints coordinate loops for a body that names the coordinates). Without
``boundscheck`` nothing here runs and the generated module is what it was.

Where the unit's ids live depends on the shape of the loops: a flat kernel in *rows* mode has
only the global inner coordinate (``looporder.GLOBAL_INNER``), and one whose loop order is
*swapped* holds the real ``x`` in the ``y`` names (``looporder.py``). Code a cube kernel runs
once per cube (between its unit loops) is code every unit runs alike: it is reported as unit
``(0, 0, 0)``, the first that would fail (and, in grid mode, where it runs once per grid, of cube
``(0, 0, 0)``).

Not rewritten (Numba's plain ``IndexError`` still guards them): device functions that are not
inlined, warp-exchange operands, the tests of uniform control flow and of run-time masks,
literal indices (``a[12]``, ``t[0][i]``: a literal must stay in the subscript, where Numba
needs it to type ``t[0]`` of a tuple; an expression around it that checks first,
``(__checked(...), t[0])[1][i] = v``, lost Numba's own check of ``[i]`` in a test), and
subscripts whose index has a bare slice, ``None``, ``...`` or a starred item.
"""

from __future__ import annotations

import ast
import copy
import hashlib
from pathlib import Path

from numba_cube.backends.cpu.fission import CubeKernel
from numba_cube.backends.cpu.looporder import GLOBAL_INNER
from numba_cube.backends.cpu.plan import Ctrl, MaskedIf, MaskedWhile, Region, Uniform

__all__ = ["CHECKER", "SITES", "add_checks", "import_line", "sites_line"]

#: the name of ``checked_index`` in generated modules
CHECKER = "__checked"
#: the generated module's tuple of the checked arrays' names (``CpuProgram.bounds_sites``)
SITES = "__bounds_sites"
_RUNTIME = Path(__file__).with_name("bounds_runtime.py")


def import_line() -> str:
    """The generated module's import of the checker. Its comment carries the digest of the
    run-time module, so editing it changes the text (and so the files and caches) of checked
    kernels only."""
    digest = hashlib.sha256(_RUNTIME.read_bytes()).hexdigest()[:16]
    return (f"from numba_cube.backends.cpu.bounds_runtime import checked_index as {CHECKER}"
            f"  # bounds_runtime {digest}")


def sites_line(sites: tuple) -> str:
    return f"{SITES} = {sites!r}"


def add_checks(shape, arrays: set[str]) -> tuple:
    """Rewrite, in place, the subscripts of ``arrays`` in the code of ``shape`` (a
    ``flatten.FlatKernel`` or ``fission.CubeKernel``, before it is emitted); the sites, the
    names of the arrays in the order the checks number them."""
    sites: list[str] = []
    if isinstance(shape, CubeKernel):
        cube = ("0", "0", "0") if shape.grid else ("__bx", "__by", "__bz")
        in_units = _Checks(sites, arrays, ("__bx", "__by", "__bz"), ("__tx", "__ty", "__tz"))
        per_cube = _Checks(sites, arrays, cube, ("0", "0", "0"))
        _plan_items(shape.plan, in_units, per_cube)
        return tuple(sites)
    inner_cube, inner_unit = ((f"{GLOBAL_INNER} // __bdx", f"{GLOBAL_INNER} % __bdx")
                              if shape.rows else ("__bx", "__tx"))
    if shape.swapped:   # the names of x and y are exchanged: the inner loop walks the real y
        cube, unit = ("__by", inner_cube, "__bz"), ("__ty", inner_unit, "__tz")
    else:
        cube, unit = (inner_cube, "__by", "__bz"), (inner_unit, "__ty", "__tz")
    checks = _Checks(sites, arrays, cube, unit)
    shape.body[:] = [checks.visit(s) for s in shape.body]
    return tuple(sites)


def _plan_items(items: list, in_units: "_Checks", per_cube: "_Checks") -> None:
    for item in items:
        if isinstance(item, Region):
            item.code[:] = [in_units.visit(s) for s in item.code]
        elif isinstance(item, Uniform):
            item.stmt = per_cube.visit(item.stmt)
        elif isinstance(item, (Ctrl, MaskedIf)):
            _plan_items(item.body, in_units, per_cube)
            _plan_items(item.orelse, in_units, per_cube)
        elif isinstance(item, MaskedWhile):
            _plan_items(item.body, in_units, per_cube)


class _Checks(ast.NodeTransformer):
    """Passes the index of every subscript of ``arrays`` through the checker."""

    def __init__(self, sites: list, arrays: set[str], cube: tuple, unit: tuple):
        self.sites = sites
        self.arrays = arrays
        self.cube = _tuple(cube)
        self.unit = _tuple(unit)

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        target = node.value
        if not (isinstance(target, ast.Name) and target.id in self.arrays):
            return node
        if _is_literal_index(node.slice):
            return node         # left to Numba (module docstring)
        index = _index_value(node.slice)
        if index is None:
            return node
        node.slice = ast.copy_location(self._check(target.id, index), node.slice)
        return ast.fix_missing_locations(node)

    def _check(self, name: str, index: ast.expr) -> ast.Call:
        if name not in self.sites:
            self.sites.append(name)
        site = ast.Constant(self.sites.index(name))
        return ast.Call(ast.Name(CHECKER, ast.Load()),
                        [ast.Name(name, ast.Load()), index, site, copy.deepcopy(self.cube),
                         copy.deepcopy(self.unit)], [])


def _index_value(index: ast.expr) -> ast.expr | None:
    """The index as a value a call can take (a slice inside a tuple as ``slice(...)``), or None
    when it has nothing this check handles (module docstring)."""
    if isinstance(index, ast.Slice):
        return None
    if not isinstance(index, ast.Tuple):
        return None if _is_none_or_ellipsis(index) else index
    items = []
    for item in index.elts:
        if isinstance(item, ast.Starred) or _is_none_or_ellipsis(item):
            return None
        if isinstance(item, ast.Slice):
            bounds = [b if b is not None else ast.Constant(None)
                      for b in (item.lower, item.upper, item.step)]
            item = ast.Call(ast.Name("slice", ast.Load()), bounds, [])
        items.append(item)
    return ast.Tuple(items, ast.Load())


def _is_literal_index(index: ast.expr) -> bool:
    """An index of literals only (``t[1]``, ``r["x"]``, ``a[-1, 0]``). It must stay literal in
    the subscript: Numba types an item of a heterogeneous tuple or a record field only for a
    literal, which the checker's result is not."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(_is_constant(item) and not _is_none_or_ellipsis(item) for item in items)


def _is_constant(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)


def _is_none_or_ellipsis(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and (node.value is None or node.value is Ellipsis)


def _tuple(names: tuple) -> ast.Tuple:
    return ast.Tuple([ast.parse(n, mode="eval").body for n in names], ast.Load())
