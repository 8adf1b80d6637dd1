"""The ``cudasim`` client the plugin's tests share: through the installed entry point, else with
the plugin module registered by hand (tests run from a checkout without
``pip install -e plugins/numba_cube_cudasim``)."""

from __future__ import annotations

import pytest

import numba_cube as cube
import numba_cube_cudasim
from numba_cube.plugins import get_plugin_manager


@pytest.fixture(scope="module")
def sim():
    pm = get_plugin_manager()
    registered = None
    if "cudasim" not in cube.backends():
        registered = pm.register(numba_cube_cudasim, name="cudasim")
    yield cube.client("cudasim")
    if registered is not None:
        pm.unregister(name=registered)   # its backend and devices go with it
