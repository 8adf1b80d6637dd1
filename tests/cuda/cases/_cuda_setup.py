"""Which CUDA mechanism the cases run on (imported by ``conftest.py`` and the case files).

``KIND`` is one of:

- ``"gpu"``: ``cube.client("cuda")`` on a real GPU;
- ``"sim"``: ``cube.client("cuda")`` under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``);
- ``"fake"``: the GPU path (``CudaMechanism``) over the fake driver of ``_cuda_fake.py``
  (``NUMBA_CUBE_TEST_CUDA_DEVICE=fakecuda``).

A test that pins a contract of one mechanism only skips itself on the others, with the reason.
"""

from __future__ import annotations

import os

import pytest

from numba_cube.backends.cuda.driver import probe

DEVICE = os.environ.get("NUMBA_CUBE_TEST_CUDA_DEVICE", "cuda")
if DEVICE == "fakecuda":
    KIND = "fake"
    from _cuda_fake import register_fake_cuda

    FAKE_API = register_fake_cuda("fakecuda", devices=2)
elif probe.simulating():
    KIND = "sim"
    FAKE_API = None
else:
    KIND = "gpu"
    FAKE_API = None


def device_count() -> int:
    if KIND == "fake":
        return FAKE_API.devices
    if KIND == "sim":
        return 2          # the simulator backend accepts any index
    return probe.device_count()


def only(*kinds: str, why: str = ""):
    """Skip unless running on one of ``kinds``."""
    label = "/".join(kinds)
    return pytest.mark.skipif(KIND not in kinds, reason=f"only on {label}" + (f": {why}" if why else ""))
