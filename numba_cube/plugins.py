"""The plugin manager: built-in backends first, then entry points, then a check.

Modelled on pluggy's eggsample and the ``llm`` project: ``get_plugin_manager()`` registers the
built-in backends as plugins (the same path third parties take), loads the ``numba_cube``
entry-point group unless ``NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD=1``, checks that every hook
implementation matches a specification, and then asks every plugin to register its backends.
Nothing here runs at ``import numba_cube``: the manager is built on the first use of backends or
clients (``registry.backend_infos``), so an expensive or broken plugin costs nothing until then.

A plugin that fails to load, or a backend built for another ``BACKEND_API_VERSION``, is recorded
in ``plugin_errors()`` with the reason and skipped: numba_cube never crashes because of a third
party. A refused backend stays listed, as unavailable with that reason, so ``cube.client(name)``
and ``python -m numba_cube info`` say why instead of "no such backend".

The manager keeps numba_cube's view in step with pluggy's: ``pm.register(obj)`` after start-up
registers ``obj``'s backends and observers at once, ``pm.unregister(obj)`` removes them. The
observer hooks are called through one dispatcher per hook, installed in ``runtime.observers``
only while some plugin implements the hook, so a process without tracers pays nothing per launch.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

import pluggy

from . import config, hookspecs
from .backends.base import BACKEND_API_VERSION

__all__ = ["get_plugin_manager", "plugin_errors", "plugin_sources", "plugin_infos",
           "reset_plugin_manager", "notify_client_created"]

log = logging.getLogger("numba_cube")

BUILTIN = "builtin"
_BUILTIN_MODULES = (("numba_cube.cpu", "numba_cube.backends.cpu"),
                    ("numba_cube.cuda", "numba_cube.backends.cuda"))

_lock = threading.RLock()
_pm: "_Manager | None" = None
_errors: list[str] = []
_sources: dict[str, str] = {}           # plugin name -> where it came from
_dists: dict[str, tuple] = {}           # plugin name -> (distribution, version, entry-point value)
_backend_owner: dict[str, str] = {}     # backend name -> plugin name that registered it
# Observer hook implementations, replaced (never mutated) so dispatchers read them without a lock.
_launch_fns: tuple = ()
_task_fns: tuple = ()


def _error(msg: str, exc_info: bool = False) -> None:
    _errors.append(msg)
    log.warning("numba_cube: %s", msg, exc_info=exc_info)


class _Manager(pluggy.PluginManager):
    """A ``PluginManager`` that registers a late plugin's backends and observers, and removes
    them again when the plugin is unregistered (tests register plugins this way)."""

    def __init__(self):
        super().__init__(hookspecs.PROJECT_NAME)
        self.add_hookspecs(hookspecs)
        self.started = False  # False while get_plugin_manager() is still loading plugins

    def register(self, plugin, name=None):
        name = super().register(plugin, name)
        if name is not None:
            _sources.setdefault(name, "registered at run time")
            if self.started:
                try:
                    self.check_pending()
                except pluggy.PluginValidationError:
                    # A hook name no spec declares (a typo): refuse it to the caller, loudly.
                    self.unregister(plugin)
                    raise
                _register_backends_of(self, name, plugin)
                _refresh_observers(self)
        return name

    def unregister(self, plugin=None, name=None):
        if name is None and plugin is not None:
            name = self.get_name(plugin)
        plugin = super().unregister(plugin=plugin, name=name)
        if plugin is not None and name is not None:
            _drop_backends_of(name)
            _sources.pop(name, None)
            _dists.pop(name, None)
            if self.started:
                _refresh_observers(self)
        return plugin


def get_plugin_manager() -> pluggy.PluginManager:
    """The process's plugin manager, built on first call (thread-safe)."""
    global _pm
    if _pm is not None:
        return _pm
    with _lock:
        if _pm is not None:
            return _pm
        pm = _Manager()
        _register_builtins(pm)
        if not config.get_bool("NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD"):
            _load_entry_points(pm)
        _check(pm)
        for name, plugin in pm.list_name_plugin():
            _register_backends_of(pm, name, plugin)
        pm.started = True
        _refresh_observers(pm)
        _pm = pm
        return pm


def _register_builtins(pm: _Manager) -> None:
    import importlib

    for name, module in _BUILTIN_MODULES:
        try:
            plugin = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue  # this build has no such backend: nothing to report
            _error(f"built-in backend module {module} failed to import: {exc}", exc_info=True)
            continue
        except Exception as exc:  # noqa: BLE001 - a broken built-in must not break the others
            _error(f"built-in backend module {module} failed to import: {type(exc).__name__}: {exc}",
                   exc_info=True)
            continue
        _sources[name] = BUILTIN
        pm.register(plugin, name=name)


