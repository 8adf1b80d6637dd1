"""Numba's on-disk cache for the generated modules, authenticated: nothing is unpickled that this
user's numba_cube did not write.

Numba's ``cache=True`` keeps, per function, an index file (``<base>.nbi``: signature -> data file)
and data files (``<base>.<n>.nbc``: the compiled code) and *unpickles* both when a dispatcher
compiles. A corrupt file then fails every later compile of that kernel (an unpickling error is a
``CompileError`` forever), and a pickle planted there is executed. So numba_cube replaces the cache
object of every dispatcher the generated module defines (``adopt``, called by ``cache/translations.py`` right
after the module's code ran, before anything can have compiled: the module only *defines*
functions) with an ``AuthenticatedCache``:

- its files live in ``<cache dir>/__pycache__`` and nowhere else: ``NUMBA_CACHE_DIR`` and
  ``NUMBA_CACHE_LOCATOR_CLASSES`` are not consulted, and ``config.cache_root()`` has already
  checked that directory is private (mode 0o700, owned by this user) or fallen back;
- every file it writes is ``MAGIC + HMAC-SHA256 + payload`` (the payload is what Numba itself would
  write). The key is a per-user secret, ``<cache dir>/numba-cache.key``, 32 random bytes created
  0o600; the MAC covers the file's name, the SHA-256 of the generated module's text and, for a data
  file, the index key it was saved under (signature, CPU, bytecode), so a valid file cannot stand
  in for another one either;
- a file is read once, from an ``O_NOFOLLOW`` descriptor, and its bytes are checked before
  ``pickle`` sees them. A file that fails (truncated, garbage, planted, written by plain Numba or
  with another key) is deleted and treated as a miss: the kernel is recompiled and the entry
  rewritten, in this process and for the next. A verified file that Numba still cannot rebuild is
  also a miss, never a failure.

Why this seam: ``numba.core.caching.Cache`` takes its file store from ``_cache_file`` (``load``,
``save``, ``flush``) and its directory from the ``CacheImpl``'s locator; both are replaced here
with numba_cube's own, and everything else (index keys, ``reduce``/``rebuild``, the dispatcher's
hit/miss statistics) stays Numba's. It needs two private names of Numba 0.68: the dispatcher's
``_cache`` attribute and the ``CacheImpl`` attributes set in ``_Impl.__init__``.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import inspect
import itertools
import os
import pickle
import secrets
import sys
import tempfile
from pathlib import Path

import numba
from numba.core.caching import CompileResultCacheImpl, FunctionCache, _CacheLocator
from numba.core.dispatcher import Dispatcher
from numba.core.serialize import dumps

from numba_cube import cache_layout, config

__all__ = ["adopt", "AuthenticatedCache", "AuthenticatedCacheFile", "read_private", "secret_key",
           "write_sealed", "read_sealed", "KEY_NAME", "PYCACHE"]

KEY_NAME = cache_layout.KEY_NAME
PYCACHE = config.NUMBA_PYCACHE        # checked private by config.cache_root()
MAGIC = cache_layout.SEALED_MAGIC
_KEY_BYTES = 32
_TAG_BYTES = hashlib.sha256().digest_size
_DOMAIN = b"numba_cube numba cache v1\0"


def adopt(module, source: str) -> None:
    """Give every caching dispatcher defined in ``module`` (the generated module of ``source``,
    whose ``__file__`` is in the cache directory) an ``AuthenticatedCache`` instead of Numba's."""
    namespace = vars(module)
    path = Path(module.__file__)
    stamp = hashlib.sha256(source.encode("utf-8")).digest()
    for value in namespace.values():
        if not isinstance(value, Dispatcher) or value.py_func.__globals__ is not namespace:
            continue                        # imported from elsewhere (support helpers, numpy)
        if value.stats.cache_path is None:
            continue                        # not cache=True: nothing is read from disk
        # Nothing can have been loaded yet: the module's code only defines functions, so the
        # first compile (and the first cache read) comes after this swap.
        if value.overloads:
            raise RuntimeError(f"internal error: generated function {value.py_func.__name__} "
                               "was compiled before numba_cube could verify its cache")
        value._cache = AuthenticatedCache(value.py_func, path.parent, stamp)


def read_private(path: str, max_bytes: int = cache_layout.MAX_FILE_BYTES
                 ) -> tuple[bytes, os.stat_result] | None:
    """The bytes and stat of ``path`` if it is a regular file owned by this user (no symlink, no
    FIFO: never blocks) of at most ``max_bytes``, else None (``cache_layout.read_regular``)."""
    try:
        return cache_layout.read_regular(path, max_bytes)
    except OSError:
        return None


