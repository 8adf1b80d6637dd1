"""Scratch copies of a tuner call's arguments (CONTRACT.md section 7).

A tuner runs each candidate several times (warm-ups, samples) and keeps none of those runs, so
no candidate may write the caller's data: an accumulating kernel (``out += x``) would otherwise
leave the caller's buffer holding the sum of every run. Only the winner's final call gets the
real arguments. A candidate is an arbitrary function, so what it writes is unknown here; every
buffer reachable from the arguments is therefore copied, however it is passed:

- ``Handle``s (device buffers) and host NumPy arrays (what a numba-style ``kernel[count,
  dim](...)`` launch copies in and back), top-level or inside tuples (named tuples too), lists
  and dicts, nested, positional or by keyword; a NumPy record (``np.void``, which numba-style
  launches write back into its array) is copied too.
- Views keep what decides the compiled code and the timing: their shape, dtype, strides (F order,
  stride-0 broadcast axes, negative steps) and, for handles, their byte offset modulo the pool
  alignment (a launch's alignment is part of its compile key, CONTRACT.md 1.2). Views of one
  allocation (or of one NumPy array) stay views of one copy, so arguments that alias the same
  bytes still alias them: one copy per allocation, of the bytes its views span.
- Anything else (scalars, kernels, other objects) is passed as it is: an object that hides a
  buffer in an attribute is not looked into, and is then the caller's own to protect.
"""

from __future__ import annotations

import numpy as np

from numba_cube.runtime.memory.handle import Handle
from numba_cube.runtime.memory.pool import ALIGNMENT

__all__ = ["scratch_copies"]


def scratch_copies(client, args: tuple, kwargs: dict) -> tuple[tuple, dict, list]:
    """``(args, kwargs, handles)``: the arguments with every buffer replaced by a copy (module
    docstring), and the scratch handles (whose failures disqualify a candidate)."""
    copier = _Copier(client)
    copier.visit(args)
    copier.visit(kwargs)
    copier.copy_sources()
    return copier.swap(args), copier.swap(kwargs), copier.handles


class _Copier:
    def __init__(self, client):
        self.client = client
        self.extents: dict[int, list] = {}    # id(allocation) -> [allocation, low, high]
        self.roots: dict[int, np.ndarray] = {}  # id(root array) -> its copy (after copy_sources)
        self.root_of: dict[int, np.ndarray] = {}  # id(host array) -> its root array
        self.copies: dict[int, tuple] = {}    # id(allocation) -> (new allocation, byte shift)
        self.handles: list[Handle] = []

    # -- pass 1: what is reachable, and the bytes each allocation's views span ------------------
    def visit(self, value) -> None:
        if isinstance(value, Handle):
            low, high = value.binding().extent
            seen = self.extents.setdefault(id(value._alloc), [value._alloc, low, high])
            seen[1], seen[2] = min(seen[1], low), max(seen[2], high)
        elif isinstance(value, np.ndarray):
            root = _root(value)
            self.root_of[id(value)] = root
            self.roots.setdefault(id(root), root)
        elif isinstance(value, (tuple, list)):
            for item in value:
                self.visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                self.visit(item)

    # -- one copy per allocation and per host root ----------------------------------------------
    def copy_sources(self) -> None:
        for key, (alloc, low, high) in self.extents.items():
            # The copy starts at the same offset modulo the alignment: the views keep the
            # alignment (part of the compile key) that the caller's have.
            pad = low % ALIGNMENT
            data = np.zeros(pad + (high - low), np.uint8)
            if high > low:
                data[pad:] = self.client.read(Handle(alloc, low, (high - low,), np.uint8))
            fresh = self.client.create(data)
            self.copies[key] = (fresh._alloc, fresh.offset + pad - low)
        for key, root in self.roots.items():
            self.roots[key] = _duplicate(root)

    # -- pass 2: the same structure, with the copies --------------------------------------------
    def swap(self, value):
        if isinstance(value, Handle):
            alloc, shift = self.copies[id(value._alloc)]
            view = Handle(alloc, value.offset + shift, value.shape, value.dtype, value.strides)
            self.handles.append(view)
            return view
        if isinstance(value, np.ndarray):
            return _same_view(value, self.root_of[id(value)], self.roots[id(self.root_of[id(value)])])
        if isinstance(value, np.void):
            return np.array(value).copy()[()]   # a record of a fresh one-element array
        if isinstance(value, tuple):
            items = [self.swap(v) for v in value]
            return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
        if isinstance(value, list):
            return [self.swap(v) for v in value]
        if isinstance(value, dict):
            return {k: self.swap(v) for k, v in value.items()}
        return value


def _root(a: np.ndarray) -> np.ndarray:
    """The array whose memory ``a`` views: its ``base`` chain followed through arrays, and through
    the wrapper ``as_strided``/``broadcast_to`` put between a view and its base."""
    while True:
        base = a.base
        if not isinstance(base, np.ndarray):
            base = getattr(base, "base", None)      # stride_tricks' DummyArray
        if not isinstance(base, np.ndarray):
            return a
        a = base


def _duplicate(root: np.ndarray) -> np.ndarray:
    """A fresh array with ``root``'s contents and its byte layout (C or F; else C)."""
    if root.flags.c_contiguous or root.flags.f_contiguous:
        dup = np.empty_like(root, order="K")
        np.copyto(dup, root)
        if dup.strides == root.strides:
            return dup
    return np.ascontiguousarray(root)


def _same_view(a: np.ndarray, root: np.ndarray, dup: np.ndarray) -> np.ndarray:
    """The view of ``dup`` that ``a`` is of ``root`` (same offset, shape, strides)."""
    if dup.strides == root.strides and (root.flags.c_contiguous or root.flags.f_contiguous):
        offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        raw = dup.reshape(-1, order="A").view(np.uint8)    # the copy's bytes, in memory order
        try:
            view = np.ndarray(a.shape, a.dtype, buffer=raw, offset=offset, strides=a.strides)
        except (TypeError, ValueError):
            view = None
        if view is not None:
            view.flags.writeable = a.flags.writeable
            return view
    # A root that is no one block (a strided view of foreign memory): an independent copy, with
    # the layout kept where NumPy can (aliasing between such arrays is then not kept).
    return np.array(a, copy=True, order="K")
