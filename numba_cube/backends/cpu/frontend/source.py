"""Reading a kernel's source and resolving the free names it uses.

The translator works on Python source (``ast``), so the first step for every kernel and device
function is to get that source back from the function object, parse it, and remember where it
came from: every ``CompileError`` names the construct, the line *in the user's file* and the file.
A function without source (made by ``exec``, typed into a REPL) is rebuilt from its bytecode by
``frontend/decompiler/function.py``, with the user's line numbers.

Name resolution follows Python's own rules for a function body: a name assigned anywhere in the
function (or a parameter) is local; any other name is looked up in the closure cells, then the
module globals, then builtins. Attribute chains rooted at a module (``np.float32``,
``numba.cuda.threadIdx.x``, ``config.TPB``) are followed through modules, so the translator sees the
object they denote. The CUDA module (numba.cuda, or numba-cuda-mlir's ``numba_cuda_mlir.cuda``:
``kernel/dialects.py``) is recognised whatever it is bound to (``cuda``, ``import numba.cuda as
nc``), and so are objects imported from it (``from numba.cuda import threadIdx, syncthreads``);
the scalar type objects it re-exports (``cuda.float32``) are values, Numba's own types (for
numba-cuda-mlir's copies, the Numba type of the same name). A device function being inlined at a call
site (``lower/inline/inliner.py``) resolves the parameters bound to compile-time values there (a function such
as ``cuda.atomic.add``, a dtype, a shape) as if they were closure variables
(``SourceFunction.static``).
"""

from __future__ import annotations

import ast
import builtins
import copy
import inspect
import sys
import textwrap
import types as pytypes
from dataclasses import dataclass, field

from numba_cube.backends.cpu.frontend.decompiler import function as sourceless
from numba_cube.errors import CompileError
from numba_cube.kernel import dialects

#: module names under which a CUDA kernel API lives (``kernel/dialects.py``)
CUDA_MODULE_NAMES = dialects.CUDA_MODULE_NAMES

#: prefix/infix reserved for names the translator introduces (see ``check_reserved``)
RESERVED = "__"


@dataclass
class SourceFunction:
    """A parsed function plus what is needed to report errors and resolve its names."""

    py_func: pytypes.FunctionType
    node: ast.FunctionDef
    filename: str
    line_offset: int                     # user line = node.lineno + line_offset
    params: list[str]
    local_names: set[str] = field(default_factory=set)
    #: parameters bound to compile-time values at an inlined call site (``lower/inline/inliner.py``): they
    #: resolve like closure variables, before the closure cells and globals are consulted
    static: dict[str, "Resolved"] = field(default_factory=dict)
    vararg: str | None = None            # the ``*args`` parameter (inlined functions only)

    @property
    def name(self) -> str:
        return self.py_func.__name__

    def with_static(self, static: dict[str, "Resolved"]) -> "SourceFunction":
        """A fresh copy of this function (its own AST, which lowering rewrites in place) whose
        parameters in ``static`` denote compile-time values instead of local variables."""
        return SourceFunction(self.py_func, copy.deepcopy(self.node), self.filename,
                              self.line_offset, list(self.params),
                              self.local_names - set(static), dict(static), self.vararg)

    def add_locals(self, names) -> None:
        """Declare names that generated code binds in this function's body (the renamed locals
        of inlined device functions), so that later passes treat them as local variables."""
        self.local_names |= set(names)

    def user_line(self, node: ast.AST | None) -> int | None:
        lineno = getattr(node, "lineno", None)
        return None if lineno is None else lineno + self.line_offset

    def error(self, message: str, construct: str, node: ast.AST | None = None) -> CompileError:
        """A CompileError for ``construct`` at ``node`` (the function itself when None)."""
        return CompileError(f"{message} [in {self.name!r}]", construct=construct,
                            lineno=self.user_line(node if node is not None else self.node),
                            filename=self.filename)

    # ---- name resolution ---------------------------------------------------------------

    def lookup(self, name: str):
        """``(True, obj)`` for a free name, ``(False, None)`` when it is not defined anywhere."""
        code = self.py_func.__code__
        if name in code.co_freevars and self.py_func.__closure__:
            cell = self.py_func.__closure__[code.co_freevars.index(name)]
            try:
                return True, cell.cell_contents
            except ValueError:                  # empty cell: referenced before assignment
                return False, None
        g = self.py_func.__globals__
        if name in g:
            return True, g[name]
        if hasattr(builtins, name):
            return True, getattr(builtins, name)
        return False, None


