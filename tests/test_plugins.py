"""Plugins (CONTRACT.md section 8): discovery through the ``numba_cube``
entry-point group, backend registration with version and availability checks, observer hooks,
the client-created hook, and a plugin manager that can be reset without leaving anything behind."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import numba_cube as cube
from numba_cube import plugins
from numba_cube.plugins import get_plugin_manager, plugin_errors, plugin_infos, plugin_sources, reset_plugin_manager
from numba_cube.runtime.client import observers
from numba_cube.runtime.registry import backend_infos
from numba_cube.testing import PythonBackend


def _python_factory(name):
    """``factory(index)`` of a backend that runs kernels as plain Python (``PythonBackend``)."""

    def factory(index):
        from numba_cube.runtime.streams.channel import ThreadChannel
        from numba_cube.runtime.server import DeviceServer

        device = f"{name}:{index}"
        return DeviceServer(device, PythonBackend(), ThreadChannel(device))

    return factory


def _twice(x, out):
    out[:] = x * 2


twice = cube.kernel(_twice, reads=("x",), writes=("out",))


@pytest.fixture
def pm():
    """The plugin manager; every plugin a test registers is gone afterwards (reset)."""
    manager = get_plugin_manager()
    yield manager
    reset_plugin_manager()


def _run(script: str, **env_overrides) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD", None)
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True,
                          text=True, timeout=120)


# -- discovery --------------------------------------------------------------------------------------


def test_example_plugins_discovered_through_entry_points():
    """The two example packages under ``plugins/``, installed (``pip install -e plugins/...``),
    are found through their entry points and listed with their distribution names and versions;
    the built-in cpu backend is a plugin too, with source ``builtin``."""
    sources = plugin_sources()
    missing = [d for d in ("numba_cube_cudasim", "numba_cube_trace")
               if not any(d in s for s in sources.values())]
    assert not missing, (f"example plugins {missing} not discovered; install them: "
                         f"pip install -e plugins/numba_cube_cudasim -e plugins/numba_cube_trace")
    assert sources["numba_cube.cpu"] == "builtin"
    infos = {p["name"]: p for p in plugin_infos()}
    assert infos["cudasim"]["distribution"] == "numba_cube_cudasim"
    assert infos["cudasim"]["version"] == importlib.metadata.version("numba_cube_cudasim")
    assert infos["cudasim"]["backends"] == ["cudasim"]
    assert infos["trace"]["distribution"] == "numba_cube_trace"
    assert "cudasim" in cube.backends()
    assert backend_infos()["cudasim"].source == sources["cudasim"]


def test_disable_autoload_variable():
    """``NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD=1`` loads no entry-point plugin (the built-in
    backends still register); without it, the installed example plugins are loaded."""
    script = """
        import json, numba_cube as cube
        from numba_cube.plugins import plugin_sources
        print(json.dumps([cube.backends(), plugin_sources()]))
    """
    off = _run(script, NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD="1")
    assert off.returncode == 0, off.stderr
    backends, sources = json.loads(off.stdout)
    assert "cpu" in backends and "cudasim" not in backends
    assert sources["numba_cube.cpu"] == "builtin"
    assert set(sources.values()) == {"builtin"}
    on = _run(script)
    assert on.returncode == 0, on.stderr
    backends, sources = json.loads(on.stdout)
    assert "cudasim" in backends and {"cudasim", "trace"} <= set(sources)


def test_import_is_cheap_and_plugins_load_lazily():
    """``import numba_cube`` imports neither the plugin manager nor any plugin nor Numba: plugins
    load on the first use of backends or clients."""
    proc = _run("""
        import sys, numba_cube as cube
        before = sorted(m for m in ("numba_cube.plugins", "numba_cube_cudasim", "numba_cube_trace", "numba")
                        if m in sys.modules)
        cube.backends()
        after = sorted(m for m in ("numba_cube.plugins", "numba_cube_cudasim", "numba_cube_trace") if m in sys.modules)
        print(before, after)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "['numba_cube.plugins',", "'numba_cube_cudasim',", "'numba_cube_trace']"]


