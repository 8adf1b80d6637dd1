"""How numba_cube's commands end: exit statuses, one-line errors, broken pipes.

Shared by ``python -m numba_cube`` (``cli.py``) and the trace plugin's ``numba-cube-trace``, so
that every command says the same things the same way:

- an **expected error** (a typed numba_cube error, a missing or unreadable file, an optional
  package that is not installed, a ``CommandError`` the command raised itself) is one line on
  stderr, ``<prog>: error: <what happened>; <what to do>``, and exit status 1 (``EXIT_FAILURE``);
  a command line that is wrong as written (an unknown subcommand or option, a device name no
  backend has) is one line and exit status 2 (``EXIT_USAGE``), as argparse's own errors are;
- the traceback of an expected error is printed only on request: ``--debug`` or
  ``NUMBA_CUBE_DEBUG=1`` (``debug_requested``). An *unexpected* exception (a bug) keeps Python's
  traceback, because that is what a bug report needs;
- a reader that goes away (``... | head``) ends the command quietly with status 141, what a
  shell reports for a process that SIGPIPE ended (Python ignores SIGPIPE, so without this a
  ``BrokenPipeError`` traceback is printed); Ctrl-C ends it quietly with status 130.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Callable

from . import config
from .errors import CubeError

__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE", "CommandError",
           "OneLineArgumentParser", "debug_requested", "run_command", "INSTALL_HINTS"]

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130   # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_BROKEN_PIPE = 141   # 128 + SIGPIPE

DEBUG_VARIABLE = "NUMBA_CUBE_DEBUG"

#: The install command of each optional package a command may need (a top-level module name ->
#: what to run), so that a missing one is reported with the line that fixes it.
INSTALL_HINTS = {
    "dask": "pip install 'numba_cube[dask]'",
    "distributed": "pip install 'numba_cube[dask]'",
    "numba_cuda": "pip install 'numba_cube[cuda]'",
    "tqdm": "pip install 'numba_cube[progress]'",
    "matplotlib": "pip install 'numba_cube_trace[png]'",
}


class CommandError(Exception):
    """An error a command reports as one line: ``message`` says what happened and what to do;
    ``status`` is the exit status (``EXIT_FAILURE``, or ``EXIT_USAGE`` for a bad command line)."""

    def __init__(self, message: str, status: int = EXIT_FAILURE):
        super().__init__(message)
        self.status = status


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line (``<prog>: error: ...; see --help``)
    with exit status 2, instead of the usage block followed by the error."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; see '{self.prog} --help'\n")


def debug_requested(flag: bool = False) -> bool:
    """Whether expected errors show their traceback: ``--debug`` (``flag``) or
    ``NUMBA_CUBE_DEBUG=1``."""
    return flag or config.get_bool(DEBUG_VARIABLE)


def _one_line(exc: BaseException) -> str:
    """What an expected error says, on one line: its message's first line (``--debug`` shows
    the rest), with the install command when it is a missing optional package."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.partition(".")[0]
        hint = INSTALL_HINTS.get(top, f"install the package that provides {top!r}")
        return f"{top} is not installed: {hint}"
    if isinstance(exc, OSError) and exc.filename is not None:
        # "[Errno 2] No such file or directory: 'x'" says it less plainly than this.
        return f"{exc.strerror or type(exc).__name__}: {exc.filename}"
    text = str(exc).strip() or type(exc).__name__
    lines = text.splitlines()
    more = " (--debug shows the rest)" if len(lines) > 1 else ""
    return lines[0] + more


def _silence_stdout() -> None:
    """After a broken pipe: send what is still buffered to /dev/null, so that the interpreter's
    flush at exit does not raise the same error again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass       # stdout is no file descriptor (captured by a test): nothing will flush to it


def run_command(prog: str, body: Callable[[], int], debug: bool) -> int:
    """Run ``body()`` (a command's work, returning its exit status) and turn the ways it can end
    into exit statuses, as this module's docstring says."""
    try:
        status = body()
        sys.stdout.flush()   # here, not at exit: a broken pipe must surface inside this try
        return status
    except BrokenPipeError:  # before OSError, which it is
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (CommandError, CubeError, OSError, ModuleNotFoundError) as exc:
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {_one_line(exc)}", file=sys.stderr)
        return exc.status if isinstance(exc, CommandError) else EXIT_FAILURE
