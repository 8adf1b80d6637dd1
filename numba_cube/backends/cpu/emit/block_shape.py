"""A cube kernel's generated module specialized for one block shape.

The translator's module takes the block shape at run time (``__bdx, __bdy, __bdz``, after the
grid), so that one compile serves every launch. For a kernel with barriers or warp exchanges
(``shape == "cube"``) that costs more than the calls: every unit loop, replica size, warp count
and lane test then depends on values LLVM cannot see, so it keeps the general loop, the tail
loop for a partial warp and the per-lane tests that a known shape folds away. Measured on the
warp-shuffle reduction of ``benchmarks/bench_kernels.py`` (2^24 float64, serial body, min of
11): 42-55 ms with the shape at run time, 14-21 ms with it known; in the benchmark, which
prints the ratio against a hand-written ``prange`` reduction in the same process, 2.73-3.19x
before and 1.59-1.65x after.

``for_block(source, block)`` makes the module for one shape from the translator's text (the
launchers found in its syntax tree, the lines added to the text, whose comments carry the
kernel's own lines), so a cached translation serves every shape without translating again:

- every launcher function of the kernel (``<kernel>__chunk``, ``__body``, ``__guard``,
  ``__par_status``, ``__par``, ``__ser``) rebinds ``__bdx, __bdy, __bdz`` to the shape's values first thing (LLVM
  then folds them into the loops; device functions receive them from there);
- the entry points (``<kernel>__par``, ``<kernel>__ser``, and ``<kernel>__par_status`` of a
  kernel that can raise, which the runtime calls instead of ``__par``) first check that they were
  called with that shape and raise ``ValueError`` otherwise. The inner functions are called only
  from the entry points, with the values the entry point received, so the rebinding can never
  replace a value by a different one: a module called with another shape fails loudly instead
  of computing that shape's cubes with this one's loops.

The backend compiles one module per (kernel, block shape) that a program launches
(``CpuBackend.cache_extras`` puts the shape in the compile key). Flat kernels (no barriers, no
shared memory) keep the shared module: their block shape only enters the index arithmetic once
per row, and a compile per shape would buy nothing.
"""

from __future__ import annotations

import ast

__all__ = ["for_block", "SPECIALIZED_HEADER"]

#: The line that marks a specialized module (after the translator's header comment).
SPECIALIZED_HEADER = "# specialized for block shape"

_GEOMETRY = ("__bdx", "__bdy", "__bdz")
#: the generated functions of a kernel that take the block shape (``module._launchers``)
_LAUNCHERS = ("chunk", "body", "guard", "par_status", "par", "ser")
#: the ones the runtime or a caller calls (``server._compile_twin``): they check the shape
_ENTRIES = ("par_status", "par", "ser")


def _launcher_bodies(source: str, kernel_name: str) -> list[tuple[str, int, int]]:
    """``(name, line index of its first statement, its indentation)`` for every launcher of
    ``kernel_name`` in the module ``source`` that takes the block shape, read from the module's
    syntax tree (not its text: a signature over several lines, or a body that starts with a
    comment, is found all the same)."""
    launchers = {f"{kernel_name}__{part}" for part in _LAUNCHERS}
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name in launchers \
                and set(_GEOMETRY) <= {a.arg for a in node.args.args}:
            first = node.body[0]
            found.append((node.name, first.lineno - 1, first.col_offset))
    return found


def for_block(source: str, kernel_name: str, block: tuple[int, int, int]) -> str:
    """``source`` (a generated cube module for ``kernel_name``) with ``block`` fixed; see the
    module docstring."""
    bx, by, bz = (int(v) for v in block)
    entries = {f"{kernel_name}__{part}" for part in _ENTRIES}
    lines = source.split("\n")
    bodies = _launcher_bodies(source, kernel_name)
    if not bodies:
        raise ValueError(f"no generated function of {kernel_name} takes the block shape")
    for name, first, indent in sorted(bodies, key=lambda b: -b[1]):   # bottom up: indices hold
        pad = " " * indent
        added = [f"{pad}__bdx = {bx}", f"{pad}__bdy = {by}", f"{pad}__bdz = {bz}"]
        if name in entries:
            added = [f"{pad}if __bdx != {bx} or __bdy != {by} or __bdz != {bz}:",
                     f"{pad}    raise ValueError('this module of {kernel_name} is compiled for "
                     f"block shape ({bx}, {by}, {bz})')"] + added
        lines[first:first] = added
    header = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    lines.insert(header, f"{SPECIALIZED_HEADER} ({bx}, {by}, {bz})")
    return "\n".join(lines)