def test_broken_and_misspelt_entry_points_are_recorded_not_raised(monkeypatch):
    """An entry point that fails to import, and one whose hook name matches no specification
    (a typo that would otherwise never be called), are refused with the reason in
    ``plugin_errors()``; the other plugins and backends still load."""
    typo = types.ModuleType("nc_test_typo_plugin")

    @cube.hookimpl
    def numba_cube_lauch(event):  # sic: misspelt
        pass

    typo.numba_cube_lauch = numba_cube_lauch
    monkeypatch.setitem(sys.modules, "nc_test_typo_plugin", typo)
    fake = [importlib.metadata.EntryPoint("broken", "nc_no_such_module_xyz", "numba_cube"),
            importlib.metadata.EntryPoint("typo", "nc_test_typo_plugin", "numba_cube")]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: fake)
    reset_plugin_manager()
    try:
        errors = plugin_errors()
        assert any("broken" in e and "nc_no_such_module_xyz" in e and "failed to load" in e for e in errors)
        assert any("typo" in e and "numba_cube_lauch" in e for e in errors)
        assert "typo" not in plugin_sources() and "broken" not in plugin_sources()
        assert "cpu" in cube.backends()
    finally:
        monkeypatch.undo()
        reset_plugin_manager()


# -- a plugin registered in a test ---------------------------------------------------------------------


class _Plugin:
    """Every hook: a Python backend, and recorders of launches, tasks and clients."""

    def __init__(self, backend="plugbk"):
        self.backend = backend
        self.launches, self.tasks, self.clients = [], [], []

    @cube.hookimpl
    def numba_cube_register_backends(self, register):
        register(self.backend, _python_factory(self.backend), api_version=cube.BACKEND_API_VERSION)

    @cube.hookimpl
    def numba_cube_launch(self, event):
        self.launches.append(event)

    @cube.hookimpl
    def numba_cube_task_done(self, event):
        self.tasks.append(event)

    @cube.hookimpl
    def numba_cube_client_created(self, client):
        self.clients.append(client)


def test_registered_plugin_gets_every_hook_and_is_cleaned_up(pm):
    """``pm.register(obj)`` after start-up registers obj's backend at once; a launch reaches its
    launch observer (kernel, device, stream) and its task observer (timing, deps); the client
    hook runs once per new client (not for the cached one); ``pm.unregister(obj)`` removes the
    backend and the observers."""
    plugin = _Plugin()
    pm.register(plugin, name="test-plugin")
    assert plugin_sources()["test-plugin"] == "registered at run time"
    assert "plugbk" in cube.backends()
    client = cube.client("plugbk")
    assert plugin.clients == [client]
    assert cube.client("plugbk") is client and plugin.clients == [client]
    boundscheck_client = cube.client("plugbk", boundscheck=True)
    assert plugin.clients == [client, boundscheck_client]
    x, out = client.create(np.arange(4.0)), client.empty(4, np.float64)
    client.launch(twice, 1, 4, x, out)
    np.testing.assert_array_equal(client.read(out), np.arange(4.0) * 2)
    client.sync()
    assert [(e.kernel_id, e.device) for e in plugin.launches] == [(twice.id, "plugbk:0")]
    assert plugin.launches[0].stream == cube.StreamId.current()
    (task,) = plugin.tasks
    assert task.kernel_id == twice.id and task.start <= task.end and not task.failed
    pm.unregister(plugin)
    assert "plugbk" not in cube.backends()
    assert not observers.active() or plugins._launch_fns == ()
    with pytest.raises(cube.BackendNotFound):
        cube.client("plugbk")


