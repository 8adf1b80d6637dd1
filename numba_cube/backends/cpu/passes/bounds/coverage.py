"""Which subscripts of a bounds-checked kernel are covered, and which generated functions may
then drop Numba's own check (``relax``): the half of ``passes/bounds/checks.py`` that reads generated code
rather than writing checks into it.

The names the checks are called by in generated modules live here too (``CHECKER`` and the
helpers of checks hoisted out of loops), so that both halves use one spelling of them.
"""

from __future__ import annotations

import ast

from numba_cube.backends.cpu.passes.bounds.affine import SHAPE_ATTRIBUTES

__all__ = ["CHECKER", "PRECHECKED", "IN_BOUNDS", "RANGE_ENDS", "SMALL", "relax", "all_checked",
           "safe_unchecked", "index_items", "repeatable", "call_to", "is_checked",
           "own_expressions", "index_value", "is_literal_index", "is_constant",
           "is_none_or_ellipsis", "names_tuple", "internal_storage"]

#: the name of ``checked_index`` in generated modules
CHECKER = "__checked"
#: the names of the helpers of checks hoisted out of loops (``bounds._Loop``)
PRECHECKED, IN_BOUNDS, RANGE_ENDS, SMALL = ("__prechecked", "__in_bounds", "__range_ends",
                                            "__small_coefficient")

def internal_storage(name: str) -> bool:
    """A name of the translator's own per-unit storage: ``__failed``, the masks ``__m<k>``,
    exchange buffers ``__x..``, replicas ``<name>__r`` and their lists ``<name>__l``. User names
    never contain ``__`` (``frontend.check_reserved``), and the translator's renamings of them
    (``x__i1`` of an inlined function, ``sm__s1``, ``f__rv1``) end otherwise."""
    return name.startswith("__") or name.endswith(("__r", "__l"))

def safe_unchecked(node: ast.Subscript) -> bool:
    """Can this subscript not go out of bounds unchecked? Slices only (clipped to their axis),
    a record's field by name, a shape or strides tuple (Numba checks a tuple's run-time index
    whatever its flag), or the translator's own storage at an index made of its own names."""
    target, items = node.value, index_items(node.slice)
    if isinstance(target, ast.Attribute) and target.attr in SHAPE_ATTRIBUTES:
        return True
    if all(isinstance(i, ast.Slice) or (isinstance(i, ast.Constant) and isinstance(i.value, str))
           for i in items):
        return True
    return (isinstance(target, ast.Name) and internal_storage(target.id)
            and all("__" in n.id for i in items for n in ast.walk(i) if isinstance(n, ast.Name)))

def index_items(index: ast.expr) -> list:
    return index.elts if isinstance(index, ast.Tuple) else [index]

def repeatable(node: ast.expr) -> bool:
    """An expression that may be evaluated twice: names, attributes, constants, subscripts of
    such, and the checkers' calls (no other call)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            if not (isinstance(n.func, ast.Name) and n.func.id == CHECKER):
                return False
        elif not isinstance(n, (ast.Name, ast.Attribute, ast.Constant, ast.Subscript, ast.Tuple,
                                ast.Slice, ast.UnaryOp, ast.BinOp, ast.expr_context, ast.unaryop,
                                ast.operator)):
            return False
    return True

def call_to(e: ast.expr, name: str) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == name

def is_checked(node: ast.Subscript, ahead: set) -> bool:
    """Does the generated code check this subscript (``add_checks``)? ``ahead``: the literal
    subscripts, as ``(value, index)`` texts, that the checks right in front of the statement
    holding it check."""
    return (call_to(node.slice, CHECKER) or call_to(node.slice, PRECHECKED)
            or safe_unchecked(node)
            or (is_literal_index(node.slice)
                and (ast.unparse(node.value), ast.unparse(node.slice)) in ahead))

def own_expressions(stmt: ast.stmt) -> list:
    """The expressions a statement evaluates itself (a compound statement's header, not its
    body, whose statements are walked as statements)."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, ast.For):
        return [stmt.target, stmt.iter]
    return [c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.expr)]

def all_checked(stmts: list) -> bool:
    """Is every subscript in ``stmts`` (and the statements nested in them) checked?"""
    ahead: set = set()
    for stmt in stmts:
        exprs = own_expressions(stmt)
        # a walrus may rebind what the checks in front read; a while's test is evaluated again,
        # and so is a for's target
        trusted = set() if isinstance(stmt, ast.While) or any(
            isinstance(n, ast.NamedExpr) for e in exprs for n in ast.walk(e)) else ahead
        again = [stmt.target] if isinstance(stmt, ast.For) else []
        if not all(is_checked(n, set() if e in again else trusted) for e in exprs
                   for n in ast.walk(e) if isinstance(n, ast.Subscript)):
            return False
        nested = [getattr(stmt, f, None) or [] for f in ("body", "orelse", "finalbody")]
        nested += [h.body for h in getattr(stmt, "handlers", [])]
        if not all(all_checked(body) for body in nested if body and isinstance(body[0], ast.stmt)):
            return False
        if isinstance(stmt, ast.Expr) and call_to(stmt.value, CHECKER) \
                and is_literal_index(stmt.value.args[1]):
            # a literal index's check: it covers that subscript in the next statement
            ahead = ahead | {(ast.unparse(stmt.value.args[0]), ast.unparse(stmt.value.args[1]))}
        else:
            ahead = set()
    return True

def relax(text: str) -> str:
    """The checked module ``text`` with ``boundscheck=False`` in the ``njit`` decorator of each
    function whose every subscript is checked by ``add_checks`` or needs no check
    (``all_checked``); the others keep Numba's own check (module docstring)."""
    tree = ast.parse(text)
    lines = text.split("\n")
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not all_checked(fn.body):
            continue
        for dec in fn.decorator_list:
            if not (isinstance(dec, ast.Call) and any(
                    k.arg == "boundscheck" and isinstance(k.value, ast.Constant)
                    and k.value.value is True for k in dec.keywords)):
                continue
            for i in range(dec.lineno - 1, dec.end_lineno):
                lines[i] = lines[i].replace("boundscheck=True", "boundscheck=False")
    return "\n".join(lines)

def index_value(index: ast.expr) -> ast.expr | None:
    """The index as a value a call can take (a slice inside a tuple as ``slice(...)``), or None
    when it has nothing this check handles (module docstring)."""
    if isinstance(index, ast.Slice):
        return None
    if not isinstance(index, ast.Tuple):
        return None if is_none_or_ellipsis(index) else index
    items = []
    for item in index.elts:
        if isinstance(item, ast.Starred) or is_none_or_ellipsis(item):
            return None
        if isinstance(item, ast.Slice):
            bounds = [b if b is not None else ast.Constant(None)
                      for b in (item.lower, item.upper, item.step)]
            item = ast.Call(ast.Name("slice", ast.Load()), bounds, [])
        items.append(item)
    return ast.Tuple(items, ast.Load())

def is_literal_index(index: ast.expr) -> bool:
    """An index of literals only (``t[1]``, ``r["x"]``, ``a[-1, 0]``). It must stay literal in
    the subscript: Numba types an item of a heterogeneous tuple or a record field only for a
    literal, which the checker's result is not."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(is_constant(item) and not is_none_or_ellipsis(item) for item in items)

def is_constant(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)

def is_none_or_ellipsis(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and (node.value is None or node.value is Ellipsis)

def names_tuple(names: tuple) -> ast.Tuple:
    return ast.Tuple([ast.parse(n, mode="eval").body for n in names], ast.Load())
