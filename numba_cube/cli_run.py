"""``python -m numba_cube run [--device D] script.py [args]`` and ``run [--device D] -m module
[args]``: a numba.cuda program, unchanged, with numba.cuda served by numba_cube.

As ``coverage run`` does: the layer is installed (``numba_cube.install(device)``, default
``cpu``) before the program's first line, ``sys.argv`` is the program's (``[script, *args]``, or
``[module path, *args]`` for ``-m``), ``sys.path[0]`` is the script's folder (the current one for
``-m``), the program runs as ``__main__`` (``runpy``), and its exit status is the command's:
``sys.exit(n)`` and ``SystemExit`` pass through, an uncaught exception prints Python's traceback and
exits 1, as ``python script.py`` would. Mistakes in the command line itself are one line and exit
status 2 (``cli_errors.py``).
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback

from .cli_errors import EXIT_FAILURE, EXIT_USAGE, CommandError

__all__ = ["run_program", "USAGE"]

USAGE = "run [--device DEVICE] (script.py | -m module) [args ...]"


def _parse(argv: list[str]) -> tuple[str, str | None, str | None, list[str]]:
    """``(device, script, module, program args)`` of ``run``'s arguments."""
    device, i = "cpu", 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--device":
            if i + 1 >= len(argv):
                raise CommandError(f"--device needs a value; usage: {USAGE}", EXIT_USAGE)
            device, i = argv[i + 1], i + 2
        elif arg.startswith("--device="):
            device, i = arg.split("=", 1)[1], i + 1
        elif arg == "-m":
            if i + 1 >= len(argv):
                raise CommandError(f"-m needs a module name; usage: {USAGE}", EXIT_USAGE)
            return device, None, argv[i + 1], argv[i + 2:]
        elif arg.startswith("-"):
            raise CommandError(f"unknown option {arg!r} before the program; usage: {USAGE}",
                               EXIT_USAGE)
        else:
            return device, arg, None, argv[i + 1:]
    raise CommandError(f"no program to run; usage: {USAGE}", EXIT_USAGE)


def _exit_status(code) -> int:
    """The exit status of ``SystemExit(code)``, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return EXIT_FAILURE


def run_program(argv: list[str]) -> int:
    """Install the layer and run the program ``argv`` names (module docstring)."""
    device, script, module, args = _parse(argv)
    if script is not None and not os.path.exists(script):
        raise CommandError(f"can't open file {script!r}: no such file", EXIT_USAGE)
    from .dropin import install

    try:
        install(device)
    except RuntimeError as exc:             # (numba-cuda's simulator is switched on)
        raise CommandError(str(exc)) from None
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    try:
        if script is not None:
            sys.argv = [script, *args]
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
        else:
            sys.argv = [module, *args]          # runpy sets argv[0] to the module's file
            sys.path[0] = os.getcwd()
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return _exit_status(exc.code)
    except KeyboardInterrupt:
        raise
    except BaseException:                       # noqa: BLE001 - the program's own error
        traceback.print_exc()
        return EXIT_FAILURE
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
    return 0
