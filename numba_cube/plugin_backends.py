"""What a plugin's ``register(name, factory, ...)`` does: check the backend, then record it.

``numba_cube_register_backends(register)`` (``hookspecs.py``) hands each plugin a ``register``
made here for that plugin (``make_register``), so the backend table (``runtime/registry.py``)
records who registered what. A backend that cannot be taken is refused with a message that
names the plugin, recorded through the ``record_error`` the plugin manager passes in, and never
raised: a third party's mistake must not break numba_cube. A backend built for another
``BACKEND_API_VERSION`` stays listed, as unavailable with that message, so that
``cube.client(name)`` says why instead of "no such backend".
"""

from __future__ import annotations

from typing import Any, Callable

from .backends.base import BACKEND_API_VERSION
from .errors import BackendNotFound
from numba_cube.runtime import registry

__all__ = ["BUILTIN", "make_register", "drop_backends_of", "version_refusal"]

#: The source of the built-in backends' plugins, as ``plugin_sources()`` and the registry list it.
BUILTIN = "builtin"

#: A refused backend's priority: below any real one, so ``cube.client()`` never picks it.
_REFUSED_PRIORITY = -(1 << 30)


def version_refusal(api_version) -> str | None:
    """Why a backend declaring ``api_version`` is refused, or None when it matches."""
    if api_version == BACKEND_API_VERSION:
        return None
    if api_version is None:
        return "declares no api_version (pass api_version=numba_cube.BACKEND_API_VERSION)"
    upgrade = ("numba_cube" if isinstance(api_version, int) and api_version > BACKEND_API_VERSION
               else "the plugin")
    return (f"was built for backend API version {api_version}, this numba_cube has "
            f"version {BACKEND_API_VERSION}: upgrade {upgrade}")


def _refused_factory(reason: str) -> Callable[[int], Any]:
    def factory(index):
        raise BackendNotFound(reason)

    return factory


def make_register(plugin_name: str, source: str,
                  record_error: Callable[[str], None]) -> Callable[..., None]:
    """The ``register`` callable of plugin ``plugin_name`` (which came from ``source``)."""
    # How messages name the plugin; and what the registry lists as the backend's source.
    who = source if plugin_name in source else f"plugin {plugin_name} ({source})"
    listed = source if source == BUILTIN else who

    def register(name: str, factory: Callable[[int], Any], *, api_version: int | None = None,
                 available: Callable[[], str | None] | None = None, priority: int = 0,
                 devices: Callable[[], list] | None = None,
                 default_options: Callable[[], dict] | None = None) -> None:
        """Register backend ``name`` (see ``hookspecs.numba_cube_register_backends``)."""
        if not callable(factory):
            record_error(f"backend {name!r} from {who} refused: its factory is not callable")
            return
        refusal = version_refusal(api_version)
        if refusal is not None:
            refusal = f"backend {name!r} from {who} refused: it {refusal}"
            # Listed, as unavailable with the reason: `cube.client(name)` then says why.
            factory, priority, devices, default_options = (_refused_factory(refusal),
                                                           _REFUSED_PRIORITY, None, None)
            available = lambda: refusal  # noqa: E731 - the reason, as the availability probe
        try:
            registry.register_backend(name, factory, source=listed, available=available,
                                      priority=priority, devices=devices, owner=plugin_name,
                                      default_options=default_options)
        except Exception as exc:  # noqa: BLE001 - a bad or taken name: refuse it, keep the rest
            record_error(f"backend {name!r} from {who} refused: {exc}")
            return
        if refusal is not None:
            record_error(refusal)

    return register


def drop_backends_of(plugin_name: str) -> None:
    """Unregister every backend plugin ``plugin_name`` registered (their devices are closed)."""
    for backend, owner in registry.owned_backends().items():
        if owner == plugin_name:
            registry.unregister_backend(backend)
