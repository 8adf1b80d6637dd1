"""Putting the layer on ``numba.cuda`` and taking it away (``numba_cube/dropin/install.py``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import numba_cube as cube


def test_uninstall_restores_numba_cudas_own_objects():
    """After ``uninstall`` every served and refused name is numba-cuda's object again, and
    numba-cuda's internal ``get_context`` and numba's ``vectorize(target="cuda")`` builder too;
    ``installed_device`` says which device serves."""
    import numba.cuda as cuda_module
    from numba.cuda.cudadrv import devices

    from numba.np.ufunc.decorators import Vectorize

    before = {n: getattr(cuda_module, n) for n in ("jit", "to_device", "compile_ptx", "gpus")}
    get_context = devices.get_context
    builders = (dict(Vectorize.target_registry), dict(Vectorize.target_registry.ondemand))
    cube.install("cpu")
    try:
        assert cube.dropin.installed_device() == "cpu:0"
        assert cuda_module.to_device is not before["to_device"]
        assert devices.get_context is not get_context
    finally:
        cube.uninstall()
    assert {n: getattr(cuda_module, n) for n in before} == before
    assert devices.get_context is get_context and cube.dropin.installed_device() is None
    assert (dict(Vectorize.target_registry), dict(Vectorize.target_registry.ondemand)) == builders


def test_code_that_imported_cuda_before_the_install_sees_the_layer():
    """``from numba import cuda`` before ``install`` looks names up at call time: it gets the
    layer (in a fresh process, so nothing else in this session is touched)."""
    code = ("import numpy as np\nfrom numba import cuda\nimport numba_cube\n"
            "numba_cube.install('cpu')\n"
            "@cuda.jit\ndef k(a):\n    a[cuda.grid(1)] += 1\n"
            "d = cuda.to_device(np.zeros(4))\nk[1, 4](d)\nprint(d.copy_to_host().tolist())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1.0, 1.0, 1.0, 1.0]"


def test_install_is_refused_under_the_simulator():
    """Under numba-cuda's simulator ``numba.cuda`` is another module: install says so."""
    code = "import numba_cube\nnumba_cube.install('cpu')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert out.returncode != 0 and "NUMBA_ENABLE_CUDASIM" in out.stderr


def test_an_unknown_device_is_the_registrys_error():
    """``install("nodevice")`` is BackendNotFound, and leaves numba.cuda as it was."""
    import numba.cuda as cuda_module

    jit = cuda_module.jit
    with pytest.raises(cube.BackendNotFound):
        cube.install("nodevice")
    assert cuda_module.jit is jit


def test_installing_twice_then_uninstalling_restores_the_originals():
    """A second ``install`` keeps numba-cuda's originals (not the layer's own objects), so one
    ``uninstall`` restores them; ``uninstall`` without an install does nothing."""
    import numba.cuda as cuda_module

    jit = cuda_module.jit
    cube.uninstall()
    cube.install("cpu")
    cube.install("cpu:0")
    cube.uninstall()
    assert cuda_module.jit is jit and cube.dropin.installed_device() is None