def test_reset_leaves_no_duplicate_observers(pm):
    """Resetting the plugin manager and registering the same observer again, several times,
    leaves exactly one dispatcher per hook installed: each launch reaches the observer once."""
    plugin = _Plugin("resetbk")
    for _ in range(3):
        reset_plugin_manager()
        get_plugin_manager().register(plugin, name="reset-plugin")
        get_plugin_manager()  # a second call must not install anything again
    client = cube.client("resetbk")
    x, out = client.create(np.ones(2)), client.empty(2, np.float64)
    client.launch(twice, 1, 2, x, out)
    client.sync()
    assert len(plugin.launches) == 1 and len(plugin.tasks) == 1
    assert observers._observers.count(plugins._dispatch_launch) == 1
    assert observers._task_observers.count(plugins._dispatch_task) == 1
    reset_plugin_manager()
    assert plugins._dispatch_launch not in observers._observers
    assert plugins._dispatch_task not in observers._task_observers
    assert "resetbk" not in cube.backends()


def test_misspelt_hook_refused_at_run_time(pm):
    """Registering an object whose hook name matches no specification raises pluggy's
    ``PluginValidationError`` and leaves the object unregistered."""
    import pluggy

    class Typo:
        @cube.hookimpl
        def numba_cube_task_dnoe(self, event):
            pass

    typo = Typo()
    with pytest.raises(pluggy.PluginValidationError, match="numba_cube_task_dnoe"):
        pm.register(typo, name="typo")
    assert not pm.is_registered(typo) and "typo" not in plugin_sources()


def test_failing_observer_is_isolated(pm):
    """An observer that raises is logged and ignored: the launch runs, and another plugin's
    observer of the same hook is still called."""

    class Bad:
        @cube.hookimpl
        def numba_cube_launch(self, event):
            raise RuntimeError("observer bug")

    good = _Plugin("isobk")
    pm.register(good, name="good")
    pm.register(Bad(), name="bad")
    client = cube.client("isobk")
    x, out = client.create(np.ones(3)), client.empty(3, np.float64)
    client.launch(twice, 1, 3, x, out)
    np.testing.assert_array_equal(client.read(out), np.full(3, 2.0))
    assert len(good.launches) == 1


# -- backend registration: versions, availability, names -----------------------------------------------


def _backend_plugin(**register_kwargs):
    name = register_kwargs.pop("name")

    class P:
        @cube.hookimpl
        def numba_cube_register_backends(self, register):
            register(name, _python_factory(name), **register_kwargs)

    return P()


@pytest.mark.parametrize("version, advice", [(cube.BACKEND_API_VERSION + 1, "upgrade numba_cube"),
                                             (cube.BACKEND_API_VERSION - 1, "upgrade the plugin"),
                                             (None, "declares no api_version")])
def test_other_api_version_refused(pm, version, advice):
    """A backend built for another ``BACKEND_API_VERSION`` (or declaring none) is refused with a
    message naming both versions and what to upgrade; it stays listed as unavailable with that
    message, and ``cube.client(name)`` raises ``BackendNotFound`` carrying it."""
    kwargs = {"name": "oldbk"} if version is None else {"name": "oldbk", "api_version": version}
    pm.register(_backend_plugin(**kwargs), name="old-plugin")
    (msg,) = [e for e in plugin_errors() if "oldbk" in e]
    assert advice in msg and "old-plugin" in msg
    if version is not None:
        assert f"version {version}" in msg and f"version {cube.BACKEND_API_VERSION}" in msg
    assert "oldbk" in cube.backends()
    assert backend_infos()["oldbk"].unavailable_reason() == msg
    with pytest.raises(cube.BackendNotFound, match=advice):
        cube.client("oldbk")


