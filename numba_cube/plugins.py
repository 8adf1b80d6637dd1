"""The plugin manager: built-in backends first, then entry points, then a check.

Modelled on pluggy's eggsample and the ``llm`` project: ``get_plugin_manager()`` registers the
built-in backends as plugins (the same path third parties take), loads the ``numba_cube``
entry-point group unless ``NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD=1``, checks that every hook
implementation matches a specification, and then asks every plugin to register its backends.

A plugin that fails to load, or a backend built for another ``BACKEND_API_VERSION``, is recorded
in ``plugin_errors()`` with the reason and skipped: importing numba_cube never crashes because of
a third party.
"""

from __future__ import annotations

import logging
import threading

import pluggy

from . import config, hookspecs
from .backends.base import BACKEND_API_VERSION

__all__ = ["get_plugin_manager", "plugin_errors", "plugin_sources", "reset_plugin_manager"]

log = logging.getLogger("numba_cube")

_lock = threading.RLock()
_pm: pluggy.PluginManager | None = None
_errors: list[str] = []
_sources: dict[str, str] = {}


def _make_register(source: str):
    from .runtime.registry import register_backend

    def register(name, factory, *, api_version, available=None, priority=0):
        if api_version != BACKEND_API_VERSION:
            msg = (f"backend {name!r} from {source} was built for numba_cube backend API version "
                   f"{api_version}, this numba_cube has version {BACKEND_API_VERSION}: upgrade the plugin")
            _errors.append(msg)
            log.warning(msg)
            return
        register_backend(name, factory, source=source, available=available, priority=priority)

    return register


def get_plugin_manager() -> pluggy.PluginManager:
    global _pm
    with _lock:
        if _pm is not None:
            return _pm
        pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        pm.add_hookspecs(hookspecs)
        from .backends import cpu as cpu_plugin

        pm.register(cpu_plugin, name="numba_cube.cpu")
        _sources["numba_cube.cpu"] = "builtin"
        try:
            from .backends import cuda as cuda_plugin
        except ImportError:
            cuda_plugin = None
        if cuda_plugin is not None:
            pm.register(cuda_plugin, name="numba_cube.cuda")
            _sources["numba_cube.cuda"] = "builtin"
        if not config.get_bool("NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD"):
            _load_entry_points(pm)
        pm.check_pending()
        _pm = pm
        for impl in pm.hook.numba_cube_register_backends.get_hookimpls():
            source = _sources.get(impl.plugin_name, impl.plugin_name)
            try:
                impl.function(register=_make_register(source))
            except Exception as exc:  # noqa: BLE001 - one broken plugin must not break the rest
                _errors.append(f"plugin {impl.plugin_name} failed to register its backends: {exc}")
                log.warning("numba_cube: plugin %s failed to register", impl.plugin_name, exc_info=True)
        from .runtime import observers

        if pm.hook.numba_cube_launch.get_hookimpls():
            observers.add_observer(lambda event: pm.hook.numba_cube_launch(event=event))
        if pm.hook.numba_cube_task_done.get_hookimpls():
            observers.add_task_observer(lambda event: pm.hook.numba_cube_task_done(event=event))
        return pm


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=hookspecs.PROJECT_NAME):
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        try:
            plugin = ep.load()
        except Exception as exc:  # noqa: BLE001 - see module docstring
            _errors.append(f"plugin {ep.name} ({ep.value}) failed to load: {type(exc).__name__}: {exc}")
            log.warning("numba_cube: plugin %s failed to load", ep.name, exc_info=True)
            continue
        pm.register(plugin, name=ep.name)
        dist = getattr(ep, "dist", None)
        _sources[ep.name] = f"entry point {ep.name} ({dist.name} {dist.version})" if dist else f"entry point {ep.name}"


def plugin_errors() -> list[str]:
    get_plugin_manager()
    return list(_errors)


def plugin_sources() -> dict[str, str]:
    """Registered plugin name -> where it came from."""
    get_plugin_manager()
    return dict(_sources)


def reset_plugin_manager() -> None:
    """Forget the plugin manager (tests); the next use loads plugins again."""
    global _pm
    with _lock:
        _pm = None
        _errors.clear()
        _sources.clear()
