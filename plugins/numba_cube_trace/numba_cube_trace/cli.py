"""``numba-cube-trace TRACE.json [-o OUT.png]``: summarize a trace, optionally draw it."""

from __future__ import annotations

import argparse

from .render import render_png, summary

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="numba-cube-trace", description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a trace written by numba_cube_trace (NUMBA_CUBE_TRACE or tracing())")
    parser.add_argument("-o", "--png", help="also draw the timeline into this PNG file (needs matplotlib)")
    parser.add_argument("--title", help="title of the chart")
    args = parser.parse_args(argv)
    print(summary(args.trace))
    if args.png:
        print("wrote", render_png(args.trace, args.png, title=args.title))
    return 0