def test_unavailable_backend_listed_with_reason(pm):
    """A backend whose ``available()`` says no is listed (``cube.backends()``, ``info``) as
    unavailable with the reason; ``cube.client(name)`` raises ``BackendNotFound`` (also a
    LookupError) with it; the default device skips it whatever its priority; its factory is never
    called. An ``available()`` that raises counts as unavailable."""
    from numba_cube.cli import collect_info
    from numba_cube.runtime.registry import _default_device

    def factory(index):
        raise AssertionError("the factory of an unavailable backend must not be called")

    class P:
        @cube.hookimpl
        def numba_cube_register_backends(self, register):
            register("nodriver", factory, api_version=cube.BACKEND_API_VERSION,
                     available=lambda: "no frobnicator driver found", priority=100)
            register("crashprobe", factory, api_version=cube.BACKEND_API_VERSION,
                     available=lambda: 1 / 0)

    pm.register(P(), name="unavailable-plugin")
    assert {"nodriver", "crashprobe"} <= set(cube.backends())
    with pytest.raises(cube.BackendNotFound, match="no frobnicator driver found") as info:
        cube.client("nodriver")
    assert isinstance(info.value, LookupError)
    with pytest.raises(cube.BackendNotFound, match="ZeroDivisionError"):
        cube.client("crashprobe")
    if not os.environ.get("NUMBA_CUBE_DEVICE"):
        assert _default_device() != "nodriver"
    listed = collect_info()["backends"]["nodriver"]
    assert listed["available"] is False and listed["reason"] == "no frobnicator driver found"
    assert listed["devices"] == []


def test_factory_that_cannot_start_raises_backend_not_found(pm):
    """A factory that raises (a driver error at start-up) becomes ``BackendNotFound`` naming the
    device and the cause, chained to the original exception, not a crash."""

    def factory(index):
        raise OSError("libfrob.so: cannot open shared object file")

    class P:
        @cube.hookimpl
        def numba_cube_register_backends(self, register):
            register("frob", factory, api_version=cube.BACKEND_API_VERSION)

    pm.register(P(), name="frob-plugin")
    with pytest.raises(cube.BackendNotFound, match="frob:1.*libfrob.so") as info:
        cube.client("frob:1")
    assert isinstance(info.value.__cause__, OSError)


def test_duplicate_backend_name_and_bad_names_refused(pm):
    """A second plugin registering a backend name another plugin owns (here the built-in ``cpu``)
    is refused and recorded; the original stays. A name that is not an identifier is refused."""
    pm.register(_backend_plugin(name="cpu", api_version=cube.BACKEND_API_VERSION), name="usurper")
    assert backend_infos()["cpu"].source == "builtin"
    assert any("'cpu'" in e and "usurper" in e and "already registered" in e for e in plugin_errors())
    pm.register(_backend_plugin(name="not-an-identifier", api_version=cube.BACKEND_API_VERSION), name="badname")
    assert "not-an-identifier" not in cube.backends()
    assert any("not-an-identifier" in e for e in plugin_errors())


def test_register_hook_that_raises_is_recorded(pm):
    """A plugin whose registration hook raises is recorded in ``plugin_errors()``; nothing else
    breaks."""

    class P:
        @cube.hookimpl
        def numba_cube_register_backends(self, register):
            raise ImportError("frobnicate is not installed")

    pm.register(P(), name="raising-plugin")
    assert any("raising-plugin" in e and "frobnicate" in e for e in plugin_errors())
    assert "cpu" in cube.backends()


def test_first_use_from_many_threads_at_once(pm):
    """Plugins loading on first use, raced by threads that ask for backends, plugin sources and
    clients at once, load once and deadlock nowhere (the plugin manager's lock is always taken
    before the registry's); every thread gets the same client."""
    import threading

    reset_plugin_manager()
    results, errors = [], []
    barrier = threading.Barrier(8)

    def worker(i):
        try:
            barrier.wait()
            if i % 3 == 0:
                results.append(cube.client("cpu"))
            elif i % 3 == 1:
                cube.backends()
                results.append(cube.client("cpu"))
            else:
                plugin_sources()
                results.append(cube.client("cpu"))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert not errors, errors
    assert len({id(c) for c in results}) == 1 and len(results) == 8
    assert observers._observers.count(plugins._dispatch_launch) <= 1


# -- hooks go through pluggy: wrappers, ordering, one backend table ------------------------------------


