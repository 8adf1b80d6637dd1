"""``python -m numba_cube translate FILE.py:KERNEL`` (or ``MODULE:KERNEL``): what the CPU
translator makes of a kernel, for reading and for bisecting a wrong answer.

By default it prints the generated module (what Numba compiles). ``--after STAGE`` prints the
kernel's body after a named stage instead (``lower``, ``lockstep``, ``privatize``, ``scan_idiom``,
``const_shapes``: ``backends/cpu/emit/module.py``'s ``STAGES``); ``--without PASS`` (repeatable,
or comma-separated) switches optional passes off, as ``NUMBA_CUBE_DISABLE_PASSES`` does
(``backends/cpu/passes/__init__.py``); ``--boundscheck`` translates with bounds checks. A kernel
that runs right with a pass off and wrong with it on points at that pass.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from .cli_errors import CommandError

__all__ = ["run_translate_command", "load_kernel"]


def load_kernel(spec: str):
    """The Python function of the kernel ``spec`` names (``path/to/file.py:name`` or
    ``package.module:name``; a ``cube.kernel``, a ``cuda.jit`` dispatcher or a plain function)."""
    where, colon, name = spec.rpartition(":")
    if not colon or not where or not name:
        raise CommandError(f"expected FILE.py:KERNEL or MODULE:KERNEL, got {spec!r}")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise CommandError(f"no such file: {where}")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.path.insert(0, str(path.parent.resolve()))    # its own imports, as `python file.py`
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    try:
        obj = getattr(module, name)
    except AttributeError:
        raise CommandError(f"{where} has no {name!r}") from None
    while hasattr(obj, "py_func"):
        obj = obj.py_func
    if not callable(obj):
        raise CommandError(f"{spec} is not a kernel (a function, cube.kernel or cuda.jit)")
    return obj


def run_translate_command(args, out=None) -> int:
    out = sys.stdout if out is None else out
    from .backends.cpu.emit.module import STAGES
    from .backends.cpu.passes import OPTIONAL_PASSES

    without = [n.strip() for item in args.without or () for n in item.split(",") if n.strip()]
    unknown = [n for n in without if n not in OPTIONAL_PASSES and n != "all"]
    if unknown:
        raise CommandError(f"--without: unknown pass {', '.join(unknown)}; the optional passes "
                           f"are {', '.join(OPTIONAL_PASSES)} (or all)")
    if args.after is not None and args.after not in STAGES:
        raise CommandError(f"--after: unknown stage {args.after!r}; the stages are "
                           f"{', '.join(STAGES)}")
    if without:
        os.environ["NUMBA_CUBE_DISABLE_PASSES"] = ",".join(without)
    py_func = load_kernel(args.kernel)
    from .backends.cpu.translate import translate_stages

    stages = translate_stages(py_func, boundscheck=args.boundscheck)
    stage = args.after or "module"
    if stage not in stages:
        raise CommandError(f"{args.kernel} does not go through stage {stage!r} (a barrier-free "
                           f"kernel has no cube stages); its stages: {', '.join(stages)}")
    print(stages[stage], file=out)
    return 0
