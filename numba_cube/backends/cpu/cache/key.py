"""The key under which a kernel's translation is kept on disk, so a new process can skip it.

The translator's output (the generated module's text) is decided by:

- the kernel id (``Kernel.id``: source, code, closures, globals read, device functions
  transitively, options), which already keys the in-process program cache;
- the compile flags (``boundscheck``, ``fastmath``, the error model);
- where the code is: the kernel id leaves line numbers and file names out (moving a kernel does
  not change its code), but the generated text names them (its header, the messages of
  ``debug=True`` exceptions and of divergent barriers), so ``source_positions`` adds the file,
  first line and line table of the kernel and of every function it reaches;
- the translator itself: the text of every module of this package (``translator_digest``) and
  the kernel-side module it reads (``kernel/signatures.py``), the Python, Numba, NumPy and
  numba-cuda versions, and whether numba-cuda's simulator is on (it changes what ``cuda`` is).

A change in any of these gives another key, so a stale translation is never found. A kernel
whose id is salted per process (``Kernel.id_is_stable`` is False) is not cached at all: its
entry could never be found again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
import sys
import types as pytypes
from pathlib import Path

from numba_cube.kernel.identity_lookup import (UNDEFINED, global_value, is_dispatcher,
                                               is_library_module, references, through_modules)

__all__ = ["translation_key", "translator_digest", "source_positions"]

#: the CPU backend's package: every source file in it, in every folder, is the translator's
_CPU = Path(__file__).parents[1]
#: outside this package, the one module whose code the translator runs on a kernel's values
_KERNEL_SIDE = (_CPU.parent.parent / "kernel" / "signatures.py",)
_VERSION = b"numba_cube translation key 1"


def _frame(*parts: bytes) -> bytes:
    return b"".join(struct.pack("<Q", len(p)) + p for p in parts)


@functools.lru_cache(maxsize=1)
def translator_digest() -> str | None:
    """SHA-256 of the translator's sources and the library versions it targets, read once per
    process (about 0.4 MB of text: a millisecond or two); None when the sources cannot be read
    (an installation without ``.py`` files), and then nothing is cached."""
    digest = hashlib.sha256(_VERSION)
    sources = sorted(_CPU.rglob("*.py"))
    try:
        for path in (*sources, *_KERNEL_SIDE):
            name = path.relative_to(_CPU.parent.parent).as_posix()
            digest.update(_frame(name.encode(), path.read_bytes()))
    except OSError:
        return None
    if not sources:
        return None
    import numba
    import numpy

    numba_cuda = sys.modules.get("numba_cuda")
    digest.update(_frame(sys.version.encode(), numba.__version__.encode(),
                         numpy.__version__.encode(),
                         str(getattr(numba_cuda, "__version__", "")).encode(),
                         os.environ.get("NUMBA_ENABLE_CUDASIM", "").encode()))
    return digest.hexdigest()


def source_positions(py_func: pytypes.FunctionType) -> list[tuple[str, int, str, str]]:
    """``(file, first line, qualname, line-table digest)`` of ``py_func`` and of every
    user function it reaches through its globals, closures and module attributes (device
    functions, transitively), in a stable order. Library functions are left out: their
    places are fixed by the versions in ``translator_digest``."""
    seen: set[int] = set()
    found = []
    stack = [py_func]
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        code = fn.__code__
        found.append((code.co_filename, code.co_firstlineno, fn.__qualname__,
                      hashlib.sha256(_line_tables(code)).hexdigest()))
        for value in _values_read(fn):
            stack.extend(_functions_in(value, depth=3))
    return sorted(found)


def translation_key(kernel_id: str, py_func: pytypes.FunctionType, flags: tuple) -> str | None:
    """Hex SHA-256 naming the translation of ``py_func`` (whose id is ``kernel_id``) with
    ``flags``, as the module docstring lists; None when the translator's digest is unknown."""
    translator = translator_digest()
    if translator is None:
        return None
    positions = repr(source_positions(py_func)).encode("utf-8", "surrogatepass")
    return hashlib.sha256(_frame(_VERSION, kernel_id.encode(), repr(flags).encode(), positions,
                                 translator.encode())).hexdigest()


def _line_tables(code: pytypes.CodeType) -> bytes:
    """The line tables of ``code`` and of the code nested in it (closures, comprehensions)."""
    tables = [getattr(code, "co_linetable", b""), struct.pack("<q", code.co_firstlineno)]
    tables += [_line_tables(c) for c in code.co_consts if isinstance(c, pytypes.CodeType)]
    return _frame(*tables)


def _values_read(fn: pytypes.FunctionType):
    """What ``fn`` reads: its closure cells' values and the globals (through modules) its code
    loads, as the identity encoder finds them (``identity_lookup.references``)."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    for cell in cells.values():
        try:
            yield cell.cell_contents
        except ValueError:                  # an empty cell
            continue
    for kind, chain in references(fn.__code__):
        if kind == "global":
            root = global_value(fn, chain[0])
        else:
            try:
                root = cells[chain[0]].cell_contents
            except (KeyError, ValueError):
                continue
        value, _ = through_modules(root, chain[1:])     # closure.dev as well as config.dev
        if value is not UNDEFINED:
            yield value


def _functions_in(value, depth: int) -> list:
    """The user functions ``value`` is or holds (a dispatcher's Python function, tuples of them)."""
    if is_dispatcher(value):
        value = getattr(value, "py_func", None) or getattr(value, "fn", None)
    if isinstance(value, pytypes.FunctionType):
        return [] if is_library_module(value.__module__ or "") else [value]
    if isinstance(value, (tuple, list)) and depth > 0:
        return [f for v in value for f in _functions_in(v, depth - 1)]
    return []
