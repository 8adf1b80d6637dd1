"""``numba_cube.config``: every ``NUMBA_CUBE_*`` variable is parsed there, read when asked for,
and a bad value warns (once) and falls back to the default instead of breaking anything."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from numba_cube import config


@pytest.fixture(autouse=True)
def _fresh_warnings():
    config._warned.clear()
    yield
    config._warned.clear()


@pytest.mark.parametrize("raw, expected", [("1", True), ("true", True), ("YES", True), (" on ", True),
                                           ("0", False), ("False", False), ("no", False), ("off", False),
                                           ("", False)])
def test_bool_spellings(monkeypatch, raw, expected):
    """Booleans accept 1/0, true/false, yes/no, on/off in any case; empty means the default."""
    monkeypatch.setenv("NUMBA_CUBE_BOUNDSCHECK", raw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert config.get_bool("NUMBA_CUBE_BOUNDSCHECK") is expected


def test_bad_bool_warns_once_and_falls_back(monkeypatch):
    """A value that is not a boolean warns, naming the variable and the value, and the default
    is used; the same bad value does not warn again (a hot path may read it often)."""
    monkeypatch.setenv("NUMBA_CUBE_BOUNDSCHECK", "maybe")
    with pytest.warns(RuntimeWarning, match="NUMBA_CUBE_BOUNDSCHECK='maybe'"):
        assert config.get_bool("NUMBA_CUBE_BOUNDSCHECK", default=True) is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert config.get_bool("NUMBA_CUBE_BOUNDSCHECK") is False


@pytest.mark.parametrize("raw", ["lots", "3.5", "0"])
def test_bad_int_warns_and_falls_back(monkeypatch, raw):
    """An integer that does not parse, or is below the minimum, warns and gives the default."""
    monkeypatch.setenv("NUMBA_CUBE_MAX_TASKS", raw)
    with pytest.warns(RuntimeWarning, match="NUMBA_CUBE_MAX_TASKS"):
        assert config.get_int("NUMBA_CUBE_MAX_TASKS", 32, minimum=1) == 32


def test_good_int_and_read_when_asked(monkeypatch):
    """Values are read when asked for, not frozen at import: a change is seen at once."""
    monkeypatch.setenv("NUMBA_CUBE_MAX_TASKS", "7")
    assert config.get_int("NUMBA_CUBE_MAX_TASKS", 32, minimum=1) == 7
    monkeypatch.setenv("NUMBA_CUBE_MAX_TASKS", "9")
    assert config.get_int("NUMBA_CUBE_MAX_TASKS", 32, minimum=1) == 9
    monkeypatch.delenv("NUMBA_CUBE_MAX_TASKS")
    assert config.get_int("NUMBA_CUBE_MAX_TASKS", 32, minimum=1) == 32


def test_choice_is_case_insensitive_and_bad_choice_falls_back(monkeypatch):
    """A string with choices is matched case-insensitively; another value warns and falls back."""
    monkeypatch.setenv("NUMBA_CUBE_DEPENDENCY_RULE", "BASELINE")
    assert config.get_str("NUMBA_CUBE_DEPENDENCY_RULE", "hazard", ("hazard", "baseline")) == "baseline"
    monkeypatch.setenv("NUMBA_CUBE_DEPENDENCY_RULE", "strict")
    with pytest.warns(RuntimeWarning, match="'hazard'"):
        assert config.get_str("NUMBA_CUBE_DEPENDENCY_RULE", "hazard", ("hazard", "baseline")) == "hazard"


def test_every_variable_is_documented_and_every_read_is_declared():
    """The module docstring's table documents exactly ``VARIABLES``, and every ``NUMBA_CUBE_*``
    name used anywhere in the package is one of them (parsed in one place, documented once)."""
    documented = set(re.findall(r"^\| (NUMBA_CUBE_\w+) \|", config.__doc__, re.M))
    assert documented == set(config.VARIABLES)
    package = Path(config.__file__).parent
    used = set()
    for path in package.rglob("*.py"):
        used |= set(re.findall(r"\bNUMBA_CUBE_[A-Z_]+\b", path.read_text()))
    used.discard("NUMBA_CUBE_")   # the prefix itself
    used.discard("NUMBA_CUBE_TRACE")   # the trace plugin's, named in config's docstring as an example
    assert used <= set(config.VARIABLES), used - set(config.VARIABLES)


def test_snapshot_and_unknown(monkeypatch):
    """``snapshot()`` shows every ``NUMBA_CUBE_*`` variable set; ``unknown()`` those nothing
    reads (a typo) until a plugin ``declare()``s it; other variables are not shown."""
    monkeypatch.setenv("NUMBA_CUBE_DEVICE", "cpu")
    monkeypatch.setenv("NUMBA_CUBE_FROBNICATE", "1")
    monkeypatch.setenv("NUMBA_NUM_THREADS", "2")
    snap = config.snapshot()
    assert snap["NUMBA_CUBE_DEVICE"] == "cpu" and "NUMBA_NUM_THREADS" not in snap
    assert "NUMBA_CUBE_FROBNICATE" in config.unknown() and "NUMBA_CUBE_DEVICE" not in config.unknown()
    monkeypatch.setitem(config._declared, "NUMBA_CUBE_FROBNICATE", "a plugin")
    assert "NUMBA_CUBE_FROBNICATE" not in config.unknown()
    with pytest.raises(ValueError):
        config.declare("FROB", "a plugin")


def test_cache_root_refuses_a_directory_others_can_write(monkeypatch, tmp_path):
    """Generated code is code that will run: a cache directory writable by others is refused
    with a warning, and a private temporary directory is used instead."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(shared))
    monkeypatch.setattr(config, "_fallback_root", None)
    with pytest.warns(RuntimeWarning, match="not private"):
        root = config.cache_root()
    assert root != shared and root.exists()
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path / "mine"))
    assert config.cache_root() == tmp_path / "mine"