def load_function(py_func, role: str = "kernel", allow_vararg: bool = False) -> SourceFunction:
    """Get, dedent and parse the source of ``py_func``; raise CompileError when impossible.

    ``allow_vararg``: accept a ``*args`` parameter (device functions being inlined, whose call
    sites bind it, ``lower/inline/inliner.py``)."""
    py_func = getattr(py_func, "py_func", py_func)          # tolerate dispatchers
    if not isinstance(py_func, pytypes.FunctionType):
        raise CompileError(f"cannot translate {py_func!r}: not a Python function",
                           construct=f"{role} object of type {type(py_func).__name__}")
    filename = inspect.getsourcefile(py_func) or py_func.__code__.co_filename
    parsed = _parse_source(py_func)
    if parsed is None:      # no source: rebuilt from the bytecode, lines are the user's own
        node, start, offset = sourceless.function_node(py_func, role), 1, 0
    else:
        node, start, offset = parsed
    if isinstance(node, ast.AsyncFunctionDef) or not isinstance(node, ast.FunctionDef):
        raise CompileError(f"{role} {py_func.__name__!r} must be a plain 'def' function",
                           construct="non-def kernel", lineno=start, filename=filename)
    node.decorator_list = []
    node.returns = None
    args = node.args
    if (args.vararg and not allow_vararg) or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise CompileError(f"{role} {py_func.__name__!r} may only have plain positional "
                           "parameters", construct="*args/**kwargs/keyword-only parameters",
                           lineno=start + node.lineno - 1, filename=filename)
    params = [a.arg for a in args.args]
    for a in args.args:
        a.annotation = None
    fn = SourceFunction(py_func, node, filename, offset, params)
    fn.local_names = set(params) | {n.id for n in ast.walk(node)
                                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if args.vararg:
        fn.vararg = args.vararg.arg
        fn.local_names.add(fn.vararg)
    check_reserved(fn)
    return fn


def _parse_source(py_func):
    """``(def node, first line, line offset)`` from the function's source, or None when there
    is none, or when the source found is not the function's (a file edited since it was
    imported, other text registered in linecache under its pseudo-file name): compiling it must
    give the function's own bytecode, which is what numba-cuda compiles."""
    try:
        # inspect reads linecache first: IPython cells and generated code registered there
        lines, start = inspect.getsourcelines(py_func)
    except (OSError, TypeError):
        return None
    text = textwrap.dedent("".join(lines))
    offset = start - 1
    try:
        module = ast.parse(text)
    except SyntaxError:
        # dedent fails when a continuation line (e.g. inside a string) is less indented than
        # the def; parsing the raw lines under "if 1:" tolerates any common indentation
        text = "if 1:\n" + "".join(lines)
        try:
            module = ast.parse(text)
        except SyntaxError:
            return None
        module.body = module.body[0].body
        offset -= 1
    if not sourceless.source_matches(py_func, lines):
        return None
    return (module.body[0] if module.body else None), start, offset


def check_reserved(fn: SourceFunction) -> None:
    """Refuse user identifiers containing '__': the generated code owns that namespace."""
    for n in ast.walk(fn.node):
        name = n.id if isinstance(n, ast.Name) else n.arg if isinstance(n, ast.arg) else None
        if name and RESERVED in name and not (name.startswith("__") and name.endswith("__")):
            raise fn.error(f"identifier {name!r} contains '__', which the CPU translator "
                           "reserves for its own names; please rename it",
                           construct=f"reserved identifier {name!r}", node=n)


# ---- the CUDA module ---------------------------------------------------------------------


is_cuda_module = dialects.is_cuda_module


#: CUDA namespaces that numba-cuda-mlir makes submodules (numba.cuda: stub classes), so that
#: ``from numba_cuda_mlir.cuda import shared`` then ``shared.array`` is ``cuda.shared.array``
_MODULE_NAMESPACES = ("shared", "local", "const")


def cuda_stub_name(obj) -> str | None:
    """If ``obj`` is an attribute of the (already imported) CUDA module, its name there."""
    if isinstance(obj, (int, float, str, bool)) or obj is None:
        return None
    for modname in CUDA_MODULE_NAMES:
        mod = sys.modules.get(modname)
        if mod is None:
            continue
        table = _stub_tables.get(id(mod))
        if table is None:
            table = {}
            for attr in dir(mod):
                if attr.startswith("_"):
                    continue
                try:
                    value = getattr(mod, attr)
                except Exception:                       # pragma: no cover - lazy attrs
                    continue
                # only CUDA's own objects (stubs such as threadIdx, syncthreads, atomic): the
                # module also re-exports things like numba.float64 (as cuda.double)
                namespace = (isinstance(value, pytypes.ModuleType) and attr in _MODULE_NAMESPACES
                             and value.__name__ == f"{mod.__name__}.{attr}")
                if namespace or dialects.defined_in_cuda(value) and not isinstance(
                        value, (int, float, str, bool, pytypes.ModuleType)):
                    table.setdefault(id(value), attr)
            _stub_tables[id(mod)] = table
        name = table.get(id(obj))
        if name is not None:
            return name
    return None


_stub_tables: dict[int, dict[int, str]] = {}


def chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """``a.b.c`` -> ``("a", ["b", "c"])``; None for anything that is not a pure name chain."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return node.id, attrs[::-1]
    return None


@dataclass
class Resolved:
    """What a free name chain denotes.

    ``cuda_path`` is set for CUDA builtins (``"threadIdx.x"``, ``"atomic.add"``, ``"syncthreads"``);
    otherwise ``obj`` is the object reached by following the chain through modules, and ``rest``
    the attributes left over (taken at run time on that object, e.g. ``W.shape`` of a global array).
    """

    cuda_path: str | None = None
    obj: object = None
    rest: tuple[str, ...] = ()
    root: str = ""


def resolve(fn: SourceFunction, node: ast.AST) -> Resolved | None:
    """Resolve a free Name/Attribute chain; None if it is local or not a name chain."""
    parts = chain(node)
    if parts is None:
        return None
    root, attrs = parts
    if root in fn.local_names:
        return None
    bound = fn.static.get(root)
    if bound is not None and bound.cuda_path is not None:
        return Resolved(cuda_path=".".join([bound.cuda_path, *attrs]), root=root)
    found, obj = (True, bound.obj) if bound is not None else fn.lookup(root)
    if not found:
        raise fn.error(f"name {root!r} is not defined", construct=f"undefined name {root!r}",
                       node=node)
    for i in range(len(attrs) + 1):
        if is_cuda_module(obj):
            # cuda.float32 is a type object the module re-exports, a value like numba.float32
            scalar = (dialects.numba_scalar_type(getattr(obj, attrs[i], None))
                      if i < len(attrs) else None)
            if scalar is not None:
                return Resolved(obj=scalar, rest=tuple(attrs[i + 1:]), root=root)
            return Resolved(cuda_path=".".join(attrs[i:]), root=root)
        stub = cuda_stub_name(obj)
        if stub is not None:
            return Resolved(cuda_path=".".join([stub, *attrs[i:]]), root=root)
        if i == len(attrs) or not isinstance(obj, pytypes.ModuleType):
            # numba-cuda-mlir's copy of a Numba scalar type stands for Numba's own
            obj = dialects.numba_scalar_type(obj) or obj
            return Resolved(obj=obj, rest=tuple(attrs[i:]), root=root)
        try:
            obj = getattr(obj, attrs[i])
        except AttributeError:
            raise fn.error(f"module {obj.__name__!r} has no attribute {attrs[i]!r}",
                           construct=f"{root}.{'.'.join(attrs[:i + 1])}", node=node) from None
    return None  # pragma: no cover - loop always returns
