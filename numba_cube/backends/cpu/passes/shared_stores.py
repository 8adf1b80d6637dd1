"""Stores that every unit makes to one element: read it first, write only a different value.

Why this exists: a flat kernel's parallel variant runs each thread's share of the units one after
another. A store every unit makes to the same element -- stumpy's ``gpu_stump`` kernel writes
``QT_out[0] = QT_first[j]`` in every iteration of every unit's grid-stride loop -- then has all
threads writing one cache line over and over, and each write takes the line away from every
other core: on 16 cores the row's parallel variant ran several times slower than the same loop
written by hand with the store made once (``benchmarks/bench_stumpy.py``). A GPU has no such
cost; the CPU translation must not add it. Rewritten as::

    __shared_value1 = <value>
    if __store_differs(a[index], __shared_value1):
        a[index] = __shared_value1

the element is read by every unit but written only when its bits change, so once it holds the
value the line stays shared in every core's cache.

Exact, whatever the kernel: skipping a store that would leave the element's bits as they are
changes nothing any unit or thread can see (``kernel_runtime/support.store_differs`` compares
what the store would write, cast to the element's type, bit for bit: ``-0.0`` over ``0.0`` is
stored, a NaN always is). If another unit stores a different value at the same time, the store
skipped is as if it was made just before that one, an order the GPU may run them in too. The
value is computed once, where it was, before the element is read (Python's order for
``a[i] = v``), and the element's index and bounds checks are the store's own.

Which stores: a statement ``a[index] = value`` (one target; ``a`` a name; not ``a[index] += v``,
which reads the element anyway) anywhere in a flat kernel's unit code whose index is the same for
every unit: built from constants and from names the unit code never assigns that are the kernel's
parameters, the uniform prologue's names or the grid's dimensions. For other stores the read
would be pure cost.
"""

from __future__ import annotations

import ast
import copy

from numba_cube.backends.cpu.analyze.dataflow import store_counts
from numba_cube.backends.cpu.lower.hidden import GRID_UNIFORM_IDS
from numba_cube.backends.cpu.passes import enabled

__all__ = ["conditional_shared_stores", "STORE_DIFFERS", "VALUE_PREFIX"]

#: ``support.store_differs`` in generated code (``emit/module.py`` imports it under this name)
STORE_DIFFERS = "__store_differs"
#: the temporaries that hold a rewritten store's value
VALUE_PREFIX = "__shared_value"


def conditional_shared_stores(body: list[ast.stmt], uniform_names) -> list[ast.stmt]:
    """``body`` with its stores to a grid-uniform element made conditional (module docstring).
    ``uniform_names``: the names that hold the same value for every unit where the body does
    not assign them (the parameters, the uniform prologue's names)."""
    if not enabled("shared_stores"):
        return body
    assigned = store_counts(body)
    uniform = {n for n in (*uniform_names, *GRID_UNIFORM_IDS) if not assigned[n]}
    rewriter = _Rewriter(uniform)
    return rewriter.statements(body)


class _Rewriter:
    def __init__(self, uniform: set[str]):
        self.uniform = uniform
        self.count = 0

    def statements(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            if self._qualifies(stmt):
                out.extend(self._conditional(stmt))
                continue
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and not isinstance(stmt, (ast.FunctionDef,
                                                                     ast.ClassDef)):
                    setattr(stmt, field, self.statements(inner))
            out.append(stmt)
        return out

    def _qualifies(self, stmt: ast.stmt) -> bool:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            return False
        target = stmt.targets[0]
        return (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and self._uniform_index(target.slice))

    def _uniform_index(self, index: ast.expr) -> bool:
        if isinstance(index, ast.Tuple):
            return all(self._uniform_index(e) for e in index.elts)
        if isinstance(index, ast.Constant):
            return isinstance(index.value, int) and not isinstance(index.value, bool)
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
            return self._uniform_index(index.operand)
        return isinstance(index, ast.Name) and index.id in self.uniform

    def _conditional(self, stmt: ast.Assign) -> list[ast.stmt]:
        self.count += 1
        value = f"{VALUE_PREFIX}{self.count}"
        target = stmt.targets[0]
        keep = ast.Assign([ast.Name(value, ast.Store())], stmt.value)
        element = ast.Subscript(ast.Name(target.value.id, ast.Load()), _copy(target.slice),
                                ast.Load())
        test = ast.Call(ast.Name(STORE_DIFFERS, ast.Load()),
                        [element, ast.Name(value, ast.Load())], [])
        store = ast.Assign([target], ast.Name(value, ast.Load()))
        guarded = ast.If(test, [store], [])
        for node in (keep, guarded, store):
            ast.copy_location(node, stmt)
        return [ast.fix_missing_locations(keep), ast.fix_missing_locations(guarded)]


def _copy(node: ast.expr) -> ast.expr:
    """A copy of an index expression, locations kept (the store keeps the original node)."""
    return copy.deepcopy(node)
