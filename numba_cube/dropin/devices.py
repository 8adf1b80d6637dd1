"""numba.cuda's devices and contexts, for the one device the layer serves.

numba.cuda programs ask which GPU they run on (``cuda.gpus``, ``get_current_device()``), select
one, read its limits to size launches, and ask the context for free memory. Under the layer there
is one device, named after the numba_cube device (``"numba_cube cpu:0"``), whose attributes are
CUDA's launch limits (which numba_cube enforces on every backend: CONTRACT.md section 4.3) and the
common figures of a recent GPU; ``compute_capability`` is (9, 0), so code that checks for a
feature level (``cc >= (6, 0)``) takes the path numba_cube's dialect supports. Memory figures are
the host's (on the CPU backend device memory is host memory).
"""

from __future__ import annotations

import os
from collections import namedtuple

from ..errors import UnsupportedAPIError
from .state import layer_client
from .streams import default_stream, synchronize

__all__ = ["Device", "Context", "gpus", "list_devices", "select_device", "get_current_device",
           "current_context", "is_available", "detect", "close", "MemoryInfo",
           "is_supported_version", "profile_start", "profile_stop", "defer_cleanup",
           "is_float16_supported", "is_bfloat16_supported", "is_fp8_supported", "cuda_error"]

MemoryInfo = namedtuple("MemoryInfo", ["free", "total"])

#: CUDA's limits (numba_cube enforces them on every backend) and a recent GPU's common figures
_ATTRIBUTES = {
    "MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024,
    "MAX_BLOCK_DIM_Z": 64, "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535,
    "MAX_GRID_DIM_Z": 65535, "MAX_SHARED_MEMORY_PER_BLOCK": 48 * 1024, "WARP_SIZE": 32,
    "MAX_REGISTERS_PER_BLOCK": 65536, "MAX_THREADS_PER_MULTI_PROCESSOR": 2048,
    "TOTAL_CONSTANT_MEMORY": 65536, "ASYNC_ENGINE_COUNT": 2, "UNIFIED_ADDRESSING": 1,
    "CAN_MAP_HOST_MEMORY": 1, "CONCURRENT_KERNELS": 1, "COMPUTE_MODE": 0, "ECC_ENABLED": 0,
    "PCI_BUS_ID": 0, "PCI_DEVICE_ID": 0, "PCI_DOMAIN_ID": 0, "MANAGED_MEMORY": 1,
    "COOPERATIVE_LAUNCH": 1, "CONCURRENT_MANAGED_ACCESS": 1,
}


class Device:
    """The layer's one device."""

    id = 0
    compute_capability = (9, 0)

    def __init__(self):
        for name, value in _ATTRIBUTES.items():
            setattr(self, name, value)
        self.MULTIPROCESSOR_COUNT = os.cpu_count() or 1

    @property
    def name(self) -> str:
        return f"numba_cube {layer_client().device}"

    @property
    def uuid(self) -> str:
        return "GPU-00000000-0000-0000-0000-000000000000"

    def get_device_identity(self) -> dict:
        return {"pci_domain_id": 0, "pci_bus_id": 0, "pci_device_id": 0}

    def reset(self) -> None:
        synchronize()

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<CUDA device {self.id} '{self.name}'>"


_DEVICE = Device()


class _Deallocations:
    """numba's queue of pending frees: numba_cube frees memory itself (CONTRACT.md section 3)."""

    def clear(self) -> None:
        """numba frees what is pending; numba_cube has nothing pending to free on request."""

    def __len__(self) -> int:
        return 0


class Context:
    """numba's context of the layer's device."""

    device = _DEVICE
    deallocations = _Deallocations()

    def get_memory_info(self) -> MemoryInfo:
        """``(free, total)`` bytes of host memory (the CPU backend's device memory)."""
        page = os.sysconf("SC_PAGE_SIZE")
        total = page * os.sysconf("SC_PHYS_PAGES")
        try:
            free = page * os.sysconf("SC_AVPHYS_PAGES")
        except (ValueError, OSError):
            free = total
        return MemoryInfo(free, total)

    def synchronize(self) -> None:
        synchronize()

    def reset(self) -> None:
        synchronize()

    def get_default_stream(self):
        return default_stream()

    def memalloc(self, nbytes):
        raise UnsupportedAPIError("Context.memalloc (raw device memory)",
                                  "allocate arrays with cuda.device_array(shape, dtype)")


_CONTEXT = Context()


class _DeviceList:
    """``cuda.gpus``: the one device; ``with cuda.gpus[0]:`` selects it."""

    def __getitem__(self, index):
        if index not in (0, -1):
            raise IndexError(f"numba_cube serves one device (0), not {index}")
        return _DEVICE

    def __len__(self) -> int:
        return 1

    def __iter__(self):
        return iter([_DEVICE])

    @property
    def current(self) -> Device:
        return _DEVICE

    def __repr__(self) -> str:
        return f"<numba_cube device list: {_DEVICE!r}>"


gpus = _DeviceList()


def list_devices() -> list:
    return [_DEVICE]


def select_device(device_id: int) -> Device:
    return gpus[device_id]


def get_current_device() -> Device:
    return _DEVICE


def current_context(devnum=None) -> Context:
    if devnum not in (None, 0):
        raise IndexError(f"numba_cube serves one device (0), not {devnum}")
    return _CONTEXT


def is_available() -> bool:
    return True


def is_supported_version() -> bool:
    return True


def is_float16_supported() -> bool:
    """``float16`` and ``cuda.fp16`` run on every numba_cube backend (numba-cuda's rounding)."""
    return True


def is_bfloat16_supported() -> bool:
    """False: programs take their path without ``bfloat16`` (the CPU translator has none)."""
    return False


def is_fp8_supported() -> bool:
    """False: programs take their path without FP8 types."""
    return False


def cuda_error():
    """None: the layer's device initialised without an error."""
    return None


def detect() -> bool:
    """Print the device, as numba's ``detect`` does; True."""
    print("Found 1 CUDA devices")
    print(f"id 0    b'{_DEVICE.name}'                              [SUPPORTED]")
    print(f"                      Compute Capability: {_DEVICE.compute_capability[0]}."
          f"{_DEVICE.compute_capability[1]}")
    print("Summary:\n\t1/1 devices are supported")
    return True


def close() -> None:
    """numba closes the context; here: wait for the device's work."""
    synchronize()


def profile_start() -> None:
    """numba starts the CUDA profiler; no profiler is attached here."""


def profile_stop() -> None:
    """numba stops the CUDA profiler; no profiler is attached here."""


class _DeferCleanup:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


def defer_cleanup() -> _DeferCleanup:
    """numba defers freeing device memory inside the block; numba_cube frees memory only when no
    stream uses it anyway."""
    return _DeferCleanup()
