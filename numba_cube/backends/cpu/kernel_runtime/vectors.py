"""numba.cuda's vector types on the CPU backend: ``cuda.float64x4(...)``, ``cuda.short2(...)``, ...

numba-cuda's vector types (``numba/cuda/vector_types.py``) are immutable structs of one base
type with the fields ``x``, ``y``, ``z``, ``w`` (as many as the type has elements). Here each is
a ``namedtuple`` class of the same name (``float64x4(x, y, z, w)``), which Numba compiles as a
struct of that base type; the translator replaces ``cuda.<name>(...)`` with ``<name>__ctor(...)``
(``lower/cuda_calls.py``).

The constructor follows numba-cuda's overloads: its arguments are numbers, each converted to the
base type as a call converts it, or vector values of the same base type, whose elements are
spliced in (``float32x4(float32x2(a, b), c, d)``), and the elements must add up to the type's
count; anything else is a typing error, as in numba-cuda. The aliases (``double4``, ``short2``,
``uint3``, ...) are numba-cuda's, from the C type sizes of this platform.
"""

from __future__ import annotations

import collections
import itertools

import numpy as np
from numba.core import types
from numba.extending import overload

__all__ = ["VECTOR_TYPES", "constructor_name"]

_BASES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
          "float64")
_FIELDS = ("x", "y", "z", "w")
_C_ALIASES = {"char": np.byte, "short": np.short, "int": np.intc, "long": np.int_,
              "longlong": np.longlong, "uchar": np.ubyte, "ushort": np.ushort, "uint": np.uintc,
              "ulong": np.uint, "ulonglong": np.ulonglong, "float": np.single,
              "double": np.double}

#: every name numba.cuda spells a vector type with -> its canonical name (``double4`` ->
#: ``float64x4``)
VECTOR_TYPES: dict[str, str] = {}
#: canonical name -> (namedtuple class, base type name, element count)
_CLASSES: dict[str, tuple[type, str, int]] = {}


def constructor_name(name: str) -> str:
    """The name of the constructor function here for vector type ``name`` (alias or not)."""
    return VECTOR_TYPES[name] + "__ctor"


def _make_constructor(canonical: str, cls: type, base: str, count: int):
    def constructor(*args):
        raise NotImplementedError(f"{canonical}() runs in compiled CPU kernels only")
    constructor.__name__ = constructor.__qualname__ = canonical + "__ctor"

    @overload(constructor)
    def _typed(*args):
        elements = []                      # source expressions of the elements, in order
        for i, arg in enumerate(args):
            if isinstance(arg, (types.Number, types.Boolean)):
                elements.append(f"__base(args[{i}])")
            elif (isinstance(arg, types.NamedUniTuple) and arg.instance_class in _VECTOR_CLASSES
                  and _VECTOR_CLASSES[arg.instance_class] == base):
                elements += [f"args[{i}][{k}]" for k in range(arg.count)]
            else:
                return None
        if len(elements) != count:
            return None
        namespace = {"__cls": cls, "__base": getattr(np, base)}
        exec(f"def impl(*args):\n    return __cls({', '.join(elements)})\n", namespace)
        return namespace["impl"]
    return constructor


#: namedtuple class -> its base type name (to check that spliced vectors share the base)
_VECTOR_CLASSES: dict[type, str] = {}

for _base, _count in itertools.product(_BASES, (1, 2, 3, 4)):
    _canonical = f"{_base}x{_count}"
    _cls = collections.namedtuple(_canonical, _FIELDS[:_count], module=__name__)
    globals()[_canonical] = _cls
    _CLASSES[_canonical] = (_cls, _base, _count)
    _VECTOR_CLASSES[_cls] = _base
    VECTOR_TYPES[_canonical] = _canonical
    globals()[_canonical + "__ctor"] = _make_constructor(_canonical, _cls, _base, _count)
for _alias, _c_type in _C_ALIASES.items():
    _base = np.dtype(_c_type).name
    for _count in (1, 2, 3, 4):
        VECTOR_TYPES[f"{_alias}{_count}"] = f"{_base}x{_count}"
