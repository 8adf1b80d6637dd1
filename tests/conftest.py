"""Test-session setup shared by every test directory.

Generated CPU kernels and autotune results go to a cache directory inside pytest's own cache
folder rather than the user's ``~/.cache/numba_cube``: tests must not leave files in a user's home,
and subprocesses that tests start inherit the variable, so they share the session's compiled
kernels. A caller that sets ``NUMBA_CUBE_CACHE_DIR`` keeps its own.
"""

from __future__ import annotations

import os
from pathlib import Path

_cache = Path(__file__).resolve().parent.parent / ".pytest_cache" / "numba_cube"
_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
os.environ.setdefault("NUMBA_CUBE_CACHE_DIR", str(_cache))
