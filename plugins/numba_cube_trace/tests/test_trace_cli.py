"""``numba-cube-trace`` (``numba_cube_trace/cli.py``): a trace file that is missing, not JSON, or
JSON but no trace is one line on stderr with exit status 1, never a traceback."""

from __future__ import annotations

import subprocess
import sys


def _trace_cli(*args):
    return subprocess.run([sys.executable, "-m", "numba_cube_trace", *args], capture_output=True,
                          text=True, timeout=300)


def _one_error_line(proc) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_missing_trace_file(tmp_path):
    """A path that does not exist: exit status 1, one line naming it."""
    missing = tmp_path / "nope.json"
    proc = _trace_cli(str(missing))
    assert proc.returncode == 1
    assert _one_error_line(proc) == f"numba-cube-trace: error: No such file or directory: {missing}"


def test_file_that_is_no_trace(tmp_path):
    """A file that is not JSON, or JSON without ``traceEvents``: exit status 1, one line saying
    what it is and which files the command reads."""
    text = tmp_path / "notes.txt"
    text.write_text("not json")
    proc = _trace_cli(str(text))
    assert proc.returncode == 1 and "is not JSON" in _one_error_line(proc)
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')
    proc = _trace_cli(str(other))
    assert proc.returncode == 1
    line = _one_error_line(proc)
    assert "no trace" in line and "NUMBA_CUBE_TRACE" in line


def test_events_that_lack_keys(tmp_path):
    """A trace whose dispatch event lacks its duration, or whose event is no object: exit status
    1 and one line naming the event and the missing key, never a KeyError's traceback."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 2, "ts": 0.0}]}')
    proc = _trace_cli(str(bad))
    line = _one_error_line(proc)
    assert proc.returncode == 1 and "event 0 (ph 'X') lacks dur" in line, line
    bad.write_text('{"traceEvents": [{"ph": "M", "name": "thread_name", "pid": 1, "args": {}}, 3]}')
    line = _one_error_line(_trace_cli(str(bad)))
    assert "event 0 (ph 'M') lacks tid, args.name" in line, line
    bad.write_text('{"traceEvents": [3]}')
    assert "event 0 is a int, not an object" in _one_error_line(_trace_cli(str(bad)))