def test_registry_records_the_owner_plugin(pm):
    """The backend table (``runtime/registry.py``) is the only record of who registered a
    backend: its entry names the plugin, ``plugin_infos()`` lists the backend under it, and the
    built-in backends are owned by their built-in plugins."""
    pm.register(_Plugin("ownedbk"), name="owner-plugin")
    assert backend_infos()["ownedbk"].owner == "owner-plugin"
    assert backend_infos()["cpu"].owner == "numba_cube.cpu"
    assert {p["name"]: p["backends"] for p in plugin_infos()}["owner-plugin"] == ["ownedbk"]


def test_hook_wrappers_wrap_registration_and_client_creation(pm):
    """``numba_cube_register_backends`` and ``numba_cube_client_created`` are called through
    pluggy: a plugin's hook wrapper runs around another plugin's registration (and sees its
    ``register``) and around the client-created call (and sees the client)."""

    class Wrapper:
        def __init__(self):
            self.registrations, self.clients = [], []

        @cube.hookimpl(wrapper=True)
        def numba_cube_register_backends(self, register):
            self.registrations.append(register)
            return (yield)

        @cube.hookimpl(wrapper=True)
        def numba_cube_client_created(self, client):
            self.clients.append(client)
            return (yield)

    wrapper = Wrapper()
    pm.register(wrapper, name="wrapper-plugin")
    plugin = _Plugin("wrappedbk")
    pm.register(plugin, name="wrapped-plugin")
    assert len(wrapper.registrations) == 1 and "wrappedbk" in cube.backends()
    client = cube.client("wrappedbk")
    assert wrapper.clients == [client] and plugin.clients == [client]


def test_builtins_register_first_and_trylast_is_honoured(monkeypatch):
    """At start-up backends register in pluggy's call order: the built-in backends are
    ``tryfirst``, so an entry point that registers ``cpu`` is refused and ``cpu`` stays built-in;
    between two entry points registering one name, the ``trylast`` one comes second (though
    pluggy would call it first, as the later registered) and is refused."""

    def plugin_module(module_name, backend, **hookimpl_opts):
        module = types.ModuleType(module_name)

        @cube.hookimpl(**hookimpl_opts)
        def numba_cube_register_backends(register):
            register(backend, _python_factory(backend), api_version=cube.BACKEND_API_VERSION)

        module.numba_cube_register_backends = numba_cube_register_backends
        monkeypatch.setitem(sys.modules, module_name, module)

    plugin_module("nc_test_usurper", "cpu")
    plugin_module("nc_test_first", "orderbk")
    plugin_module("nc_test_last", "orderbk", trylast=True)
    fake = [importlib.metadata.EntryPoint("usurper", "nc_test_usurper", "numba_cube"),
            importlib.metadata.EntryPoint("first", "nc_test_first", "numba_cube"),
            importlib.metadata.EntryPoint("last", "nc_test_last", "numba_cube")]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: fake)
    reset_plugin_manager()
    try:
        infos = backend_infos()
        assert infos["cpu"].source == "builtin" and infos["cpu"].owner == "numba_cube.cpu"
        assert infos["orderbk"].owner == "first"
        errors = plugin_errors()
        assert any("'cpu'" in e and "usurper" in e and "already registered" in e for e in errors)
        assert any("'orderbk' from entry point last" in e and "first = nc_test_first" in e
                   and "already registered" in e for e in errors)
    finally:
        monkeypatch.undo()
        reset_plugin_manager()


def test_backend_default_options_come_from_its_registration(pm):
    """Client options a backend takes from the environment are declared with its registration
    (``default_options``), not known to the registry: a client asked for without them gets them,
    the one asked for with the same values is the same object, and an option the caller passes
    wins."""

    class P:
        @cube.hookimpl
        def numba_cube_register_backends(self, register):
            register("defaultsbk", _python_factory("defaultsbk"), api_version=cube.BACKEND_API_VERSION,
                     default_options=lambda: {"boundscheck": True})

    pm.register(P(), name="defaults-plugin")
    client = cube.client("defaultsbk")
    assert client.options == {"boundscheck": True}
    assert cube.client("defaultsbk", boundscheck=True) is client
    assert cube.client("defaultsbk", boundscheck=False).options == {"boundscheck": False}
