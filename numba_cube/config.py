"""Every ``NUMBA_CUBE_*`` environment variable, parsed in one place.

Values are read when asked for (not frozen at import), so tests and long-lived processes see
changes. A bad value warns once and falls back to the default instead of breaking the import.

| variable | meaning | default |
| --- | --- | --- |
| NUMBA_CUBE_DEVICE | device ``cube.client()`` picks | best available |
| NUMBA_CUBE_INSTALL | a pytest session serves ``numba.cuda`` with numba_cube on this device (``cpu``, ...; ``plugins/pytest_numba_cube``) | unset |
| NUMBA_CUBE_CACHE_DIR | cache directory (generated code, Numba's cache of it, compiled CUDA kernels, autotune.json; ``cache_root()``; ``python -m numba_cube cache info/clear`` reports and prunes it, ``cache_admin.py``) | platformdirs' user cache dir (``~/.cache/numba_cube``) |
| NUMBA_CUBE_BOUNDSCHECK | bounds-check CPU kernels (IndexError becomes a launch failure); Numba's ``NUMBA_BOUNDSCHECK`` wins when set (``boundscheck_forced``) | 1 (``BOUNDSCHECK_DEFAULT``) |
| NUMBA_CUBE_DISABLE_PASSES | comma-separated optional passes of the CPU translator to switch off (``backends/cpu/passes/__init__.py``: ``OPTIONAL_PASSES``), to bisect a wrong answer to a pass; the kernel computes the same, slower; part of the translation's key | unset |
| NUMBA_CUBE_MAX_TASKS | queued launches per stream before it executes | 32 |
| NUMBA_CUBE_STREAM_WORKERS | most worker threads running a host device's streams (CPU backend) | twice the CPUs, at least 4 |
| NUMBA_CUBE_INLINE_US | a host-backend launch whose kernel last ran at most this many microseconds runs on the issuing thread (``runtime/launch/warm_host.py``); 0 queues every launch to a stream worker | 200 |
| NUMBA_CUBE_SERIAL_UNITS | set: below this many units a CPU launch runs the serial twin, from there the parallel one (a fixed rule); unset: each kernel's own timed runs choose (``backends/cpu/twin_choice.py``) | unset |
| NUMBA_CUBE_DEPENDENCY_RULE | ``hazard`` (read/write sets) or ``baseline`` (any shared buffer) | hazard |
| NUMBA_CUBE_AUTOTUNE_CACHE | 0 turns the on-disk autotune cache off | 1 |
| NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD | 1 skips entry-point plugins | 0 |
| NUMBA_CUBE_PROFILE_LOG | 1 logs every kernel's duration (logger ``numba_cube.profile``) | 0 |
| NUMBA_CUBE_CUDA_DYNAMIC_COUNT | CUDA dynamic counts: ``auto`` (device-count kernel where possible) or ``readback`` | auto |
| NUMBA_CUBE_CUDA_KERNEL_ERRORS | CUDA kernels that can raise (``raise``, ``assert``) without ``debug=True``: ``check`` (the launch's write set fails with the exception, checked when read: ``backends/cuda/kernels/exception_codegen.py``) or ``off`` (compiled as numba-cuda compiles them: the exception is lost); read at each compile, part of the compile key | check |
| NUMBA_CUBE_CUDA_ERROR_SLOTS | error words in the ring a device hands launches that can raise (a power of two; ``backends/cuda/launch/error_slots.py``); read when a device's server is made | 8192 |
| NUMBA_CUBE_DEBUG | 1: the ``python -m numba_cube`` commands print the traceback of an error, not only its line (``cli_errors.py``) | 0 |
| NUMBA_CUBE_NVTX | 1 puts an NVTX range named after the kernel around each CUDA launch, if the ``nvtx`` package is installed (``backends/cuda/driver/nvtx.py``); read when a device's server is made | 0 |

Plugins read their own ``NUMBA_CUBE_*`` variables through the same functions and ``declare()``
them (e.g. ``NUMBA_CUBE_TRACE`` of the ``numba_cube_trace`` plugin), so that ``python -m
numba_cube info`` can tell a plugin's variable from a misspelt one (``unknown()``).

Numba's, numba-cuda's and the CUDA driver's own variables change what numba_cube does too (a
simulated ``cuda``, no JIT, thread counts, bounds checks, which GPUs are visible): numba_cube does
not parse them, but ``upstream_snapshot()`` lists them for ``python -m numba_cube info``.

Booleans accept ``1/0``, ``true/false``, ``yes/no``, ``on/off`` (any case); integers are decimal.
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
import warnings
from pathlib import Path

__all__ = ["get_bool", "get_int", "get_str", "VARIABLES", "declare", "known", "unknown", "snapshot",
           "cache_root", "BOUNDSCHECK_DEFAULT", "boundscheck_forced", "numba_boundscheck",
           "UPSTREAM_VARIABLES", "UPSTREAM_PREFIXES", "upstream_snapshot"]

PREFIX = "NUMBA_CUBE_"

VARIABLES = (
    "NUMBA_CUBE_DEVICE", "NUMBA_CUBE_CACHE_DIR", "NUMBA_CUBE_BOUNDSCHECK", "NUMBA_CUBE_MAX_TASKS",
    "NUMBA_CUBE_DISABLE_PASSES", "NUMBA_CUBE_SERIAL_UNITS", "NUMBA_CUBE_DEPENDENCY_RULE", "NUMBA_CUBE_AUTOTUNE_CACHE",
    "NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD", "NUMBA_CUBE_PROFILE_LOG", "NUMBA_CUBE_CUDA_DYNAMIC_COUNT",
    "NUMBA_CUBE_STREAM_WORKERS", "NUMBA_CUBE_INLINE_US", "NUMBA_CUBE_DEBUG", "NUMBA_CUBE_NVTX",
    "NUMBA_CUBE_INSTALL",
    "NUMBA_CUBE_CUDA_KERNEL_ERRORS", "NUMBA_CUBE_CUDA_ERROR_SLOTS",
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


#: ``NUMBA_CUBE_BOUNDSCHECK``'s default: on. Unchecked, an out-of-bounds index on the CPU is a
#: wild access into the process's memory: a crash later at an unrelated point, or a Dask
#: worker killed with nothing naming the kernel (issue 30), where a GPU gives at worst a
#: garbage value or an ``illegal address``. Checked, it is a ``LaunchFailure[IndexError]``
#: naming the array, index, cube and unit, at the cost ``benchmarks/bench_kernels.py
#: --boundscheck`` measures (README, "Failures live on buffers"). ``cube.client("cpu",
#: boundscheck=False)``, ``NUMBA_CUBE_BOUNDSCHECK=0`` or ``NUMBA_BOUNDSCHECK=0`` turn it off.
BOUNDSCHECK_DEFAULT = True


def numba_boundscheck() -> bool | None:
    """Numba's ``NUMBA_BOUNDSCHECK`` as Numba's compiler will see it (``numba.config.BOUNDSCHECK``,
    which it obeys over any ``@jit(boundscheck=...)``), or None when it is not set."""
    from numba.core import config as numba_config

    raw = os.environ.get("NUMBA_BOUNDSCHECK")
    if raw != _numba_boundscheck_seen[0]:
        # Numba re-reads its variables before each compile; do it here too when this one
        # changed (only then: a reload scans the whole environment).
        numba_config.reload_config()
        _numba_boundscheck_seen[0] = raw
    return None if numba_config.BOUNDSCHECK is None else bool(numba_config.BOUNDSCHECK)


_numba_boundscheck_seen: list = [None]


def boundscheck_forced() -> bool | None:
    """What the environment says about bounds-checking CPU kernels, or None if nothing:
    ``NUMBA_BOUNDSCHECK`` (``numba_boundscheck``), else ``NUMBA_CUBE_BOUNDSCHECK``."""
    forced = numba_boundscheck()
    if forced is not None:
        return forced
    if get_str("NUMBA_CUBE_BOUNDSCHECK") is None:
        return None
    return get_bool("NUMBA_CUBE_BOUNDSCHECK", BOUNDSCHECK_DEFAULT)


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


#: Numba, numba-cuda and CUDA variables that change what numba_cube does, listed by ``python -m
#: numba_cube info`` whether set or not (a user asking "why is this not on the GPU" needs to see
#: that NUMBA_ENABLE_CUDASIM is set, and one asking "why is it slow" that NUMBA_DISABLE_JIT is).
UPSTREAM_VARIABLES = (
    "NUMBA_ENABLE_CUDASIM",     # the `cuda` device is numba-cuda's simulator
    "NUMBA_DISABLE_JIT",        # Numba compiles nothing: kernels run as Python
    "NUMBA_CACHE_DIR",          # where Numba caches (numba_cube's own cache is NUMBA_CUBE_CACHE_DIR)
    "NUMBA_NUM_THREADS",        # threads of the CPU backend's parallel loops
    "NUMBA_THREADING_LAYER",    # omp, tbb or workqueue for those loops
    "NUMBA_BOUNDSCHECK",        # wins over NUMBA_CUBE_BOUNDSCHECK (boundscheck_forced)
    "NUMBA_OPT",                # LLVM optimization level
    "NUMBA_CUDA_DRIVER",        # the libcuda that numba-cuda loads
    "CUDA_VISIBLE_DEVICES",     # which GPUs exist for this process
    "CUDA_DEVICE_ORDER",        # how they are numbered
    "CUDA_LAUNCH_BLOCKING",     # every launch synchronous
    "CUDA_HOME",                # where numba-cuda looks for the toolkit (NVVM, libdevice)
    "CUDA_PATH",
)
#: Any variable set with one of these prefixes is listed too: all of Numba's and numba-cuda's
#: (``NUMBA_CUDA_*`` included), and the CUDA driver's and toolkit's.
UPSTREAM_PREFIXES = ("NUMBA_", "CUDA_")


def upstream_snapshot() -> dict:
    """The variables of ``UPSTREAM_VARIABLES`` (value, or None when not set), then every other
    variable set with a prefix of ``UPSTREAM_PREFIXES``, in name order; numba_cube's own
    (``NUMBA_CUBE_*``, ``snapshot()``) are not repeated."""
    out: dict = {name: os.environ.get(name) for name in UPSTREAM_VARIABLES}
    for name in sorted(os.environ):
        if name.startswith(UPSTREAM_PREFIXES) and not name.startswith(PREFIX) and name not in out:
            out[name] = os.environ[name]
    return out


#: Where Numba's cache of the generated modules lives, inside the cache root.
NUMBA_PYCACHE = "__pycache__"
#: Subdirectories of the cache root that hold files numba_cube executes or unpickles: held to
#: the same rule as the root itself.
PRIVATE_SUBDIRS = (NUMBA_PYCACHE,)

_CACHE_DIR_VAR = "NUMBA_CUBE_CACHE_DIR"


def cache_root() -> Path:
    """The user's private numba_cube cache directory, with its ``__pycache__``: the one place
    that decides where generated code, Numba's cache of it and ``autotune.json`` live.

    ``NUMBA_CUBE_CACHE_DIR`` if set, else platformdirs' user cache directory for ``numba_cube``
    (``$XDG_CACHE_HOME/numba_cube``, i.e. ``~/.cache/numba_cube`` on Linux). A missing directory
    is created with mode 0o700. The cache holds code that will run and pickles that will be
    loaded, so a directory (root or ``__pycache__``) that another user owns or that group or
    others can write to is refused: a private temporary directory is used instead for this
    process, with a warning (once per refused directory), because anyone who can write there
    could plant code. That directory is removed when the process exits. ``OSError`` when not
    even it can be made: what every caller treats as a cache that cannot be used.
    """
    configured = _configured_cache_root()
    problem = _make_private(configured)
    if problem is None:
        return configured
    return _fall_back(configured, problem)


def _configured_cache_root() -> Path:
    raw = get_str(_CACHE_DIR_VAR)
    if raw:
        return Path(raw).expanduser()
    import platformdirs            # only here: most imports of numba_cube never need it

    return Path(platformdirs.user_cache_dir("numba_cube", appauthor=False))


def _make_private(root: Path) -> str | None:
    """Create ``root`` and its private subdirectories if missing; why they must not be used,
    or None if every one of them is private to this user."""
    for path in (root, *(root / sub for sub in PRIVATE_SUBDIRS)):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir(mode=0o700)
            os.chmod(path, 0o700)           # mkdir's mode is filtered by the umask
        except FileExistsError:
            pass                            # an existing directory is judged, never chmodded
        except OSError as exc:
            return f"cannot create {str(path)!r} ({exc})"
        problem = _private_dir_problem(path)
        if problem is not None:
            return f"{str(path)!r} is not private to this user: {problem}"
    return None


def _private_dir_problem(path: Path) -> str | None:
    """Why ``path`` must not hold files numba_cube executes or unpickles, or None if it is a
    directory owned by this user that neither group nor others can write to."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot stat it ({exc})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it is owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):#o})"
    return None


