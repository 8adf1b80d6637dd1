"""What a plugin's ``register`` does (``plugin_backends.py``): the backend goes to the registry
with its owner, and one that cannot be taken is refused through ``record_error``, never raised."""

from __future__ import annotations

import pytest

import numba_cube as cube
from numba_cube.plugin_backends import make_register, version_refusal
from numba_cube.runtime import registry


@pytest.fixture
def recorded():
    """The errors a ``register`` records; the backends the test registers are dropped after it."""
    errors: list[str] = []
    yield errors
    for name in ("pbk_ok", "pbk_old"):
        registry.unregister_backend(name)


def _factory(index):
    raise AssertionError("not started in these tests")


def test_version_refusal_names_what_to_upgrade():
    """The matching version is taken; a newer one says to upgrade numba_cube, an older one the
    plugin, and a missing one how to declare it."""
    assert version_refusal(cube.BACKEND_API_VERSION) is None
    assert "upgrade numba_cube" in version_refusal(cube.BACKEND_API_VERSION + 1)
    assert "upgrade the plugin" in version_refusal(cube.BACKEND_API_VERSION - 1)
    assert "declares no api_version" in version_refusal(None)


def test_register_records_the_owner_and_refusals(recorded):
    """A good backend is registered with the plugin as owner and its source; a factory that is not
    callable is refused and not registered; a backend of another version is registered as
    unavailable, with the refusal recorded once and given as its reason."""
    register = make_register("my-plugin", "entry point my-plugin = pkg (pkg 1.0)", recorded.append)
    register("pbk_ok", _factory, api_version=cube.BACKEND_API_VERSION)
    info = registry.backend_infos()["pbk_ok"]
    assert info.owner == "my-plugin" and info.source == "entry point my-plugin = pkg (pkg 1.0)"
    assert recorded == []
    register("pbk_bad", "not callable", api_version=cube.BACKEND_API_VERSION)
    assert "pbk_bad" not in registry.backend_infos()
    assert len(recorded) == 1 and "not callable" in recorded[0]
    register("pbk_old", _factory, api_version=None)
    assert len(recorded) == 2 and "'pbk_old'" in recorded[1]
    assert registry.backend_infos()["pbk_old"].unavailable_reason() == recorded[1]
