"""Which backends exist, and the one server per device (API.md "Clients and handles").

``cube.client(device)`` parses ``"<backend>[:index]"``, asks the backend's factory for the
device's server once, and returns the same client object every time for the same device and
options. Backends are registered by name with a factory ``factory(index) -> server``; the built-in
ones are registered through the plugin manager like any third-party one (``plugins.py``).

This is the one table of backends: each entry records the plugin that registered it (its
owner; ``None`` for one registered directly, as tests do), and a name another plugin owns is
refused. The registry knows no backend by name: what a backend wants of its clients (options it
takes from the environment, such as the CPU backend's ``boundscheck``) comes with its
registration.

The registry sits below the plugin manager: ``plugins.py`` imports it, never the reverse. The
manager is handed in instead (``connect_plugins``, done by ``numba_cube/__init__.py``): how to
start it on the first use of backends or clients, and whom to tell of a new client.

A backend may be registered but unavailable (no driver, no device): its factory raises, and
``client()`` turns that into a ``BackendNotFound`` that says why, instead of a crash at import.
"""

from __future__ import annotations

import os
import threading
from typing import Callable

from .. import config
from ..errors import BackendNotFound, OptionError
from numba_cube.runtime.client.client import Client, entered_client

__all__ = ["register_backend", "unregister_backend", "owned_backends", "backend_infos", "backends",
           "client", "use", "current_client", "connect_plugins", "BackendInfo"]

_lock = threading.RLock()
_backends: dict[str, "BackendInfo"] = {}
_servers: dict[str, object] = {}
_clients: dict[tuple, object] = {}
_default_client = None


def _forget_devices_in_child() -> None:
    """After ``os.fork()``, in the child: the devices started before it are disowned (each
    operation on them raises ``DeviceFault``: their threads stayed in the parent) and forgotten,
    so ``client()`` here starts fresh ones. The lock is new: a thread of the parent may have held
    the old one when it forked."""
    global _lock, _default_client
    _lock = threading.RLock()
    parent = os.getppid()
    for server in _servers.values():
        server.disown_after_fork(parent)
    _servers.clear()
    _clients.clear()
    _default_client = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_devices_in_child)


def _no_plugins() -> None:
    """Until ``connect_plugins``: there is no plugin manager to start."""


def _nobody_listens(client) -> None:
    """Until ``connect_plugins``: nobody is told of new clients."""


_start_plugins: Callable[[], None] = _no_plugins
_client_created: Callable[[object], None] = _nobody_listens


def connect_plugins(start: Callable[[], None], client_created: Callable[[object], None]) -> None:
    """Hand the registry its plugin manager: ``start()`` loads the plugins (their backends
    register here) and is called before backends are listed or a client is made; it must be
    cheap once they are loaded. ``client_created(client)`` is called once per new client, outside
    the registry's lock."""
    global _start_plugins, _client_created
    _start_plugins, _client_created = start, client_created


