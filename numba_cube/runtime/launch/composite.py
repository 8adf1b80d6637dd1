"""Launch arguments that are neither one buffer nor a plain number: tuples, records, enums, dates.

numba.cuda takes more than arrays and numbers as kernel arguments, and types each of them in a
way that decides the compiled code:

- a ``tuple`` or ``namedtuple`` (of numbers, arrays, nested tuples, or empty) is a
  ``UniTuple``/``Tuple`` (``NamedUniTuple``/``NamedTuple`` of its class): ``TupleArg``. The
  arrays inside are buffers like top-level ones (read and write sets, dependencies, failures);
- a structured scalar (``np.void``/``np.record``, e.g. ``arr[0]``) is a ``Record``, passed *by
  reference* to a device copy that is copied back after the launch (numba-cuda's ``wrap_arg``):
  ``RecordRef``, bound to a one-element buffer of the record's dtype;
- an ``Enum``/``IntEnum`` member, a ``datetime64``/``timedelta64`` are typed by more than their
  Python type (the enum's value type, the date's unit): ``TypedScalar``.

Every composite carries two keys: ``key`` (its structure, its bindings and the *types* of its
numbers, never their values) names it in bound-launch caches, which also hold the buffers bound;
``type_key`` (structure and types only) names the code compiled for it. Their numbers change from
launch to launch and are filled in per launch, as top-level scalars are: ``materialize`` gives a
host backend the value it passes to the kernel, ``leaves`` the flat parameters a device backend
packs, in numba's data-model order (a tuple is its elements, one after the other).

Plain arguments never reach this module: the binding loop (``launch/arguments.py``) sends only types it
does not bind directly here, so the launch path of handles and numbers costs nothing more.
"""

from __future__ import annotations

import abc

import numpy as np

from numba_cube.runtime.memory.handle import Binding

__all__ = ["Composite", "TupleArg", "RecordRef", "TypedScalar", "COMPOSITE_TYPES",
           "composite_bindings", "leaf_type", "analysis_entry", "add_regions"]


class Composite(abc.ABC):
    """Base of the argument kinds of this module (see the module docstring)."""

    __slots__ = ("key", "type_key")

    @abc.abstractmethod
    def bindings(self) -> tuple:
        """Every buffer bound inside, in order."""

    @abc.abstractmethod
    def materialize(self, view_of):
        """The value a host backend passes to the kernel; ``view_of(binding)`` is a buffer's view."""

    @abc.abstractmethod
    def leaves(self) -> tuple:
        """The flattened parameters: ``Binding`` (an array), ``RecordRef`` (a device pointer) or
        a NumPy scalar, in numba's data-model order."""

    @abc.abstractmethod
    def numba_type(self):
        """The Numba type numba.cuda gives the argument (what the code is compiled for)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.type_key}>"


#: (dtype, ndim, layout) -> its Numba array type: building one is ~10 us (Numba interns types),
#: and a launch of a kernel with declared signatures types every argument (stumpy's 26)
_ARRAY_TYPES: dict = {}


def leaf_type(value):
    """The Numba type of one bound leaf: an array of a binding's layout (C, F or A, as
    ``numba.typeof`` types the same NumPy array), a composite's own."""
    kind = type(value)
    if kind is Binding:
        key = (value.dtype, len(value.shape), value.layout)
        array_type = _ARRAY_TYPES.get(key)
        if array_type is None:
            import numba
            from numba.core import types

            array_type = _ARRAY_TYPES[key] = types.Array(numba.from_dtype(key[0]), key[1], key[2])
        return array_type
    import numba

    if kind in COMPOSITE_TYPES:
        return value.numba_type()
    return numba.typeof(value)


def _leaf_key(value) -> object:
    kind = type(value)
    if kind is Binding:
        return value
    if kind in COMPOSITE_TYPES:
        return value.key
    return kind


def _leaf_type_key(value) -> object:
    kind = type(value)
    if kind is Binding:
        return ("array", value.dtype, len(value.shape), value.layout)
    if kind in COMPOSITE_TYPES:
        return value.type_key
    return kind


