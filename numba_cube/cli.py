"""``python -m numba_cube``: ``demo`` runs a small real pipeline; ``info`` reports the setup.

``info`` is to numba_cube what ``numba -s`` is to Numba: versions, backends with their devices
and whether they can start (and why not), plugins and where they came from, and the
``NUMBA_CUBE_*`` variables in effect. ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

__all__ = ["main", "collect_info"]


def collect_info() -> dict:
    import numba
    import numpy
    import pluggy

    from . import __version__, config
    from .plugins import plugin_errors, plugin_sources
    from .runtime.registry import backend_infos

    versions = {"numba_cube": __version__, "python": platform.python_version(),
                "numba": numba.__version__, "numpy": numpy.__version__, "pluggy": pluggy.__version__}
    try:
        from importlib.metadata import version

        versions["numba-cuda"] = version("numba-cuda")
    except Exception:  # noqa: BLE001 - optional
        versions["numba-cuda"] = None
    backends = {}
    for name, info in sorted(backend_infos().items()):
        reason = info.unavailable_reason()
        backends[name] = {"available": reason is None, "reason": reason, "source": info.source,
                          "priority": info.priority}
    return {
        "versions": versions,
        "platform": platform.platform(),
        "threading_layer_default": numba.config.THREADING_LAYER,
        "backends": backends,
        "plugins": plugin_sources(),
        "plugin_errors": plugin_errors(),
        "environment": config.snapshot(),
    }


def _print_info(info: dict) -> None:
    print("numba_cube", info["versions"]["numba_cube"])
    print("\nversions:")
    for k, v in info["versions"].items():
        print(f"  {k:12} {v if v is not None else '(not installed)'}")
    print(f"  platform     {info['platform']}")
    print("\nbackends:")
    for name, b in info["backends"].items():
        state = "available" if b["available"] else f"unavailable: {b['reason']}"
        print(f"  {name:10} {state}  (from {b['source']})")
    print("\nplugins:")
    for name, src in info["plugins"].items():
        print(f"  {name:24} {src}")
    for err in info["plugin_errors"]:
        print(f"  ! {err}")
    print("\nenvironment:")
    if not info["environment"]:
        print("  (no NUMBA_CUBE_* variables set)")
    for k, v in info["environment"].items():
        print(f"  {k}={v}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m numba_cube", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a small real pipeline and explain what happened")
    demo.add_argument("--device", default="cpu", help="device to run on (default: cpu)")
    demo.add_argument("--size", type=int, default=1 << 22, help="elements per buffer")
    info = sub.add_parser("info", help="versions, backends, plugins, settings")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.command == "info":
        data = collect_info()
        if args.json:
            json.dump(data, sys.stdout, indent=2, default=str)
            print()
        else:
            _print_info(data)
        return 0
    from .demo import run_demo

    return run_demo(args.device, args.size)
