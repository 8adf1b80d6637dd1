"""Housekeeping of the disk caches: what ``python -m numba_cube cache info`` and ``cache clear``
report and remove (``cli.py`` prints it).

A top-level module, beside ``config.py`` (which decides where the cache is) and
``cache_layout.py`` (which names its files): the cache directory is shared by the CPU backend,
the CUDA backend and autotune, so its housekeeping belongs to none of them, and it must not
import them (Numba, NumPy, the CUDA driver) to count files.

Nothing in the cache expires by itself: an entry written by another Numba, numba-cuda or
translator version is never found again (its key differs), yet stays on disk until a ``clear``
removes it, as ``pip cache`` leaves pruning to its user.

**Entries.** A removal is never of single files but of entries, each removed whole:

- ``cpu``: a generated module (``<kernel>_<sha16>.py``), Numba's cache files of its functions
  (``__pycache__/<kernel>_<sha16>.*``) and the translations whose text it is (read from their
  JSON, which is only parsed here, never executed);
- ``cuda``: one compiled kernel, ``cuda-<key32>.bin``;
- ``autotune``: ``autotune.json``, removed under its own lock (``autotune.json.lock``, the one
  its writers take).

An entry's last use is the newest mtime of its files (readers mark it: ``cache_layout.mark_used``).
``clear`` removes, under the cache's lock (``cache_layout.writing``: the one every cpu and cuda
writer takes), every entry of the kinds asked for, or only those not used for ``older_than_days``.
A process running meanwhile finds the files gone and translates or compiles again; files it has
open are unaffected (POSIX). A writer's temporary file is removed only by a ``clear`` of every
kind and only when older than an hour (a writer holds one for milliseconds; an older one is left
by a process that died), so a writer in flight never loses its file. The sealing key and the
locks are never removed.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import cache_layout, config

__all__ = ["KINDS", "Entry", "scan", "info", "clear", "CacheBusyError"]

KINDS = ("cpu", "cuda", "autotune")
AUTOTUNE_FILE = "autotune.json"          # autotune_store.FILE_NAME, without importing filelock
_TEMP_AGE_S = 3600.0
_DAY_S = 86400.0


class CacheBusyError(OSError):
    """Another process held the cache's lock for ``LOCK_TIMEOUT_S``: nothing was removed."""


@dataclass
class Entry:
    """One unit of the cache: ``kind`` (``KINDS``, or ``"temporary"``), a ``name`` for people,
    its ``files`` (paths), ``bytes`` and ``last_used`` (seconds since the epoch)."""

    kind: str
    name: str
    files: list = field(default_factory=list)
    bytes: int = 0
    last_used: float = 0.0

    def add(self, path: Path, st: os.stat_result) -> None:
        self.files.append(str(path))
        self.bytes += st.st_size
        self.last_used = max(self.last_used, st.st_mtime)