class BackendInfo:
    """A registered backend: its factory, where it came from, whether it can start."""

    def __init__(self, name: str, factory: Callable[[int], object], source: str = "builtin",
                 available: Callable[[], str | None] | None = None, priority: int = 0,
                 devices: Callable[[], list] | None = None, owner: str | None = None,
                 default_options: Callable[[], dict] | None = None):
        self.name = name
        self.factory = factory
        self.source = source
        #: the plugin that registered the backend, or None when it was registered directly
        self.owner = owner
        self._available = available
        self._devices = devices
        self._default_options = default_options
        self.priority = priority  # the highest available priority is the default device

    def unavailable_reason(self) -> str | None:
        """``None`` when the backend can start, else why not."""
        if self._available is None:
            return None
        try:
            return self._available()
        except Exception as exc:  # noqa: BLE001 - a probe that crashes means "unavailable"
            return f"{type(exc).__name__}: {exc}"

    def device_names(self) -> list[str]:
        """The devices this backend offers, as far as a cheap probe tells (``devices()`` if the
        backend gave one, else ``<name>:0``), plus those already started; none if unavailable."""
        with _lock:
            started = [k for k in _servers if k.split(":")[0] == self.name]
        if self.unavailable_reason() is not None:
            return sorted(started)
        names = [f"{self.name}:0"]
        if self._devices is not None:
            try:
                names = [str(d) for d in self._devices()]
            except Exception:  # noqa: BLE001 - a probe that crashes lists nothing
                names = []
        return sorted(set(names) | set(started), key=lambda d: (len(d), d))

    def client_options(self, given: dict) -> dict:
        """The options of a client asked for with ``given``: the backend's defaults (what its
        ``default_options()`` reads from the environment now), overridden by ``given``."""
        if self._default_options is None:
            return given
        try:
            defaults = self._default_options()
        except Exception as exc:  # noqa: BLE001 - a plugin's bug says where it is, not a crash
            raise BackendNotFound(f"backend {self.name!r}: its default_options() failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
        return {**defaults, **given} if defaults else given


def register_backend(name: str, factory: Callable[[int], object], *, source: str = "builtin",
                     available: Callable[[], str | None] | None = None, priority: int = 0,
                     devices: Callable[[], list] | None = None, owner: str | None = None,
                     default_options: Callable[[], dict] | None = None) -> None:
    """Register (or replace) backend ``name``. ``ValueError`` for a name that is no identifier,
    or one that another plugin owns (``owner`` is the registering plugin's name)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"backend name must be an identifier, got {name!r}")
    with _lock:
        taken_by = getattr(_backends.get(name), "owner", None)
        if owner is not None and taken_by is not None and taken_by != owner:
            source = _backends[name].source
            who = source if taken_by in source else f"plugin {taken_by} ({source})"
            raise ValueError(f"{who} already registered a backend of that name")
        _backends[name] = BackendInfo(name, factory, source, available, priority, devices, owner,
                                      default_options)


def unregister_backend(name: str) -> None:
    """Forget backend ``name``: its devices are closed and its clients dropped."""
    with _lock:
        _backends.pop(name, None)
        for key in [k for k in _servers if k.split(":")[0] == name]:
            server = _servers.pop(key)
            server.channel.close()
        for key in [k for k in _clients if k[0].split(":")[0] == name]:
            del _clients[key]


def owned_backends() -> dict[str, str]:
    """Backend name -> the plugin that registered it, for the backends a plugin registered. Does
    not start the plugin manager (the manager itself asks)."""
    with _lock:
        return {name: info.owner for name, info in _backends.items() if info.owner is not None}


def backend_infos() -> dict[str, BackendInfo]:
    """Every registered backend (the plugins loaded first), available or not."""
    _start_plugins()
    with _lock:
        return dict(_backends)


def backends() -> list[str]:
    """The registered backend names (available or not)."""
    return sorted(backend_infos())


def _default_device() -> str:
    env = config.get_str("NUMBA_CUBE_DEVICE")
    if env:
        return env
    infos = sorted(backend_infos().values(), key=lambda i: -i.priority)
    for info in infos:
        if info.unavailable_reason() is None:
            return info.name
    raise BackendNotFound("no backend is available: " + "; ".join(
        f"{i.name}: {i.unavailable_reason()}" for i in infos))


def _parse(device: str) -> tuple[str, int]:
    name, _, index = device.partition(":")
    if not index:
        return name, 0
    try:
        idx = int(index)
    except ValueError:
        raise BackendNotFound(f"bad device {device!r}: expected '<backend>[:index]'") from None
    if idx < 0:
        raise BackendNotFound(f"bad device {device!r}: the index must not be negative")
    return name, idx


def _no_such_backend(name: str) -> BackendNotFound:
    return BackendNotFound(f"no backend named {name!r}; registered: {sorted(_backends)}")


def client(device: str | None = None, **options):
    """The client of ``device`` (``"cpu"``, ``"cpu:1"``, ``"cuda"``, ...); the same object each time.

    Options (e.g. ``boundscheck=True``) change how kernels are compiled; clients with different
    options share the device's server, its memory and its streams. Options the caller leaves out
    may come from the environment, as the backend's registration says (``default_options``). An
    option the device's backend does not know is ``OptionError`` (a ``TypeError``), listing the
    ones it knows.
    """
    if device is None:
        device = _default_device()
    if not isinstance(device, str):
        raise TypeError(f"device must be a string '<backend>[:index]', got {type(device).__name__}")
    name, index = _parse(device)
    canonical = f"{name}:{index}"
    info = _backends.get(name)  # a dict read is atomic: no lock on the common path
    if info is None:
        _start_plugins()
        info = _backends.get(name)
        if info is None:
            raise _no_such_backend(name)
    options = info.client_options(options)
    key = (canonical, tuple(sorted(options.items())))
    c = _clients.get(key)
    if c is not None:
        return c
    # Plugins load before the registry lock is taken: the plugin manager's lock is always taken
    # first (it registers backends under it), so holding ours while waiting for it could deadlock
    # against a thread that is loading plugins.
    _start_plugins()
    with _lock:
        c = _clients.get(key)
        if c is not None:
            return c
        info = _backends.get(name)
        if info is None:
            raise _no_such_backend(name)
        server = _servers.get(canonical)
        if server is None:
            reason = info.unavailable_reason()
            if reason is not None:
                raise BackendNotFound(f"backend {name!r} is not available: {reason}")
            try:
                server = info.factory(index)
            except BackendNotFound:
                raise
            except Exception as exc:  # noqa: BLE001 - a backend that cannot start says why
                raise BackendNotFound(f"backend {name!r} could not start device {canonical}: "
                                      f"{type(exc).__name__}: {exc}") from exc
            _servers[canonical] = server
        _refuse_unknown_options(server, canonical, options)
        c = _clients[key] = Client(server, options=options)
    # Outside the lock: a plugin's hook may itself ask for clients, from any thread.
    _client_created(c)
    return c


def _refuse_unknown_options(server, device: str, options: dict) -> None:
    """A misspelt option (``boundcheck=True``) would silently compile without what was asked for:
    refuse every option the device's backend does not declare (``HostBackend.compile_options``)."""
    known_of = getattr(server, "known_options", None)
    known = known_of() if known_of is not None else frozenset()
    unknown = sorted(set(options) - known)
    if unknown:
        raise OptionError(f"cube.client({device!r}): unknown option(s) {', '.join(unknown)}; "
                          f"{device} knows: {', '.join(sorted(known)) or 'none'}")


def use(c) -> None:
    """Make ``c`` the client ``kernel[count, dim](...)`` launches on (process-wide default)."""
    global _default_client
    _default_client = c


def current_client():
    """The innermost ``with client:`` on this thread, else ``cube.use``'s, else the default device's."""
    entered = entered_client()
    if entered is not None:
        return entered
    if _default_client is not None:
        return _default_client
    return client()
