"""Autotune: pick the fastest of several candidate implementations, once per key (CONTRACT.md 7).

A ``Tuner`` holds a table of candidates for one operation and a key function of the inputs (sizes
rounded to powers of two with ``pow2_bucket``, so nearby shapes share a result)::

    @cube.autotune(key=lambda x, out: cube.pow2_bucket(x.size),
                   candidates=[{"tpb": 64}, {"tpb": 128}, {"tpb": 256}])
    def block_sum(client, x, out, *, tpb):
        client.launch(sum_kernels[tpb], cubes(x.size, tpb), tpb, x, out)

    block_sum(client, x, out)        # tunes on first use of the key, then runs the winner

First use of a key:

1. **compile** every candidate under a dry run of this thread only (``thread_dry_run``: nothing
   runs, every kernel is compiled and cached; a compile failure is remembered and disqualifies
   the candidate later). Other threads' launches meanwhile run as usual: a process-wide
   ``dry_run`` here would skip them silently;
2. **measure** each candidate inside ``real_run`` (so it runs even if another thread, or this one,
   holds a dry run) and ``client.exclusive`` (nobody else's work in the timings): warm-ups, then
   several samples, the median kept. Candidates run on *copies* of every buffer reachable from
   the arguments (handles and host NumPy arrays, top-level or in tuples, lists and dicts,
   positional or by keyword; ``autotune_scratch``), in steps 1 and 2 alike, so in-place
   candidates do not corrupt the caller's data by running many times;
3. a candidate whose launches fail (its outputs carry a ``LaunchFailure``) is disqualified, not
   fatal; the fastest remaining one wins.

The winner is then run on the real arguments in the caller's launch mode (under a dry run it only
compiles). Results are kept in memory and on disk (``<cache dir>/autotune.json``, see
``autotune_store``), keyed by device, tuner name, candidate set and key, so a new process does
not tune again; ``NUMBA_CUBE_AUTOTUNE_CACHE=0`` turns the disk cache off. Tuning shows a progress
bar (tqdm, the ``progress`` extra; ``progress.py``) on a terminal, never when piped or in CI.

A result is only as good as the code it measured, and the key above does not see the kernels a
candidate launches (a kernel table filled by a factory, a kernel edited in another module). So
each result records the kernel ids (``Kernel.id``: the compiled code) its winner launched while
it was tuned (``TuneResult.launched``), and every call that reuses a result, from memory or from
disk, watches the winner's launches (``runtime/client/launch_log.py``): a kernel id it did not launch
when tuned means the code changed, so the result is dropped (memory and disk) and the key is
tuned again at once. The call itself has already run the current code, so its outputs are right
either way; only the choice was stale. Launching *fewer* kernels (a zero-size launch is skipped,
a data-dependent branch) is not a change. A winner that launches another kernel on other inputs
of the same key is retuned too; if it wins again its record keeps the union of what it was seen
to launch, so a key whose candidates pick kernels by data does not retune on every call.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from . import config
from .autotune_scratch import scratch_copies
from .errors import LaunchFailure
from .progress import progress_bar
from numba_cube.runtime.client.launch_log import record_launches
from numba_cube.runtime.client.modes import real_run, thread_dry_run

__all__ = ["Tuner", "autotune", "pow2_bucket", "TuneResult"]


def pow2_bucket(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1): a key that lets nearby sizes share a result."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


@dataclass
class TuneResult:
    best: str
    timings: dict = field(default_factory=dict)        # candidate -> median seconds
    disqualified: dict = field(default_factory=dict)   # candidate -> reason
    from_cache: bool = False
    launched: frozenset = frozenset()                  # kernel ids the winner launched, tuned

    def entry(self) -> dict:
        """The JSON form stored in ``autotune.json``."""
        return {"best": self.best, "timings": self.timings, "disqualified": self.disqualified,
                "launched": sorted(self.launched)}


def _fingerprint(obj: Any) -> str:
    fn = getattr(obj, "func", obj)  # functools.partial
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        src = getattr(fn, "__qualname__", repr(fn))
    extra = repr(sorted(getattr(obj, "keywords", {}).items())) if hasattr(obj, "keywords") else ""
    return hashlib.sha256((src + extra).encode()).hexdigest()[:16]


class Tuner:
    """Candidates for one operation, a key function, and the results per key."""

    def __init__(self, name: str, candidates, key: Callable[..., Any], *, warmup: int = 1,
                 samples: int = 5):
        self.name = name
        if isinstance(candidates, dict):
            self.candidates = dict(candidates)
        else:
            self.candidates = {getattr(c, "__name__", f"candidate{i}"): c for i, c in enumerate(candidates)}
        if not self.candidates:
            raise ValueError("a Tuner needs at least one candidate")
        self.key = key
        self.warmup = warmup
        self.samples = samples
        self._results: dict[str, TuneResult] = {}
        self._lock = threading.Lock()
        digest = hashlib.sha256()
        for cname in sorted(self.candidates):
            digest.update(f"{cname}:{_fingerprint(self.candidates[cname])};".encode())
        self.candidate_set = digest.hexdigest()[:16]

    def _cache_key(self, client, key) -> str:
        return f"{client.device}|{os.cpu_count()}|{self.name}|{self.candidate_set}|{key!r}"

    def __call__(self, client, *args, **kwargs):
        result = self.tune(client, *args, **kwargs)
        with record_launches() as ids:
            outcome = self.candidates[result.best](client, *args, **kwargs)
        if not result.launched.issuperset(ids):        # the winner's code changed: retune
            self._retune(client, args, kwargs, result, frozenset(ids))
        return outcome

    def result(self, client, *args) -> TuneResult | None:
        return self._results.get(self._cache_key(client, self.key(*args)))

    def tune(self, client, *args, **kwargs) -> TuneResult:
        """The result for ``key(*args)``: from memory, else from disk, else measured now. A
        result from disk is checked by the next call (``__call__``), not here."""
        ck = self._cache_key(client, self.key(*args))
        with self._lock:
            hit = self._results.get(ck)
            if hit is None and _disk_cache_on():
                stored = _store().load().get(ck)
                if stored is not None and stored["best"] in self.candidates:
                    hit = self._results[ck] = TuneResult(
                        stored["best"], stored["timings"], stored["disqualified"],
                        from_cache=True, launched=frozenset(stored["launched"]))
            if hit is None:
                hit = self._measure_and_keep(ck, client, args, kwargs)
            return hit

    def _retune(self, client, args, kwargs, stale: TuneResult, seen: frozenset) -> None:
        ck = self._cache_key(client, self.key(*args))
        with self._lock:
            if self._results.get(ck) is not stale:
                return                      # another thread retuned (or dropped) it meanwhile
            del self._results[ck]
            if _disk_cache_on():
                _store().drop(ck)           # gone even if the new tuning fails
            self._measure_and_keep(ck, client, args, kwargs, stale=stale, seen=seen)

    def _measure_and_keep(self, ck, client, args, kwargs, stale=None, seen=frozenset()):
        result = self._measure(client, args, kwargs)
        if stale is not None and result.best == stale.best:
            # Same winner: what it launched before and in the call that triggered this stays
            # known, so inputs of this key that take another branch do not retune again.
            result.launched = result.launched | stale.launched | seen
        self._results[ck] = result
        if _disk_cache_on():
            _store().store(ck, result.entry())
        return result

    def _measure(self, client, args, kwargs) -> TuneResult:
        names = list(self.candidates)
        launched = {name: set() for name in names}
        # Step 1 on copies too: a candidate's host-side code runs even when its launches are
        # skipped, and a numba-style launch copies its host arrays back all the same.
        scratch_args, scratch_kwargs, _ = scratch_copies(client, args, kwargs)
        with thread_dry_run():                            # step 1: compile them all
            for name in names:
                try:
                    with record_launches() as ids:
                        self.candidates[name](client, *scratch_args, **scratch_kwargs)
                except Exception:  # noqa: BLE001 - judged in step 2
                    pass
                launched[name].update(ids)
        progress = progress_bar(len(names), f"tuning {self.name}")
        timings, disqualified = {}, {}
        with real_run():
            def measure_all():
                for name in names:
                    progress.set_postfix_str(name)
                    try:
                        with record_launches() as ids:
                            timings[name] = self._time_one(client, self.candidates[name], args,
                                                           kwargs)
                    except Exception as exc:  # noqa: BLE001 - disqualify, do not fail the tuner
                        disqualified[name] = f"{type(exc).__name__}: {exc}"
                    launched[name].update(ids)
                    progress.update()
            try:
                client.exclusive(measure_all)
            finally:
                progress.close()
        if not timings:
            raise RuntimeError(f"tuner {self.name}: every candidate failed: {disqualified}")
        best = min(timings, key=timings.get)
        return TuneResult(best, timings, disqualified, launched=frozenset(launched[best]))

    def _time_one(self, client, candidate, args, kwargs) -> float:
        args, kwargs, handles = scratch_copies(client, args, kwargs)

        def once() -> float:
            start = time.perf_counter()
            candidate(client, *args, **kwargs)
            answers = client.sync_buffers(*handles)
            elapsed = time.perf_counter() - start
            failed = next((a for a in answers if isinstance(a, LaunchFailure)), None)
            if failed is not None:
                raise failed
            return elapsed

        import statistics                   # here: `import numba_cube` need not load it

        for _ in range(self.warmup):
            once()
        return statistics.median(once() for _ in range(self.samples))


def _store():
    """A ``ResultStore`` (``autotune.json``), imported at the first tuning: its file lock
    (``filelock``) is 10-15 ms of ``import numba_cube`` that a process which never tunes
    need not pay."""
    from .autotune_store import ResultStore

    return ResultStore()


def _disk_cache_on() -> bool:
    return config.get_bool("NUMBA_CUBE_AUTOTUNE_CACHE", True)


def autotune(*, key: Callable[..., Any], candidates, name: str | None = None, warmup: int = 1,
             samples: int = 5):
    """Decorator form: ``fn(client, *args, **candidate_params)`` with one dict of params per
    candidate; returns a ``Tuner`` whose call runs the fastest for ``key(*args)``."""
    import functools

    def wrap(fn):
        table = {}
        for params in candidates:
            label = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
            table[label] = functools.partial(fn, **params)
        tuner = Tuner(name or f"{fn.__module__}.{fn.__qualname__}", table, key, warmup=warmup, samples=samples)
        functools.update_wrapper(tuner, fn)
        return tuner

    return wrap