def _fall_back(configured: Path, problem: str) -> Path:
    global _fallback_root
    # One private temporary directory per process serves every refused directory; the
    # warning is given once per refused directory, so a changed setting is reported again.
    with _fallback_lock:
        if _fallback_root is None or _make_private(_fallback_root) is not None:
            try:
                _fallback_root = Path(tempfile.mkdtemp(prefix="numba_cube-"))     # mode 0o700
            except OSError as exc:
                # Callers treat an OSError as a cache that cannot be used: the kernel runs
                # uncached (cache_layout.report_unusable).
                raise OSError(exc.errno, f"{problem}, and no private temporary directory can "
                              f"be made instead ({exc})", str(configured)) from exc
            _make_private(_fallback_root)
            _remove_at_exit(_fallback_root)
        fallback, first = _fallback_root, ("cache dir", str(configured)) not in _warned
        _warned.add(("cache dir", str(configured)))
    if first:
        warnings.warn(f"numba_cube: not using cache directory {str(configured)!r}: {problem}; "
                      f"using the private temporary directory {str(fallback)!r} for this "
                      f"process instead (set {_CACHE_DIR_VAR} to a private directory to keep "
                      f"compiled kernels and autotune results across runs)",
                      RuntimeWarning, stacklevel=3)
    return fallback


_fallback_root: Path | None = None
_fallback_lock = threading.Lock()      # threads that are refused together share one directory


def _remove_at_exit(path: Path) -> None:
    """Remove the fallback directory ``path`` when this process exits: it is this process's
    alone (nobody else is told its name), so a later process would never use it, and one left
    per process would fill the temp dir. Only by the process that made it: a child forked
    meanwhile inherits this exit handler and must not remove its parent's directory. (A process
    killed outright leaves it, as it leaves any temporary file.)"""
    import atexit
    import shutil

    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:
            shutil.rmtree(path, ignore_errors=True)

    atexit.register(remove)
