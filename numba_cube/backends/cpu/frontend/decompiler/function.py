"""Kernels and device functions without source: a ``def`` rebuilt from their bytecode.

The CPU translator works on Python source. A function made by ``exec`` or typed into a REPL has
none that ``inspect`` can find, but numba-cuda compiles such functions (from bytecode), so the
CPU backend must too. ``frontend.load_function`` asks this module in two places:

- ``source_matches(py_func, lines)``: the source ``inspect`` finds (a file, or ``linecache``
  for a pseudo-file such as ``<ipython-input-3-...>`` or generated code registered under
  ``<string>``) is used only when compiling it gives the function's own bytecode: a file edited
  since it was imported, or a tool that registered other text under the same name, must not
  make the translator compile another kernel than numba-cuda would.
- ``function_node(py_func, role)``: no (matching) source. Numba's own bytecode frontend
  (``run_frontend``) gives the untyped IR, which ``frontend/decompiler/block.py`` (statements) and
  ``frontend/decompiler/flow.py`` (``if``/``for``/``while``) turn back into an ``ast.FunctionDef`` whose
  statements carry the user's line numbers. The translator then handles it as it handles parsed
  source, with the same support and refusals (barriers and shared memory included), since what
  it receives is an equivalent Python function over the same globals and closure.
"""

from __future__ import annotations

import ast
import dis
import inspect

from numba.core.compiler import run_frontend
from numba.core.compiler_lock import global_compiler_lock

from numba_cube.backends.cpu.frontend.decompiler.block import BlockRenderer
from numba_cube.backends.cpu.frontend.decompiler.flow import Structurer
from numba_cube.errors import CompileError

__all__ = ["function_node", "source_matches"]

_TERMINATORS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def function_node(py_func, role: str) -> ast.FunctionDef:
    """An ``ast.FunctionDef`` equivalent to ``py_func``, rebuilt from its bytecode.

    Raises ``CompileError`` naming the construct (and its line) that has no rebuilt form.
    """
    code = py_func.__code__
    describe = f"{role} {py_func.__name__!r}"
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE |
                        inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
        raise CompileError(f"{describe} must be a plain 'def' function",
                           construct="non-def kernel", lineno=code.co_firstlineno,
                           filename=code.co_filename)
    try:
        with global_compiler_lock:     # Numba's frontend is not documented as thread-safe
            func_ir = run_frontend(py_func)
    except Exception as exc:            # Numba's frontend refuses bytecode it cannot read
        raise CompileError(
            f"{describe} has no source (defined by exec or in a REPL), and Numba cannot read "
            f"its bytecode: {exc}; define it in a file", construct="unreadable bytecode",
            lineno=code.co_firstlineno, filename=code.co_filename) from exc
    taken = set(code.co_varnames) | set(code.co_names) | set(code.co_freevars) | set(
        code.co_cellvars)
    renderer = BlockRenderer(py_func, func_ir, describe, taken)
    body = Structurer(renderer).emit()
    clash = renderer.globals_used & renderer.locals_used
    if clash:
        raise renderer.refuse(f"the name {sorted(clash)[0]!r} both as a global and a local",
                              func_ir.loc)
    body = tidy(body)
    return _function_def(py_func, body)


def _function_def(py_func, body: list[ast.stmt]) -> ast.FunctionDef:
    code = py_func.__code__
    names = code.co_varnames
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    args = ast.arguments(
        posonlyargs=[ast.arg(n) for n in names[:code.co_posonlyargcount]],
        args=[ast.arg(n) for n in names[code.co_posonlyargcount:npos]],
        vararg=ast.arg(names[npos + nkw]) if code.co_flags & inspect.CO_VARARGS else None,
        kwonlyargs=[ast.arg(n) for n in names[npos:npos + nkw]], kw_defaults=[],
        kwarg=ast.arg(names[npos + nkw + bool(code.co_flags & inspect.CO_VARARGS)])
        if code.co_flags & inspect.CO_VARKEYWORDS else None,
        defaults=[])
    node = ast.FunctionDef(py_func.__name__, args, body or [ast.Pass()], [], None)
    node.lineno = node.end_lineno = code.co_firstlineno
    node.col_offset = node.end_col_offset = 0
    for n in ast.walk(node):
        if isinstance(n, (ast.arg, ast.stmt, ast.expr)) and not hasattr(n, "lineno"):
            n.lineno = n.end_lineno = code.co_firstlineno
            n.col_offset = n.end_col_offset = 0
    return node


def tidy(body: list[ast.stmt]) -> list[ast.stmt]:
    """Undo what compiling did to the shape (not the meaning) of the function's end.

    CPython copies the implicit ``return None`` into every path, so ``if i < n: <body>`` comes
    back as ``if i < n: <body>; return`` / ``else: return``. An ``else`` after an arm that always
    leaves is moved after the ``if``; returns at the very end of the function are dropped
    (falling off the end returns too). This restores the guard shapes the translator's flat
    loops hoist (``if i < n: ...``, ``if i >= n: return``).
    """
    body = _flatten_else(body)
    _strip_tail_returns(body)
    return _fill_empty(_unrotate_whiles(body))