def _write_atomically(path: str, data: bytes, *, exclusive: bool = False) -> None:
    """Publish ``data`` at ``path`` through a 0o600 temp file in the same directory: readers never
    see a torn file. ``exclusive``: keep a file that exists already (first writer wins)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if exclusive:
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass                        # somebody else's file won: it is the one read
            except OSError:                 # no hard links on this filesystem
                os.replace(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def secret_key(root: Path) -> bytes:
    """This user's MAC key for the cache in ``root``, created on first use.

    Read from disk every time (not kept in memory), so that processes which raced to replace a bad
    key converge on the one that won. A key that is not a private regular file of exactly 32 bytes
    (truncated, or readable by others, who could then forge files) is replaced; the only cost is
    that the entries signed with the old key are recompiled."""
    path = str(root / KEY_NAME)
    for _ in range(3):
        found = read_private(path, max_bytes=_KEY_BYTES)
        if found is not None and len(found[0]) == _KEY_BYTES and not found[1].st_mode & 0o077:
            return found[0]
        # A missing key is published with os.link, so that processes starting together agree on
        # the first one; a bad one is replaced outright.
        _write_atomically(path, secrets.token_bytes(_KEY_BYTES),
                          exclusive=not os.path.lexists(path))
    raise OSError(f"cannot create a private key file {path!r}")


class AuthenticatedCacheFile:
    """Numba's ``IndexDataCacheFile`` (same file names, same pickled contents, same freshness
    rules) with every file signed on write and verified, before unpickling, on read."""

    def __init__(self, cache_path: str, filename_base: str, source_stamp: bytes, root: Path):
        self._cache_path = cache_path
        self._index_name = f"{filename_base}.nbi"
        self._data_name_pattern = f"{filename_base}.{{number:d}}.nbc"
        self._source_stamp = source_stamp
        self._root = root
        self._version = numba.__version__

    # -- what numba.core.caching.Cache calls --------------------------------------------------
    def flush(self) -> None:
        self._save_index({})

    def save(self, key, data) -> None:
        overloads = self._load_index()
        data_name = overloads.get(key)
        if data_name is None:
            taken = set(overloads.values())
            data_name = next(n for n in map(self._data_name, itertools.count(1)) if n not in taken)
            overloads[key] = data_name
            self._save_index(overloads)
        self._write(data_name, dumps(data), binding=_key_digest(key))

    def load(self, key):
        data_name = self._load_index().get(key)
        if data_name is None:
            return None
        payload = self._read(data_name, binding=_key_digest(key))
        return None if payload is None else pickle.loads(payload)

    # -- the index ------------------------------------------------------------------------------
    def _load_index(self) -> dict:
        payload = self._read(self._index_name, binding=b"")
        if payload is None:
            return {}
        try:
            version, stamp, overloads = pickle.loads(payload)
        except Exception:  # noqa: BLE001 - verified, yet this Python cannot read it back
            return {}                       # treated as empty: the next save rewrites it
        if version != self._version or stamp != self._source_stamp:
            return {}                       # stale: its data files are overwritten in turn
        return overloads

    def _save_index(self, overloads: dict) -> None:
        payload = dumps((self._version, self._source_stamp, overloads))
        self._write(self._index_name, payload, binding=b"")

    def _data_name(self, number: int) -> str:
        return self._data_name_pattern.format(number=number)

    # -- signed files ---------------------------------------------------------------------------
    def _write(self, name: str, payload: bytes, binding: bytes) -> None:
        write_sealed(self._root, os.path.join(self._cache_path, name),
                     (name.encode("utf-8"), self._source_stamp, binding), payload)

    def _read(self, name: str, binding: bytes) -> bytes | None:
        """The verified payload of ``name``, or None (missing, or failed and deleted)."""
        return read_sealed(self._root, os.path.join(self._cache_path, name),
                           (name.encode("utf-8"), self._source_stamp, binding))


def _tag(key: bytes, context: tuple[bytes, ...], payload: bytes) -> bytes:
    mac = hmac.new(key, _DOMAIN, hashlib.sha256)
    for part in context:
        mac.update(len(part).to_bytes(8, "little") + part)     # unambiguous framing
    mac.update(payload)
    return mac.digest()


def write_sealed(root: Path, path: str, context: tuple[bytes, ...], payload: bytes) -> None:
    """Publish ``MAGIC + HMAC + payload`` at ``path`` (in the cache directory ``root``), the MAC
    over ``context`` (what the file stands for: its name, what it was made from) and ``payload``
    with this user's key, under the cache's lock (``cache_layout.writing``, what ``cache clear``
    takes). ``cache/translations.py`` seals its translations this way too."""
    try:
        tag = _tag(secret_key(root), context, payload)
        # Under the cache's lock, so that ``cache clear`` removes an entry whole or not at all.
        with cache_layout.writing(root):
            _write_atomically(path, MAGIC + tag + payload)
    except OSError as exc:              # the callers carry on uncached; say so once
        cache_layout.report_unusable(root, exc)
        raise


def read_sealed(root: Path, path: str, context: tuple[bytes, ...]) -> bytes | None:
    """The payload of the file ``write_sealed`` wrote at ``path`` for ``context``, verified
    before anything parses it; None if missing, or if it fails (then it is deleted)."""
    found = read_private(path)
    if found is None:
        if os.path.lexists(path):
            _discard(path, None)            # a symlink or a file of another user: not ours
        return None
    raw, st = found
    split = len(MAGIC) + _TAG_BYTES
    head, tag, payload = raw[:len(MAGIC)], raw[len(MAGIC):split], raw[split:]
    try:
        key = secret_key(root)
    except OSError as exc:              # no key can be had (a directory in its place, a full
        cache_layout.report_unusable(root, exc)     # disk): nothing can be verified, a miss
        return None
    expected = _tag(key, context, payload)
    if head != MAGIC or not hmac.compare_digest(tag, expected):
        _discard(path, st)                  # before anything unpickles or executes it
        return None
    return payload


def _key_digest(key) -> bytes:
    # The index key is (signature, codegen magic tuple, bytecode hashes): its repr names types and
    # CPU features only, so it is the same in every process.
    return hashlib.sha256(repr(key).encode("utf-8")).digest()


def _discard(path: str, seen: os.stat_result | None) -> None:
    """Delete the bad file at ``path``, unless a concurrent writer has just replaced the file that
    was judged (``seen``) with a new one."""
    try:
        if seen is not None and os.lstat(path).st_ino != seen.st_ino:
            return
        os.unlink(path)
    except OSError:
        pass                                # gone already, or a directory: a miss either way


class _Locator(_CacheLocator):
    """Numba's cache locator for one generated function: numba_cube's ``__pycache__``, and the
    hash of the module text numba_cube verified (not the file's mtime) as freshness stamp."""

    def __init__(self, py_func, cache_path: str, source_stamp: bytes):
        self._py_file = inspect.getfile(py_func)     # Numba's warnings name it
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = cache_path
        self._source_stamp = source_stamp

    def ensure_cache_path(self) -> None:
        os.makedirs(self._cache_path, mode=0o700, exist_ok=True)

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> bytes:
        return self._source_stamp

    def get_disambiguator(self) -> str:
        return str(self._lineno)


class _Impl(CompileResultCacheImpl):
    """``CompileResultCacheImpl`` with the locator given, not searched for (the search would
    honour ``NUMBA_CACHE_DIR`` and ``NUMBA_CACHE_LOCATOR_CLASSES``)."""

    def __init__(self, py_func, locator: _Locator):
        self._lineno = py_func.__code__.co_firstlineno
        self._locator = locator
        modname = os.path.splitext(os.path.basename(inspect.getfile(py_func)))[0]
        self._filename_base = self.get_filename_base(f"{modname}.{py_func.__qualname__}",
                                                     getattr(sys, "abiflags", ""))


class AuthenticatedCache(FunctionCache):
    """Numba's per-function cache with numba_cube's locator and signed files (module docstring)."""

    def __init__(self, py_func, root: Path, source_stamp: bytes):
        cache_path = str(root / PYCACHE)
        # Cache.__init__ builds the CacheImpl from self._impl_class(py_func): an instance
        # attribute here, so that it gets this function's locator.
        self._impl_class = functools.partial(_Impl, locator=_Locator(py_func, cache_path,
                                                                     source_stamp))
        super().__init__(py_func)
        self._cache_file = AuthenticatedCacheFile(cache_path, self._impl.filename_base,
                                                  source_stamp, root)

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception:  # noqa: BLE001 - a verified entry this Numba cannot rebuild
            return None                     # compile afresh; saving overwrites the entry

    def save_overload(self, sig, data) -> None:
        try:
            super().save_overload(sig, data)
        except OSError:
            pass                            # disk full, read-only: the kernel works, uncached
