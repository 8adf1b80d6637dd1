"""What a call does to the arrays handed to it: the rule tables of the IO analysis.

The IR walker (``io_walk``) resolves a call's target to a Python object (or, for a bound method
of an array, to the method's name) and asks this module for a ``Rule``. A rule says, per
argument position, whether the callee reads the array, writes it, or only looks at its
metadata, and whether the call's result is a *view* of its first argument (so that a later
store into the result is a store into the argument).

The tables are deliberately closed: anything not listed here is *unknown*, and the walker then
reports the arrays passed to it as ``IO_UNKNOWN`` (read and written, CONTRACT.md section 4.2),
and the elements too (an element may be a record, a reference into its array). A wrong entry
here can hide a write, so an entry is added only where Numba's semantics of the callee are clear.
numba.cuda's builtins follow the same closed rule by path (``CUDA_RULES``): the ones listed have
their effect; every other one takes values only, so an array handed to it is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .io_cuda import cuda_path

__all__ = ["Rule", "ATOMIC", "PURE", "VALUES", "CUDA_RULES", "METHOD_RULES", "rule_for_object",
           "rule_for_cuda_path", "META_ATTRS", "VIEW_ATTRS"]


@dataclass(frozen=True)
class Rule:
    """The effect of one callee on its array arguments.

    ``default`` applies to every argument not named in ``effects``: ``"r"`` (read), ``""``
    (metadata only: ``len(a)``, ``np.empty_like(a)``), ``"?"`` (the callee takes values there:
    an element passed is a value, an array or a tuple passed is unknown). ``effects`` maps an
    argument position to ``"r"``, ``"w"`` or ``"rw"``; for methods position 0 is the array the
    method is bound to.
    A keyword argument named ``out`` is always a write (NumPy's convention).

    ``view`` is set when the result aliases argument 0: ``"same"`` (same ndim), ``"one"``
    (1-D), ``"reshape"`` (ndim = the length of the new shape), ``"unknown"`` (an array of
    unknown ndim).
    """

    default: str = "r"
    effects: tuple[tuple[int, str], ...] = ()
    view: str | None = None

    def effect(self, position: int) -> str:
        for pos, eff in self.effects:
            if pos == position:
                return eff
        return self.default


PURE = Rule()                       # reads its array arguments, returns a fresh value
META = Rule(default="")             # looks only at shape / dtype
ATOMIC = Rule(effects=((0, "rw"),))  # cuda.atomic.*(ary, idx, ...): read-modify-write of ary
VALUES = Rule(default="?")          # numba.cuda builtins that take values only (grid, fma, ...)
_VIEW_SAME = Rule(default="", view="same")
_VIEW_ONE = Rule(default="", view="one")
_VIEW_UNKNOWN = Rule(default="", view="unknown")
_VIEW_RESHAPE = Rule(default="", view="reshape")


# Attributes of an array that are not its data: reading them is not a read of the buffer.
META_ATTRS = frozenset({"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes",
                        "flags", "layout"})
# Attributes that are views of the same data, with the ndim of the view ("same" or 1).
VIEW_ATTRS = {"T": "same", "real": "same", "imag": "same", "flat": "one"}


def _reads(out: int | None = None) -> Rule:
    """A callee that reads its arrays, except NumPy's positional ``out`` at position ``out``."""
    return PURE if out is None else Rule(effects=((out, "w"),))


# Methods of an array, position 0 being the array itself. Copies (``copy``, ``emit/flat_kernel.py``,
# ``astype``) are reads; ``ravel`` may return a view in NumPy, so it is treated as one (a view
# that is really a copy only over-reports, never hides, a write). The numbers are NumPy's
# positional ``out`` (``a.sum(axis, dtype, out)``: 3, counting ``a`` as 0).
METHOD_RULES: dict[str, Rule] = {
    "reshape": _VIEW_RESHAPE, "ravel": _VIEW_ONE, "transpose": _VIEW_SAME, "view": _VIEW_SAME,
    "swapaxes": _VIEW_SAME, "squeeze": _VIEW_UNKNOWN, "diagonal": _VIEW_UNKNOWN,
    "fill": Rule(effects=((0, "w"),)), "itemset": Rule(effects=((0, "w"),)),
    "put": Rule(effects=((0, "w"),)), "setfield": Rule(effects=((0, "w"),)),
    "sort": Rule(effects=((0, "rw"),)), "partition": Rule(effects=((0, "rw"),)),
    **{name: _reads(out) for name, out in {
        "copy": None, "flatten": None, "astype": None, "item": None, "tolist": None,
        "tobytes": None, "nonzero": None, "conj": None, "conjugate": None, "repeat": None,
        "argsort": None, "searchsorted": None,
        "sum": 3, "prod": 3, "mean": 3, "std": 3, "var": 3, "cumsum": 3, "cumprod": 3,
        "take": 3, "clip": 3, "min": 2, "max": 2, "argmax": 2, "argmin": 2, "all": 2,
        "any": 2, "ptp": 2, "dot": 2, "round": 2, "trace": 5}.items()},
}

_BUILTIN_PURE = (abs, min, max, int, float, bool, complex, round, pow, divmod, range, print, sum,
                 any, all, sorted, slice, hash, enumerate, zip, iter, reversed)
# NumPy functions that read their arrays, with the position of a positional ``out``.
_NUMPY_READS = {
    "vdot": None, "inner": None, "copy": None, "array": None, "sort": None, "argsort": None,
    "count_nonzero": None, "nonzero": None, "unique": None, "where": None, "isclose": None,
    "allclose": None, "array_equal": None, "searchsorted": None, "interp": None,
    "arange": None, "linspace": None, "empty": None, "zeros": None, "ones": None, "full": None,
    "hstack": None, "vstack": None, "diff": None, "cross": None, "kron": None,
    "sum": 3, "prod": 3, "mean": 3, "std": 3, "var": 3, "cumsum": 3, "cumprod": 3, "clip": 3,
    "min": 2, "max": 2, "amin": 2, "amax": 2, "median": 2, "dot": 2, "outer": 2, "argmax": 2,
    "argmin": 2, "any": 2, "all": 2, "concatenate": 2, "stack": 2, "round": 2, "around": 2,
    "trace": 5}
_NUMPY_META = ("shape", "ndim", "size", "empty_like", "zeros_like", "ones_like", "full_like")
_NUMPY_VIEW = {"asarray": _VIEW_SAME, "ascontiguousarray": _VIEW_SAME,
               "asfortranarray": _VIEW_SAME, "ravel": _VIEW_ONE, "reshape": _VIEW_RESHAPE,
               "transpose": _VIEW_SAME, "swapaxes": _VIEW_SAME, "moveaxis": _VIEW_SAME,
               "real": _VIEW_SAME, "imag": _VIEW_SAME, "flip": _VIEW_SAME,
               "fliplr": _VIEW_SAME, "flipud": _VIEW_SAME, "squeeze": _VIEW_UNKNOWN,
               "expand_dims": _VIEW_UNKNOWN, "atleast_1d": _VIEW_UNKNOWN,
               "atleast_2d": _VIEW_UNKNOWN, "atleast_3d": _VIEW_UNKNOWN,
               "diagonal": _VIEW_UNKNOWN, "broadcast_to": _VIEW_UNKNOWN}
_NUMPY_WRITE = {"copyto": Rule(effects=((0, "w"),)), "fill_diagonal": Rule(effects=((0, "w"),)),
                "put": Rule(effects=((0, "w"),)), "place": Rule(effects=((0, "w"),)),
                "putmask": Rule(effects=((0, "w"),))}


def _build_table() -> dict[int, tuple[object, Rule]]:
    # Keyed by id() because some callables are unhashable; the object is kept alongside so the
    # id cannot be recycled while the table lives.
    table: dict[int, tuple[object, Rule]] = {}

    def add(obj: object, rule: Rule) -> None:
        table[id(obj)] = (obj, rule)

    for fn in _BUILTIN_PURE:
        add(fn, PURE)
    add(len, META)
    add(isinstance, META)
    for name, out in _NUMPY_READS.items():
        if hasattr(np, name):
            add(getattr(np, name), _reads(out))
    for name in _NUMPY_META:
        add(getattr(np, name), META)
    for name, rule in {**_NUMPY_VIEW, **_NUMPY_WRITE}.items():
        if hasattr(np, name):
            add(getattr(np, name), rule)
    add(np.random.shuffle, Rule(effects=((0, "rw"),)))
    return table


_TABLE = _build_table()


# numba.cuda's builtins that take an array, by path, with numba-cuda's semantics. Every atomic
# reads and writes its first argument; ``ld*(array, i)`` loads ``array[i]`` with a cache hint;
# ``st*(array, i, value)`` stores ``value`` at ``array[i]``; ``const.array_like(a)`` copies ``a``
# (the CPU backend hands back ``a`` itself, so its result is treated as a view of ``a``). Not
# listed, so unknown: ``fp16.atomicAdd`` (it takes a pointer, which only an unknown call such
# as ``ffi.from_buffer`` can make of an array), and any name numba-cuda adds.
_ATOMIC_OPS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min",
               "nanmax", "nanmin", "compare_and_swap", "cas")
