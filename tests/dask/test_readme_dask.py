"""README.md's "On a Dask cluster" block runs as written: a script of its own (its kernels in
``__main__``, so they reach the worker processes by value with their source) on a two-process
local cluster, printing equal sums."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _section_block() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## On a Dask cluster\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_dask_block_runs_as_written(tmp_path):
    """The block exits 0 and its last line prints the kernels' sum next to Dask's own."""
    script = tmp_path / "readme_dask.py"
    script.write_text(_section_block())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=240, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    ours, reference = map(float, proc.stdout.strip().splitlines()[-1].split())
    assert abs(ours - reference) <= 1e-9 * abs(reference)
