"""numba.cuda's host API served by numba_cube: existing numba.cuda programs, unchanged, on any
numba_cube backend (the CPU one on a machine without a GPU).

``numba_cube.install("cpu")`` (or ``python -m numba_cube run program.py``, or
``NUMBA_CUBE_INSTALL=cpu`` for a pytest session) puts this layer on the imported ``numba.cuda``
module: ``cuda.jit`` kernels launch through a numba_cube client, ``cuda.to_device`` and
``device_array`` make handles that behave as numba's device arrays, streams are numba_cube
streams, and what cannot be served raises ``UnsupportedAPIError`` naming the API. The layer adds
no runtime policy of its own: it translates numba.cuda calls into the public client's.

Its rooms: ``devicearray.py`` (``DeviceNDArray``), ``memory.py`` (``to_device`` and the other
allocators), ``streams.py`` (streams, events, ``synchronize``), ``devices.py`` (``gpus``,
contexts), ``dispatcher.py`` (``cuda.jit`` and launches), ``ufuncs.py`` (``vectorize``),
``reduction.py`` (``@cuda.reduce``, in numba-cuda's order), ``exports.py`` (which numba.cuda name is served, kept or refused), ``install.py`` (putting it in
place), ``state.py`` (the installed client). The ``NUMBA_CUBE_INSTALL`` pytest hook is a
distribution of its own, ``plugins/pytest_numba_cube``.

Importing this package imports nothing of Numba: ``install`` does.
"""

from __future__ import annotations

__all__ = ["install", "uninstall", "installed_device"]


def install(device: str = "cpu", **client_options) -> None:
    """Serve ``numba.cuda`` with numba_cube on ``device`` (``install.py``)."""
    from .install import install as _install

    _install(device, **client_options)


def uninstall() -> None:
    """Give ``numba.cuda`` its own objects back (``install.py``)."""
    from .install import uninstall as _uninstall

    _uninstall()


def installed_device() -> str | None:
    """The device numba.cuda is served with, or None when the layer is not installed."""
    from .install import installed_device as _installed_device

    return _installed_device()
