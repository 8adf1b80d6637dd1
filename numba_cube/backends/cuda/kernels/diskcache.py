"""What numba-cuda compiled, kept on disk, so that a new process launches a kernel without it.

A compile-cache miss (``kernels/entries.py``) first asks this cache. An entry holds what loading
and launching the kernel needs and nothing of numba-cuda's objects:

- the code image the compiler linked (a cubin; a PTX image is loaded the same way, the driver
  JIT-compiling it), the entry's mangled name, and the PTX text (``inspect_asm``);
- the launch plan's inputs: the kernel's most units per cube and static shared memory (what a
  refused launch is explained with), whether it is launched cooperatively (a grid sync: its
  cudadevrt is already linked into the cubin), and the kernel's IO answer per parameter (so a
  hit skips the IO analysis too). The argument layout (``packed_launch.ArgLayout``) is made
  from the launch's own arguments, as on a compile.

On a hit the image is loaded into the device's primary context with ``cuModuleLoadData`` and the
function found with ``cuModuleGetFunction`` (``driver.py``): numba-cuda's compiler is not called,
nor imported. A load the driver refuses is a miss: the kernel is compiled and the entry
rewritten.

**The key** (``entry_key``) covers everything that decides the code: the kernel id (source,
closures, globals read, device functions transitively, options), the argument signature, the
client's options and the ``cuda.jit`` options they resolve to, the device's compute capability,
the driver's, numba-cuda's and cuda-bindings' versions, the ``NUMBA_*`` environment (numba-cuda's
own switches, ``NUMBA_OPT`` say), the kernel's file and first line (line info names them), and
the text of the numba_cube modules that decide what is compiled (this package and ``kernel/``:
the device-count wrapper, the signatures, the IO analysis). A change in any of them is another
key, so a stale image is never found.

**Integrity** is the CPU cache's (``backends/cpu/cache/numba_cache.py``): each entry is
``<cache dir>/cuda-<key32>.bin``, sealed by ``write_sealed`` (an HMAC with this user's key over
the entry's key and its bytes) and read back by ``read_sealed``, which deletes a file that fails
(corrupt, truncated, planted, another user's) before anything parses it; that entry is then
compiled again and rewritten. An unwritable cache directory costs the next process a compile.
Entries are written under the cache's lock and a hit marks its entry used
(``cache_layout.py``), so ``python -m numba_cube cache clear`` removes an entry whole and prunes
by last use; an entry removed meanwhile is a miss.

**What is not cached** (``refusal``, and ``image_of`` of the compiler after a compile), counted
by the server as ``cuda_disk_cache_uncacheable``: a kernel whose id is salted for this process
(it could never be found again), a kernel compiled through the user's own ``cuda.jit``
dispatcher (numba-cuda's tools read its overloads), launch-time ``extensions``, ``link=`` files
(their contents are not in the id), ``debug=True`` (its exceptions are decoded with numba-cuda's
objects), a kernel that can raise (the same: ``exception_codegen.py``; one that cannot keeps
whether it has the error-word parameter), NRT, module setup callbacks or a shared-memory carveout (set up by numba-cuda's
launch path), composite arguments (tuples, records, enums, dates), and options without a stable
text form. Hits and misses are ``cuda_disk_cache_hits`` and ``cuda_disk_cache_misses``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import struct
import sys
from pathlib import Path
from typing import NamedTuple

from numba_cube import cache_layout, config
from numba_cube.runtime.memory.handle import Binding
from numba_cube.backends.cuda.driver.errors import CudaError

__all__ = ["CodeImage", "CachedCode", "DiskCache", "entry_key", "refusal", "backend_digest",
           "HITS", "MISSES", "UNCACHEABLE"]

#: the server counters of this cache (``server.stats``)
HITS, MISSES, UNCACHEABLE = ("cuda_disk_cache_hits", "cuda_disk_cache_misses",
                             "cuda_disk_cache_uncacheable")

_FORMAT = b"numba_cube cuda kernel 1"
_HERE = Path(__file__).parent
#: the numba_cube sources that decide what is compiled: this backend and the kernel package
_SOURCE_DIRS = (_HERE, _HERE.parent.parent / "kernel")
_PLAIN_SCALARS = (bool, int, float, complex)

log = logging.getLogger("numba_cube")


class CodeImage(NamedTuple):
    """What a compiler hands the cache after a compile (its ``image_of(compiled)``)."""

    kind: str          # "cubin" or "ptx"
    data: bytes
    entry: str         # the kernel's mangled name in the image
    asm: str           # the PTX text (numba-cuda's ``inspect_asm``), "" if unknown


class CachedCode:
    """The ``source`` of a kernel loaded from the cache: it keeps the module (and so the
    function) and answers ``inspect_asm`` as numba-cuda's kernel object does."""

    __slots__ = ("module", "entry", "asm", "cooperative")

    def __init__(self, module, entry: str, asm: str, cooperative: bool):
        self.module = module
        self.entry = entry
        self.asm = asm
        self.cooperative = cooperative

    def inspect_asm(self, cc=None) -> str:
        return self.asm


