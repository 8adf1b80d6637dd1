"""Can the CUDA backend start here, and on what: the ``available()`` probe and the mode switch.

``available()`` answers ``None`` (it can) or a sentence saying why not: numba-cuda missing,
cuda-python missing, no driver, no device. It never raises, and it is cheap after the first call
(the answer is cached: drivers and devices do not appear in a running process).

Under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``, how CI runs the CUDA tests without a
GPU) the ``cuda`` backend is the simulator, as it is for numba.cuda itself: ``cuda.is_available()``
is true there too. So ``cube.client()`` picks the simulated device when that variable is set,
which is what a user who set it for numba.cuda expects; it never touches the driver then. The
simulator's mechanism is a plugin's (``plugins/numba_cube_cudasim``, registered as
``cudasim``), found through the backend registry (``simulator_backend``); without it, ``cuda`` is
unavailable under the simulator with the command that installs it, rather than anything else
standing in for it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading

__all__ = ["simulating", "available", "device_count", "reset", "simulator_backend",
           "SIMULATOR_BACKEND", "SIMULATOR_INSTALL_HINT"]

INSTALL_HINT = "pip install 'numba_cube[cuda]' (numba-cuda, cuda-python, numpy<2.5)"
#: The registered backend whose mechanism ``cuda`` is under the simulator, and its plugin.
SIMULATOR_BACKEND = "cudasim"
SIMULATOR_INSTALL_HINT = "pip install -e plugins/numba_cube_cudasim"

_lock = threading.Lock()
_probe: tuple | None = None  # (reason or None, device count)


def simulating() -> bool:
    """Whether numba.cuda is (or will be, once imported) numba-cuda's simulator."""
    mod = sys.modules.get("numba.cuda")
    if mod is not None:
        config = getattr(mod, "config", None)
        if config is not None and hasattr(config, "ENABLE_CUDASIM"):
            return bool(config.ENABLE_CUDASIM)
    raw = os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip()
    try:
        return int(raw) != 0
    except ValueError:
        return False


def simulator_backend() -> tuple:
    """``(BackendInfo, None)`` for the backend that runs ``cuda`` under the simulator, or
    ``(None, why not)``: its plugin is not installed, or it cannot start."""
    from numba_cube.runtime.registry import backend_infos   # here: the registry sits above the backends

    info = backend_infos().get(SIMULATOR_BACKEND)
    if info is None:
        return None, (f"NUMBA_ENABLE_CUDASIM is set, and the CUDA simulator backend is the "
                      f"{SIMULATOR_BACKEND!r} plugin, which is not installed: "
                      f"{SIMULATOR_INSTALL_HINT}")
    reason = info.unavailable_reason()
    if reason is not None:
        return None, (f"NUMBA_ENABLE_CUDASIM is set, and the {SIMULATOR_BACKEND!r} backend is not "
                      f"available: {reason}")
    return info, None


def _find(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _probe_driver() -> tuple:
    if not _find("numba_cuda"):
        return f"numba-cuda is not installed: {INSTALL_HINT}", 0
    if not (_find("cuda.bindings") or _find("cuda.cuda")):
        return f"cuda-python (cuda-bindings) is not installed: {INSTALL_HINT}", 0
    try:
        from numba_cube.backends.cuda.driver.driver import Driver

        drv = Driver()
    except Exception as exc:  # noqa: BLE001 - the probe never raises
        return f"cuda-python cannot be loaded: {type(exc).__name__}: {exc}", 0
    try:
        err = drv.api.cuInit(0)[0]
    except Exception as exc:  # noqa: BLE001 - e.g. libcuda.so not found
        return f"no CUDA driver: {type(exc).__name__}: {exc}", 0
    if err != drv.SUCCESS:
        name = getattr(err, "name", str(err))
        if name == "CUDA_ERROR_NO_DEVICE":
            return "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)", 0
        return f"the CUDA driver failed to initialise: cuInit returned {name}", 0
    try:
        count = drv.device_count()
    except Exception as exc:  # noqa: BLE001
        return f"cannot count CUDA devices: {exc}", 0
    if count < 1:
        return "no CUDA device", 0
    return None, count


def _probed() -> tuple:
    global _probe
    with _lock:
        if _probe is None:
            try:
                _probe = _probe_driver()
            except Exception as exc:  # noqa: BLE001 - belt and braces: never raise
                _probe = (f"CUDA probe failed: {type(exc).__name__}: {exc}", 0)
        return _probe


def available() -> str | None:
    """``None`` when ``cube.client("cuda")`` can start, else why not. Never raises."""
    try:
        if simulating():
            if not _find("numba_cuda"):
                return f"NUMBA_ENABLE_CUDASIM is set but numba-cuda is not installed: {INSTALL_HINT}"
            return simulator_backend()[1]
        return _probed()[0]
    except Exception as exc:  # noqa: BLE001
        return f"CUDA probe failed: {type(exc).__name__}: {exc}"


def device_count() -> int:
    """How many real GPUs the driver sees (0 without a driver or under the simulator)."""
    if simulating():
        return 0
    return _probed()[1]


def reset() -> None:
    """Forget the cached probe (tests)."""
    global _probe
    with _lock:
        _probe = None
