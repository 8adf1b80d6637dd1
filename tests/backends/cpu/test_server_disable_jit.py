"""``NUMBA_DISABLE_JIT=1`` and the CPU backend (backends/cpu/server.py): the CPU backend compiles
kernels with ``numba.njit``, which that variable turns off, so a launch fails with a
``CompileError`` naming the variable and what to do, not an ``AttributeError`` from deep inside;
and nothing else breaks (the buffer the failed launch writes carries the failure). Run in a fresh
interpreter: Numba reads the variable once, at import.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

_PROGRAM = textwrap.dedent("""
    import numpy as np
    from numba import cuda
    import numba_cube as cube

    @cube.kernel
    def add_one(a):
        i = cuda.grid(1)
        if i < a.shape[0]:
            a[i] += 1

    client = cube.client("cpu")
    h = client.create(np.zeros(4))
    client.launch(add_one, 1, 32, h)
    try:
        client.read(h)
    except cube.LaunchFailure as exc:
        print("FAILED", type(exc).__name__, str(exc))
    print("CREATED", np.asarray(client.create(np.arange(3.0))).tolist())
""")


def test_disable_jit_is_a_compile_error_naming_the_variable():
    """With NUMBA_DISABLE_JIT=1 a CPU launch fails as a CompileError naming NUMBA_DISABLE_JIT and
    the simulator; buffers still work (create and read give NumPy's values back)."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    done = subprocess.run([sys.executable, "-c", _PROGRAM], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    failed = next(line for line in done.stdout.splitlines() if line.startswith("FAILED"))
    assert "CompileError" in failed and "NUMBA_DISABLE_JIT=1" in failed
    assert "NUMBA_ENABLE_CUDASIM=1" in failed
    assert "has no attribute 'compile'" not in failed
    assert "CREATED [0.0, 1.0, 2.0]" in done.stdout
