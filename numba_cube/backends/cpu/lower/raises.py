"""Exceptions raised by ``debug=True`` kernels name the unit that raised them, as numba-cuda's do.

numba-cuda reports a kernel's exceptions only for ``debug=True`` kernels, and then re-raises the
exception class with its first argument prefixed by where it happened
(``dispatcher.py``, ``_KernelConfiguration``/``launch``)::

    MyError("In function 'k', file /abs/path.py, line 12, tid=[0, 0, 3] ctaid=[0, 0, 1]: foo")

(``tid``/``ctaid`` listed z, y, x, as numba-cuda reads them back; no argument: the prefix
alone). The CPU backend knows the same facts at the ``raise``: the function, the user's file and
line, and the unit's hidden ids. ``RaiseLowering.visit_Raise`` (a mixin of the ``Lowerer``)
rewrites ``raise E`` / ``raise E("text", ...)`` in ``debug=True`` kernels and their device
functions so that the message is built at run time (Numba's dynamic exception arguments).

Only what is known for certain is rewritten: ``E`` must resolve to an exception class, and its
first argument, when there is one, must be a string literal (numba-cuda's arguments are
compile-time constants too). Any other ``raise`` is left as written: the exception is the same,
without the prefix. Kernels without ``debug=True`` keep their messages unchanged (numba-cuda
raises nothing for them).
"""

from __future__ import annotations

import ast
import os

from numba_cube.backends.cpu.frontend.source import chain, resolve
from numba_cube.backends.cpu.lower.hidden import BLOCK_IDS, THREAD_IDS

__all__ = ["RaiseLowering", "position_prefix"]


def _is_exception_class(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseException)


def position_prefix(function: str, filename: str, line: int | None) -> ast.expr:
    """The run-time message prefix numba-cuda gives a kernel exception, as an expression over
    the unit's hidden ids."""
    where = f"In function {function!r}, file {os.path.abspath(filename)}, line {line}, "

    def listed(names):                       # "str(__tz) + ', ' + str(__ty) + ', ' + str(__tx)"
        return " + ', ' + ".join(f"str({n})" for n in reversed(names))   # z, y, x
    source = (f"{where + 'tid=['!r} + {listed(THREAD_IDS)} + '] ctaid=[' + "
              f"{listed(BLOCK_IDS)} + ']'")
    return ast.parse(source, mode="eval").body


class RaiseLowering:
    """Mixin of ``lowering.Lowerer`` (needs ``fn``, ``env`` and ``generic_visit``)."""

    def visit_Raise(self, node):
        if (not self.env.unit_positions_in_exceptions or node.exc is None
                or node.cause is not None):
            return self.generic_visit(node)
        exc = node.exc
        target = exc.func if isinstance(exc, ast.Call) else exc
        r = resolve(self.fn, target) if chain(target) is not None else None
        if r is None or r.cuda_path is not None or r.rest or not _is_exception_class(r.obj):
            return self.generic_visit(node)
        if isinstance(exc, ast.Call):
            if exc.keywords or any(isinstance(a, ast.Starred) for a in exc.args):
                return self.generic_visit(node)
            if exc.args and not (isinstance(exc.args[0], ast.Constant)
                                 and isinstance(exc.args[0].value, str)):
                return self.generic_visit(node)
        node = self.generic_visit(node)             # freezes the class name, lowers the rest
        call = node.exc if isinstance(node.exc, ast.Call) else ast.Call(node.exc, [], [])
        prefix = position_prefix(self.fn.name, self.fn.filename, self.fn.user_line(node))
        if call.args:
            first = ast.BinOp(ast.BinOp(prefix, ast.Add(), ast.Constant(": ")), ast.Add(),
                              call.args[0])
            call.args = [first] + call.args[1:]
        else:
            call.args = [prefix]
        node.exc = ast.copy_location(call, node)
        return ast.fix_missing_locations(node)
