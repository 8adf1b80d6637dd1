"""What the disk caches keep under ``config.cache_root()``, and the lock their writers take.

One place names every file of the cache directory, so that the writers (``backends/cpu/
cache/translations.py``, ``backends/cpu/cache/numba_cache.py``, ``backends/cuda/kernels/diskcache.py``, ``autotune_store.py``)
and the housekeeping that reads them back (``cache_admin.py``: ``python -m numba_cube cache``)
cannot disagree. It imports nothing heavy (no Numba, no NumPy): ``cache info`` must be quick.

| file | kind | what |
| --- | --- | --- |
| ``<kernel>_<sha16>.py`` | cpu | a generated module (``translations.load_module``) |
| ``__pycache__/<kernel>_<sha16>.*.nbi``, ``.nbc`` | cpu | Numba's cache of that module's functions |
| ``__pycache__/warps_runtime.*``, ``scans_runtime.*`` | cpu | Numba's cache of numba_cube's own helpers (``cache/helpers.py``) |
| ``translation-<key32>.json`` | cpu | a sealed translation whose text is one of those modules |
| ``cuda-<key32>.bin`` | cuda | a sealed compiled CUDA kernel (``diskcache.py``) |
| ``autotune.json`` | autotune | the autotune results (``autotune_store.py``, its own lock) |
| ``numba-cache.key``, ``*.lock`` | - | the sealing key and the locks: never removed |
| ``.tmp-*``, ``.autotune-*`` | - | a writer's file before it is published |

**The lock.** Every writer of a cpu or cuda file publishes it while holding ``cache.lock``
(``writing``, a ``filelock.FileLock``), and housekeeping removes entries while holding it, so an
entry is removed whole (its files all gone together) or not at all, and never while a writer is
adding a file to it. Readers take no lock: each file is read whole through one descriptor, which
a removal does not disturb (POSIX), and a file found missing is a cache miss (translate or
compile again). A writer that cannot get the lock within ``LOCK_TIMEOUT_S`` gets
``filelock.Timeout``, an ``OSError``: what every writer already treats as an unwritable cache.

**Reading.** A cache directory is private (``config.cache_root()``), yet what lies in it may
still be anything: a directory, a FIFO or a device where a file should be, a file of another
user, a huge one. Every reader goes through ``read_regular``: opened ``O_NOFOLLOW`` and
``O_NONBLOCK`` (a FIFO's open would otherwise wait for a writer for ever), then ``fstat``: only a
regular file of this user's, of at most ``MAX_FILE_BYTES`` (or less, per caller), is read, and
only the size ``fstat`` gave. Anything else is ``UnusableFile`` (an ``OSError``), which every
reader treats as a miss.

**A cache that cannot be used.** A directory that cannot be written (disk full, read-only, a
directory where the key or the lock should be) costs speed, never a result: the kernel runs
uncached, autotune results stay in memory. ``report_unusable`` warns once per cache directory
and process; the readers and writers call it where they give up.

**Last use.** An entry's age is the newest modification time of its files. A reader that finds
an entry marks it used (``mark_used``: the head file's mtime, at most once an hour, so a warm
start costs one ``stat`` per kernel), so entries in use are not pruned as old.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import threading
import time
import warnings
from pathlib import Path

__all__ = ["LOCK_NAME", "LOCK_TIMEOUT_S", "KEY_NAME", "TRANSLATION_PREFIX", "TRANSLATION_SUFFIX",
           "CUDA_PREFIX", "CUDA_SUFFIX", "MODULE_SUFFIX", "TEMP_PREFIXES", "SEALED_MAGIC",
           "SEALED_HEADER_BYTES", "MAX_FILE_BYTES", "UnusableFile", "generated_stem", "writing",
           "mark_used", "read_regular", "report_unusable"]

LOCK_NAME = "cache.lock"
#: how long a writer (or ``cache clear``) waits for the lock: a removal holds it for the
#: unlinks of one sweep, a writer for one file's publication
LOCK_TIMEOUT_S = 60.0
KEY_NAME = "numba-cache.key"
TRANSLATION_PREFIX, TRANSLATION_SUFFIX = "translation-", ".json"
CUDA_PREFIX, CUDA_SUFFIX = "cuda-", ".bin"
MODULE_SUFFIX = ".py"
#: prefixes of a writer's file before it is published (``tempfile.mkstemp`` in the same folder)
TEMP_PREFIXES = (".tmp-", ".autotune-")
#: a sealed file (``numba_cache.write_sealed``) is this, an HMAC-SHA256 tag, then the payload
SEALED_MAGIC = b"NBCUBE1\n"
SEALED_HEADER_BYTES = len(SEALED_MAGIC) + hashlib.sha256().digest_size

#: the largest file a reader reads: far above any translation, compiled kernel or autotune file
MAX_FILE_BYTES = 256 * 2**20

#: a reader re-marks an entry used only when its mark is older than this (seconds)
_USE_MARK_S = 3600.0


def generated_stem(kernel_name: str, source: str) -> str:
    """The file stem of the generated module whose text is ``source``: ``<kernel>_<sha16>``."""
    return f"{kernel_name}_{hashlib.sha256(source.encode('utf-8')).hexdigest()[:16]}"


@contextlib.contextmanager
def writing(root: Path, timeout: float = LOCK_TIMEOUT_S):
    """Hold the cache directory's lock (see the module docstring) for the block; re-entrant in
    a thread (an import retried under the lock publishes its file under it too: a second
    ``flock`` of the same file from the same process would wait for itself)."""
    held = _held.__dict__.setdefault("roots", set())
    key = str(root)
    if key in held:
        yield
        return
    from filelock import FileLock      # here: 10-15 ms of import that a warm start never needs

    with FileLock(str(root / LOCK_NAME), timeout=timeout, mode=0o600):
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)


_held = threading.local()      # the cache roots whose lock this thread holds


def mark_used(path: Path | str) -> None:
    """Record that the entry whose head file is ``path`` was just used (its mtime, at most once
    an hour); a file that is gone or read-only is left as it is: the mark only decides pruning."""
    try:
        if time.time() - os.stat(path).st_mtime > _USE_MARK_S:
            os.utime(path)
    except OSError:
        pass


class UnusableFile(OSError):
    """A file of the cache directory that is never read: not a regular file, another user's, or
    larger than its reader allows (module docstring: reading)."""


def read_regular(path: Path | str, max_bytes: int = MAX_FILE_BYTES) -> tuple[bytes, os.stat_result]:
    """The bytes and stat of ``path``, a regular file of this user's of at most ``max_bytes``.

    ``FileNotFoundError`` when there is nothing there; ``UnusableFile`` for anything that must not
    be read; other ``OSError``s as the system gives them (a symlink is ``ELOOP``). Never blocks on
    a FIFO or a device: the descriptor is opened non-blocking and judged by ``fstat`` first."""
    flags = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_CLOEXEC", 0))
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnusableFile(errno.EINVAL, "not a regular file", str(path))
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise UnusableFile(errno.EPERM, f"owned by another user (uid {st.st_uid})", str(path))
        if st.st_size > max_bytes:
            raise UnusableFile(errno.EFBIG, f"{st.st_size} bytes, more than the {max_bytes} read",
                               str(path))
        # The size fstat gave, no more: a file that grows meanwhile is not read without end.
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break                       # truncated meanwhile: the caller's check fails it
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


_unusable_reported: set[str] = set()
_report_lock = threading.Lock()


def report_unusable(root: Path | str, problem: BaseException | str) -> None:
    """Warn, once per cache directory in this process, that ``root`` could not be used (why:
    ``problem``): what was being cached runs uncached, and is compiled again next time."""
    with _report_lock:
        if str(root) in _unusable_reported:
            return
        _unusable_reported.add(str(root))
    warnings.warn(f"numba_cube: cannot use the cache directory {str(root)!r} ({problem}); what "
                  "it would keep is kept by this process only: kernels run uncached (translated "
                  "and compiled again by the next process), autotune results stay in memory. "
                  "Free space, or fix or remove what is in the way, to cache again",
                  RuntimeWarning, stacklevel=3)