def test_cache_root_default_is_platformdirs_and_includes_a_private_pycache(monkeypatch, tmp_path):
    """Without NUMBA_CUBE_CACHE_DIR the cache is platformdirs' user cache directory for
    numba_cube (``$XDG_CACHE_HOME/numba_cube`` on Linux); the root and its ``__pycache__`` (Numba's
    cache of the generated modules) are created 0o700."""
    import os
    import stat

    import platformdirs

    monkeypatch.delenv("NUMBA_CUBE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    expected = Path(platformdirs.user_cache_dir("numba_cube", appauthor=False))
    assert config.cache_root() == expected
    for path in (expected, expected / "__pycache__"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


def test_upstream_snapshot_lists_numba_and_cuda_variables(monkeypatch):
    """``upstream_snapshot()`` has every named Numba/CUDA variable (None when not set, the value
    as set otherwise, an empty one included), then any other set ``NUMBA_*``/``CUDA_*`` variable,
    and none of numba_cube's own."""
    for name in config.UPSTREAM_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NUMBA_OPT", "0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    monkeypatch.setenv("NUMBA_CUBE_MAX_TASKS", "8")
    snap = config.upstream_snapshot()
    assert list(snap)[:len(config.UPSTREAM_VARIABLES)] == list(config.UPSTREAM_VARIABLES)
    assert snap["NUMBA_OPT"] == "0" and snap["CUDA_VISIBLE_DEVICES"] == ""
    assert snap["NUMBA_ENABLE_CUDASIM"] is None and snap["NUMBA_DISABLE_JIT"] is None
    assert snap["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] == "0"
    assert not any(name.startswith("NUMBA_CUBE_") for name in snap)


def test_debug_variable_is_known(monkeypatch):
    """``NUMBA_CUBE_DEBUG`` (the commands' traceback switch) is one of numba_cube's variables,
    so ``info`` does not flag it as a typo."""
    monkeypatch.setenv("NUMBA_CUBE_DEBUG", "1")
    assert "NUMBA_CUBE_DEBUG" in config.known()
    assert "NUMBA_CUBE_DEBUG" not in config.unknown()
