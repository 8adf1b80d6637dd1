"""Which backends exist, and the one server per device (api.md "Clients and handles").

``cube.client(device)`` parses ``"<backend>[:index]"``, asks the backend's factory for the
device's server once, and returns the same client object every time for the same device and
options. Backends are registered by name with a factory ``factory(index) -> server``; the built-in
ones are registered through the plugin manager like any third-party one (``plugins.py``).

A backend may be registered but unavailable (no driver, no device): its factory raises, and
``client()`` turns that into a ``BackendNotFound`` that says why, instead of a crash at import.
"""

from __future__ import annotations

import threading
from typing import Callable

from .. import config
from ..errors import BackendNotFound, OptionError

__all__ = ["register_backend", "unregister_backend", "backends", "client", "use", "current_client",
           "push_current", "pop_current", "BackendInfo"]

_lock = threading.RLock()
_factories: dict[str, "BackendInfo"] = {}
_servers: dict[str, object] = {}
_clients: dict[tuple, object] = {}
_default_client = None
_local = threading.local()


class BackendInfo:
    """A registered backend: its factory, where it came from, whether it can start."""

    def __init__(self, name: str, factory: Callable[[int], object], source: str = "builtin",
                 available: Callable[[], str | None] | None = None, priority: int = 0,
                 devices: Callable[[], list] | None = None):
        self.name = name
        self.factory = factory
        self.source = source
        self._available = available
        self._devices = devices
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


def register_backend(name: str, factory: Callable[[int], object], *, source: str = "builtin",
                     available: Callable[[], str | None] | None = None, priority: int = 0,
                     devices: Callable[[], list] | None = None) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"backend name must be an identifier, got {name!r}")
    with _lock:
        _factories[name] = BackendInfo(name, factory, source, available, priority, devices)


def unregister_backend(name: str) -> None:
    with _lock:
        _factories.pop(name, None)
        for key in [k for k in _servers if k.split(":")[0] == name]:
            server = _servers.pop(key)
            server.channel.close()
        for key in [k for k in _clients if k[0].split(":")[0] == name]:
            del _clients[key]


def backend_infos() -> dict[str, BackendInfo]:
    _ensure_plugins()
    with _lock:
        return dict(_factories)


def backends() -> list[str]:
    """The registered backend names (available or not)."""
    return sorted(backend_infos())


def _ensure_plugins() -> None:
    from ..plugins import get_plugin_manager

    get_plugin_manager()


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


def client(device: str | None = None, **options):
    """The client of ``device`` (``"cpu"``, ``"cpu:1"``, ``"cuda"``, ...); the same object each time.

    Options (e.g. ``boundscheck=True``) change how kernels are compiled; clients with different
    options share the device's server, its memory and its streams. An option the device's backend
    does not know is ``OptionError`` (a ``TypeError``), listing the ones it knows.
    """
    from .client import Client

    if device is None:
        device = _default_device()
    if not isinstance(device, str):
        raise TypeError(f"device must be a string like 'cpu' or 'cuda:1', got {type(device).__name__}")
    name, index = _parse(device)
    canonical = f"{name}:{index}"
    if name == "cpu" and "boundscheck" not in options and (forced := config.boundscheck_forced()) is not None:
        options["boundscheck"] = forced      # NUMBA_BOUNDSCHECK, else NUMBA_CUBE_BOUNDSCHECK
    key = (canonical, tuple(sorted(options.items())))
    c = _clients.get(key)  # the common case, without the lock (a dict read is atomic)
    if c is not None:
        return c
    # Plugins load before the registry lock is taken: the plugin manager's lock is always taken
    # first (it registers backends under it), so holding ours while waiting for it could deadlock
    # against a thread that is loading plugins.
    _ensure_plugins()
    with _lock:
        c = _clients.get(key)
        if c is not None:
            return c
        infos = _factories
        info = infos.get(name)
        if info is None:
            raise BackendNotFound(f"no backend named {name!r}; registered: {sorted(infos)}")
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
    from ..plugins import notify_client_created

    notify_client_created(c)
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


def push_current(c) -> None:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(c)


def pop_current() -> None:
    _local.stack.pop()


def current_client():
    """The innermost ``with client:`` on this thread, else ``cube.use``'s, else the default device's."""
    stack = getattr(_local, "stack", None)
    if stack:
        return stack[-1]
    if _default_client is not None:
        return _default_client
    return client()
