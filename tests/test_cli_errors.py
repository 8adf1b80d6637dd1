"""``numba_cube/cli_errors.py``: how a command ends. Expected errors are one line on stderr with
exit status 1 (2 for a bad command line), their traceback only when asked for; a bug keeps its
traceback; a broken pipe and Ctrl-C end quietly with 141 and 130."""

from __future__ import annotations

import importlib

import pytest

from numba_cube import errors
from numba_cube.cli_errors import (EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE,
                                   CommandError, OneLineArgumentParser, debug_requested, run_command)


def _raise(exc_factory):
    def body():
        raise exc_factory()
    return body


def test_missing_file_is_one_line_naming_the_file(capsys, tmp_path):
    """Opening a file that is not there: exit status 1, one line with the OS's words and the path."""
    missing = tmp_path / "nope.json"
    assert run_command("prog", lambda: open(missing).read(), debug=False) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert err == f"prog: error: No such file or directory: {missing}\n"


def test_typed_error_is_its_first_line(capsys):
    """A numba_cube error is reported as its message's first line (the rest is behind --debug)."""
    body = _raise(lambda: errors.BackendNotFound("backend 'x' is not available\nsecond line"))
    assert run_command("prog", body, debug=False) == EXIT_FAILURE
    assert capsys.readouterr().err == ("prog: error: backend 'x' is not available "
                                       "(--debug shows the rest)\n")


def test_command_error_carries_its_status(capsys):
    """A ``CommandError`` ends with its own status: 2 for a usage error."""
    body = _raise(lambda: CommandError("no backend named 'cdua'", EXIT_USAGE))
    assert run_command("prog", body, debug=False) == EXIT_USAGE
    assert capsys.readouterr().err == "prog: error: no backend named 'cdua'\n"


def test_missing_module_names_what_to_install(capsys):
    """A module that is not installed (a real failed import) is named, with how to get it."""
    body = lambda: importlib.import_module("numba_cube_no_such_module_anywhere")  # noqa: E731
    assert run_command("prog", body, debug=False) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert err.startswith("prog: error: numba_cube_no_such_module_anywhere is not installed")
    assert err.count("\n") == 1


def test_debug_prints_the_traceback_too(capsys):
    """With ``debug=True`` the same error also prints its traceback, then the line."""
    assert run_command("prog", _raise(lambda: CommandError("boom")), debug=True) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("prog: error: boom\n")


def test_a_bug_keeps_its_traceback():
    """An exception no command expects (a bug) is not turned into a line: it propagates, so that
    Python prints its traceback for the bug report."""
    with pytest.raises(ZeroDivisionError):
        run_command("prog", lambda: 1 // 0, debug=False)


def test_broken_pipe_and_interrupt_end_quietly(capsys):
    """A broken pipe ends with 141 and Ctrl-C with 130, printing nothing."""
    assert run_command("prog", _raise(BrokenPipeError), debug=False) == EXIT_BROKEN_PIPE
    assert run_command("prog", _raise(KeyboardInterrupt), debug=False) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == ""


def test_usage_error_is_one_line_with_status_2(capsys):
    """The parser's own errors are one line pointing to --help, exit status 2."""
    parser = OneLineArgumentParser(prog="prog")
    parser.add_argument("--n", type=int)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--n", "x"])
    assert info.value.code == EXIT_USAGE
    assert capsys.readouterr().err == ("prog: error: argument --n: invalid int value: 'x'; "
                                       "see 'prog --help'\n")


def test_debug_is_the_flag_or_the_variable(monkeypatch):
    """Tracebacks are asked for by ``--debug`` or ``NUMBA_CUBE_DEBUG=1``."""
    monkeypatch.delenv("NUMBA_CUBE_DEBUG", raising=False)
    assert debug_requested(True) and not debug_requested(False)
    monkeypatch.setenv("NUMBA_CUBE_DEBUG", "1")
    assert debug_requested(False)