def _load_entry_points(pm: _Manager) -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=hookspecs.PROJECT_NAME):
        dist = getattr(ep, "dist", None)
        where = f"{dist.name} {dist.version}" if dist is not None else "unknown distribution"
        if pm.is_blocked(ep.name):
            continue
        if pm.get_plugin(ep.name) is not None:
            _error(f"plugin {ep.name} = {ep.value} ({where}) skipped: "
                   f"that name is taken by {_sources.get(ep.name, 'another plugin')}")
            continue
        try:
            plugin = ep.load()
        except Exception as exc:  # noqa: BLE001 - see module docstring
            _error(f"plugin {ep.name} = {ep.value} ({where}) failed to load: {type(exc).__name__}: {exc}",
                   exc_info=True)
            continue
        _sources[ep.name] = f"entry point {ep.name} = {ep.value} ({where})"
        if dist is not None:
            _dists[ep.name] = (dist.name, dist.version, ep.value)
        try:
            pm.register(plugin, name=ep.name)
        except Exception as exc:  # noqa: BLE001 - PluginValidationError, or the same object twice
            _sources.pop(ep.name, None)
            _dists.pop(ep.name, None)
            _error(f"plugin {ep.name} = {ep.value} ({where}) refused: {exc}")


def _check(pm: _Manager) -> None:
    """``check_pending()``, dropping each plugin that implements a hook no spec declares (a
    misspelt hook name would otherwise never be called, silently)."""
    while True:
        try:
            pm.check_pending()
            return
        except pluggy.PluginValidationError as exc:
            name = pm.get_name(exc.plugin)
            _error(f"plugin {name} ({_sources.get(name, '?')}) refused: {exc}")
            pm.unregister(exc.plugin)


def _register_backends_of(pm: _Manager, name: str, plugin: Any) -> None:
    """Call ``plugin``'s ``numba_cube_register_backends`` with a ``register`` bound to it."""
    for impl in pm.hook.numba_cube_register_backends.get_hookimpls():
        if impl.plugin is not plugin:
            continue
        try:
            impl.function(**{a: _make_register(name) for a in impl.argnames})
        except Exception as exc:  # noqa: BLE001 - one broken plugin must not break the rest
            _error(f"plugin {name} failed to register its backends: {type(exc).__name__}: {exc}",
                   exc_info=True)


def _refused_factory(reason: str):
    def factory(index):
        from .errors import BackendNotFound

        raise BackendNotFound(reason)

    return factory


def _make_register(plugin_name: str) -> Callable[..., None]:
    from .runtime.registry import register_backend

    source = _sources.get(plugin_name, plugin_name)
    # How messages name the plugin; and what the registry lists as the backend's source.
    who = source if plugin_name in source else f"plugin {plugin_name} ({source})"
    listed = source if source == BUILTIN else who

    def register(name: str, factory: Callable[[int], Any], *, api_version: int | None = None,
                 available: Callable[[], str | None] | None = None, priority: int = 0,
                 devices: Callable[[], list] | None = None) -> None:
        """Register backend ``name`` (see ``hookspecs.numba_cube_register_backends``)."""
        owner = _backend_owner.get(name)
        if owner is not None and owner != plugin_name:
            _error(f"backend {name!r} from {who} refused: plugin {owner} "
                   f"({_sources.get(owner, '?')}) already registered a backend of that name")
            return
        if not callable(factory):
            _error(f"backend {name!r} from {who} refused: its factory is not callable")
            return
        if api_version != BACKEND_API_VERSION:
            if api_version is None:
                why = "declares no api_version (pass api_version=numba_cube.BACKEND_API_VERSION)"
            elif isinstance(api_version, int) and api_version > BACKEND_API_VERSION:
                why = (f"was built for backend API version {api_version}, this numba_cube has "
                       f"version {BACKEND_API_VERSION}: upgrade numba_cube")
            else:
                why = (f"was built for backend API version {api_version}, this numba_cube has "
                       f"version {BACKEND_API_VERSION}: upgrade the plugin")
            msg = f"backend {name!r} from {who} refused: it {why}"
            _error(msg)
            # Listed, as unavailable with the reason: `cube.client(name)` then says why.
            factory, available, priority, devices = _refused_factory(msg), (lambda: msg), -(1 << 30), None
        try:
            register_backend(name, factory, source=listed, available=available, priority=priority,
                             devices=devices)
        except Exception as exc:  # noqa: BLE001 - a bad name: refuse this backend, keep the rest
            _error(f"backend {name!r} from {who} refused: {exc}")
            return
        _backend_owner[name] = plugin_name

    return register


