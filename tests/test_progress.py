"""``numba_cube/progress.py``: autotune draws a tqdm progress bar on a terminal, and nothing when
its stderr is piped, under CI, or without tqdm."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from numba_cube import progress

REPO = Path(__file__).resolve().parents[1]

# Two candidates that launch nothing: the tuner times them like any (no compile to wait for).
_TUNE = """
import numba_cube as cube
tuner = cube.Tuner("bar_demo", {"first": lambda client: None, "second": lambda client: None},
                   key=lambda: 0, samples=2)
print(tuner.tune(cube.client("cpu")).best in ("first", "second"))
"""


def _env(tmp_path, **extra):
    import tqdm   # the bar's library: where it is, the child imports it too

    paths = [str(REPO), str(Path(tqdm.__file__).parents[1])] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p),
               NUMBA_CUBE_CACHE_DIR=str(tmp_path / "cache"), NUMBA_CUBE_AUTOTUNE_CACHE="0")
    env.pop("CI", None)
    env.update(extra)
    return env


def _tune_on_a_terminal(env) -> tuple[int, str]:
    """Run the tuner with stderr on a real pseudo-terminal; its exit status and what it drew."""
    master, slave = pty.openpty()
    # A terminal has a size (a fresh pty's is 0x0, where tqdm draws nothing): 24 rows, 80 columns.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        proc = subprocess.Popen([sys.executable, "-c", _TUNE], env=env, stdout=subprocess.PIPE,
                                stderr=slave, text=True)
        os.close(slave)
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:          # the child closed its end
                break
            if not chunk:
                break
            drawn += chunk
        out, _ = proc.communicate(timeout=300)
    finally:
        os.close(master)
    assert out.strip() == "True"
    return proc.returncode, drawn.decode(errors="replace")


def test_autotune_draws_a_tqdm_bar_on_a_terminal(tmp_path):
    """With stderr a terminal (a pty) and tqdm installed, tuning draws tqdm's bar: the tuner's
    name and its count of candidates."""
    pytest.importorskip("tqdm")
    rc, drawn = _tune_on_a_terminal(_env(tmp_path))
    assert rc == 0
    assert "tuning bar_demo" in drawn and "/2" in drawn, drawn


def test_autotune_draws_nothing_under_ci_even_on_a_terminal(tmp_path):
    """Under CI (``CI`` set) nothing is drawn, even on a terminal."""
    pytest.importorskip("tqdm")
    rc, drawn = _tune_on_a_terminal(_env(tmp_path, CI="true"))
    assert rc == 0 and "tuning" not in drawn, drawn


def test_autotune_draws_nothing_when_piped(tmp_path):
    """With stderr a pipe, tuning writes nothing to it (no bar, no control characters)."""
    pytest.importorskip("tqdm")
    proc = subprocess.run([sys.executable, "-c", _TUNE], env=_env(tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "True"
    assert proc.stderr == "", proc.stderr


def test_the_no_bar_takes_the_bar_calls():
    """Where no bar is shown (here: pytest captures stderr), ``progress_bar`` returns one that
    takes update/set_postfix_str/close and draws nothing."""
    assert not progress.bars_shown()
    bar = progress.progress_bar(3, "nothing")
    bar.set_postfix_str("x")
    bar.update()
    bar.close()
