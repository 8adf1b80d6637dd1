"""``python -m numba_cube info [--json]`` (like ``numba -s``): versions, backends with devices and
availability, plugins and their sources, the ``NUMBA_CUBE_*`` variables in effect."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import numba_cube as cube
from numba_cube.cli import collect_info, main
from numba_cube.plugins import get_plugin_manager, reset_plugin_manager

INFO_KEYS = {"versions", "platform", "python_executable", "cpu_count", "threading_layer", "backends",
             "plugins", "plugin_errors", "environment", "environment_unknown", "warnings"}


def test_text_output_names_backends_devices_plugins(capsys, monkeypatch):
    """The text report has a section per topic and names every registered backend with its
    state and devices (``cpu:0`` for cpu), every plugin with its source, and the variables set."""
    monkeypatch.setenv("NUMBA_CUBE_MAX_TASKS", "16")
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for section in ("versions:", "backends:", "plugins:", "environment:"):
        assert f"\n{section}" in out
    for name in cube.backends():
        assert f"\n  {name} " in out
    assert "cpu:0" in out and "numba_cube.cpu" in out and "builtin" in out
    assert "NUMBA_CUBE_MAX_TASKS=16" in out
    assert f"numba_cube {cube.__version__}" in out


def test_json_output_parses_and_has_the_keys(capsys):
    """``info --json`` prints one JSON object with every key, versions of the main
    dependencies, and per backend: available, reason, source, priority, devices."""
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert INFO_KEYS <= set(data)
    assert {"numba_cube", "python", "numba", "numpy", "pluggy"} <= set(data["versions"])
    assert set(data["backends"]) == set(cube.backends())
    cpu = data["backends"]["cpu"]
    assert set(cpu) == {"available", "reason", "source", "priority", "devices"}
    assert cpu["source"] == "builtin" and cpu["devices"][0] == "cpu:0"
    assert data["plugins"]["numba_cube.cpu"]["hooks"] == ["numba_cube_register_backends"]
    assert data["plugins"]["numba_cube.cpu"]["backends"] == ["cpu"]


def test_unavailable_backend_and_unknown_variable_reported(capsys, monkeypatch):
    """An unavailable backend is shown with its reason, and a ``NUMBA_CUBE_*`` variable nothing
    reads (a typo) is flagged, in text and in JSON."""

    class P:
        @cube.hookimpl
        def numba_cube_register_backends(self, register):
            register("nogpu", lambda i: None, api_version=cube.BACKEND_API_VERSION,
                     available=lambda: "no GPU driver (libcuda.so not found)")

    monkeypatch.setenv("NUMBA_CUBE_BOUNDSCHEK", "1")
    get_plugin_manager().register(P(), name="nogpu-plugin")
    try:
        assert main(["info"]) == 0
        out = capsys.readouterr().out
        assert "nogpu" in out and "unavailable: no GPU driver (libcuda.so not found)" in out
        assert "NUMBA_CUBE_BOUNDSCHEK=1" in out and "unknown" in out
        data = collect_info()
        assert data["backends"]["nogpu"]["available"] is False
        assert data["backends"]["nogpu"]["reason"] == "no GPU driver (libcuda.so not found)"
        assert data["environment_unknown"] == ["NUMBA_CUBE_BOUNDSCHEK"]
    finally:
        reset_plugin_manager()


def test_plugins_subcommand(capsys):
    """``python -m numba_cube plugins`` prints the plugins as JSON (like ``llm plugins``)."""
    assert main(["plugins"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "numba_cube.cpu" in {p["name"] for p in data["plugins"]}
    assert isinstance(data["errors"], list)


def test_module_entry_point_runs():
    """``python -m numba_cube info --json`` works as a command in a fresh process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CUBE_")}
    proc = subprocess.run([sys.executable, "-m", "numba_cube", "info", "--json"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert INFO_KEYS <= set(data) and "cpu" in data["backends"]
    assert data["environment"] == {}


def test_bad_command_exits_nonzero():
    """An unknown subcommand is a usage error (exit status 2), not a traceback."""
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2
