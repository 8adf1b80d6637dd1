"""``numba_cube/progress.py``: autotune, and a dry run that compiles more than a few launches,
draw a tqdm progress bar on a terminal, and nothing when stderr is piped, under CI, or without
tqdm."""

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


# A dry run of N launches of N distinct kernels (closure values: each its own id and compile).
_DRY_RUN = """
import sys
import numpy as np
from numba import cuda
import numba_cube as cube

def make(k):
    @cube.kernel
    def add_k(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += k
    return add_k

kernels = [make(float(k)) for k in range(int(sys.argv[1]))]
client = cube.client("cpu")
x = client.create(np.zeros(32))
with cube.dry_run() as run:
    for k in kernels:
        client.launch(k, 1, 32, x)
print(len(run.failures) == 0 and float(client.read(x).sum()) == 0.0)
"""


def _tune_on_a_terminal(env) -> tuple[int, str]:
    """Run the tuner with stderr on a real pseudo-terminal; its exit status and what it drew."""
    return _on_a_terminal(env, "-c", _TUNE)


def _on_a_terminal(env, *args) -> tuple[int, str]:
    """Run ``python *args`` with stderr on a real pseudo-terminal; check that it printed "True",
    and return its exit status and what it drew."""
    master, slave = pty.openpty()
    # A terminal has a size (a fresh pty's is 0x0, where tqdm draws nothing): 24 rows, 80 columns.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        proc = subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.PIPE,
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


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory):
    """One cache directory for the dry-run tests: the first compiles, the others read it (a
    launch served from the cache is still one the dry run handles and counts)."""
    return tmp_path_factory.mktemp("dry-run-cache")


def test_dry_run_of_many_kernels_draws_a_counter_on_a_terminal(tmp_path, kernel_cache):
    """A dry run that compiles more than a few launches (here 6 kernels) draws tqdm's counter on
    a terminal: its label and the count of launches it compiled, up to all 6."""
    pytest.importorskip("tqdm")
    env = _env(tmp_path, NUMBA_CUBE_CACHE_DIR=str(kernel_cache))
    rc, drawn = _on_a_terminal(env, "-c", _DRY_RUN, "6")
    assert rc == 0
    assert "dry run: compiled" in drawn and "6 launches" in drawn, drawn


def test_dry_run_of_a_few_kernels_draws_nothing(tmp_path, kernel_cache):
    """A dry run of as many launches as ``DRY_RUN_BAR_AFTER`` (3) draws nothing, even on a
    terminal: a bar that flashes for a handful of compiles is noise."""
    pytest.importorskip("tqdm")
    from numba_cube.runtime.client.modes import DRY_RUN_BAR_AFTER

    env = _env(tmp_path, NUMBA_CUBE_CACHE_DIR=str(kernel_cache))
    rc, drawn = _on_a_terminal(env, "-c", _DRY_RUN, str(DRY_RUN_BAR_AFTER))
    assert rc == 0 and "dry run" not in drawn, drawn


def test_dry_run_draws_nothing_under_ci_or_piped(tmp_path, kernel_cache):
    """Under CI (even on a terminal), or with stderr a pipe, a dry run of many launches draws
    nothing: no bar, no control characters on stderr."""
    pytest.importorskip("tqdm")
    env = _env(tmp_path, NUMBA_CUBE_CACHE_DIR=str(kernel_cache))
    rc, drawn = _on_a_terminal(dict(env, CI="true"), "-c", _DRY_RUN, "6")
    assert rc == 0 and "dry run" not in drawn, drawn
    proc = subprocess.run([sys.executable, "-c", _DRY_RUN, "6"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "True"
    assert proc.stderr == "", proc.stderr


def test_deferred_counter_counts_without_drawing_here():
    """Where no bar is shown (pytest captures stderr), a ``DeferredCounter`` still counts every
    step, past its threshold too, and draws nothing."""
    counter = progress.DeferredCounter("steps", show_after=2, unit=" steps")
    for i in range(5):
        counter.update(f"step {i}")
    counter.close()
    assert counter.count == 5


def test_deferred_counter_that_cannot_draw_stops_drawing(monkeypatch):
    """A bar that fails to draw (a broken tqdm: faked here, tqdm itself swallows write errors)
    stops drawing instead of raising into the work it reports on (a dry run's server thread);
    the count goes on."""
    def broken_bar(*args, **kwargs):
        raise RuntimeError("a broken tqdm")

    monkeypatch.setattr(progress, "progress_bar", broken_bar)
    counter = progress.DeferredCounter("steps", show_after=1, unit=" steps")
    for _ in range(4):
        counter.update("x")
    counter.close()
    assert counter.count == 4
