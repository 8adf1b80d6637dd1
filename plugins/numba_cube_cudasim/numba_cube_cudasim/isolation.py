"""What the simulator needs to know of a kernel's Python function before it runs it.

numba-cuda's simulator runs a kernel by swapping the ``cuda`` module for its fake in the
*globals* of the kernel's function while it runs. Swapping the user's module globals would let a
concurrent compile of another kernel of that module (by the CPU backend, on another thread) see
the fake module. So each kernel runs as a copy of its function over a private copy of its
globals, in which ``cuda.jit(device=True)`` device functions are replaced by simulated ones
(``isolated``).

The simulator's grid group synchronizes one block only (it runs cubes one after the other), so
the backend must know which kernels ask for it (``uses_grid_sync``) to refuse their grids of
several cubes instead of computing wrong values.

Both are public: the fake CUDA driver of numba_cube's tests runs its "GPU" kernels the same way.
"""

from __future__ import annotations

import types

__all__ = ["isolated", "is_device_function", "uses_grid_sync"]


def is_device_function(value) -> bool:
    """A real ``cuda.jit(device=True)`` dispatcher (not callable from Python as it is)."""
    options = getattr(value, "targetoptions", None)
    return isinstance(options, dict) and bool(options.get("device")) and callable(getattr(value, "py_func", None))


def isolated(fn: types.FunctionType, memo: dict) -> types.FunctionType:
    """``fn`` over a private copy of its globals, device functions simulated, recursively.

    ``memo`` maps a module's globals dict (by id) to its copy; it is filled in *before* the
    copy's device functions are rebuilt, so mutually recursive and same-module device functions
    share one copy and the recursion ends. Pass a fresh ``{}`` per kernel.
    """
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    key = id(fn.__globals__)
    private = memo.get(key)
    if private is None:
        private = memo[key] = dict(fn.__globals__)
        for name, value in list(private.items()):
            if is_device_function(value):
                private[name] = FakeCUDAKernel(isolated(value.py_func, memo), device=True)
    copy = types.FunctionType(fn.__code__, private, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__module__ = fn.__module__
    return copy


def uses_grid_sync(fn: types.FunctionType, seen: set | None = None) -> bool:
    """Does ``fn`` (or a device function it reaches through its globals) ask for the grid group?
    Read from the names its code objects use: ``this_grid`` is how numba.cuda spells it."""
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        if "this_grid" in code.co_names:
            return True
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        for name in code.co_names:
            value = fn.__globals__.get(name)
            py = getattr(value, "py_func", None)
            if isinstance(py, types.FunctionType) and uses_grid_sync(py, seen):
                return True
    return False
