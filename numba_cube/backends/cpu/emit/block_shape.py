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

``for_block(source, block)`` makes the module for one shape from the translator's text, by
text, so a cached translation serves every shape without translating again:

- every launcher function of the kernel (``<kernel>__chunk``, ``__body``, ``__guard``,
  ``__par``, ``__ser``) rebinds ``__bdx, __bdy, __bdz`` to the shape's values first thing (LLVM
  then folds them into the loops; device functions receive them from there);
- the two entry points (``<kernel>__par`` and ``<kernel>__ser``) first check that they were
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

import re

__all__ = ["for_block", "SPECIALIZED_HEADER"]

#: The line that marks a specialized module (after the translator's header comment).
SPECIALIZED_HEADER = "# specialized for block shape"

_GEOMETRY = "__bdx, __bdy, __bdz"
#: the generated functions of a kernel that take the block shape (``module._launchers``)
_LAUNCHERS = ("chunk", "body", "guard", "par", "ser")
_DEF = re.compile(r"^def (\w+)\((.*)\):$")


def for_block(source: str, kernel_name: str, block: tuple[int, int, int]) -> str:
    """``source`` (a generated cube module for ``kernel_name``) with ``block`` fixed; see the
    module docstring."""
    bx, by, bz = (int(v) for v in block)
    launchers = {f"{kernel_name}__{part}" for part in _LAUNCHERS}
    entries = {f"{kernel_name}__par", f"{kernel_name}__ser"}
    rebind = [f"    __bdx = {bx}", f"    __bdy = {by}", f"    __bdz = {bz}"]
    check = [f"    if __bdx != {bx} or __bdy != {by} or __bdz != {bz}:",
             f"        raise ValueError('this module of {kernel_name} is compiled for block shape "
             f"({bx}, {by}, {bz})')"]
    out: list[str] = []
    header_done = False
    specialized = 0
    for line in source.split("\n"):
        if not header_done and not line.startswith("#"):
            out.append(f"{SPECIALIZED_HEADER} ({bx}, {by}, {bz})")
            header_done = True
        out.append(line)
        found = _DEF.match(line)
        if found is None or found.group(1) not in launchers or _GEOMETRY not in found.group(2):
            continue
        if found.group(1) in entries:
            out.extend(check)
        out.extend(rebind)
        specialized += 1
    if specialized == 0:
        raise ValueError(f"no generated function of {kernel_name} takes the block shape")
    return "\n".join(out)
