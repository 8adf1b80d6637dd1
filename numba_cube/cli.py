"""``python -m numba_cube`` (also the ``numba-cube`` script): ``demo`` runs a small real pipeline;
``info`` reports the setup; ``plugins`` lists plugins as JSON; ``cache info`` and ``cache clear``
report and prune the disk caches (``cache_admin.py``; printed here); ``translate`` shows what the
CPU translator makes of a kernel (``cli_translate.py``); ``--version``.

``info`` is to numba_cube what ``numba -s`` is to Numba (``numba/misc/numba_sysinfo.py``): versions,
backends with their devices and whether they can start (and why not), plugins and where they came
from, the ``NUMBA_CUBE_*`` variables in effect, with any that nothing reads flagged (a typo), and
the Numba and CUDA variables that change what numba_cube does (``config.upstream_snapshot()``);
when ``NUMBA_ENABLE_CUDASIM=1`` makes numba-cuda's simulator the ``cuda`` device it says so in
plain words (``cuda_device``). ``--json`` prints the same as one JSON object (``collect_info()``).
Every probe is best effort: one that fails adds a line to ``warnings`` instead of failing the
report, because this command is what a user runs when something is already wrong.

Devices are listed as far as a cheap probe tells: a backend's ``devices()`` if it registered one,
else ``<name>:0``, plus every device already started in this process. No device is started.

Errors a user can meet (a device that is not there, a bad ``--device``, the ``dask`` extra not
installed) are one line on stderr and exit status 1 or 2, never a traceback unless asked for
(``--debug`` or ``NUMBA_CUBE_DEBUG=1``); see ``cli_errors.py``, which also keeps ``... | head``
quiet.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import platform
import sys
import textwrap

from .cli_errors import EXIT_USAGE, CommandError, OneLineArgumentParser, debug_requested, run_command

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
        from numba_cube.runtime.registry import backend_infos

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
        "cuda_device": _cuda_device(backends.get("cuda"), warnings),
        "plugins": plugins,
        "plugin_errors": errors,
        "environment": config.snapshot(),
        "environment_unknown": config.unknown(),
        "upstream_environment": config.upstream_snapshot(),
        "warnings": warnings,
    })
    return info


def _cuda_device(cuda_backend: dict | None, warnings: list) -> dict:
    """What ``cuda`` runs on here, in words: ``{"simulator": bool, "description": str}``. Under
    ``NUMBA_ENABLE_CUDASIM`` it is numba-cuda's simulator, which a user comparing timings or
    debugging a GPU problem must not mistake for a GPU."""
    try:
        from numba_cube.backends.cuda.driver.probe import simulating

        simulated = simulating()
    except Exception as exc:  # noqa: BLE001 - best effort
        warnings.append(f"cuda probe: {type(exc).__name__}: {exc}")
        simulated = False
    if simulated:
        value = os.environ.get("NUMBA_ENABLE_CUDASIM", "1")
        return {"simulator": True,
                "description": f"numba-cuda's simulator (NUMBA_ENABLE_CUDASIM={value}), not a GPU"}
    if cuda_backend is None:
        return {"simulator": False, "description": "no cuda backend registered"}
    if not cuda_backend["available"]:
        return {"simulator": False, "description": f"unavailable: {cuda_backend['reason']}"}
    return {"simulator": False,
            "description": f"GPUs through the CUDA driver: {', '.join(cuda_backend['devices']) or '-'}"}


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
    if info["cuda_device"]["simulator"]:
        p(f"  cuda: {info['cuda_device']['description']}")
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
    p("\nnumba and CUDA environment (they change what numba_cube does):")
    unset = [k for k, v in info["upstream_environment"].items() if v is None]
    for k, v in info["upstream_environment"].items():
        if v is not None:
            p(f"  {k}={v}")
    if unset:
        p(textwrap.fill("not set: " + ", ".join(unset), width=100, initial_indent="  ",
                        subsequent_indent="    "))
    if info["warnings"]:
        p("\nwarnings:")
        for w in info["warnings"]:
            p(f"  {w}")


def _prog() -> str:
    """The name the user typed: the ``numba-cube`` script, or ``python -m numba_cube``."""
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return script if script == "numba-cube" else "python -m numba_cube"


def _parser(prog: str) -> argparse.ArgumentParser:
    from . import __version__

    parser = OneLineArgumentParser(
        prog=prog, description="numba_cube's command line: a demo, a report of the setup, the plugins.",
        epilog="Errors are one line on stderr (exit status 1, or 2 for a bad command line); "
               "--debug, or NUMBA_CUBE_DEBUG=1 in the environment, also prints their traceback.")
    parser.add_argument("--version", action="version", version=f"numba_cube {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of an error too (same as NUMBA_CUBE_DEBUG=1)")
    # The same option after the subcommand; SUPPRESS keeps it from resetting one given before.
    debug_after = argparse.ArgumentParser(add_help=False)
    debug_after.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="print the traceback of an error too (same as NUMBA_CUBE_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", parents=[debug_after],
                          help="run a small real pipeline and explain what happened")
    demo.add_argument("--device", default="cpu",
                      help="device to run on: cpu (default), cuda, cuda:1, ... ('info' lists them)")
    demo.add_argument("--size", type=_positive_int, default=1 << 22, help="elements per buffer")
    demo.add_argument("--dask", action="store_true",
                      help="run a small pipeline on a two-worker local Dask cluster instead "
                           "(needs the dask extra: pip install 'numba_cube[dask]')")
    run = sub.add_parser("run", help="run a numba.cuda program unchanged, numba.cuda served by "
                         "numba_cube: run [--device cpu] (script.py | -m module) [args]")
    run.add_argument("program", nargs=argparse.REMAINDER,
                     help="[--device DEVICE] script.py [args], or -m module [args] (cli_run.py)")
    info = sub.add_parser("info", parents=[debug_after],
                          help="versions, backends and devices, plugins, settings")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_parser("plugins", parents=[debug_after], help="the registered plugins, as JSON")
    translate = sub.add_parser("translate", parents=[debug_after],
                               help="what the CPU translator makes of a kernel: the generated "
                                    "module, or its body after a stage (cli_translate.py)")
    translate.add_argument("kernel", help="FILE.py:KERNEL or MODULE:KERNEL")
    translate.add_argument("--after", metavar="STAGE", default=None,
                           help="print the kernel's body after this stage instead of the module "
                                "(lower, lockstep, privatize, scan_idiom, const_shapes)")
    translate.add_argument("--without", metavar="PASS", action="append", default=None,
                           help="switch an optional pass off (repeatable, or comma-separated; "
                                "as NUMBA_CUBE_DISABLE_PASSES)")
    translate.add_argument("--boundscheck", action="store_true", help="with bounds checks")
    cache = sub.add_parser("cache", parents=[debug_after],
                           help="the disk caches: compiled kernels, translations, autotune results")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True)
    cache_info = cache_sub.add_parser("info", parents=[debug_after],
                                      help="where the cache is, its entries and bytes per kind")
    cache_info.add_argument("--json", action="store_true", help="print one JSON object")
    clear = cache_sub.add_parser("clear", parents=[debug_after],
                                 help="remove entries (all, or those not used for DAYS), printing them")
    clear.add_argument("--older-than", type=_days, metavar="DAYS", default=None,
                       help="only entries not used for more than DAYS days (a number, 0.5 is 12 hours)")
    clear.add_argument("--kind", action="append", choices=_cache_kinds(), default=None,
                       help="only this kind of entry (may be repeated; default: every kind)")
    clear.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _cache_kinds() -> tuple:
    from .cache_admin import KINDS

    return KINDS


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of days of 0 or more, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _check_device(device: str) -> None:
    """Refuse, as one line, a ``--device`` no backend has (a usage error) or one that cannot start
    here (a failure), before the demo starts: the registry's own errors say what is wrong, these
    also say what to do."""
    from numba_cube.backends.cuda.driver.probe import simulating
    from numba_cube.runtime.registry import backend_infos

    name, colon, index = device.partition(":")
    if colon and not index.isdigit():
        raise CommandError(f"bad --device {device!r}: expected '<backend>[:index]' with an index "
                           f"of 0 or more (cpu, cuda, cuda:1)", EXIT_USAGE)
    infos = backend_infos()
    if name not in infos:
        close = difflib.get_close_matches(name, list(infos), n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        raise CommandError(f"no backend named {name!r}{guess}; the backends here: "
                           f"{', '.join(sorted(infos))}", EXIT_USAGE)
    reason = infos[name].unavailable_reason()
    if reason is not None:
        sim = (", or set NUMBA_ENABLE_CUDASIM=1 to run cuda on numba-cuda's simulator"
               if name == "cuda" and not simulating() else "")
        raise CommandError(f"device {device!r} is not available here ({reason.rstrip('.')}); "
                           f"use --device cpu{sim}; '{_prog()} info' lists the devices")


def _needs_dask() -> None:
    missing = [m for m in ("dask", "distributed") if importlib.util.find_spec(m) is None]
    if missing:
        raise CommandError(f"demo --dask needs Dask ({', '.join(missing)} not installed): "
                           f"pip install 'numba_cube[dask]'")


def _run(args) -> int:
    if args.command == "info":
        data = collect_info()
        if args.json:
            json.dump(data, sys.stdout, indent=2, default=str)
            print()
        else:
            _print_info(data)
        return 0
    if args.command == "cache":
        from .cli_cache import run_cache_command

        return run_cache_command(args)
    if args.command == "run":
        from .cli_run import run_program

        return run_program(args.program)
    if args.command == "translate":
        from .cli_translate import run_translate_command

        return run_translate_command(args)
    if args.command == "plugins":
        from .plugins import plugin_errors, plugin_infos

        json.dump({"plugins": plugin_infos(), "errors": plugin_errors()}, sys.stdout, indent=2, default=str)
        print()
        return 0
    _check_device(args.device)
    if args.dask:
        _needs_dask()
        from .demo import run_dask_demo

        return run_dask_demo(args.device)
    from .demo import run_demo

    return run_demo(args.device, args.size)


def main(argv: list[str] | None = None) -> int:
    """The command: its exit status (a usage error raises ``SystemExit(2)``, as argparse does)."""
    prog = _prog()
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:
        # Everything after `run` is the program's command line (its own options included), which
        # argparse would try to read as ours: cli_run.py parses it.
        from .cli_run import run_program

        return run_command(prog, lambda: run_program(argv[1:]), debug_requested(False))
    args = _parser(prog).parse_args(argv)
    return run_command(prog, lambda: _run(args), debug_requested(args.debug))
