"""``python -m numba_cube translate FILE.py:KERNEL`` (``cli_translate.py``): the generated module
by default, the kernel's body after a named stage with ``--after``, optional passes switched off
with ``--without`` (the output then lacks what the pass adds), and bad names as one line with
exit status 1 naming what exists. Run as a real command in a fresh process, on the benchmark's
tiled matmul (a cube kernel with barriers whose guards the ``interior`` pass splits)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KERNEL = str(Path(__file__).parents[1] / "benchmarks" / "bench_kernels.py") + ":fast_matmul"


def _cli(tmp_path, *args):
    env = {**os.environ, "NUMBA_CUBE_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NUMBA_CUBE_DISABLE_PASSES", None)
    return subprocess.run([sys.executable, "-m", "numba_cube", "translate", *args],
                          capture_output=True, text=True, env=env, timeout=300)


def test_module_stage_and_a_pass_switched_off(tmp_path):
    """The default output is the generated module (its chunk function and entry points); after
    ``lower`` it is the lowered body (barriers as ``__syncthreads()``, no loops over units yet);
    ``--without interior`` gives a module without the interior cubes' flags, and the same
    module otherwise keeps its entry points."""
    module = _cli(tmp_path, KERNEL)
    assert module.returncode == 0, module.stderr
    assert "def fast_matmul__chunk(" in module.stdout and "def fast_matmul__ser(" in module.stdout
    assert "interior" in module.stdout
    lowered = _cli(tmp_path, KERNEL, "--after", "lower")
    assert lowered.returncode == 0, lowered.stderr
    assert "__syncthreads()" in lowered.stdout and "def " not in lowered.stdout
    without = _cli(tmp_path, KERNEL, "--without", "interior")
    assert without.returncode == 0, without.stderr
    assert "interior" not in without.stdout and "def fast_matmul__ser(" in without.stdout


def test_unknown_pass_stage_or_kernel_is_one_line(tmp_path):
    """A misspelt pass or stage, or a kernel that is not there, is one line on stderr naming
    what exists, exit status 1, no traceback."""
    for args, words in (((KERNEL, "--without", "intrior"), "interior"),
                        ((KERNEL, "--after", "lowr"), "lockstep"),
                        ((KERNEL.replace("fast_matmul", "no_such_kernel"),), "no_such_kernel")):
        done = _cli(tmp_path, *args)
        assert done.returncode == 1, (args, done.stderr)
        assert words in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
