"""On-disk home of generated kernel modules, safe to share between processes.

Numba's ``cache=True`` only works for functions defined in a real file that can be re-imported by
module name in a later process (``exec``'d code has no cache locator). So each generated module is written to ``<cache dir>/<kernel>_<sha16>.py``,
where ``sha16`` is the first 16 hex digits of the SHA-256 of its text, and loaded under the stable
module name ``numba_cube_gen_<kernel>_<sha16>``, registered in ``sys.modules`` before its code runs
(Numba re-imports it by that name when it loads a cached function). Numba's own cache files
for it (``<cache dir>/__pycache__/*.nbi``, ``*.nbc``) are signed and verified before Numba
unpickles them: see ``cache/numba_cache.py``.

Generated code is code that will be executed, so:

- the cache dir is ``config.cache_root()`` (``$NUMBA_CUBE_CACHE_DIR``, else the user's cache
  directory): private to this user, ``__pycache__`` included, or replaced for this process by a
  private temporary directory (with a warning), because anyone who can write there could plant
  code;
- what runs is always the text given to ``load_module`` (the translator's, or a sealed
  translation below), compiled from memory, never the bytes found in the ``.py`` file; a file
  whose bytes differ from that text (corrupt, truncated, foreign) is replaced atomically and is
  never executed. No ``.pyc`` is written or read;
- a new file is written to a temp file in the same directory and published with ``os.link``
  (fails if the name exists, so a concurrent writer's good file is never replaced) or
  ``os.replace``; readers therefore never see a torn file;
- an existing good file is not rewritten; its mtime is the entry's last use
  (``cache_layout.mark_used``), which ``python -m numba_cube cache clear --older-than`` reads;
- files are published under the cache's lock (``cache_layout.writing``), so housekeeping
  removes a kernel's files together or not at all.

A new process need not translate a kernel again: ``store_translation`` keeps the translator's
output under its ``key.translation_key`` (``<cache dir>/translation-<key32>.json``: the
module text and what the program needs besides), sealed like Numba's files
(``numba_cache.write_sealed``: an HMAC with this user's key over the key and the payload), and
``load_translation`` gives it back only when it verifies. So the text that runs is either the
one the translator just produced or one it produced earlier for the same key, signed by this
user's numba_cube; a file that fails the check is deleted and the kernel translated again.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import tempfile
import threading
import types
from pathlib import Path

from numba_cube import cache_layout, config
from numba_cube.backends.cpu.cache import numba_cache as numbacache

MODULE_PREFIX = "numba_cube_gen_"

_lock = threading.RLock()      # one thread at a time writes and imports a generated module


def _new_lock_in_child() -> None:
    """After ``os.fork()``: a thread of the parent may have held the lock as it forked."""
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def _read_if_ours(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of ours (no symlink), else None."""
    found = numbacache.read_private(str(path))
    return None if found is None else found[0]


def ensure_file(path: Path, data: bytes) -> bool:
    """Make ``path`` hold exactly ``data``; True if it had to be written."""
    if _read_if_ours(path) == data:
        return False                        # good file: keep it
    # Under the cache's lock, so that ``cache clear`` removes an entry whole or not at all.
    with cache_layout.writing(path.parent):
        return _publish(path, data)


def _publish(path: Path, data: bytes) -> bool:
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
    stem = cache_layout.generated_stem(kernel_name, source)
    return MODULE_PREFIX + stem, stem


def load_module(kernel_name: str, source: str) -> types.ModuleType:
    """Write (if needed) and import the generated module for ``source``; see the docstring. A
    cache directory that cannot be written (disk full, read-only, a directory where the lock
    is) is reported once and the module imported uncached (``_import_uncached``)."""
    modname, stem = module_name(kernel_name, source)
    with _lock:
        mod = sys.modules.get(modname)
        if mod is not None:
            return mod
        path = Path(f"{stem}.py")
        try:
            path = config.cache_root() / f"{stem}.py"
            try:
                return _import(modname, path, source)
            except OSError:
                raise
            except BaseException:
                if path.exists():
                    raise
            # ``cache clear`` removed the file between its check and the import (Numba's
            # decorator wants it there): once more, under the cache's lock, which no removal
            # can interleave.
            with cache_layout.writing(path.parent):
                return _import(modname, path, source)
        except OSError as exc:
            cache_layout.report_unusable(path.parent, exc)
            return _import_uncached(modname, path, source)


#: ``cache=True`` in a generated ``@__njit(...)`` decorator line (``emit/module.py``)
_CACHED_DECORATOR = re.compile(r"^(\s*@__njit\(.*)\bcache=True\b", re.MULTILINE)


def _import_uncached(modname: str, path: Path, source: str) -> types.ModuleType:
    """The generated module without Numba's disk cache: its decorators' ``cache=True`` turned
    off (Numba's would refuse a function whose file is not there), nothing written. Line numbers
    and file name stay the module's, so errors still point into the kernel (``linemarks``)."""
    code = compile(_CACHED_DECORATOR.sub(r"\1cache=False", source), str(path), "exec")
    mod = types.ModuleType(modname)
    mod.__file__ = str(path)
    sys.modules[modname] = mod
    try:
        exec(code, mod.__dict__)
    except BaseException:
        del sys.modules[modname]
        raise
    return mod


def _import(modname: str, path: Path, source: str) -> types.ModuleType:
    if not ensure_file(path, source.encode("utf-8")):
        cache_layout.mark_used(path)        # its entry is in use: not pruned as old
    code = compile(source, str(path), "exec")   # from memory: the bytes we just verified
    mod = types.ModuleType(modname)
    mod.__file__ = str(path)
    sys.modules[modname] = mod
    try:
        exec(code, mod.__dict__)
        numbacache.adopt(mod, source)        # before any dispatcher can read Numba's cache
    except BaseException:
        del sys.modules[modname]
        raise
    return mod


def _translation_path(key: str) -> Path:
    return config.cache_root() / (f"{cache_layout.TRANSLATION_PREFIX}{key[:32]}"
                                  f"{cache_layout.TRANSLATION_SUFFIX}")


def _translation_context(key: str) -> tuple[bytes, ...]:
    # "translation" first: no file of Numba's cache (whose first part is its name) can pass
    return (b"translation", key.encode())


def store_translation(key: str, record: dict) -> None:
    """Keep ``record`` (JSON-able: the generated text and what ``translate`` needs besides) as
    the translation for ``key``; an unwritable cache directory only costs the next process a
    translation."""
    payload = json.dumps(record, sort_keys=True).encode("utf-8")
    try:
        numbacache.write_sealed(config.cache_root(), str(_translation_path(key)),
                                _translation_context(key), payload)
    except OSError:
        pass


def load_translation(key: str) -> dict | None:
    """The record ``store_translation`` kept for ``key``, verified; None when there is none, or
    when it fails verification or does not parse (it is then deleted or overwritten)."""
    try:
        payload = numbacache.read_sealed(config.cache_root(), str(_translation_path(key)),
                                         _translation_context(key))
    except OSError:                             # no cache directory at all: translate again
        return None
    if payload is None:
        return None
    try:
        record = json.loads(payload)
    except ValueError:                          # verified yet unreadable: translate again
        return None
    return record if isinstance(record, dict) else None
