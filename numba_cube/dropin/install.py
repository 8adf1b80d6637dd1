"""Putting the layer in place on the imported ``numba.cuda`` module, and taking it away.

``install(device)`` makes the layer's client (``cube.client(device, **options)``) and sets the
attributes of ``numba.cuda`` that ``exports.py`` classes as served (the layer's objects) or refused
(functions raising ``UnsupportedAPIError``), keeping numba-cuda's originals; ``uninstall()`` puts
them back. Code that did ``from numba import cuda`` before the install sees the layer, because it
looks ``cuda.to_device`` up at call time; a name imported by value before the install
(``from numba.cuda import to_device``) keeps numba-cuda's object, so ``python -m numba_cube run``
installs before the program's first line.

On a CUDA device numba-cuda's devices and contexts stay its own (the GPU is real; numba_cube's
CUDA backend uses them). On other devices one internal of numba-cuda is served too:
``numba.cuda.cudadrv.devices.get_context``, through which numba-cuda's own helpers ask the
current context (``numba.cuda.testing``'s compute-capability checks, ``require_context``), so
they see the layer's device instead of failing to load a driver.

Installing twice changes the device (the originals kept are still numba-cuda's own); it is refused
under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``), whose ``cuda`` module is another object.
"""

from __future__ import annotations

import importlib
import threading

__all__ = ["install", "uninstall", "installed_device"]

_MISSING = object()
_originals: dict = {}
_internal_originals: dict = {}

#: numba-cuda internals the layer serves: (module, name) -> the dropin room that defines it
_INTERNALS = {("numba.cuda.cudadrv.devices", "get_context"): ("devices", "current_context")}
_lock = threading.Lock()
_device: str | None = None


def install(device: str = "cpu", **client_options) -> None:
    """Serve ``numba.cuda`` with numba_cube on ``device`` (``"cpu"``, ``"cuda"``, ...)."""
    global _device
    from numba.cuda.core import config as cuda_config

    if cuda_config.ENABLE_CUDASIM:
        raise RuntimeError("numba_cube.install() cannot serve numba.cuda under numba-cuda's "
                           "simulator (NUMBA_ENABLE_CUDASIM=1): unset the variable")
    import numba.cuda as cuda_module

    from numba_cube.runtime.registry import client as make_client
    from . import dispatcher, exports
    from .state import set_layer_client

    client = make_client(device, **client_options)
    with _lock:
        if not _originals:
            for name in (*exports.SERVED, *exports.REFUSED):
                _originals[name] = getattr(cuda_module, name, _MISSING)
            dispatcher.set_original_jit(_originals["jit"])
        set_layer_client(client)
        # On a CUDA device the GPU is real: numba-cuda's own devices and contexts stay (numba_cube's
        # CUDA backend works through them too), and so does its @cuda.reduce, whose kernels the
        # CUDA backend runs as they are (reduction.py says why the CPU's is the layer's own).
        on_gpu = client.device.startswith("cuda")
        for name, room in exports.SERVED.items():
            if on_gpu and room in ("devices", "reduction"):
                setattr(cuda_module, name, _originals[name])
                continue
            module = importlib.import_module(f"{__package__}.{room}")
            setattr(cuda_module, name, getattr(module, name))
        for name in exports.REFUSED:
            setattr(cuda_module, name, exports.refusal(name))
        for (module_name, name), (room, attr) in ({} if on_gpu else _INTERNALS).items():
            module = importlib.import_module(module_name)
            _internal_originals.setdefault((module_name, name), getattr(module, name))
            served = getattr(importlib.import_module(f"{__package__}.{room}"), attr)
            setattr(module, name, served)
        _swap_ufunc_builders(install=True)
        _device = client.device


#: numba's builder of ``vectorize`` for ``target="cuda"``, as it was (``guvectorize``'s stays
#: numba-cuda's: its gufunc kernels, made with ``cuda.jit``, run through the layer)
_builders: dict = {}


def _swap_ufunc_builders(install: bool) -> None:
    """``numba.vectorize(..., target="cuda")`` finds its builder in numba's registry, not in
    ``numba.cuda``: the layer's is put there (``ufuncs.py``), numba-cuda's is kept and put back.
    (``guvectorize(target="cuda")`` keeps numba-cuda's builder: its generated kernels call the
    function as a device function declared ``void(arrays...)``, which the CPU translator
    compiles as it is, ``kernel/signatures.py``, ``converts_nothing``.)
    (numba's registries refuse a key twice, hence the plain dict operations.)"""
    from numba.np.ufunc.decorators import Vectorize

    from .ufuncs import CubeVectorize

    for owner, ours in ((Vectorize, CubeVectorize),):
        registry = owner.target_registry
        if install:
            if owner not in _builders:
                _builders[owner] = (dict.get(registry, "cuda", _MISSING),
                                    dict.get(registry.ondemand, "cuda", _MISSING))
            dict.pop(registry.ondemand, "cuda", None)
            dict.__setitem__(registry, "cuda", ours)
        elif owner in _builders:
            value, ondemand = _builders.pop(owner)
            dict.pop(registry, "cuda", None)
            if value is not _MISSING:
                dict.__setitem__(registry, "cuda", value)
            if ondemand is not _MISSING:
                dict.__setitem__(registry.ondemand, "cuda", ondemand)


def uninstall() -> None:
    """Put numba-cuda's own objects back (waiting for the layer's work first)."""
    global _device
    import numba.cuda as cuda_module

    from .state import layer_client, set_layer_client

    with _lock:
        if not _originals:
            return
        layer_client().sync()
        for name, value in _originals.items():
            if value is _MISSING:
                delattr(cuda_module, name)
            else:
                setattr(cuda_module, name, value)
        _originals.clear()
        for (module_name, name), value in _internal_originals.items():
            setattr(importlib.import_module(module_name), name, value)
        _internal_originals.clear()
        _swap_ufunc_builders(install=False)
        set_layer_client(None)
        _device = None


def installed_device() -> str | None:
    """The device the layer serves numba.cuda with (``"cpu:0"``), or None."""
    return _device