def _flatten_else(stmts: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for s in stmts:
        for attr in ("body", "orelse"):
            if isinstance(getattr(s, attr, None), list):
                setattr(s, attr, _flatten_else(getattr(s, attr)))
        out.append(s)
        if isinstance(s, ast.If) and s.body and isinstance(s.body[-1], _TERMINATORS) \
                and s.orelse:
            out.extend(s.orelse)
            s.orelse = []
    return out


def _unrotate_whiles(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """``if c: while True: <body>; if c: continue; break`` back to ``while c: <body>``.

    CPython compiles ``while c:`` with the test copied to the loop's end; both forms evaluate
    ``c`` at the same moments, provided no ``continue`` in ``body`` skips the copy (a
    ``continue`` of the source jumps to the test, so it comes back as ``if c: continue``)."""
    out = []
    for s in stmts:
        for attr in ("body", "orelse"):
            if isinstance(getattr(s, attr, None), list):
                setattr(s, attr, _unrotate_whiles(getattr(s, attr)))
        loop = s.body[0] if isinstance(s, ast.If) and len(s.body) == 1 else None
        if (isinstance(loop, ast.While) and not s.orelse and _is_true(loop.test)
                and not loop.orelse and len(loop.body) >= 2
                and isinstance(loop.body[-1], ast.Break)
                and isinstance(loop.body[-2], ast.If) and not loop.body[-2].orelse
                and len(loop.body[-2].body) == 1
                and isinstance(loop.body[-2].body[0], ast.Continue)
                and ast.dump(loop.body[-2].test) == ast.dump(s.test)
                and not _continues(loop.body[:-2])):
            loop.test, loop.body = s.test, loop.body[:-2] or [ast.copy_location(ast.Pass(), s)]
            s = loop
        out.append(s)
    return out


def _is_true(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _continues(stmts) -> bool:
    """Does a ``continue`` of the loop these statements are the body of occur in them?"""
    for s in stmts:
        if isinstance(s, ast.Continue):
            return True
        if isinstance(s, ast.If) and (_continues(s.body) or _continues(s.orelse)):
            return True
    return False


def _strip_tail_returns(stmts: list[ast.stmt]) -> None:
    while stmts and isinstance(stmts[-1], ast.Return) and stmts[-1].value is None:
        stmts.pop()
    if stmts and isinstance(stmts[-1], ast.If):
        _strip_tail_returns(stmts[-1].body)
        _strip_tail_returns(stmts[-1].orelse)


def _fill_empty(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """Empty bodies get ``pass``; ``if c: pass`` / ``else: X`` becomes ``if not c: X``."""
    for n in (n for s in stmts for n in ast.walk(s)):
        if isinstance(n, ast.If) and n.orelse and all(isinstance(s, ast.Pass) for s in n.body):
            n.test = ast.copy_location(ast.UnaryOp(ast.Not(), n.test), n.test)
            n.body, n.orelse = n.orelse, []
        if isinstance(n, (ast.If, ast.For, ast.While)) and not n.body:
            n.body = [ast.copy_location(ast.Pass(), n)]
    return stmts


# ---- source found in linecache ---------------------------------------------------------------


def source_matches(py_func, lines: list[str]) -> bool:
    """Does compiling ``lines`` (the source ``inspect`` found) give ``py_func``'s bytecode?

    The lines are compiled as they stand (dedenting would change multi-line strings), under
    ``if 1:`` when indented; free variables are bound in an enclosing function, so that the
    candidate compiles to the same loads (``LOAD_DEREF``) as the original closure.
    """
    code = py_func.__code__
    raw = "".join(lines)
    if code.co_freevars:
        text = ("def _outer():\n " + " = ".join(code.co_freevars) + " = None\n if 1:\n"
                + raw)
    elif lines and lines[0][:1] in (" ", "\t"):
        text = "if 1:\n" + raw
    else:
        text = raw
    try:
        module = compile(text, code.co_filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return any(_same_code(c, code) for c in _code_objects(module))


def _code_objects(code):
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield const
            yield from _code_objects(const)


def _same_code(a, b) -> bool:
    if (a.co_name != b.co_name or a.co_names != b.co_names or a.co_varnames != b.co_varnames
            or a.co_freevars != b.co_freevars or a.co_argcount != b.co_argcount):
        return False
    ia, ib = _instructions(a), _instructions(b)
    if len(ia) != len(ib):
        return False
    for (op_a, arg_a), (op_b, arg_b) in zip(ia, ib):
        if op_a != op_b:
            return False
        if hasattr(arg_a, "co_code") or hasattr(arg_b, "co_code"):
            if not (hasattr(arg_a, "co_code") and hasattr(arg_b, "co_code")
                    and _same_code(arg_a, arg_b)):
                return False
        elif type(arg_a) is not type(arg_b) or (arg_a != arg_b and not (
                arg_a != arg_a and arg_b != arg_b)):         # nan constants compare unequal
            return False
    return True


def _instructions(code) -> list[tuple[str, object]]:
    """``(operation, argument)`` per instruction, jump targets as instruction indexes.

    CPython 3.11 compiles ``module.f(x)`` to ``LOAD_GLOBAL (NULL + module); LOAD_ATTR f`` when
    the enclosing module imported ``module`` and to ``LOAD_GLOBAL; LOAD_METHOD f`` otherwise,
    so the same text compiled alone differs from the module's code in exactly that (and in the
    offsets it shifts, and the ``EXTENDED_ARG`` prefixes those need); both mean the same call.
    """
    instrs, index, prefix = [], {}, []
    for ins in dis.get_instructions(code):
        if ins.opname == "EXTENDED_ARG":     # longer jumps need it: an offset, not a meaning
            prefix.append(ins.offset)
            continue
        for offset in (*prefix, ins.offset):
            index[offset] = len(instrs)
        prefix = []
        instrs.append(ins)
    out = []
    for ins in instrs:
        op, arg = ins.opname, ins.argval
        if op == "LOAD_METHOD":
            op = "LOAD_ATTR"
        if ins.opcode in _JUMPS:
            arg = index.get(arg, arg)
        out.append((op, arg))
    return out


_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
