"""``numba.cuda.random`` through the layer: numba-cuda's own Python (``create_xoroshiro128p_states``
calls ``cuda.device_array`` and ``copy_to_device``; the draws are device functions) runs unchanged,
and the states and uniform draws are bit-identical to numba-cuda's simulator's for the same
program. (The normal draws do not compile on the CPU backend yet: the translator's inlined copy
of ``xoroshiro128p_normal_*`` misses the module's ``np``; a CompileError, never other numbers.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

_PROGRAM = r"""
import json
import numpy as np
from numba import cuda
from numba.cuda.random import (create_xoroshiro128p_states, xoroshiro128p_uniform_float32,
                               xoroshiro128p_uniform_float64)

@cuda.jit
def draw(states, f32, f64):
    i = cuda.grid(1)
    if i < f32.shape[0]:
        for j in range(f32.shape[1]):
            f32[i, j] = xoroshiro128p_uniform_float32(states, i)
            f64[i, j] = xoroshiro128p_uniform_float64(states, i)

states = create_xoroshiro128p_states(48, seed=7, subsequence_start=3)
f32 = cuda.device_array((48, 3), np.float32)
f64 = cuda.device_array((48, 3), np.float64)
draw[2, 32](states, f32, f64)
s = states.copy_to_host()
print(json.dumps({"f32": f32.copy_to_host().tolist(), "f64": f64.copy_to_host().tolist(),
                  "s0": [int(v) for v in s["s0"]], "s1": [int(v) for v in s["s1"]]}))
"""


def test_states_and_uniform_draws_are_the_simulators(tmp_path):
    """The same program under the simulator and under ``run`` prints the same states and the
    same float32 and float64 uniform draws, bit for bit."""
    script = tmp_path / "rng.py"
    script.write_text(_PROGRAM)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    ref = subprocess.run([sys.executable, "-W", "ignore", str(script)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr[-2000:]
    env.pop("NUMBA_ENABLE_CUDASIM")
    ours = subprocess.run([sys.executable, "-W", "ignore", "-m", "numba_cube", "run", str(script)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert json.loads(ours.stdout) == json.loads(ref.stdout)
