"""Collection rules of the CUDA backend's tests.

``cases/`` holds the CUDA test cases proper. They run against whatever ``cube.client("cuda")`` is
in the process that collects them, so the same files serve three ways (see
``cases/conftest.py``):

- on a machine with a GPU: for real (the main session collects them);
- under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``): how CI runs them without a GPU;
- against the fake driver (``NUMBA_CUBE_TEST_CUDA_DEVICE=fakecuda``): the GPU path's own code
  (packed launches, events, graphs, ...) on host memory.

The main test session sets neither variable, so without a GPU it does not collect ``cases/``:
``test_simulator_suite.py`` runs them in subprocesses with the variables set instead (the
simulator must be chosen before numba.cuda is imported, which pytest has long done by then).
"""

from __future__ import annotations

import os

from numba_cube.backends.cuda.driver import probe

collect_ignore: list[str] = []


def gpu_present() -> bool:
    """A real GPU this process can use (never true under the simulator)."""
    return not probe.simulating() and probe.device_count() > 0


if not (probe.simulating() or os.environ.get("NUMBA_CUBE_TEST_CUDA_DEVICE") or gpu_present()):
    collect_ignore.append("cases")
