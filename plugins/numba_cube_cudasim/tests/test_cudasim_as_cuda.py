"""numba_cube's own ``cuda`` backend under ``NUMBA_ENABLE_CUDASIM=1`` is this plugin's backend:
``cube.client("cuda")`` gets a server made by the plugin's factory under the name ``cuda:0``,
runs kernels as NumPy computes them and adopts ``numba.cuda.to_device`` arrays in place.

The simulator must be chosen before ``numba.cuda`` is first imported, so this runs in a fresh
interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import numba_cube_cudasim

pytestmark = pytest.mark.skipif(numba_cube_cudasim.available() is not None,
                                reason=str(numba_cube_cudasim.available()))

PLUGIN_ROOT = Path(numba_cube_cudasim.__file__).resolve().parents[1]

PROGRAM = '''
import json
import numpy as np
from numba import cuda
import numba_cube as cube
import numba_cube_cudasim
from numba_cube.plugins import get_plugin_manager

if "cudasim" not in cube.backends():      # a checkout without the plugin installed
    get_plugin_manager().register(numba_cube_cudasim, name="cudasim")

@cube.kernel
def scale(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]

client = cube.client("cuda")
x = np.arange(50.0)
out = client.empty(50)
client.launch(scale, 2, 32, 3.0, client.create(x), out)
device_out = cuda.to_device(np.zeros(50))
client.launch(scale, 2, 32, 2.0, client.create(x), device_out)
client.sync()
backend = type(client.server.mechanism.backend)
print(json.dumps({"device": client.device, "backend": f"{backend.__module__}.{backend.__qualname__}",
                  "out": client.read(out).tolist(), "device_out": device_out.copy_to_host().tolist()}))
'''


def test_core_cuda_under_the_simulator_is_this_backend(tmp_path):
    """Under NUMBA_ENABLE_CUDASIM=1, cube.client("cuda") is device cuda:0 on the plugin's
    SimulatorBackend, computes 3x as NumPy does, and writes a numba device array in place."""
    script = tmp_path / "as_cuda.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(PLUGIN_ROOT)] + inherited)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    x = [float(v) for v in range(50)]
    assert seen["device"] == "cuda:0"
    assert seen["backend"] == "numba_cube_cudasim.backend.SimulatorBackend"
    assert seen["out"] == [3.0 * v for v in x]
    assert seen["device_out"] == [2.0 * v for v in x]
