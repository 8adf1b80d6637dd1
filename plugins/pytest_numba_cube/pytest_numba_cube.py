"""The pytest hook of the drop-in layer: ``NUMBA_CUBE_INSTALL=cpu pytest ...`` runs a test suite
written against numba.cuda with numba.cuda served by numba_cube (``pytest11`` entry point of the
``pytest-numba-cube`` distribution: its own, so that pytest rewrites this module's assertions and
not all of numba_cube's).

Loaded by every pytest session where numba_cube is installed, so with the variable unset it does
nothing and imports nothing (no Numba): a variable read and a dictionary lookup. Set, it installs
the layer on that device before collection (``pytest_configure``), so test modules see the layer
whether they did ``from numba import cuda`` at import or inside a test.

Why its own variable and not ``NUMBA_CUBE_DEVICE``: that one picks ``cube.client()``'s device, and
users set it for that alone (numba_cube's own test suite, on a GPU machine, with
``NUMBA_CUBE_DEVICE=cuda``); replacing numba.cuda in every pytest session that has it set would
change what those sessions test.

numba-cuda's test classes (``numba.cuda.testing.CUDATestCase``) ask for a fixture that numba-cuda's
own conftest defines and its wheel does not ship; while the layer is installed this plugin
defines it, and answers numba-cuda's probe for the CUDA toolkit's device runtime library, so
numba-cuda's shipped tests (``numba/cuda/tests/doc_examples``) run as they are.
"""

from __future__ import annotations

import os
import sys

VARIABLE = "NUMBA_CUBE_INSTALL"


def pytest_configure(config):
    device = os.environ.get(VARIABLE)
    if device:
        import numba_cube

        numba_cube.install(device)
    installer = sys.modules.get("numba_cube.dropin.install")    # (set up by `run` too)
    if installer is not None and installer.installed_device() is not None:
        config.pluginmanager.register(_NumbaCudaTestSupport(), "numba_cube_dropin_support")
        _answer_toolkit_probes()


def _answer_toolkit_probes() -> None:
    """numba-cuda's test helpers look for the CUDA toolkit's device runtime library (cudadevrt,
    which grid synchronization links on a GPU) when a test module is imported; numba_cube runs
    ``this_grid().sync()`` without it, so the probe answers "present" under the layer."""
    testing = sys.modules.get("numba.cuda.testing")
    if testing is None:
        import importlib

        try:
            testing = importlib.import_module("numba.cuda.testing")
        except ImportError:         # its test requirements (filecheck) are not installed
            return
    if hasattr(testing, "cudadevrt_missing"):
        testing.cudadevrt_missing = lambda: False


class _NumbaCudaTestSupport:
    """What numba-cuda's own conftest gives its test classes."""

    import pytest as _pytest

    @_pytest.fixture(scope="class")
    def initialize_from_pytest_config(self, request):
        if request.cls is not None:
            request.cls._dump_failed_filechecks = False
