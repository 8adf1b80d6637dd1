"""Every ``NUMBA_CUBE_*`` environment variable, parsed in one place.

Values are read when asked for (not frozen at import), so tests and long-lived processes see
changes. A bad value warns once and falls back to the default instead of breaking the import.

| variable | meaning | default |
| --- | --- | --- |
| NUMBA_CUBE_DEVICE | device ``cube.client()`` picks | best available |
| NUMBA_CUBE_CACHE_DIR | generated-code cache directory | ``$XDG_CACHE_HOME/numba_cube`` |
| NUMBA_CUBE_BOUNDSCHECK | bounds-check CPU kernels (IndexError becomes a launch failure) | 0 |
| NUMBA_CUBE_MAX_TASKS | queued launches per stream before it executes | 32 |
| NUMBA_CUBE_SERIAL_UNITS | below this many units a CPU launch runs the serial twin | 32768 |
| NUMBA_CUBE_DEPENDENCY_RULE | ``hazard`` (read/write sets) or ``baseline`` (any shared buffer) | hazard |
| NUMBA_CUBE_AUTOTUNE_CACHE | 0 turns the on-disk autotune cache off | 1 |
| NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD | 1 skips entry-point plugins | 0 |
| NUMBA_CUBE_PROFILE_LOG | 1 logs every kernel's duration (logger ``numba_cube.profile``) | 0 |
| NUMBA_CUBE_CUDA_DYNAMIC_COUNT | CUDA dynamic counts: ``auto`` (device-count kernel where possible) or ``readback`` | auto |

Plugins read their own ``NUMBA_CUBE_*`` variables through the same functions and ``declare()``
them (e.g. ``NUMBA_CUBE_TRACE`` of the ``numba_cube_trace`` plugin), so that ``python -m
numba_cube info`` can tell a plugin's variable from a misspelt one (``unknown()``).

Booleans accept ``1/0``, ``true/false``, ``yes/no``, ``on/off`` (any case); integers are decimal.
"""

from __future__ import annotations

import os
import stat
import tempfile
import warnings
from pathlib import Path

__all__ = ["get_bool", "get_int", "get_str", "VARIABLES", "declare", "known", "unknown", "snapshot",
           "cache_root"]

PREFIX = "NUMBA_CUBE_"

VARIABLES = (
    "NUMBA_CUBE_DEVICE", "NUMBA_CUBE_CACHE_DIR", "NUMBA_CUBE_BOUNDSCHECK", "NUMBA_CUBE_MAX_TASKS",
    "NUMBA_CUBE_SERIAL_UNITS", "NUMBA_CUBE_DEPENDENCY_RULE", "NUMBA_CUBE_AUTOTUNE_CACHE",
    "NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD", "NUMBA_CUBE_PROFILE_LOG", "NUMBA_CUBE_CUDA_DYNAMIC_COUNT",
)

_declared: dict[str, str] = {}  # variables declared by plugins -> who declared them

_warned: set = set()


def _warn(name: str, raw: str, default) -> None:
    if (name, raw) not in _warned:
        _warned.add((name, raw))
        warnings.warn(f"{name}={raw!r} is not valid; using {default!r}", RuntimeWarning, stacklevel=3)


def get_str(name: str, default: str | None = None, choices: tuple | None = None) -> str | None:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if choices is not None and raw.lower() not in choices:
        _warn(name, raw, default)
        return default
    return raw.lower() if choices is not None else raw


def get_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    _warn(name, raw, default)
    return default


def get_int(name: str, default: int, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        _warn(name, raw, default)
        return default
    if minimum is not None and value < minimum:
        _warn(name, raw, default)
        return default
    return value


def declare(name: str, owner: str) -> None:
    """A plugin declares a ``NUMBA_CUBE_*`` variable it reads (``owner``: the plugin's name)."""
    if not name.startswith(PREFIX):
        raise ValueError(f"numba_cube variables start with {PREFIX}, got {name!r}")
    _declared[name] = owner


def known() -> dict[str, str]:
    """Every variable numba_cube or a loaded plugin reads -> ``"numba_cube"`` or the plugin."""
    out = {name: "numba_cube" for name in VARIABLES}
    out.update(_declared)
    return out


def snapshot() -> dict:
    """Every ``NUMBA_CUBE_*`` variable that is set, known or not (for ``python -m numba_cube
    info``): a misspelt one is exactly what a user looking at this needs to see."""
    return {k: os.environ[k] for k in sorted(os.environ) if k.startswith(PREFIX)}


def unknown() -> list[str]:
    """The ``NUMBA_CUBE_*`` variables that are set but that nothing reads (a typo, or a plugin
    that is not loaded)."""
    names = known()
    return [k for k in snapshot() if k not in names]


def cache_root() -> Path:
    """The user's private numba_cube cache directory (created 0o700 if missing).

    ``NUMBA_CUBE_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/numba_cube`` (``~/.cache/numba_cube``).
    Generated code is code that will run, so a directory that another user owns or can write to
    is refused: a private temporary directory is used instead, with a warning.
    """
    raw = get_str("NUMBA_CUBE_CACHE_DIR")
    if raw:
        root = Path(raw).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = Path(base) / "numba_cube"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = root.stat()
        if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise PermissionError(f"{root} is not private to this user")
    except OSError as exc:
        global _fallback_root
        if _fallback_root is None:
            _fallback_root = Path(tempfile.mkdtemp(prefix="numba_cube-"))
            warnings.warn(f"numba_cube cache directory unusable ({exc}); using {_fallback_root}",
                          RuntimeWarning, stacklevel=2)
        return _fallback_root
    return root


_fallback_root: Path | None = None
