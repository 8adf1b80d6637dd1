"""``python -m numba_cube run`` (``numba_cube/cli_run.py``): a numba.cuda program, unchanged,
with numba.cuda served by numba_cube; argv, sys.path and the exit status are the program's."""

from __future__ import annotations

import os
import subprocess
import sys

_PROGRAM = '''
import sys
import numpy as np
from numba import cuda

@cuda.jit
def square(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = a[i] * a[i]

d = cuda.to_device(np.arange(5.0))
square[1, 32](d)
print(d.copy_to_host().tolist(), sys.argv[1:], cuda.get_current_device().name)
sys.exit(int(sys.argv[1]))
'''


def _run(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([sys.executable, "-m", "numba_cube", "run", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_script_runs_with_its_arguments_and_exit_status(tmp_path):
    """``run script.py 3 x`` runs the script with ``sys.argv[1:] == ["3", "x"]`` on the CPU
    backend and exits with the script's status."""
    script = tmp_path / "prog.py"
    script.write_text(_PROGRAM)
    out = _run(str(script), "3", "x")
    assert out.returncode == 3, out.stderr
    assert out.stdout.strip() == "[0.0, 1.0, 4.0, 9.0, 16.0] ['3', 'x'] numba_cube cpu:0"


def test_a_module_runs_with_dash_m_and_device(tmp_path):
    """``run --device cpu -m module args`` runs the module as ``__main__`` from the current
    folder (which is on sys.path, as for ``python -m``)."""
    (tmp_path / "progmod.py").write_text(_PROGRAM)
    out = _run("--device", "cpu", "-m", "progmod", "0", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "[0.0, 1.0, 4.0, 9.0, 16.0] ['0']" in out.stdout


def test_an_uncaught_exception_is_pythons_traceback_and_status_1(tmp_path):
    """The program's own error prints Python's traceback and exits 1, as ``python script.py``."""
    script = tmp_path / "boom.py"
    script.write_text("raise KeyError('boom')\n")
    out = _run(str(script))
    assert out.returncode == 1 and "Traceback" in out.stderr and "KeyError: 'boom'" in out.stderr


def test_a_bad_command_line_is_one_line_and_status_2(tmp_path):
    """No program, a missing script or an unknown option before it: one line, exit status 2."""
    for args in ((), (str(tmp_path / "missing.py"),), ("--frobnicate", "x.py")):
        out = _run(*args)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)


def test_the_simulator_switched_on_is_one_line_saying_so(tmp_path):
    """Under ``NUMBA_ENABLE_CUDASIM=1`` numba.cuda is the simulator's module, which the layer
    cannot serve: one line naming the variable, exit status 1."""

    script = tmp_path / "p.py"
    script.write_text("print('never')\n")
    out = subprocess.run([sys.executable, "-m", "numba_cube", "run", str(script)],
                         env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 1 and "NUMBA_ENABLE_CUDASIM" in out.stderr
    assert "never" not in out.stdout
    assert len(out.stderr.strip().splitlines()) == 1
