"""``python -m numba_cube``: ``demo`` runs a small real pipeline; ``info`` reports the setup;
``plugins`` lists plugins as JSON.

``info`` is to numba_cube what ``numba -s`` is to Numba (``numba/misc/numba_sysinfo.py``): versions,
backends with their devices and whether they can start (and why not), plugins and where they came
from, and the ``NUMBA_CUBE_*`` variables in effect, with any that nothing reads flagged (a typo).
``--json`` prints the same as one JSON object (``collect_info()``). Every probe is best effort: one
that fails adds a line to ``warnings`` instead of failing the report, because this command is
what a user runs when something is already wrong.

Devices are listed as far as a cheap probe tells: a backend's ``devices()`` if it registered one,
else ``<name>:0``, plus every device already started in this process. No device is started.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

__all__ = ["main", "collect_info"]

_OPTIONAL_DISTRIBUTIONS = ("llvmlite", "numba-cuda", "cuda-python", "cuda-bindings", "matplotlib")


def _versions(warnings: list) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from . import __version__

    versions: dict = {"numba_cube": __version__, "python": platform.python_version()}
    for dist in ("numba", "numpy", "pluggy") + _OPTIONAL_DISTRIBUTIONS:
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:
            versions[dist] = None
        except Exception as exc:  # noqa: BLE001 - best effort
            versions[dist] = None
            warnings.append(f"version of {dist}: {type(exc).__name__}: {exc}")
    return versions


def collect_info() -> dict:
    """Everything ``python -m numba_cube info`` reports, as one JSON-ready dict."""
    from . import config

    warnings: list[str] = []
    info: dict = {"versions": _versions(warnings), "platform": platform.platform(),
                  "python_executable": sys.executable, "cpu_count": os.cpu_count()}
    try:
        import numba

        info["threading_layer"] = numba.config.THREADING_LAYER
    except Exception as exc:  # noqa: BLE001 - best effort
        info["threading_layer"] = None
        warnings.append(f"numba: {type(exc).__name__}: {exc}")
    backends: dict = {}
    plugins: dict = {}
    errors: list = []
    try:
        from .plugins import plugin_errors, plugin_infos
        from .runtime.registry import backend_infos

        for name, binfo in sorted(backend_infos().items()):
            reason = binfo.unavailable_reason()
            backends[name] = {"available": reason is None, "reason": reason, "source": binfo.source,
                              "priority": binfo.priority, "devices": binfo.device_names()}
        for p in plugin_infos():
            plugins[p.pop("name")] = p
        errors = plugin_errors()
    except Exception as exc:  # noqa: BLE001 - the report must come out even so
        warnings.append(f"plugins: {type(exc).__name__}: {exc}")
    info.update({
        "backends": backends,
        "plugins": plugins,
        "plugin_errors": errors,
        "environment": config.snapshot(),
        "environment_unknown": config.unknown(),
        "warnings": warnings,
    })
    return info


def _print_info(info: dict, out=None) -> None:
    out = out or sys.stdout

    def p(*args):
        print(*args, file=out)

    p("numba_cube", info["versions"]["numba_cube"])
    p("\nversions:")
    for k, v in info["versions"].items():
        p(f"  {k:14} {v if v is not None else '(not installed)'}")
    p(f"  {'platform':14} {info['platform']}")
    p(f"  {'cpu count':14} {info['cpu_count']}")
    p(f"  {'threading':14} {info['threading_layer']} (Numba's setting; the cpu backend picks omp or tbb)")
    p("\nbackends:")
    if not info["backends"]:
        p("  (none registered)")
    for name, b in info["backends"].items():
        state = "available" if b["available"] else f"unavailable: {b['reason']}"
        p(f"  {name:10} {state}")
        p(f"  {'':10} devices: {', '.join(b['devices']) or '-'}; priority {b['priority']}; from {b['source']}")
    p("\nplugins:")
    for name, pl in info["plugins"].items():
        hooks = ", ".join(h.removeprefix("numba_cube_") for h in pl["hooks"]) or "no hooks"
        p(f"  {name:16} {pl['source']}")
        p(f"  {'':16} hooks: {hooks}")
    for err in info["plugin_errors"]:
        p(f"  ! {err}")
    p("\nenvironment:")
    if not info["environment"]:
        p("  (no NUMBA_CUBE_* variables set)")
    for k, v in info["environment"].items():
        flag = "   <- unknown: nothing reads it (a typo, or its plugin is not loaded)" \
            if k in info["environment_unknown"] else ""
        p(f"  {k}={v}{flag}")
    if info["warnings"]:
        p("\nwarnings:")
        for w in info["warnings"]:
            p(f"  {w}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m numba_cube", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a small real pipeline and explain what happened")
    demo.add_argument("--device", default="cpu", help="device to run on (default: cpu)")
    demo.add_argument("--size", type=int, default=1 << 22, help="elements per buffer")
    demo.add_argument("--dask", action="store_true",
                      help="run a small pipeline on a two-worker local Dask cluster instead "
                           "(needs the dask extra: pip install 'numba_cube[dask]')")
    info = sub.add_parser("info", help="versions, backends and devices, plugins, settings")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_parser("plugins", help="the registered plugins, as JSON")
    args = parser.parse_args(argv)
    if args.command == "info":
        data = collect_info()
        if args.json:
            json.dump(data, sys.stdout, indent=2, default=str)
            print()
        else:
            _print_info(data)
        return 0
    if args.command == "plugins":
        from .plugins import plugin_errors, plugin_infos

        json.dump({"plugins": plugin_infos(), "errors": plugin_errors()}, sys.stdout, indent=2, default=str)
        print()
        return 0
    if args.dask:
        from .demo import run_dask_demo

        return run_dask_demo(args.device)
    from .demo import run_demo

    return run_demo(args.device, args.size)
