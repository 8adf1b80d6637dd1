"""The pytest hook (``pytest_numba_cube``, loaded through its ``pytest11`` entry point):
``NUMBA_CUBE_INSTALL=cpu`` installs the layer in a pytest session; unset, loading the plugin
imports no Numba, and no module of numba_cube is assertion-rewritten."""

from __future__ import annotations

import os
import subprocess
import sys

_TEST = '''
import numpy as np
from numba import cuda

def test_served():
    d = cuda.to_device(np.arange(3.0))
    assert type(d).__module__ == "numba_cube.dropin.devicearray"
'''


def _pytest(tmp_path, env):
    (tmp_path / "test_served.py").write_text(_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_the_variable_installs_the_layer_in_the_session(tmp_path):
    """With ``NUMBA_CUBE_INSTALL=cpu`` a test that imported numba.cuda gets the layer's arrays."""
    out = _pytest(tmp_path, {**os.environ, "NUMBA_CUBE_INSTALL": "cpu"})
    assert out.returncode == 0, out.stdout + out.stderr


def test_unset_the_plugin_installs_nothing_and_imports_no_numba(tmp_path):
    """Without the variable the same test sees numba-cuda's own ``to_device`` (no GPU here:
    it fails), and importing the plugin module loads no Numba."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CUBE_INSTALL"}
    out = _pytest(tmp_path, env)
    assert out.returncode != 0 and "numba_cube.dropin.devicearray" not in out.stdout
    probe = subprocess.run([sys.executable, "-c", "import sys, pytest_numba_cube\n"
                            "print('numba' in sys.modules)"], env=env, capture_output=True,
                           text=True, timeout=120)
    assert probe.stdout.strip() == "False", probe.stderr


def test_the_hook_is_an_entry_point_and_numba_cube_is_not_rewritten(tmp_path):
    """pytest loads the hook from its entry point, and numba_cube's modules keep their own
    assertions: no pytest helper name lands in numba_cube's namespace."""
    (tmp_path / "test_probe.py").write_text(
        "import numba_cube\n"
        "def test_probe(pytestconfig):\n"
        "    assert pytestconfig.pluginmanager.has_plugin('numba_cube')\n"
        "    assert not [n for n in vars(numba_cube) if n.startswith('@')]\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
