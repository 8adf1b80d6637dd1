"""The ``cuda`` backend's registration and ``available()`` probe (CONTRACT.md section 8)."""

from __future__ import annotations

import pytest

import numba_cube as cube
from numba_cube.backends.cuda import PRIORITY
from numba_cube.backends.cuda.driver import probe
from numba_cube.runtime.registry import backend_infos


def test_cuda_is_registered_above_cpu():
    """``cuda`` is a registered backend whose priority beats ``cpu``'s, so ``cube.client()`` picks
    a GPU when one is present."""
    infos = backend_infos()
    assert "cuda" in cube.backends()
    assert infos["cuda"].priority == PRIORITY > infos["cpu"].priority


def test_probe_never_raises_and_says_why():
    """available() returns None or a reason, never raises, and the reason names what is
    missing (numba-cuda, cuda-python, a driver or a device)."""
    reason = probe.available()
    assert reason is None or isinstance(reason, str)
    if reason is not None:
        assert any(word in reason for word in ("numba-cuda", "cuda-python", "driver", "device", "CUDA"))


@pytest.mark.skipif(probe.simulating() or probe.device_count() > 0, reason="a GPU or the simulator is here")
def test_client_without_gpu_raises_backend_not_found_with_the_reason():
    """Without a GPU (and without the simulator) ``cube.client("cuda")`` raises BackendNotFound
    carrying the probe's reason, and ``cube.client()`` falls back to another backend."""
    with pytest.raises(cube.BackendNotFound, match="not available"):
        cube.client("cuda")
    assert infos_default_is_not_cuda()


def infos_default_is_not_cuda() -> bool:
    from numba_cube.runtime.registry import _default_device

    try:
        return _default_device() != "cuda"
    except cube.BackendNotFound:
        return True


def test_probe_reason_for_a_missing_driver_is_cached():
    """The probe is cheap after its first call: the answer is cached."""
    first = probe.available()
    assert probe.available() == first


def test_simulator_without_its_plugin_is_unavailable_and_says_how_to_install_it(tmp_path):
    """Under NUMBA_ENABLE_CUDASIM=1 the cuda backend is the cudasim plugin's simulator backend;
    with no such plugin (entry points off), available() and cube.client("cuda") say so with the
    command that installs it, and cube.client() picks another backend: nothing stands in for it."""
    import os
    import subprocess
    import sys

    pytest.importorskip("numba_cuda")
    program = tmp_path / "no_plugin.py"
    program.write_text(
        "import numba_cube as cube\n"
        "from numba_cube.backends.cuda.driver import probe\n"
        "print(probe.available())\n"
        "try:\n"
        "    cube.client('cuda')\n"
        "except cube.BackendNotFound as exc:\n"
        "    print('BackendNotFound', exc)\n"
        "print(cube.client().device)\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD="1")
    env.pop("NUMBA_CUBE_DEVICE", None)
    proc = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    reason, refusal, default = proc.stdout.strip().splitlines()[-3:]
    assert "pip install -e plugins/numba_cube_cudasim" in reason
    assert refusal.startswith("BackendNotFound") and "pip install -e plugins/numba_cube_cudasim" in refusal
    assert default == "cpu:0"