CUDA_RULES: dict[str, Rule] = {
    **{f"atomic.{op}": ATOMIC for op in _ATOMIC_OPS},
    **{name: PURE for name in ("ldca", "ldcg", "ldcs", "ldlu", "ldcv")},
    **{name: Rule(effects=((0, "w"),)) for name in ("stcg", "stcs", "stwb", "stwt")},
    "const.array_like": Rule(view="same"),
}


def rule_for_cuda_path(path: str) -> Rule:
    """Rule of a numba.cuda builtin named by its path below numba.cuda (``"atomic.add"``,
    ``"stcg"``, ``"libdevice.sin"``; ``io_cuda.cuda_path``).

    ``CUDA_RULES`` for the builtins that take arrays; ``VALUES`` for every other one (thread
    indices, ``shared.array``, ``syncthreads``, shuffles, ``fma``, libdevice, fp16, ...): they
    take numbers, so an element handed to one is a value, and an array handed to one (which
    numba-cuda would refuse, or a builtin that is new) is unknown.
    """
    return CUDA_RULES.get(path, VALUES)


def rule_for_object(obj: object) -> Rule | None:
    """Rule of a resolved, non-device-function callee, or None when it is unknown."""
    hit = _TABLE.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    # Checked before "is it a device function" by the caller too: some numba.cuda builtins
    # (``shfl_sync``) are themselves dispatchers, and touch no array beyond their arguments.
    path = cuda_path(obj)
    if path is not None:
        return rule_for_cuda_path(path)
    module = getattr(obj, "__module__", None)
    if module in ("math", "cmath") and callable(obj):
        return PURE
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, np.ufunc):
        # np.add.at(a, idx, b) updates a in place; reduce / accumulate / outer return fresh.
        return ATOMIC if getattr(obj, "__name__", "") == "at" else PURE
    if isinstance(obj, np.ufunc):
        # Inputs are read; positional arguments past the inputs are outputs.
        return Rule(effects=tuple((k, "w") for k in range(obj.nin, obj.nin + obj.nout)))
    if isinstance(obj, type) and issubclass(obj, (np.generic, np.dtype)):
        return PURE                                    # np.float32(x), ...
    if _is_numba_type(obj):
        return PURE                                    # numba.float32(x): a cast
    return None


def _is_numba_type(obj: object) -> bool:
    from numba.core import types
    return isinstance(obj, types.Type)

