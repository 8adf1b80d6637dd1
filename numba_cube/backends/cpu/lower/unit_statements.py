"""The two rewrites per-unit code needs before it can be pasted into a unit loop.

In the generated code a unit is one iteration of a loop over ``__tx`` (nested in loops over
``__ty``/``__tz``), so:

- ``return`` must end *this unit* only (``lower_returns``). At the top level of a region it
  becomes ``continue`` (next unit); inside the user's own loops it sets ``__ret`` and ``break``s
  out, and after each such loop ``if __ret: break`` / ``if __ret: continue`` carries it outwards.
  In kernels with barriers the unit is also marked in ``__exited`` so later regions skip it,
  which is CUDA's rule since Volta: exited threads no longer take part in barriers.
- ``x = __local__('x')`` (a ``cuda.local.array`` declaration) becomes a view of storage allocated
  once per worker chunk (``replace_local_markers``): ``x__buf`` when the array does not outlive
  its region, ``x__r[__tid]`` (one slice per unit) when it does.
"""

from __future__ import annotations

import ast
import copy

from numba_cube.backends.cpu.lower.hidden import LOCAL_MARKER

__all__ = ["RET_FLAG", "lower_returns", "replace_local_markers", "LocalArrays"]

RET_FLAG = "__ret"


def _parse(src: str) -> list[ast.stmt]:
    return ast.parse(src).body


def lower_returns(code: list[ast.stmt], on_exit: list[ast.stmt]) -> tuple[list[ast.stmt], bool]:
    """Rewrite ``return`` so that it ends the current unit; see the module docstring.

    Returns the new statements and whether ``__ret`` is used (then the caller must reset it to
    False at the start of every unit).
    """
    used = False

    def has_return(node) -> bool:
        return any(isinstance(n, ast.Return) for n in ast.walk(node))

    def rewrite(stmts, depth):
        nonlocal used
        out = []
        for s in stmts:
            if isinstance(s, ast.Return):
                out += copy.deepcopy(on_exit)
                if depth == 0:
                    out.append(ast.Continue())
                else:
                    used = True
                    out += _parse(f"{RET_FLAG} = True\nbreak")
                continue
            if isinstance(s, (ast.For, ast.While)) and has_return(s):
                s.body = rewrite(s.body, depth + 1)
                s.orelse = rewrite(s.orelse, depth)
                out.append(s)
                out += _parse(f"if {RET_FLAG}:\n    {'break' if depth else 'continue'}")
                continue
            if isinstance(s, ast.If):
                s.body = rewrite(s.body, depth) or [ast.Pass()]
                s.orelse = rewrite(s.orelse, depth)
            out.append(s)
        return out

    new = rewrite(copy.deepcopy(code), 0)
    return [ast.fix_missing_locations(s) for s in new], used


class LocalArrays(ast.NodeTransformer):
    """Replace ``x = __local__('x')`` markers by the storage chosen for each local array."""

    def __init__(self, replicated: set[str], slot: str = "__tid"):
        self.replicated = replicated
        self.slot = slot                  # the unit's index in per-unit arrays

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id == LOCAL_MARKER:
            name = node.args[0].value
            src = f"{name}__r[{self.slot}]" if name in self.replicated else f"{name}__buf"
            return ast.copy_location(ast.parse(src, mode="eval").body, node)
        return self.generic_visit(node)


def replace_local_markers(code: list[ast.stmt], replicated: set[str],
                          slot: str = "__tid") -> list[ast.stmt]:
    tr = LocalArrays(replicated, slot)
    return [ast.fix_missing_locations(tr.visit(s)) for s in code]
