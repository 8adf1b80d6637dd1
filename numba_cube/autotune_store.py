"""The on-disk autotune results, ``<cache dir>/autotune.json``, shared by every process of a user.

The file is one JSON object: tuning key (device, tuner, candidate set, key; see ``Tuner``) ->
entry ``{"best": name, "timings": {name: seconds}, "disqualified": {name: reason},
"launched": [kernel id, ...]}``. It is only ever a hint (which candidate to run), so a bad file
must never break a tuner:

- a file that is not valid JSON, not an object, or that holds entries of another shape is
  reported once per process (``warnings.warn``), its bad parts are ignored, and the next save
  rewrites the file without them; a file that cannot be read or written at all (a FIFO, a
  directory, a full disk) is the cache directory's one warning (``cache_layout.report_unusable``),
  and results then stay in memory. Only a regular file of this user's is read
  (``cache_layout.read_regular``): a FIFO or a device there is never waited on;
- a save is read-merge-write under a file lock (``<cache dir>/autotune.json.lock``, ``filelock``),
  so concurrent processes do not lose each other's entries, and the new file is published
  atomically (temp file + ``os.replace``), so readers (who take no lock) never see a torn one.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import warnings
from pathlib import Path

from filelock import FileLock, Timeout

from . import cache_layout, config

__all__ = ["ResultStore", "valid_entry"]

FILE_NAME = "autotune.json"
LOCK_TIMEOUT_S = 60.0                  # a save waits this long for another process's save

_reported: set[tuple[str, str]] = set()     # (file, what was wrong): reported in this process
_in_process = threading.Lock()              # one read-merge-write at a time within the process


def _report(path: Path, what: str, message: str) -> None:
    if (str(path), what) not in _reported:
        _reported.add((str(path), what))
        warnings.warn(f"numba_cube autotune cache {str(path)!r}: {message}", RuntimeWarning,
                      stacklevel=4)


def _is_map(value, kinds) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, kinds) and not isinstance(v, bool)
        for k, v in value.items())


def valid_entry(entry) -> bool:
    """Whether ``entry`` has the shape of a stored result (see the module docstring)."""
    return (isinstance(entry, dict) and isinstance(entry.get("best"), str)
            and _is_map(entry.get("timings"), (int, float))
            and _is_map(entry.get("disqualified"), str)
            and isinstance(entry.get("launched"), list)
            and all(isinstance(i, str) for i in entry["launched"]))


class ResultStore:
    """``autotune.json`` in the current cache directory (``config.cache_root()``)."""

    def __init__(self):
        try:
            root = config.cache_root()
        except OSError as exc:          # no cache directory at all: results stay in memory
            root, self._no_root = Path(FILE_NAME).parent, exc
        else:
            self._no_root = None
        self.path = root / FILE_NAME
        self._lock_path = root / (FILE_NAME + ".lock")

    def load(self) -> dict[str, dict]:
        """The well-formed entries of the file (empty if there is none); reports the rest."""
        if self._no_root is not None:
            cache_layout.report_unusable(self.path.parent, self._no_root)
            return {}
        try:
            raw, _ = cache_layout.read_regular(self.path)
        except FileNotFoundError:
            return {}
        except OSError as exc:      # the directory's one warning (cache_layout.report_unusable)
            cache_layout.report_unusable(self.path.parent, f"{FILE_NAME}: {exc}")
            return {}
        try:
            data = json.loads(raw)          # bytes: bad UTF-8 is a ValueError here too
        except ValueError as exc:
            _report(self.path, "not json", f"not valid JSON ({exc}); ignoring it, the next "
                    "tuning result saved rewrites it")
            return {}
        if not isinstance(data, dict):
            _report(self.path, "not an object", f"expected a JSON object of results, found "
                    f"{type(data).__name__}; ignoring it, the next tuning result saved rewrites it")
            return {}
        good = {k: v for k, v in data.items() if valid_entry(v)}
        if len(good) < len(data):
            bad = sorted(set(data) - set(good))
            _report(self.path, "bad entries", f"{len(bad)} entr{'y' if len(bad) == 1 else 'ies'} "
                    f"of the wrong shape (e.g. {bad[0]!r}); ignoring them, the next tuning result "
                    "saved drops them")
        return good

    def store(self, key: str, entry: dict) -> None:
        """Save ``entry`` under ``key``, keeping every other process's well-formed entries."""
        self._update(lambda data: data.__setitem__(key, entry))

    def drop(self, key: str) -> None:
        """Forget the entry under ``key`` (a stale result)."""
        self._update(lambda data: data.pop(key, None))

    def _update(self, change) -> None:
        if self._no_root is not None:
            self.load()                     # (reports it)
            return
        try:
            with _in_process, FileLock(str(self._lock_path), timeout=LOCK_TIMEOUT_S, mode=0o600):
                data = self.load()
                change(data)
                self._write(data)
        except Timeout:
            _report(self.path, "locked", f"another process held {str(self._lock_path)!r} for "
                    f"{LOCK_TIMEOUT_S:.0f} s; this result is kept in memory only")
        except OSError as exc:
            cache_layout.report_unusable(self.path.parent, f"cannot write {FILE_NAME}: {exc}")

    def _write(self, data: dict) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".autotune-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
