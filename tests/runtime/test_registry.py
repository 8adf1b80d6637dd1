"""The backend table and the clients (``runtime/registry.py``): one entry per backend name, owned
by the plugin that registered it; options a backend takes from the environment come with its
registration; the current client of ``kernel[count, dim](...)`` launches."""

from __future__ import annotations

import pytest

import numba_cube as cube
from numba_cube.runtime import registry
from numba_cube.runtime.streams.channel import InlineChannel
from numba_cube.runtime.server import DeviceServer
from numba_cube.testing import PythonBackend


def _factory(name):
    def factory(index):
        device = f"{name}:{index}"
        return DeviceServer(device, PythonBackend(), InlineChannel(device))

    return factory


@pytest.fixture
def backend_name(request):
    """A backend name for one test, unregistered afterwards (its devices closed)."""
    name = "reg_" + request.node.name.removeprefix("test_")[:40]
    yield name
    registry.unregister_backend(name)


def test_a_name_another_plugin_owns_is_refused(backend_name):
    """A backend name owned by one plugin cannot be taken by another (``ValueError`` naming the
    owner, the entry unchanged); the owner may register it again, and a direct registration
    (no owner, as tests do) may replace it. ``owned_backends()`` lists owned entries only."""
    registry.register_backend(backend_name, _factory(backend_name), owner="plugin-a", source="a's source")
    with pytest.raises(ValueError, match="plugin plugin-a .a's source. already registered"):
        registry.register_backend(backend_name, _factory(backend_name), owner="plugin-b")
    assert registry.owned_backends()[backend_name] == "plugin-a"
    registry.register_backend(backend_name, _factory(backend_name), owner="plugin-a")
    registry.register_backend(backend_name, _factory(backend_name))
    assert backend_name not in registry.owned_backends()
    assert registry.backend_infos()[backend_name].owner is None


def test_default_options_fill_in_what_the_caller_left_out(backend_name):
    """``default_options()`` is read at each ``client()`` call: its options go to a client asked
    for without them (the same object as the one asked for with those values), the caller's
    options win, and a change of the environment gives the next call another client."""
    defaults = {"boundscheck": True}
    registry.register_backend(backend_name, _factory(backend_name), default_options=lambda: dict(defaults))
    checked = cube.client(backend_name)
    assert checked.options == {"boundscheck": True}
    assert cube.client(backend_name, boundscheck=True) is checked
    assert cube.client(backend_name, boundscheck=False).options == {"boundscheck": False}
    defaults.clear()
    assert cube.client(backend_name).options == {}


def test_default_options_that_raise_are_backend_not_found(backend_name):
    """A backend whose ``default_options()`` raises cannot make clients: ``BackendNotFound``
    naming the backend and the cause, chained to it."""
    registry.register_backend(backend_name, _factory(backend_name), default_options=lambda: 1 / 0)
    with pytest.raises(cube.BackendNotFound, match=f"{backend_name}.*ZeroDivisionError") as info:
        cube.client(backend_name)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_current_client_is_the_innermost_with_block(backend_name):
    """``current_client()`` is this thread's innermost ``with client:``, nested blocks restoring
    the outer one on exit, else ``cube.use``'s client."""
    registry.register_backend(backend_name, _factory(backend_name))
    outer, inner = cube.client(f"{backend_name}:0"), cube.client(f"{backend_name}:1")
    cube.use(outer)
    try:
        with inner:
            assert registry.current_client() is inner
            with outer:
                assert registry.current_client() is outer
            assert registry.current_client() is inner
        assert registry.current_client() is outer
    finally:
        cube.use(None)
