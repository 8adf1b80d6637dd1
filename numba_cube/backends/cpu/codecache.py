"""On-disk home of generated kernel modules, safe to share between processes.

Numba's ``cache=True`` only works for functions defined in a real file that can be re-imported by
module name in a later process (``shared/research/cpu-kernels.md`` section 5.2: ``exec``'d code has
no cache locator). So each generated module is written to ``<cache dir>/<kernel>_<sha16>.py``,
where ``sha16`` is the first 16 hex digits of the SHA-256 of its text, and loaded under the stable
module name ``numba_cube_gen_<kernel>_<sha16>``, registered in ``sys.modules`` before its code runs
(Numba re-imports it by that name when it loads a cached function). Numba then keeps its own
cache in ``<cache dir>/__pycache__``.

Generated code is code that will be executed, so:

- the cache dir is ``$NUMBA_CUBE_CACHE_DIR``, else ``$XDG_CACHE_HOME/numba_cube``, else
  ``~/.cache/numba_cube``; it is created with mode 0o700, and a directory that is owned by another
  user or writable by group/others is not used: a fresh private temporary directory replaces it
  for this process (with a warning), because anyone who can write there could plant code;
- what runs is always the text the translator just produced, compiled from memory, never the
  bytes found on disk; a file on disk whose bytes differ from that text (corrupt, truncated,
  foreign) is replaced atomically and is never executed. No ``.pyc`` is written or read;
- a new file is written to a temp file in the same directory and published with ``os.link``
  (fails if the name exists, so a concurrent writer's good file is never replaced) or
  ``os.replace``; readers therefore never see a torn file;
- an existing good file is never rewritten: its mtime and size are part of Numba's cache key, so
  rewriting it would invalidate the compiled code of every process.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import sys
import tempfile
import threading
import types
import warnings
from pathlib import Path

ENV_VAR = "NUMBA_CUBE_CACHE_DIR"
MODULE_PREFIX = "numba_cube_gen_"

_lock = threading.RLock()      # load_module holds it while cache_dir() may fall back
_fallbacks: dict[str, Path] = {}     # refused directory -> private temp dir used instead


def default_cache_dir() -> Path:
    """The configured cache directory (not yet checked or created)."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "numba_cube"


def _problem(path: Path) -> str | None:
    """Why ``path`` must not hold executable cache files, or None if it is private to us."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot stat it ({exc})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it is owned by another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):#o})"
    return None


def cache_dir() -> Path:
    """The directory to use now: created private if missing, replaced if unsafe."""
    path = default_cache_dir()
    key = str(path)
    if key in _fallbacks:
        return _fallbacks[key]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700)
        os.chmod(path, 0o700)               # mkdir's mode is filtered by the umask
    except FileExistsError:
        pass
    except OSError as exc:
        return _fall_back(key, f"cannot create it ({exc})")
    problem = _problem(path)
    if problem is not None:
        return _fall_back(key, problem)
    return path


def _fall_back(key: str, problem: str) -> Path:
    with _lock:
        if key not in _fallbacks:
            tmp = Path(tempfile.mkdtemp(prefix="numba_cube-"))        # mode 0o700
            warnings.warn(f"numba_cube: not using cache directory {key!r}: {problem}; "
                          f"generated kernels go to {str(tmp)!r} for this process (set "
                          f"{ENV_VAR} to a private directory to keep them across runs)",
                          RuntimeWarning, stacklevel=3)
            _fallbacks[key] = tmp
        return _fallbacks[key]


def _read_if_ours(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of ours (no symlink), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def ensure_file(path: Path, data: bytes) -> bool:
    """Make ``path`` hold exactly ``data``; True if it had to be written."""
    if _read_if_ours(path) == data:
        return False                        # good file: keep it (and its mtime) untouched
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)              # publish only if nobody else did meanwhile
            return True
        except FileExistsError:
            if _read_if_ours(path) == data:
                return False                # a concurrent writer published the same text
        except OSError as exc:              # no hard links on this filesystem
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
        os.replace(tmp, path)               # corrupt/foreign file: replace it atomically
        return True
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def module_name(kernel_name: str, source: str) -> tuple[str, str]:
    """``(module name, file stem)`` for a generated source text."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
    stem = f"{kernel_name}_{digest}"
    return MODULE_PREFIX + stem, stem


def load_module(kernel_name: str, source: str) -> types.ModuleType:
    """Write (if needed) and import the generated module for ``source``; see the docstring."""
    modname, stem = module_name(kernel_name, source)
    with _lock:
        mod = sys.modules.get(modname)
        if mod is not None:
            return mod
        path = cache_dir() / f"{stem}.py"
        ensure_file(path, source.encode("utf-8"))
        code = compile(source, str(path), "exec")   # from memory: the bytes we just verified
        mod = types.ModuleType(modname)
        mod.__file__ = str(path)
        sys.modules[modname] = mod
        try:
            exec(code, mod.__dict__)
        except BaseException:
            del sys.modules[modname]
            raise
        return mod
