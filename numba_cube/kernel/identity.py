"""Kernel identity: one SHA-256 over everything that decides a kernel's compiled code.

Every cache of numba_cube is keyed by the kernel id (the CPU backend's translated programs, the
servers' compile caches and bound launches, the CUDA warm path, autotune), so two kernels may share
an id only when they compile to the same code. ``fingerprint(py_func, options)`` covers:

- the function itself: name, module, source text (when there is one) and the code object's
  contents (bytecode, constants, names: what runs even without source), defaults;
- its closure cells' values (a factory's ``k``, block size, device function);
- the globals its code reads, and through modules the attributes it reads (``config.TPB``);
- scalars and tuples by value, NumPy arrays by dtype, shape and bytes, dtypes by description,
  modules by name, library objects (NumPy, Numba, numba-cuda, ``math``) by their import path;
- device functions (``cuda.jit(device=True)``, ``numba.njit``, the simulator's fake kernels) by
  their own fingerprint, transitively, with their options and declared signatures; a cycle of
  device functions is encoded as a reference to the function already on the stack; a plain
  Python function is *opaque* (below): a kernel can only call it through an entry of Numba's
  registry (``@overload``, ``register_jitable``), which is not in the function;
- the compile options given (``reads=``/``writes=``, a wrapped dispatcher's ``cuda.jit`` options).

The encoding is canonical (tagged, length-prefixed, sorted where Python's order is arbitrary), so
the same inputs give the same digest in every process: nothing of one process (an ``id()``, an
address, a randomised ``hash()``) goes into it.
An object with no faithful encoding (an arbitrary instance, a class defined in a function) is
*opaque*: ``Fingerprint.opaque`` names it, and the caller must then salt the id per kernel so
that it never shares a cache entry (safe, but not stable across processes).

``Fingerprint.parts`` keeps one digest per top-level component ("global TPB", "closure k", ...),
so that a later fingerprint of the same function can say *what* changed (``changed_parts``).
What a code object reads, and which objects count as a library's, is in ``identity_lookup``.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import inspect
import linecache
import re
import struct
import types as pytypes
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .identity_lookup import (UNDEFINED, dispatcher_options, global_value, importable,
                              is_dispatcher, is_library_module, library_name, numba_type_name,
                              references, through_modules)

__all__ = ["Fingerprint", "fingerprint", "changed_parts"]

#: bump when the encoding changes, so that ids never mean two things across versions
ENCODING_VERSION = b"numba_cube-identity-1"


@dataclass(frozen=True)
class Fingerprint:
    """``digest``: hex SHA-256 of ``parts``; ``parts``: component name -> hex digest;
    ``opaque``: what could not be encoded faithfully (empty when the digest is stable)."""

    digest: str
    parts: Mapping[str, str]
    opaque: tuple[str, ...]


def fingerprint(py_func: pytypes.FunctionType, options: Mapping | None = None) -> Fingerprint:
    """The fingerprint of kernel function ``py_func`` compiled with ``options``."""
    enc = _Encoder()
    parts = enc.function_parts(py_func)
    parts["options"] = _hex(enc.value(dict(options or {}), "options"))
    return Fingerprint(_hex(_frame("parts", *(_frame("part", k.encode(), v.encode())
                                             for k, v in sorted(parts.items())))),
                       dict(parts), tuple(enc.opaque))


def changed_parts(before: Fingerprint, after: Fingerprint) -> list[str]:
    """Names of the components that differ between two fingerprints of one function."""
    names = sorted(set(before.parts) | set(after.parts))
    return [n for n in names if before.parts.get(n) != after.parts.get(n)]


# -- canonical encoding ---------------------------------------------------------------------------

def _frame(tag: str, *payloads: bytes) -> bytes:
    """``tag`` and its payloads, each length-prefixed: no two different inputs give one frame."""
    out = [tag.encode(), struct.pack("<I", len(payloads))]
    for p in payloads:
        out.append(struct.pack("<Q", len(p)))
        out.append(p)
    return b"".join(out)


def _hex(data: bytes) -> str:
    return hashlib.sha256(ENCODING_VERSION + data).hexdigest()


def _text(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


class _Encoder:
    """One fingerprint computation: memo of the functions done, the stack of those in progress."""

    def __init__(self):
        self.opaque: list[str] = []
        self._done: dict[int, tuple[object, bytes]] = {}   # id -> (function kept alive, frame)
        self._active: list[object] = []                     # functions being encoded
        self._containers: set[int] = set()                  # ids of containers being encoded

    # -- functions ------------------------------------------------------------------------------
    def function_parts(self, fn: pytypes.FunctionType) -> dict[str, str]:
        """Top-level components of ``fn``: its code, each closure cell, each global it reads."""
        self._active.append(fn)
        try:
            return self._parts(fn)
        finally:
            self._active.pop()

    def _parts(self, fn: pytypes.FunctionType) -> dict[str, str]:
        name = fn.__qualname__
        code_frame, opaque = _code_frame(fn.__code__)
        self.opaque.extend(opaque)
        parts = {"code": _hex(_frame(
            "code", _text(fn.__module__ or ""), _text(name), _source(fn.__code__), code_frame,
            self.value(fn.__defaults__, f"defaults of {name}"),
            self.value(fn.__kwdefaults__, f"keyword defaults of {name}")))}
        code = fn.__code__
        cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
        for var, cell in cells.items():
            try:
                value = cell.cell_contents
            except ValueError:                         # an empty cell: assigned later, or never
                value = UNDEFINED
            parts[f"closure {var}"] = _hex(self.value(value, f"closure variable {var!r} of {name}"))
        for kind, chain in references(code):
            if kind == "free":
                root = cells.get(chain[0])
                if root is None:
                    continue
                try:
                    value = root.cell_contents
                except ValueError:
                    continue
            else:
                value = global_value(fn, chain[0])
            reached, used = through_modules(value, chain[1:])
            if kind == "free" and not used:
                continue                               # the cell itself is encoded above
            label = ".".join(chain[:1 + len(used)])
            parts[f"{'closure' if kind == 'free' else 'global'} {label}"] = _hex(
                self.value(reached, f"{kind} {label!r} of {name}"))
        return parts

    def function(self, fn: pytypes.FunctionType) -> bytes:
        for depth, active in enumerate(self._active):
            if active is fn:                           # a cycle: refer to the stack entry
                return _frame("cycle", str(depth).encode())
        hit = self._done.get(id(fn))
        if hit is not None and hit[0] is fn:
            return hit[1]
        parts = self.function_parts(fn)
        frame = _frame("function", *(_frame("part", k.encode(), v.encode())
                                     for k, v in sorted(parts.items())))
        self._done[id(fn)] = (fn, frame)
        return frame

    def code(self, code: pytypes.CodeType) -> bytes:
        # Line numbers and the file name are left out: moving a kernel does not change its code.
        fields = [code.co_code, _text(code.co_qualname if hasattr(code, "co_qualname") else
                                      code.co_name),
                  struct.pack("<6I", code.co_argcount, code.co_posonlyargcount,
                              code.co_kwonlyargcount, code.co_nlocals, code.co_flags,
                              code.co_stacksize),
                  _frame("names", *map(_text, code.co_names)),
                  _frame("varnames", *map(_text, code.co_varnames)),
                  _frame("freevars", *map(_text, code.co_freevars)),
                  _frame("cellvars", *map(_text, code.co_cellvars)),
                  getattr(code, "co_exceptiontable", b"")]
        consts = [self.code(c) if isinstance(c, pytypes.CodeType) else self.value(c, "constant")
                  for c in code.co_consts]
        return _frame("codeobj", *fields, _frame("consts", *consts))

    # -- values ---------------------------------------------------------------------------------
    def value(self, obj, where: str) -> bytes:
        """The canonical encoding of ``obj``; ``where`` names it if it turns out opaque."""
        container = isinstance(obj, (tuple, list, set, frozenset, dict))
        if container:
            if id(obj) in self._containers:            # a list that holds itself
                return self._opaque(obj, where)
            self._containers.add(id(obj))
        try:
            return self._value(obj, where)
        except Exception:                              # noqa: BLE001 - a hostile __eq__, property,
            return self._opaque(obj, where)            # or nesting deeper than the stack
        finally:
            if container:
                self._containers.discard(id(obj))

    def _value(self, obj, where: str) -> bytes:
        if obj is UNDEFINED:
            return _frame("undefined")
        if obj is None or obj is Ellipsis:
            return _frame(repr(obj))
        if isinstance(obj, enum.Enum):                 # before int: IntEnum members are ints
            return _frame("enum", self._enum_class(type(obj), where), _text(obj.name))
        if isinstance(obj, np.generic):                # before float: np.float64 is a float
            return _frame("npscalar", self.value(obj.dtype, where), obj.tobytes())
        if isinstance(obj, bool):
            return _frame("bool", b"1" if obj else b"0")
        if isinstance(obj, int):
            return _frame("int", str(obj).encode())
        if isinstance(obj, float):
            return _frame("float", obj.hex().encode())
        if isinstance(obj, complex):
            return _frame("complex", obj.real.hex().encode(), obj.imag.hex().encode())
        if isinstance(obj, str):
            return _frame("str", _text(obj))
        if isinstance(obj, (bytes, bytearray)):
            return _frame(type(obj).__name__, bytes(obj))
        if type(obj) in (tuple, list):
            return _frame(type(obj).__name__, *(self.value(v, where) for v in obj))
        if isinstance(obj, tuple):                     # a namedtuple: its fields are its names
            return _frame("tuple of", self._callable(type(obj), where),
                          *(self.value(v, where) for v in obj))
        if isinstance(obj, (set, frozenset)):
            return _frame("set", *sorted(self.value(v, where) for v in obj))
        if isinstance(obj, dict):
            items = sorted(_frame("item", self.value(k, where), self.value(v, where))
                           for k, v in obj.items())
            return _frame("dict", *items)
        if isinstance(obj, (slice, range)):
            return _frame(type(obj).__name__, *(self.value(v, where)
                                                for v in (obj.start, obj.stop, obj.step)))
        if isinstance(obj, np.ndarray):
            return self._array(obj, where)
        if isinstance(obj, np.dtype):
            return _frame("dtype", _text(repr(obj)), _text(obj.str))
        if isinstance(obj, pytypes.ModuleType):
            return _frame("module", _text(obj.__name__))
        if isinstance(obj, pytypes.CodeType):
            return self.code(obj)
        return self._callable(obj, where)

    def _callable(self, obj, where: str) -> bytes:
        """Functions, dispatchers, classes, Numba types and named library objects."""
        if isinstance(obj, pytypes.FunctionType):
            named = library_name(obj, obj)
            if named is not None:
                return _frame("library", *map(_text, named))
            # A plain function a kernel calls compiles only through Numba's registry (an
            # @overload, register_jitable, ...), whose entry decides the code and is not in the
            # function: two factories' identical ``myoverload`` may be overloaded differently.
            # So it cannot vouch for the code: opaque (the kernel's id is salted).
            return self._opaque(obj, where)
        py_func = getattr(obj, "py_func", None)
        if isinstance(py_func, pytypes.FunctionType) and is_dispatcher(obj):
            named = library_name(obj, py_func)
            if named is not None:                      # numba.cuda.random's generators, ...
                return _frame("library", *map(_text, named))
            return _frame("dispatcher", _text(type(obj).__qualname__),
                          self.value(dispatcher_options(obj), where), self.function(py_func))
        numba_type = numba_type_name(obj)
        if numba_type is not None:
            return _frame("numbatype", _text(numba_type))
        if isinstance(obj, np.ufunc):
            if getattr(np, obj.__name__, None) is obj:
                return _frame("ufunc", _text(obj.__name__))
        elif isinstance(obj, type) and issubclass(obj, enum.Enum):
            return self._enum_class(obj, where)
        elif isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields"):
            # A namedtuple class: Numba sees its name, fields and defaults, nothing else.
            return _frame("namedtuple", _text(obj.__module__), _text(obj.__qualname__),
                          self.value(tuple(obj._fields), where),
                          self.value(getattr(obj, "_field_defaults", {}), where))
        else:
            named = importable(obj)
            if named is not None and is_library_module(named[0]):
                return _frame("library", *map(_text, named))
        return self._opaque(obj, where)

    def _enum_class(self, cls: type, where: str) -> bytes:
        members = [_frame("member", _text(m.name), self.value(m.value, where)) for m in cls]
        return _frame("enumclass", _text(cls.__module__), _text(cls.__qualname__), *members)

    def _array(self, arr: np.ndarray, where: str) -> bytes:
        if arr.dtype.hasobject:
            return self._opaque(arr, where)
        kind = b"" if type(arr) is np.ndarray else self._callable(type(arr), where)
        return _frame("ndarray", kind, self.value(arr.dtype, where),
                      self.value(tuple(arr.shape), where), np.ascontiguousarray(arr).tobytes())

    def _opaque(self, obj, where: str) -> bytes:
        kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
        self.opaque.append(f"{where}: an object of type {kind}")
        return _frame("opaque", _text(kind))


# A code object never changes, so what is read off it is memoised (inspect.getsource tokenises
# the file; it was most of a fingerprint's time). Equal code objects may come from two files
# (equality ignores the file name): their source can then differ only in comments.

@functools.lru_cache(maxsize=4096)
def _source(code: pytypes.CodeType) -> bytes:
    try:
        return _frame("source", _text(_definition_text(code)))
    except Exception:                                  # noqa: BLE001 - exec'd code, odd loaders
        return _frame("nosource")                      # the code object decides alone


#: inspect.findsource's test for the line a definition starts on
_DEFINITION_START = re.compile(r"^(\s*def\s)|(\s*async\s+def\s)|(.*(?<!\w)lambda(:|\s))|^(\s*@)")


def _definition_text(code: pytypes.CodeType) -> str:
    """``inspect.getsource(code)``, without its first step's cost: ``inspect.getmodule`` stats
    the file of every imported module (20-25 ms with numba.cuda imported, on every new
    process). The lines come from ``linecache`` as inspect reads them; where that needs what
    only inspect does (a loader's source, a definition that starts above its first line), it is
    inspect's own answer."""
    filename = code.co_filename
    if not (filename.startswith("<") and filename.endswith(">")):
        linecache.checkcache(filename)                 # as inspect.findsource does
    lines = linecache.getlines(filename)
    first = code.co_firstlineno - 1
    if 0 <= first < len(lines) and _DEFINITION_START.match(lines[first]):
        return "".join(inspect.getblock(lines[first:]))
    return inspect.getsource(code)


@functools.lru_cache(maxsize=4096)
def _code_frame(code: pytypes.CodeType) -> tuple[bytes, tuple[str, ...]]:
    """The encoding of ``code``, and what in its constants was opaque (nothing, in practice)."""
    enc = _Encoder()
    return enc.code(code), tuple(enc.opaque)
