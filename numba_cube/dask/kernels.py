"""Kernels travelling to Dask workers: by reference when importable, else by value with source.

A ``cube.Kernel`` does not pickle (it holds a lock and its frozen fingerprint), and pickling its
Python function by value (cloudpickle, which Dask uses for code defined in ``__main__``) keeps
the bytecode but loses the source text, which the CPU translator compiles from. So a kernel
crosses the wire inside a ``TravellingKernel``:

- a kernel that is an attribute of an importable module (not ``__main__``) is sent by name and
  looked up on the worker: the worker imports the same module and gets the very same kernel;
- any other (a script's ``__main__``, a notebook cell, ``exec`` with a pseudo file name) is sent
  as its function, its options, its file name and the source lines ``linecache`` holds for
  that file. cloudpickle renames every code object it sends by value ``<dynamic-code>`` (so
  its payloads do not depend on where code was defined), which hides the source even where the
  lines are: the worker gives the code its file name back, registers the lines under it
  (unless it already holds them), so ``inspect.getsource`` finds the definition there as
  here, and rebuilds the kernel once per process (the same id: same source, same code).

A kernel made from a ``cuda.jit`` dispatcher with declared signatures is refused by value
(``TypeError``): the signatures live on the dispatcher, which does not travel, and launching
without them would convert arguments differently from numba.cuda. Define it in an importable
module instead.
"""

from __future__ import annotations

import importlib
import linecache
import threading
import types

import numba_cube as cube

_rebuilt: dict[tuple, cube.Kernel] = {}
_rebuilt_lock = threading.Lock()


class TravellingKernel:
    """A kernel as a Dask task carries it; ``.kernel`` is the kernel in this process."""

    def __init__(self, kernel: cube.Kernel):
        if not isinstance(kernel, cube.Kernel):
            raise TypeError(f"numba_cube.dask needs a cube.Kernel (@cube.kernel), got "
                            f"{type(kernel).__name__}")
        self.kernel = kernel
        self.kernel_id = kernel.id

    def __dask_tokenize__(self):
        # The id covers everything that decides the code (source, globals, options).
        return ("numba_cube.kernel", self.kernel_id)

    def __reduce__(self):
        reference = _import_reference(self.kernel)
        if reference is not None:
            return (_imported_kernel, reference)
        if self.kernel.signatures is not None:
            raise TypeError(
                f"kernel {self.kernel.name} wraps a cuda.jit dispatcher with declared signatures "
                "and is defined where workers cannot import it (__main__, a notebook): its "
                "signatures cannot travel with it. Define it in an importable module")
        k = self.kernel
        filename = k.py_func.__code__.co_filename
        options = {"reads": sorted(k.declared_reads) if k.declared_reads is not None else None,
                   "writes": sorted(k.declared_writes) if k.declared_writes is not None else None,
                   **dict(k.options)}
        return (_rebuilt_kernel, (self.kernel_id, k.py_func, k.name, options, filename,
                                  tuple(linecache.getlines(filename))))


def _import_reference(kernel: cube.Kernel) -> tuple[str, str] | None:
    """``(module, qualified name)`` under which workers can import ``kernel``, or None."""
    module_name = getattr(kernel.py_func, "__module__", None)
    qualname = getattr(kernel.py_func, "__qualname__", "")
    if not module_name or module_name == "__main__" or "<locals>" in qualname:
        return None
    try:
        found = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return (module_name, qualname) if found is kernel else None


def _imported_kernel(module_name: str, qualname: str) -> TravellingKernel:
    found = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    return TravellingKernel(found)


def _rebuilt_kernel(kernel_id: str, py_func, name: str, options: dict, filename: str,
                    lines: tuple[str, ...]) -> TravellingKernel:
    with _rebuilt_lock:
        kernel = _rebuilt.get((kernel_id, filename))
        if kernel is None:
            if lines and tuple(linecache.getlines(filename)) != lines:
                # mtime None: linecache.checkcache keeps the entry (as for a loader's source)
                linecache.cache[filename] = (sum(map(len, lines)), None, list(lines), filename)
            kernel = cube.Kernel(_in_file(py_func, filename), name=name, **options)
            _rebuilt[(kernel_id, filename)] = kernel
    return TravellingKernel(kernel)


def _in_file(py_func: types.FunctionType, filename: str) -> types.FunctionType:
    """``py_func`` with its code (nested code objects included) named ``filename`` again."""
    code = _renamed(py_func.__code__, filename)
    if code is py_func.__code__:
        return py_func
    rebuilt = types.FunctionType(code, py_func.__globals__, py_func.__name__,
                                 py_func.__defaults__, py_func.__closure__)
    rebuilt.__kwdefaults__ = py_func.__kwdefaults__
    rebuilt.__qualname__ = py_func.__qualname__
    rebuilt.__module__ = py_func.__module__
    rebuilt.__doc__ = py_func.__doc__
    rebuilt.__dict__.update(py_func.__dict__)
    return rebuilt


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(_renamed(c, filename) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    if code.co_filename == filename and all(a is b for a, b in zip(consts, code.co_consts)):
        return code
    return code.replace(co_filename=filename, co_consts=consts)
