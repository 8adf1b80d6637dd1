"""One GPU's primary context, and what breaks it: the CUDA mechanism's first dependency.

Every operation makes the device's primary context current on the calling thread if it is not
(``activate``: one ``cuCtxGetCurrent`` per operation): threads start with no context, and other
libraries switch contexts on multi-GPU machines.

Faults. A launch the driver refuses (too many threads per block for this kernel, too much shared
memory) raises from ``cuLaunchKernel`` inside the execute scope: a failure recorded on its write
set (``LaunchFailure`` on read), nothing else is affected. A *sticky* fault (an illegal address in
a kernel) breaks the whole CUDA context: ``is_device_fault`` says so, the policy server keeps it
as its fault and ``sync()`` raises ``DeviceFault``. What survives it: nothing on this device.
Every later driver call in the context fails the same way, so later launches fail their write
sets with the fault as root cause, reads raise ``DeviceFault``, and the memory is lost; the
process must restart to use this GPU again (the primary context is shared with numba-cuda, CuPy
and PyTorch, which are broken the same way). Other devices (``cuda:1``, ``cpu``) and their buffers
are unaffected.
"""

from __future__ import annotations

import logging

from numba_cube.errors import BackendNotFound, DeviceFault
from numba_cube.backends.cuda.driver.driver import Driver
from numba_cube.backends.cuda.driver.errors import CudaError

__all__ = ["CudaContext"]

log = logging.getLogger("numba_cube")


class CudaContext:
    """Device ``index`` of ``driver``: its primary context made current, and its attributes."""

    def __init__(self, driver: Driver, index: int, device: str):
        self.driver = driver
        self.index = index
        self.device = device            # "cuda:0": how messages name it
        driver.init()
        count = driver.device_count()
        if not 0 <= index < count:
            raise BackendNotFound(f"{device}: this machine has {count} CUDA device(s)")
        self._dev = driver.device(index)
        self._ctx = driver.primary_context(self._dev)
        self._ctx_int = int(self._ctx)
        self._get_current = driver.api.cuCtxGetCurrent
        self._success = driver.SUCCESS
        self.activate()
        self.device_name = driver.device_name(self._dev)
        self.sm_count = driver.device_attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT", self._dev)
        # What one cube may have with the opt-in attribute (PackedLaunch.opt_in): the client
        # refuses a dynamic size above it, the launch one whose static part leaves too little.
        self.max_shared_bytes = driver.device_attribute(
            "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", self._dev)

    def activate(self) -> None:
        """Make this device's primary context current on the calling thread (if it is not)."""
        err, cur = self._get_current()
        if err != self._success:
            raise self.driver.error("cuCtxGetCurrent", err)
        if int(cur) != self._ctx_int:
            self.driver.set_current(self._ctx)

    def is_device_fault(self, exc: BaseException) -> bool:
        """A driver error that is not sticky leaves the context usable (it was recorded where it
        happened); anything else breaks the device."""
        if isinstance(exc, CudaError) and not exc.sticky:
            log.warning("numba_cube: %s on %s (not a sticky fault)", exc, self.device)
            return False
        return True

    def synchronize(self) -> None:
        """Wait for all work in the context; raises the ``CudaError`` the context reports."""
        self.activate()
        self.driver.ctx_synchronize()

    def raised(self, exc: CudaError, mark_broken) -> BaseException:
        """What an operation raises for a driver error: a sticky one breaks the device
        (``mark_broken(exc)``) and becomes ``DeviceFault``; another is raised as it is."""
        if exc.sticky:
            mark_broken(exc)
            err = DeviceFault(f"device {self.device} is broken: {exc}")
            err.__cause__ = exc
            return err
        return exc
