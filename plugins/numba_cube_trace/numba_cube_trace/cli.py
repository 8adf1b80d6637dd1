"""``numba-cube-trace TRACE.json [-o OUT.png]``: summarize a trace, optionally draw it.

Errors end as numba_cube's own commands end them (``numba_cube/cli_errors.py``): a missing or
unreadable trace, a file that is no trace (or whose events lack keys), matplotlib not installed for ``-o`` are one line on
stderr and exit status 1 (``--debug`` or ``NUMBA_CUBE_DEBUG=1`` adds the traceback), and a reader
that goes away (``| head``) ends it quietly.
"""

from __future__ import annotations

import json

from numba_cube.cli_errors import CommandError, OneLineArgumentParser, debug_requested, run_command

from .render import check, load, render_png, summary

__all__ = ["main"]

PROG = "numba-cube-trace"


def _load_trace(path: str) -> dict:
    """The trace at ``path``, or a ``CommandError`` saying why it is not one."""
    try:
        trace = load(path)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path} is not JSON ({exc}); pass a file written by "
                           f"NUMBA_CUBE_TRACE=path.json or numba_cube_trace.tracing(path)") from exc
    try:
        return check(trace)
    except ValueError as exc:
        raise CommandError(f"{path} is JSON but no trace ({exc}); pass a file written by "
                           f"NUMBA_CUBE_TRACE=path.json or numba_cube_trace.tracing(path)") from exc


def _run(args) -> int:
    trace = _load_trace(args.trace)
    print(summary(trace))
    if args.png:
        print("wrote", render_png(trace, args.png, title=args.title))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.splitlines()[0],
                                   epilog="Errors are one line on stderr (exit status 1); --debug, "
                                          "or NUMBA_CUBE_DEBUG=1, also prints their traceback.")
    parser.add_argument("trace", help="a trace written by numba_cube_trace (NUMBA_CUBE_TRACE or tracing())")
    parser.add_argument("-o", "--png", help="also draw the timeline into this PNG file (needs matplotlib)")
    parser.add_argument("--title", help="title of the chart")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error too")
    args = parser.parse_args(argv)
    return run_command(PROG, lambda: _run(args), debug_requested(args.debug))
