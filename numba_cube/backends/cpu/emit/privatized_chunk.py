"""The chunk function of a kernel whose global atomics are privatized (``passes/privatize.py``
decides which and names the copies): it makes each private copy, calls the kernel's body on
them, and merges them into the real arrays.
"""

from __future__ import annotations

from numba_cube.backends.cpu.emit.unit_code import Writer
from numba_cube.backends.cpu.passes.privatize import MODULE, Privatized

__all__ = ["emit_wrapper", "wrapper_imports"]


def emit_wrapper(w: Writer, chunk: str, body: str, geometry: list[str], privatized: Privatized,
                 decorator: str) -> None:
    """Print ``chunk`` (the launchers' signature), which runs ``body`` on private copies."""
    params = privatized.entry_params
    copies = privatized.copies
    w.line(decorator)
    with w.indent(f"def {chunk}(__c, __nchunks, {', '.join(geometry + params)}):"):
        units = " * ".join(["__gdx", "__bdx", "__gdy", "__bdy", "__gdz", "__bdz"])
        w.line(f"__units = {units} // __nchunks")
        w.line("__data = " + " + ".join(f"__array_bytes({p})" for p in params))
        others = [p for p in params if p not in copies]
        for array, copy in copies.items():
            overlaps = " or ".join(f"__may_alias({array}, {p})" for p in others) or "False"
            w.line(f"{copy} = __private_copy({array}, __units, __data, __nchunks, "
                   f"not ({overlaps}))")
        w.line(f"{body}(__c, __nchunks, {', '.join(geometry + params + list(copies.values()))})")
        for array, copy in copies.items():
            w.line(f"__merge_private({array}, {copy})")
    w.line()


def wrapper_imports(env) -> None:
    """Register the helpers ``emit_wrapper`` prints with the module's imports."""
    for name in ("private_copy", "merge_private", "array_bytes", "may_alias"):
        env.helper(MODULE, name, "__" + name)