def _frame(*parts: bytes) -> bytes:
    return b"".join(struct.pack("<Q", len(p)) + p for p in parts)


@functools.lru_cache(maxsize=1)
def backend_digest() -> str | None:
    """SHA-256 of the numba_cube sources named in the module docstring, read once per process;
    None when they cannot be read (then nothing is cached)."""
    digest = hashlib.sha256(_FORMAT)
    try:
        for folder in _SOURCE_DIRS:
            for path in sorted(folder.glob("*.py")):
                digest.update(_frame(path.name.encode(), path.read_bytes()))
    except OSError:
        return None
    return digest.hexdigest()


def _version(module_name: str) -> str:
    """``__version__`` of a module (imported if it is not: numba, numba_cuda and cuda.bindings
    are cheap at that point). Not importlib.metadata: its scan of the installed distributions
    costs ~30 ms, ten times a warm start's whole cache load."""
    import importlib

    try:
        return str(getattr(importlib.import_module(module_name), "__version__", ""))
    except ImportError:
        return ""


@functools.lru_cache(maxsize=1)
def _library_versions() -> str:
    return repr((sys.version, _version("numba"), _version("numba_cuda"), _version("cuda.bindings")))


def _numba_environment() -> str:
    # numba-cuda's switches (NUMBA_OPT, NUMBA_CUDA_DEBUGINFO, ...) change the code; numba_cube's
    # own variables do not (the cache directory must not change the key).
    return repr(sorted((k, v) for k, v in os.environ.items()
                       if k.startswith("NUMBA_") and not k.startswith(config.PREFIX)))


def _stable_text(value) -> str | None:
    """``repr`` of an option value when it is the same in every process, else None."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value)
    text = repr(value)
    return None if " at 0x" in text else text


def refusal(kernel, args: tuple, jit: dict, user_dispatcher) -> str | None:
    """Why this compile cannot be kept on disk (see the module docstring), or None."""
    if not kernel.id_is_stable:
        return "its id is salted for this process (it reads a value with no faithful encoding)"
    if user_dispatcher is not None:
        return "it is compiled through the user's cuda.jit dispatcher, whose overloads numba-cuda's tools read"
    if kernel.extensions:
        return "it has launch-time extensions"
    if jit.get("link"):
        return "it links files (link=...) whose contents its id does not cover"
    if jit.get("debug"):
        return "debug=True: its exceptions are decoded with numba-cuda's objects"
    for a in args:
        if type(a) is not Binding and not isinstance(a, _PLAIN_SCALARS) and not _is_numpy_scalar(a):
            return f"an argument of type {type(a).__name__} (tuples, records, enums, dates are not cached)"
    for name, value in jit.items():
        if _stable_text(value) is None:
            return f"option {name}={value!r} has no stable text form"
    return None


def _is_numpy_scalar(value) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.generic)


def entry_key(kid: str, signature: tuple, options: tuple, jit: dict, device_facts: str,
              py_func) -> str | None:
    """Hex SHA-256 naming one compile (the module docstring lists what it covers); None when the
    numba_cube sources cannot be read or an option has no stable text form. ``options``: the
    client's, as ``(name, value)`` pairs."""
    digest = backend_digest()
    if digest is None:
        return None
    texts = [(k, _stable_text(v)) for k, v in sorted(jit.items())]
    option_texts = [(k, _stable_text(v)) for k, v in options]
    if any(text is None for _, text in texts + option_texts):
        return None                     # two such values could not be told apart
    jit_text, options_text = repr(texts), repr(option_texts)
    code = py_func.__code__
    place = f"{code.co_filename}:{code.co_firstlineno}"
    return hashlib.sha256(_frame(_FORMAT, kid.encode(), repr(signature).encode(),
                                 options_text.encode(), jit_text.encode(),
                                 device_facts.encode(), _library_versions().encode(),
                                 _numba_environment().encode(), place.encode(),
                                 digest.encode())).hexdigest()


