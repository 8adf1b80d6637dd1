"""Test-session setup shared by every test directory.

Generated CPU kernels and autotune results go to a cache directory inside pytest's own cache
folder rather than the user's ``~/.cache/numba_cube``: tests must not leave files in a user's home,
and subprocesses that tests start inherit the variable, so they share the session's compiled
kernels. A caller that sets ``NUMBA_CUBE_CACHE_DIR`` keeps its own. ``run_script`` runs a script
in a new process (what a process reads at its first compile is only seen there).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

_cache = Path(__file__).resolve().parent.parent / ".pytest_cache" / "numba_cube"
_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
os.environ.setdefault("NUMBA_CUBE_CACHE_DIR", str(_cache))


@pytest.fixture
def run_script(tmp_path):
    """``run_script(script, *argv, env={...}, timeout=600)``: run ``script`` (Python source) in a
    new process, with ``env`` added to this one's environment; assert it exited 0 and return the
    last line it printed. For tests of what a process reads at its first compile (caches)."""
    def run(script: str, *argv: str, env: dict | None = None, timeout: float = 600) -> str:
        path = tmp_path / f"script_{hashlib.sha256(script.encode()).hexdigest()[:12]}.py"
        path.write_text(script)
        done = subprocess.run([sys.executable, str(path), *argv], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})})
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip().splitlines()[-1]
    return run
