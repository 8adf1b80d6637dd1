"""``python -m numba_cube cache info`` and ``cache clear``: the disk caches' housekeeping as text
or one JSON object (``--json``). ``cache_admin.py`` does the work; this module only prints it,
as ``cli.py`` prints ``info``.
"""

from __future__ import annotations

import json
import sys
import time

from .cache_admin import KINDS, CacheBusyError, clear, info
from .cli_errors import CommandError

__all__ = ["run_cache_command"]


def _size(nbytes: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes} B"      # pragma: no cover - the loop always returns


def _age(last_used: float | None, now: float) -> str:
    if last_used is None:
        return "-"
    days = max(0.0, now - last_used) / 86400
    return f"{days:.1f} days ago" if days >= 1 else f"{days * 24:.1f} hours ago"


def _print_info(data: dict, out) -> None:
    now = time.time()
    print(f"cache directory: {data['root']}", file=out)
    print(f"  {'kind':10} {'entries':>8} {'size':>11}  last used", file=out)
    for kind, row in data["kinds"].items():
        used = (f"{_age(row['newest_use'], now)} (oldest {_age(row['oldest_use'], now)})"
                if row["entries"] else "-")
        print(f"  {kind:10} {row['entries']:>8} {_size(row['bytes']):>11}  {used}", file=out)
    print(f"  {'other':10} {data['other']['files']:>8} {_size(data['other']['bytes']):>11}  "
          f"(the sealing key and locks: never removed)", file=out)


def _print_cleared(data: dict, out) -> None:
    now = time.time()
    for entry in data["removed"]:
        print(f"removed {entry['kind']:9} {entry['name']}  ({_size(entry['bytes'])}, "
              f"{len(entry['files'])} file{'s' if len(entry['files']) != 1 else ''}, "
              f"last used {_age(entry['last_used'], now)})", file=out)
    count = len(data["removed"])
    print(f"removed {count} entr{'y' if count == 1 else 'ies'}, {_size(data['bytes'])}, "
          f"from {data['root']}", file=out)


def run_cache_command(args) -> int:
    """``cache info`` / ``cache clear`` for the parsed ``args`` of ``cli.py``; exit status."""
    out = sys.stdout
    if args.cache_command == "info":
        data = info()
        printer = _print_info
    else:
        try:
            data = clear(tuple(args.kind) if args.kind else KINDS, args.older_than)
        except CacheBusyError as exc:
            raise CommandError(str(exc)) from None
        printer = _print_cleared
    if args.json:
        json.dump(data, out, indent=2)
        print(file=out)
    else:
        printer(data, out)
    return 0