def _drop_backends_of(plugin_name: str) -> None:
    from .runtime.registry import unregister_backend

    for backend in [b for b, owner in _backend_owner.items() if owner == plugin_name]:
        del _backend_owner[backend]
        unregister_backend(backend)


# -- observer hooks --------------------------------------------------------------------------------
def _impl_callers(hook) -> tuple:
    """Plain callables for a hook's implementations, in pluggy's call order (last registered
    first). Wrappers are skipped: around an observer call there is nothing to wrap."""
    out = []
    for impl in reversed(hook.get_hookimpls()):
        if impl.hookwrapper or getattr(impl, "wrapper", False):
            continue
        fn, names = impl.function, tuple(impl.argnames)
        if names == ("event",):
            out.append(fn)
        else:
            out.append(lambda event, fn=fn, names=names: fn(**{n: event for n in names}))
    return tuple(out)


def _dispatch_launch(event) -> None:
    for fn in _launch_fns:
        try:
            fn(event)
        except Exception:  # noqa: BLE001 - an observer must not change what the program computes
            log.exception("numba_cube: numba_cube_launch observer %r failed", fn)


def _dispatch_task(event) -> None:
    for fn in _task_fns:
        try:
            fn(event)
        except Exception:  # noqa: BLE001 - see _dispatch_launch
            log.exception("numba_cube: numba_cube_task_done observer %r failed", fn)


def _refresh_observers(pm: pluggy.PluginManager | None) -> None:
    """Point the dispatchers at the current implementations; install each dispatcher in
    ``runtime.observers`` exactly once while it has work, and remove it when it has none."""
    global _launch_fns, _task_fns
    from .runtime import observers

    with _lock:
        _launch_fns = _impl_callers(pm.hook.numba_cube_launch) if pm is not None else ()
        _task_fns = _impl_callers(pm.hook.numba_cube_task_done) if pm is not None else ()
        # remove-then-add keeps one copy whatever happened before (a reset, a second refresh)
        observers.remove_observer(_dispatch_launch)
        observers.remove_task_observer(_dispatch_task)
        if _launch_fns:
            observers.add_observer(_dispatch_launch)
        if _task_fns:
            observers.add_task_observer(_dispatch_task)


def notify_client_created(client) -> None:
    """Call ``numba_cube_client_created`` (registry.client, once per new client). Each
    implementation is called on its own: one that raises is logged and the others still run."""
    pm = get_plugin_manager()
    for impl in reversed(pm.hook.numba_cube_client_created.get_hookimpls()):
        if impl.hookwrapper or getattr(impl, "wrapper", False):
            continue
        try:
            impl.function(**{n: client for n in impl.argnames})
        except Exception:  # noqa: BLE001 - a plugin must not break client creation
            log.exception("numba_cube: numba_cube_client_created of plugin %s failed", impl.plugin_name)


# -- introspection -----------------------------------------------------------------------------------
def plugin_errors() -> list[str]:
    """Why plugins or backends were refused or failed to load, one line each."""
    get_plugin_manager()
    return list(_errors)


def plugin_sources() -> dict[str, str]:
    """Registered plugin name -> where it came from (``builtin``, ``entry point ... (<distribution>
    <version>)``, or ``registered at run time``)."""
    get_plugin_manager()
    return dict(_sources)


def plugin_infos() -> list[dict]:
    """One dict per registered plugin: name, source, distribution, version, entry point, the hooks
    it implements and the backends it registered (for ``python -m numba_cube info --json``)."""
    pm = get_plugin_manager()
    out = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda np_: np_[0]):
        dist, version, value = _dists.get(name, (None, None, None))
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or ())
        out.append({"name": name, "source": _sources.get(name, "?"), "distribution": dist,
                    "version": version, "entry_point": value, "hooks": hooks,
                    "backends": sorted(b for b, o in _backend_owner.items() if o == name)})
    return out


def reset_plugin_manager() -> None:
    """Forget the plugin manager (tests); the next use loads plugins again.

    Removes what the old manager installed: its observer dispatchers, and the backends of every
    non-built-in plugin (their devices are closed). Built-in backends stay registered, with their
    servers and clients, and are registered again identically by the next manager.
    """
    global _pm
    from .runtime.registry import unregister_backend

    with _lock:
        old, _pm = _pm, None
        if old is not None:
            old.started = False
        _refresh_observers(None)
        for backend, owner in list(_backend_owner.items()):
            if _sources.get(owner) != BUILTIN:
                unregister_backend(backend)
        _backend_owner.clear()
        _errors.clear()
        _sources.clear()
        _dists.clear()