class TupleArg(Composite):
    """A tuple or namedtuple argument: its bound items (``Binding``, NumPy scalar, composite)."""

    __slots__ = ("items", "cls")

    def __init__(self, items: tuple, cls: type | None):
        self.items = items
        self.cls = cls          # the namedtuple class, or None for a plain tuple
        self.key = ("tuple", cls, tuple(_leaf_key(v) for v in items))
        self.type_key = ("tuple", cls, tuple(_leaf_type_key(v) for v in items))

    def bindings(self) -> tuple:
        out = []
        for v in self.items:
            if type(v) is Binding:
                out.append(v)
            elif type(v) in COMPOSITE_TYPES:
                out.extend(v.bindings())
        return tuple(out)

    def materialize(self, view_of):
        values = [view_of(v) if type(v) is Binding
                  else v.materialize(view_of) if type(v) in COMPOSITE_TYPES else v
                  for v in self.items]
        return tuple(values) if self.cls is None else self.cls(*values)

    def leaves(self) -> tuple:
        out = []
        for v in self.items:
            if type(v) is TupleArg or type(v) is TypedScalar:
                out.extend(v.leaves())
            else:
                out.append(v)
        return tuple(out)

    def numba_type(self):
        from numba.core import types

        item_types = tuple(leaf_type(v) for v in self.items)
        if self.cls is None:
            return types.BaseTuple.from_types(item_types)
        return types.BaseTuple.from_types(item_types, self.cls)


class RecordRef(Composite):
    """A structured scalar passed by reference: one element of a buffer of its dtype."""

    __slots__ = ("binding",)

    def __init__(self, binding: Binding):
        self.binding = binding
        self.key = ("record", binding)
        self.type_key = ("record", binding.dtype)

    def bindings(self) -> tuple:
        return (self.binding,)

    def materialize(self, view_of):
        # Indexing a structured array gives an np.void that *refers* to its bytes: Numba passes a
        # record by pointer, so the kernel's writes land in the buffer.
        return view_of(self.binding)[0]

    def leaves(self) -> tuple:
        return (self,)

    def numba_type(self):
        import numba

        return numba.from_dtype(self.binding.dtype)


class TypedScalar(Composite):
    """A number whose Numba type is more than its Python type: an enum member (typed by its
    value's type), a ``datetime64``/``timedelta64`` (by its unit)."""

    __slots__ = ("value", "c_values", "_type")

    def __init__(self, value):
        import numba

        self.value = value
        self._type = numba.typeof(value)
        # What numba-cuda passes for it (``_prepare_args``): the date's int64, the enum's value
        # (a tuple of numbers is its items, one after the other).
        if isinstance(value, np.generic):
            self.c_values = (value.view(np.int64),)
        else:
            self.c_values = _c_values(value.value, self._type.dtype)
        self.key = self.type_key = ("scalar", self._type)

    def bindings(self) -> tuple:
        return ()

    def materialize(self, view_of):
        return self.value

    def leaves(self) -> tuple:
        return self.c_values

    def numba_type(self):
        return self._type


def _c_values(value, numba_type) -> tuple:
    """An enum member's value as the NumPy scalars of the type numba gives it, flattened."""
    from numba.core import types
    from numba.np import numpy_support

    if isinstance(numba_type, types.BaseTuple):
        return tuple(c for v, t in zip(value, numba_type) for c in _c_values(v, t))
    return (numpy_support.as_dtype(numba_type).type(value),)


#: The composite classes, for the exact-type tests of the launch path (cheaper than isinstance).
COMPOSITE_TYPES = frozenset({TupleArg, RecordRef, TypedScalar})


def composite_bindings(args: tuple) -> list:
    """Every binding of a launch's arguments, those inside composites included."""
    out = []
    for a in args:
        if type(a) is Binding:
            out.append(a)
        elif type(a) in COMPOSITE_TYPES:
            out.extend(a.bindings())
    return out


def analysis_entry(value):
    """The IO analysis' ``ndims`` entry of a composite parameter: a tuple's marker (its arrays
    get the tuple's answer), None for the others (a record is always read and written:
    ``access_of``)."""
    from numba_cube.kernel.io_ir import TUPLE

    return TUPLE if type(value) is TupleArg else None


def add_regions(value, access: tuple, reads: list, writes: list) -> None:
    """Add the regions of a composite parameter's buffers to a launch's read and write sets.

    Every array of a tuple gets the tuple parameter's answer (the analysis does not tell its
    items apart: one item written makes all of them written). And each one the kernel touches
    is *read*, even where the answer is "w": a pure output is what a relaunch repairs, and an
    item that is only said to be written, because another item is, would be marked repaired
    without a byte of it written. A record passed by reference is read and written: numba.cuda
    copies it in and back."""
    if type(value) is RecordRef:
        reads.append(value.binding.region)
        writes.append(value.binding.region)
        return
    read, written = access
    for b in value.bindings():
        if read or written:
            reads.append(b.region)
        if written:
            writes.append(b.region)
