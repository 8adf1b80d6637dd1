"""``python -m numba_cube`` (``cli.py``, ``cli_errors.py``): ``info [--json]`` (like ``numba -s``):
versions, backends with devices and availability, plugins and their sources, the ``NUMBA_CUBE_*``
variables in effect, the Numba and CUDA ones, whether ``cuda`` is the simulator; ``--version``;
expected errors as one line on stderr with exit status 1 or 2, quiet when the reader goes away."""

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
             "plugins", "plugin_errors", "environment", "environment_unknown", "warnings",
             "cuda_device", "upstream_environment"}


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


# -- the command as a user runs it: exit statuses, one-line errors, pipes ------------------------------

SIMULATOR_LINE = "cuda: numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1), not a GPU"


def _env(**extra) -> dict:
    """This process's environment (its PYTHONPATH: the tree under test) without numba_cube's
    variables or the simulator switch, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NUMBA_CUBE_") and k != "NUMBA_ENABLE_CUDASIM"}
    env.update(extra)
    return env


def _cli(*args, env=None, code=None):
    """Run ``python -m numba_cube *args`` (or ``python -c code *args``) in a fresh process."""
    argv = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "numba_cube", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env or _env())


def _one_error_line(proc) -> str:
    """The single line an expected error prints on stderr (asserting there is no traceback)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_version_from_the_module_and_the_script():
    """``python -m numba_cube --version`` and the installed ``numba-cube`` script print
    ``numba_cube <version>`` (the package's ``__version__``) and exit 0."""
    proc = _cli("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"numba_cube {cube.__version__}"
    script = os.path.join(os.path.dirname(sys.executable), "numba-cube")
    if not os.path.exists(script):
        pytest.skip("the numba-cube script is not installed next to this Python (pip install -e .)")
    proc = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"numba_cube {cube.__version__}"


def test_script_reports_errors_under_its_own_name():
    """The ``numba-cube`` script's one-line errors name it, as the user typed it."""
    script = os.path.join(os.path.dirname(sys.executable), "numba-cube")
    if not os.path.exists(script):
        pytest.skip("the numba-cube script is not installed next to this Python (pip install -e .)")
    proc = subprocess.run([script, "demo", "--device", "nosuchdevice"], capture_output=True,
                          text=True, timeout=300, env=_env())
    assert proc.returncode == 2
    assert _one_error_line(proc).startswith("numba-cube: error: no backend named 'nosuchdevice'")


def test_misspelt_device_is_a_usage_error_with_the_close_name():
    """``demo --device cdua``: exit status 2, one line naming the close backend and the list."""
    proc = _cli("demo", "--device", "cdua")
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert "no backend named 'cdua'" in line and "did you mean 'cuda'?" in line and "cpu" in line
    assert proc.stdout == ""


def test_malformed_device_and_size_are_usage_errors():
    """A device index that is no number and a size that is not positive are refused before
    anything runs: exit status 2, one line saying what is expected."""
    proc = _cli("demo", "--device", "cpu:x")
    assert proc.returncode == 2 and "expected '<backend>[:index]'" in _one_error_line(proc)
    proc = _cli("demo", "--size", "-3")
    assert proc.returncode == 2 and "expected a positive integer" in _one_error_line(proc)
    proc = _cli("frobnicate")
    assert proc.returncode == 2 and "invalid choice: 'frobnicate'" in _one_error_line(proc)


# Registers a backend that cannot start here, then runs the command line on it.
_UNAVAILABLE = """
import sys
import numba_cube as cube
from numba_cube.cli import main
from numba_cube.runtime.registry import register_backend
register_backend("nogpu", lambda index: None, available=lambda: "no GPU driver (libcuda.so not found)")
raise SystemExit(main(sys.argv[1:]))
"""


def test_unavailable_device_is_a_failure_naming_what_to_do():
    """``demo --device X`` where X cannot start here: exit status 1 and one line with the
    backend's reason and what to do instead (``--device cpu``, ``info``); nothing on stdout."""
    proc = _cli("demo", "--device", "nogpu", code=_UNAVAILABLE)
    assert proc.returncode == 1
    line = _one_error_line(proc)
    assert "device 'nogpu' is not available here (no GPU driver (libcuda.so not found))" in line
    assert "--device cpu" in line and "info' lists the devices" in line
    assert proc.stdout == ""


def test_demo_on_cuda_without_a_gpu_is_one_line():
    """On a machine where the CUDA backend cannot start, ``demo --device cuda`` exits 1 with one
    line that gives the reason and points to ``--device cpu`` and the simulator switch."""
    probe = _cli(code="from numba_cube.backends.cuda.driver.probe import available; print(available())")
    if probe.stdout.strip() == "None":
        pytest.skip("the CUDA backend can start here")
    proc = _cli("demo", "--device", "cuda")
    assert proc.returncode == 1
    line = _one_error_line(proc)
    assert "device 'cuda' is not available here" in line and "--device cpu" in line
    assert "NUMBA_ENABLE_CUDASIM=1" in line


def test_debug_shows_the_traceback_on_request():
    """``--debug`` (before or after the subcommand) and ``NUMBA_CUBE_DEBUG=1`` add the traceback
    to the same error line, with the same exit status."""
    for args, env in ((("--debug", "demo", "--device", "nogpu"), _env()),
                      (("demo", "--device", "nogpu", "--debug"), _env()),
                      (("demo", "--device", "nogpu"), _env(NUMBA_CUBE_DEBUG="1"))):
        proc = _cli(*args, env=env, code=_UNAVAILABLE)
        assert proc.returncode == 1, args
        assert "Traceback" in proc.stderr, args
        assert "device 'nogpu' is not available here" in proc.stderr.strip().splitlines()[-1]


def test_dask_demo_without_dask_says_what_to_install():
    """``demo --dask`` where Dask is not installed (hidden from the import system here): exit
    status 1, one line with the install command; nothing on stdout."""
    hide_dask = ("import sys, runpy; sys.modules['distributed'] = None; "
                 "sys.argv = ['numba_cube'] + sys.argv[1:]; runpy.run_module('numba_cube', run_name='__main__')")
    proc = _cli("demo", "--dask", code=hide_dask)
    assert proc.returncode == 1
    assert "pip install 'numba_cube[dask]'" in _one_error_line(proc)
    assert proc.stdout == ""


def test_closed_pipe_is_quiet(tmp_path):
    """A reader that is gone before the report is written (``| head`` that exited): exit status
    141, as for a process that SIGPIPE ended, and nothing on stderr (no BrokenPipeError)."""
    read_end, write_end = os.pipe()
    os.close(read_end)                       # the reader is gone: every write gets EPIPE
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.run([sys.executable, "-m", "numba_cube", "info"], stdout=write_end,
                              stderr=stderr, timeout=300, env=_env())
    os.close(write_end)
    assert proc.returncode == 141
    assert stderr_path.read_text() == ""


def test_info_shows_numba_and_cuda_variables():
    """``info`` lists the Numba and CUDA variables that change behaviour with their values as
    set (an empty CUDA_VISIBLE_DEVICES too: it hides every GPU), any other NUMBA_CUDA_* that is
    set, and names the ones not set; ``--json`` has the same under ``upstream_environment``."""
    env = _env(NUMBA_OPT="1", NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS="0", CUDA_VISIBLE_DEVICES="",
               NUMBA_NUM_THREADS="2")
    env.pop("NUMBA_DISABLE_JIT", None)
    proc = _cli("info", env=env)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for line in ("NUMBA_OPT=1", "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0", "CUDA_VISIBLE_DEVICES=",
                 "NUMBA_NUM_THREADS=2"):
        assert f"\n  {line}\n" in text, line
    assert "NUMBA_DISABLE_JIT" in text.split("not set:")[1]
    data = json.loads(_cli("info", "--json", env=env).stdout)
    upstream = data["upstream_environment"]
    assert upstream["NUMBA_OPT"] == "1" and upstream["CUDA_VISIBLE_DEVICES"] == ""
    assert upstream["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] == "0"
    assert upstream["NUMBA_DISABLE_JIT"] is None
    for name in ("NUMBA_ENABLE_CUDASIM", "NUMBA_CACHE_DIR", "NUMBA_THREADING_LAYER", "NUMBA_BOUNDSCHECK",
                 "NUMBA_CUDA_DRIVER", "CUDA_HOME", "CUDA_PATH"):
        assert name in upstream


def test_info_says_when_cuda_is_the_simulator():
    """Under NUMBA_ENABLE_CUDASIM=1, ``info`` says in plain words that ``cuda`` is numba-cuda's
    simulator and not a GPU, in the text and in ``--json`` (``cuda_device``); without it, it
    does not say so."""
    env = _env(NUMBA_ENABLE_CUDASIM="1")
    proc = _cli("info", env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"\n  {SIMULATOR_LINE}\n" in proc.stdout
    data = json.loads(_cli("info", "--json", env=env).stdout)
    assert data["cuda_device"] == {"simulator": True,
                                   "description": SIMULATOR_LINE.removeprefix("cuda: ")}
    plain = _cli("info", "--json")
    assert json.loads(plain.stdout)["cuda_device"]["simulator"] is False
    assert "not a GPU" not in _cli("info").stdout


def test_help_documents_the_traceback_switch():
    """``--help`` says how errors are reported and how to get their traceback: ``--debug`` and
    ``NUMBA_CUBE_DEBUG=1``."""
    proc = _cli("--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "--debug" in text and "NUMBA_CUBE_DEBUG=1" in text and "exit status 1" in text