def _stem_of_translation(path: Path) -> str | None:
    """The generated module a translation's text is (``cache_layout.generated_stem``), or None
    when the file does not parse (then it is an entry of its own)."""
    try:
        raw, _ = cache_layout.read_regular(path)    # never a FIFO's open, nor a huge file
        record = json.loads(raw[cache_layout.SEALED_HEADER_BYTES:])
        return cache_layout.generated_stem(str(record["kernel_name"]), str(record["source"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _files(folder: Path):
    """``(path, stat)`` of the regular files directly in ``folder`` (symlinks are not followed)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in sorted(names):
        path = folder / name
        try:
            st = os.lstat(path)
        except OSError:
            continue                     # removed meanwhile
        if stat.S_ISREG(st.st_mode):
            yield path, st


def scan(root: Path) -> tuple[list[Entry], Entry]:
    """The entries in the cache directory ``root``, and everything else (the key, the locks,
    files no writer of numba_cube makes) as one ``Entry`` of kind ``"other"``."""
    cpu: dict[str, Entry] = {}
    entries: list[Entry] = []
    other = Entry("other", "key, locks, unknown files")

    def cpu_entry(stem: str) -> Entry:
        return cpu.setdefault(stem, Entry("cpu", stem))

    for path, st in _files(root):
        name = path.name
        if name.startswith(cache_layout.TEMP_PREFIXES):
            entries.append(Entry("temporary", name))
            entries[-1].add(path, st)
        elif name == AUTOTUNE_FILE:
            entries.append(Entry("autotune", name))
            entries[-1].add(path, st)
        elif name.startswith(cache_layout.CUDA_PREFIX) and name.endswith(cache_layout.CUDA_SUFFIX):
            entries.append(Entry("cuda", name[len(cache_layout.CUDA_PREFIX):-len(cache_layout.CUDA_SUFFIX)]))
            entries[-1].add(path, st)
        elif (name.startswith(cache_layout.TRANSLATION_PREFIX)
              and name.endswith(cache_layout.TRANSLATION_SUFFIX)):
            stem = _stem_of_translation(path)
            cpu_entry(stem if stem is not None else name).add(path, st)
        elif name.endswith(cache_layout.MODULE_SUFFIX):
            cpu_entry(name[:-len(cache_layout.MODULE_SUFFIX)]).add(path, st)
        else:
            other.add(path, st)
    for path, st in _files(root / config.NUMBA_PYCACHE):
        if path.name.startswith(cache_layout.TEMP_PREFIXES):
            entries.append(Entry("temporary", f"{config.NUMBA_PYCACHE}/{path.name}"))
            entries[-1].add(path, st)
        elif path.name.endswith((".nbi", ".nbc")):
            # Numba names them <module>.<function>-<line>.py<version>...: the module is the stem
            cpu_entry(path.name.partition(".")[0]).add(path, st)
        else:
            other.add(path, st)
    return list(cpu.values()) + entries, other


def info(root: Path | None = None) -> dict:
    """``{"root", "kinds": {kind: {"entries", "bytes", "oldest_use", "newest_use"}}, "other"}``."""
    root = config.cache_root() if root is None else root
    entries, other = scan(root)
    kinds = {}
    for kind in KINDS + ("temporary",):
        mine = [e for e in entries if e.kind == kind]
        uses = [e.last_used for e in mine]
        kinds[kind] = {"entries": len(mine), "bytes": sum(e.bytes for e in mine),
                       "oldest_use": min(uses, default=None), "newest_use": max(uses, default=None)}
    return {"root": str(root), "kinds": kinds,
            "other": {"files": len(other.files), "bytes": other.bytes}}


def clear(kinds=KINDS, older_than_days: float | None = None, root: Path | None = None,
          now: float | None = None, timeout: float | None = None) -> dict:
    """Remove the entries of ``kinds`` (all of them, or those last used more than
    ``older_than_days`` ago); ``{"root", "removed": [Entry as a dict, ...], "bytes"}``. Raises
    ``CacheBusyError`` when the lock cannot be had within ``timeout`` seconds (default
    ``cache_layout.LOCK_TIMEOUT_S``)."""
    from filelock import FileLock, Timeout

    timeout = cache_layout.LOCK_TIMEOUT_S if timeout is None else timeout
    root = config.cache_root() if root is None else root
    now = time.time() if now is None else now
    cutoff = None if older_than_days is None else now - older_than_days * _DAY_S
    removed: list[Entry] = []
    try:
        with cache_layout.writing(root, timeout):
            entries, _ = scan(root)
            for entry in entries:
                if entry.kind == "temporary":
                    wanted = set(kinds) == set(KINDS) and entry.last_used < min(
                        now - _TEMP_AGE_S, now if cutoff is None else cutoff)
                elif entry.kind in kinds:
                    wanted = cutoff is None or entry.last_used < cutoff
                else:
                    wanted = False
                if not wanted:
                    continue
                if entry.kind == "autotune":
                    # its writers take their own lock (autotune_store.py), not the cache's
                    with FileLock(str(root / f"{AUTOTUNE_FILE}.lock"), timeout=timeout, mode=0o600):
                        _remove(entry)
                else:
                    _remove(entry)
                removed.append(entry)
    except Timeout as exc:
        raise CacheBusyError(f"another process held the lock {exc.lock_file!r} for {timeout:.0f} s; "
                             "nothing more was removed: try again") from None
    return {"root": str(root), "removed": [asdict(e) for e in removed],
            "bytes": sum(e.bytes for e in removed)}


def _remove(entry: Entry) -> None:
    for path in entry.files:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass                         # a corrupt file a reader has just deleted itself