class DiskCache:
    """The on-disk entries of one device: ``driver`` loads them, ``index`` is the device."""

    def __init__(self, driver, index: int):
        self.driver = driver
        self.index = index
        self._facts = None

    def device_facts(self) -> str:
        """The compute capability and the driver's version: part of every key."""
        if self._facts is None:
            drv = self.driver
            dev = drv.device(self.index)
            cc = (drv.device_attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR", dev),
                  drv.device_attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR", dev))
            self._facts = repr((cc, drv.driver_version()))
        return self._facts

    @staticmethod
    def _path(key: str) -> str:
        return str(config.cache_root() / (f"{cache_layout.CUDA_PREFIX}{key[:32]}"
                                          f"{cache_layout.CUDA_SUFFIX}"))

    @staticmethod
    def _context(key: str) -> tuple[bytes, ...]:
        # "cuda kernel" first: no translation or Numba cache file (other first parts) can pass
        return (b"cuda kernel", key.encode())

    def store(self, key: str, name: str, compiled, image: CodeImage, access: tuple) -> None:
        """Keep ``compiled`` (loaded from ``image``) with its IO ``access`` under ``key``."""
        from numba_cube.backends.cpu.cache.numba_cache import write_sealed   # the CPU cache's sealing: one rule for both

        head = json.dumps({"name": name, "kind": image.kind, "entry": image.entry,
                           "max_threads": int(compiled.max_threads),
                           "shared_bytes": int(compiled.shared_bytes),
                           "cooperative": bool(compiled.cooperative),
                           "error_word": bool(compiled.layout.error_word),
                           "access": [[bool(r), bool(w)] for r, w in access],
                           "image_bytes": len(image.data)}, sort_keys=True).encode()
        payload = struct.pack("<Q", len(head)) + head + image.data + image.asm.encode()
        try:
            write_sealed(config.cache_root(), self._path(key), self._context(key), payload)
        except OSError:
            pass

    def load(self, key: str, kinds: tuple):
        """``(CompiledKernel, access)`` of the entry under ``key``, loaded on this device (its
        context current) for arguments of ``kinds`` (``compiler.arg_kinds``), or None: no entry, one that fails verification or does not parse
        (deleted or to be overwritten), or an image the driver refuses."""
        from numba_cube.backends.cpu.cache.numba_cache import read_sealed

        try:
            payload = read_sealed(config.cache_root(), self._path(key), self._context(key))
        except OSError:                 # no key file can be made: the cache is out of reach
            return None
        if payload is None:
            return None
        cache_layout.mark_used(self._path(key))    # in use: not pruned as old
        try:
            (size,) = struct.unpack_from("<Q", payload)
            head = json.loads(payload[8:8 + size])
            start = 8 + size
            image = payload[start:start + head["image_bytes"]]
            asm = payload[start + head["image_bytes"]:].decode()
            access = tuple((bool(r), bool(w)) for r, w in head["access"])
            if head["kind"] == "ptx" and not image.endswith(b"\0"):
                image += b"\0"         # cuModuleLoadData reads PTX up to its NUL
            entry, cooperative = str(head["entry"]), bool(head["cooperative"])
            error_word = bool(head["error_word"])
            max_threads, shared = int(head["max_threads"]), int(head["shared_bytes"])
            name = str(head["name"])
        except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError):
            return None                 # verified yet unreadable: compiled again, rewritten
        try:
            module = self.driver.module_load_data(image)
            function = self.driver.module_get_function(module, entry)
        except CudaError:
            return None                 # e.g. an image this driver cannot load after all
        except Exception:  # noqa: BLE001 - a cache that cannot load costs a compile, never a launch
            log.warning("numba_cube: loading %s from the CUDA disk cache failed; compiling it",
                        name, exc_info=True)
            return None
        return self._compiled(name, function, kinds, max_threads, shared,
                              CachedCode(module, entry, asm, cooperative), error_word), access

    def _compiled(self, name, function, kinds, max_threads, shared, source, error_word=False):
        from numba_cube.backends.cuda.launch.packed_launch import ArgLayout, CompiledKernel

        driver = self.driver

        def occupancy(block_threads: int) -> int:
            return driver.occupancy(function, block_threads, 0)

        # (a kernel kept here cannot raise, ``compiler.image_of``; it may still have the
        # error-word parameter, which gets the ring's never-read word)
        return CompiledKernel(name, function, ArgLayout(kinds, error_word), max_threads, shared,
                              occupancy, source, cooperative=source.cooperative)
