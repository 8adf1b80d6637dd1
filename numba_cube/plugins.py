"""The plugin manager: built-in backends first, then entry points, then a check.

Modelled on pluggy's eggsample and the ``llm`` project: ``get_plugin_manager()`` registers the
built-in backends as plugins (the same path third parties take), loads the ``numba_cube``
entry-point group unless ``NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD=1``, checks that every hook
implementation matches a specification, and then asks every plugin to register its backends.
Nothing here runs at ``import numba_cube``: the manager is started on the first use of backends
or clients (``registry.backend_infos`` and ``registry.client`` call the starter that
``numba_cube/__init__.py`` hands the registry), so an expensive or broken plugin costs nothing
until then.

Backends go to the one backend table, ``runtime/registry.py``, which records the plugin that
registered each, through the ``register`` that ``plugin_backends.py`` makes for each plugin. A
plugin that fails to load, or a backend built for another ``BACKEND_API_VERSION``, is recorded in
``plugin_errors()`` with the reason and skipped: numba_cube never crashes because of a third
party. A refused backend stays listed, as unavailable with that reason, so ``cube.client(name)``
and ``python -m numba_cube info`` say why instead of "no such backend".

Hooks are called through pluggy, so its ordering (``tryfirst``/``trylast``) and hook wrappers
apply. ``numba_cube_register_backends`` is called once per plugin (``subset_hook_caller``,
keeping every wrapper): its ``register`` must know which plugin registers, and one plugin that
raises must not keep the others' backends out. The observer hooks are the exception: they run
on every launch and task, so each has one dispatcher over plain callables, installed in
``runtime.observers`` only while some plugin implements the hook (a process without tracers pays
nothing per launch; observers take no wrappers).

The manager keeps numba_cube's view in step with pluggy's: ``pm.register(obj)`` after start-up
registers ``obj``'s backends and observers at once, ``pm.unregister(obj)`` removes them.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pluggy

from . import config, hookspecs
from .plugin_backends import BUILTIN, drop_backends_of, make_register
from numba_cube.runtime.client import observers
from numba_cube.runtime import registry

__all__ = ["get_plugin_manager", "plugin_errors", "plugin_sources", "plugin_infos",
           "reset_plugin_manager", "notify_client_created"]

log = logging.getLogger("numba_cube")

_BUILTIN_MODULES = (("numba_cube.cpu", "numba_cube.backends.cpu"),
                    ("numba_cube.cuda", "numba_cube.backends.cuda"))

_lock = threading.RLock()
_pm: "_Manager | None" = None
_errors: list[str] = []
_sources: dict[str, str] = {}           # plugin name -> where it came from
_dists: dict[str, tuple] = {}           # plugin name -> (distribution, version, entry-point value)
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
            drop_backends_of(name)
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
        # In pluggy's call order (the built-in backends are tryfirst: a name they take stays theirs).
        for impl in reversed(pm.hook.numba_cube_register_backends.get_hookimpls()):
            if not _is_wrapper(impl):
                _register_backends_of(pm, impl.plugin_name, impl.plugin)
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


def _is_wrapper(impl: pluggy.HookImpl) -> bool:
    return impl.hookwrapper or impl.wrapper


# -- backends --------------------------------------------------------------------------------------
def _register_backends_of(pm: _Manager, name: str, plugin: Any) -> None:
    """Call ``plugin``'s ``numba_cube_register_backends`` through pluggy, with a ``register``
    that knows the plugin; the other plugins' wrappers of the hook still wrap the call."""
    impls = pm.hook.numba_cube_register_backends.get_hookimpls()
    if not any(impl.plugin is plugin and not _is_wrapper(impl) for impl in impls):
        return
    others = [impl.plugin for impl in impls if impl.plugin is not plugin and not _is_wrapper(impl)]
    call = pm.subset_hook_caller("numba_cube_register_backends", remove_plugins=others)
    try:
        call(register=make_register(name, _sources.get(name, name), _error))
    except Exception as exc:  # noqa: BLE001 - one broken plugin must not break the rest
        _error(f"plugin {name} failed to register its backends: {type(exc).__name__}: {exc}",
               exc_info=True)


# -- hooks ---------------------------------------------------------------------------------------
def _impl_callers(hook) -> tuple:
    """Plain callables for a hook's implementations, in pluggy's call order (last registered
    first, ``tryfirst``/``trylast`` honoured). Wrappers are skipped: around an observer call there
    is nothing to wrap."""
    out = []
    for impl in reversed(hook.get_hookimpls()):
        if _is_wrapper(impl):
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
    """Call ``numba_cube_client_created`` (``registry.client``, once per new client). An
    exception is logged, never raised: a plugin must not break client creation. As in any pluggy
    call, it ends the call (implementations pluggy would call after it are skipped)."""
    try:
        get_plugin_manager().hook.numba_cube_client_created(client=client)
    except Exception:  # noqa: BLE001 - see the docstring
        log.exception("numba_cube: a numba_cube_client_created hook failed")


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
    owners = registry.owned_backends()
    out = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda np_: np_[0]):
        dist, version, value = _dists.get(name, (None, None, None))
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or ())
        out.append({"name": name, "source": _sources.get(name, "?"), "distribution": dist,
                    "version": version, "entry_point": value, "hooks": hooks,
                    "backends": sorted(b for b, owner in owners.items() if owner == name)})
    return out


def reset_plugin_manager() -> None:
    """Forget the plugin manager (tests); the next use loads plugins again.

    Removes what the old manager installed: its observer dispatchers, and the backends of every
    non-built-in plugin (their devices are closed). Built-in backends stay registered, with their
    servers and clients, and are registered again identically by the next manager.
    """
    global _pm
    with _lock:
        old, _pm = _pm, None
        if old is not None:
            old.started = False
        _refresh_observers(None)
        for backend, owner in registry.owned_backends().items():
            if _sources.get(owner) != BUILTIN:
                registry.unregister_backend(backend)
        _errors.clear()
        _sources.clear()
        _dists.clear()
