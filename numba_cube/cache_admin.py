"""What the disk cache holds, and removing it: ``python -m numba_cube cache info|clear``.

Everything numba_cube keeps on disk lives in one directory, ``config.cache_root()``. Without this
module nothing there is ever removed: entries of kernels long gone, or of other Numba, NumPy or
translator versions (their keys differ, so they are never read again), stay for ever. The model
is pip's ``pip cache info`` / ``pip cache purge``: the user asks, nothing is pruned behind
their back (a start-up prune would cost every first client a directory walk).

**An entry is a unit, removed whole.** The kinds:

- ``cpu``: a generated kernel module ``<kernel>_<sha16>.py`` with Numba's cache files for it
  (``__pycache__/<kernel>_<sha16>.*``), and a kept translation ``translation-<key32>.json``
  (``backends/cpu/codecache.py``);
- ``cuda``: a compiled CUDA kernel ``cuda-<key32>.bin`` (``backends/cuda/diskcache.py``);
- ``autotune``: ``autotune.json`` (``autotune_store.py``), removed under the lock its writers
  take, so a save in progress is never cut in two.

Files this module does not recognise are never touched, and neither is ``numba-cache.key``
(the key that signs the cache: removing it would only make every entry fail its check).

**Safe while other processes use the cache.** Every reader already treats a missing or
half-written file as a miss and compiles again (a file that fails its signature is deleted and
rebuilt), and every writer publishes a new file atomically. So a removal can only cost a
recompile, never a wrong or torn read. A CPU entry's files go in the order that leaves no usable
half: Numba's index (``.nbi``) first, so no reader finds a data file through it, then the data
files, then the module text.

**Age** is the time since an entry was last used as the filesystem records it: the later of its
files' access and modification times (with ``noatime`` mounts, the last write).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import config

__all__ = ["KINDS", "CacheEntry", "entries", "clear", "summary"]

KINDS = ("cpu", "cuda", "autotune")
_KEY_FILE = "numba-cache.key"
_GENERATED_SUFFIX = ".py"


@dataclass
class CacheEntry:
    """One removable unit of the cache: its kind, a name for people, and its files."""

    kind: str
    name: str
    paths: list[Path] = field(default_factory=list)

    def _stats(self) -> list[os.stat_result]:
        out = []
        for p in self.paths:
            try:
                out.append(p.stat())
            except FileNotFoundError:            # removed by another process meanwhile
                pass
        return out

    @property
    def size(self) -> int:
        return sum(s.st_size for s in self._stats())

    @property
    def last_used(self) -> float:
        return max((max(s.st_atime, s.st_mtime) for s in self._stats()), default=0.0)

    def remove(self) -> int:
        """Delete the entry's files in order (see the module docstring); the bytes freed."""
        freed = 0
        for p in sorted(self.paths, key=_removal_order):
            try:
                size = p.stat().st_size
                p.unlink()
                freed += size
            except FileNotFoundError:
                pass
        return freed


def _removal_order(path: Path) -> int:
    if path.suffix == ".nbi":
        return 0
    if path.suffix == ".nbc":
        return 1
    return 2


def _is_generated_stem(stem: str) -> bool:
    # <kernel>_<sha16>: the module name codecache.module_name gives a generated text
    kernel, sep, digest = stem.rpartition("_")
    return bool(sep and kernel) and len(digest) == 16 and all(c in "0123456789abcdef" for c in digest)


def entries(root: Path | None = None) -> list[CacheEntry]:
    """Every entry under ``root`` (the cache directory by default), sorted by kind and name."""
    root = config.cache_root() if root is None else Path(root)
    found: dict[tuple[str, str], CacheEntry] = {}

    def add(kind: str, name: str, path: Path) -> None:
        found.setdefault((kind, name), CacheEntry(kind, name)).paths.append(path)

    for path in _listdir(root):
        name = path.name
        if not path.is_file() or name == _KEY_FILE:
            continue
        if name.endswith(_GENERATED_SUFFIX) and _is_generated_stem(name[:-len(_GENERATED_SUFFIX)]):
            add("cpu", name[:-len(_GENERATED_SUFFIX)], path)
        elif name.startswith("translation-") and name.endswith(".json"):
            add("cpu", name[:-len(".json")], path)
        elif name.startswith("cuda-") and name.endswith(".bin"):
            add("cuda", name[:-len(".bin")], path)
        elif name == "autotune.json":
            add("autotune", name, path)
    for path in _listdir(root / config.NUMBA_PYCACHE):
        stem = path.name.split(".", 1)[0]
        if path.is_file() and path.suffix in (".nbi", ".nbc") and _is_generated_stem(stem):
            add("cpu", stem, path)              # with its module, or alone if that is gone
    return sorted(found.values(), key=lambda e: (KINDS.index(e.kind), e.name))


def _listdir(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except FileNotFoundError:
        return []


def summary(root: Path | None = None) -> dict:
    """The cache directory, and per kind the number of entries and their bytes."""
    root = config.cache_root() if root is None else Path(root)
    kinds = {k: {"entries": 0, "bytes": 0} for k in KINDS}
    for e in entries(root):
        kinds[e.kind]["entries"] += 1
        kinds[e.kind]["bytes"] += e.size
    return {"directory": str(root), "kinds": kinds}


def clear(root: Path | None = None, kinds=KINDS, older_than_days: float | None = None,
          now: float | None = None) -> list[dict]:
    """Remove the entries of ``kinds`` not used for ``older_than_days`` (all without it).

    Returns what was removed (kind, name, bytes), for the command to print.
    """
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown cache kind(s) {', '.join(unknown)}; the kinds: {', '.join(KINDS)}")
    if older_than_days is not None and older_than_days < 0:
        raise ValueError(f"older_than_days must be 0 or more, got {older_than_days}")
    root = config.cache_root() if root is None else Path(root)
    cutoff = None if older_than_days is None else (time.time() if now is None else now) - older_than_days * 86400
    removed = []
    for e in entries(root):
        if e.kind not in kinds or (cutoff is not None and e.last_used >= cutoff):
            continue
        freed = _remove_autotune(root, e) if e.kind == "autotune" else e.remove()
        removed.append({"kind": e.kind, "name": e.name, "bytes": freed})
    return removed


def _remove_autotune(root: Path, entry: CacheEntry) -> int:
    from filelock import FileLock            # (as autotune_store: only where it is needed)

    from .autotune_store import LOCK_TIMEOUT_S

    with FileLock(str(root / "autotune.json.lock"), timeout=LOCK_TIMEOUT_S, mode=0o600):
        return entry.remove()
