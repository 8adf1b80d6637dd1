"""What a dry run buys (issue 5).

1. First real launch of a fresh kernel, with and without a dry run before it, in one process
   (goal: at least 10x faster after the dry run: the dry run did the compiling).
2. First launch in a *new process* with a warm on-disk cache (generated module + Numba's cache)
   against a cold one (empty cache directory).

Run: ``python benchmarks/bench_launch_modes.py``
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from common import Table

KERNEL_SOURCE = """from numba import cuda
SALT = {salt!r}


def saxpy_{tag}(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + y[i] + SALT
"""

CHILD = """
import time, importlib.util, pathlib
import numpy as np
t0 = time.perf_counter()
import numba_cube as cube
path = pathlib.Path({tmp!r}) / "k_{tag}.py"
path.write_text({source!r})
spec = importlib.util.spec_from_file_location("k_{tag}", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
k = cube.kernel(getattr(mod, "saxpy_{tag}"))
c = cube.client("cpu")
x, y = c.create(np.ones(1 << 16)), c.create(np.zeros(1 << 16))
if {mode!r} == "dry":
    with cube.dry_run():
        c.launch(k, 256, 256, 2.0, x, y)
    c.sync()
t1 = time.perf_counter()
c.launch(k, 256, 256, 2.0, x, y)
c.read(y)
t2 = time.perf_counter()
print("FIRST", t2 - t1, "TOTAL", t2 - t0)
"""


def run_child(mode: str, cache_dir: str, tag: str, salt: float, tmp: str) -> dict:
    env = {**os.environ, "NUMBA_CUBE_CACHE_DIR": cache_dir}
    source = KERNEL_SOURCE.format(salt=salt, tag=tag)
    code = CHILD.format(tag=tag, mode=mode, tmp=tmp, source=source)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr)
    parts = out.stdout.split()
    return {"first": float(parts[parts.index("FIRST") + 1]), "total": float(parts[parts.index("TOTAL") + 1])}


def main():
    t = Table("launch modes: what a dry run and the disk cache buy")
    with tempfile.TemporaryDirectory() as tmp:
        salt = time.time()
        # Same process: a dry run first (its own time excluded), then the timed first real launch.
        cold = run_child("plain", os.path.join(tmp, "c1"), "a", salt, tmp)
        dry = run_child("dry", os.path.join(tmp, "c2"), "b", salt, tmp)
        t.row("first real launch after a dry run", dry["first"], cold["first"],
              "first launch without one", goal=0.1)
        # New process, same kernel source, warm cache dir (c1 was filled by the first child).
        warm = run_child("plain", os.path.join(tmp, "c1"), "a", salt, tmp)
        t.row("first launch, new process, warm disk cache", warm["first"], cold["first"],
              "cold cache (empty dir)")
        t.row("whole process (import+create+launch), warm", warm["total"], cold["total"], "cold")


if __name__ == "__main__":
    main()
