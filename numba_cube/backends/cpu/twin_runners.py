"""How a compiled CPU kernel is run: its twins' entry points, called with a launch's geometry
and arguments, and the runner that picks a twin per launch from its timed runs.

``server.CpuBackend.compile`` compiles a twin (``server._compile_twin``) into one of three
entries: a compiled function called directly (the parallel twin of a kernel that cannot raise),
a ``ChunkEntry`` (the serial twin, as its chunk function) or a ``StatusEntry`` (the parallel twin
of a kernel that can raise). ``twin_runner`` makes ``run(count, dim, args, shared_bytes)`` of
one entry; ``measured_runner`` makes one that chooses between the twins (``twin_choice.py``).
Both of the latter two forms exist for the same reason: an exception must leave generated code
from the function Python called, not through a nested jitted call, where Numba leaks an
allocation per failing launch (numba/numba#10783).
"""

from __future__ import annotations

import logging
import threading
import time
import warnings

from numba.core.errors import NumbaPerformanceWarning

from numba_cube.backends.cpu.emit.entry_points import PIECE_SHIFT, RERUN_DID_NOT_RAISE
from numba_cube.backends.cpu.twin_choice import TwinChoice

__all__ = ["ChunkEntry", "StatusEntry", "twin_runner", "measured_runner"]

log = logging.getLogger("numba_cube")


class ChunkEntry:
    """The serial twin as its chunk function (``server._compile_twin``): what ``twin_runner``
    calls."""

    __slots__ = ("chunk",)

    def __init__(self, chunk):
        self.chunk = chunk


class StatusEntry:
    """The parallel twin of a kernel that can raise: ``<kernel>__par_status``, which returns
    its first failed piece, and the chunk function, which ``twin_runner`` calls on that piece
    to raise its exception from Python, not through a nested jitted call (numba/numba#10783)."""

    __slots__ = ("status", "chunk")

    def __init__(self, status, chunk):
        self.status = status
        self.chunk = chunk


def twin_runner(dynamic_shared: bool, entry):
    """``run(count, dim, args, shared_bytes)`` calling one compiled twin."""
    if isinstance(entry, StatusEntry):
        return _status_runner(dynamic_shared, entry)
    if isinstance(entry, ChunkEntry):
        chunk = entry.chunk
        # ``<kernel>__ser``'s own test, then its one call: chunk 0 of 1 is the whole launch
        if dynamic_shared:
            def run(count, dim, args, shared_bytes=0):
                if count[0] * count[1] * count[2] * dim[0] * dim[1] * dim[2] > 0:
                    chunk(0, 1, count[0], count[1], count[2], dim[0], dim[1], dim[2],
                          shared_bytes, *args)
        else:
            def run(count, dim, args, shared_bytes=0):
                if count[0] * count[1] * count[2] * dim[0] * dim[1] * dim[2] > 0:
                    chunk(0, 1, count[0], count[1], count[2], dim[0], dim[1], dim[2], *args)
        return run
    if dynamic_shared:
        def run(count, dim, args, shared_bytes=0):
            entry(count[0], count[1], count[2], dim[0], dim[1], dim[2], shared_bytes, *args)
    else:
        def run(count, dim, args, shared_bytes=0):
            # numba-cuda gives a kernel that declares no dynamic shared memory the bytes it
            # was launched with all the same; nothing can see them, so nothing is allocated.
            entry(count[0], count[1], count[2], dim[0], dim[1], dim[2], *args)
    return run


def _status_runner(dynamic_shared: bool, entry: StatusEntry):
    """``run`` of a ``_StatusEntry``: the parallel twin, then its failed piece re-run alone."""
    status, chunk = entry.status, entry.chunk

    def raise_failed_piece(failed, geometry, args):
        piece, pieces = divmod(failed, PIECE_SHIFT)
        chunk(piece, pieces, *geometry, *args)
        raise RuntimeError(RERUN_DID_NOT_RAISE)

    if dynamic_shared:
        def run(count, dim, args, shared_bytes=0):
            geometry = (count[0], count[1], count[2], dim[0], dim[1], dim[2], shared_bytes)
            failed = status(*geometry, *args)
            if failed >= 0:
                raise_failed_piece(failed, geometry, args)
    else:
        def run(count, dim, args, shared_bytes=0):
            failed = status(count[0], count[1], count[2], dim[0], dim[1], dim[2], *args)
            if failed >= 0:
                raise_failed_piece(failed, (count[0], count[1], count[2], dim[0], dim[1],
                                            dim[2]), args)
    return run


def measured_runner(kernel_name: str, dynamic_shared: bool, entries: dict, compile_twin):
    """``run`` choosing its twin per launch from its own timed runs (``twin_choice.py``).
    ``entries``: the twins compiled so far (twin -> entry); ``compile_twin(twin)`` compiles
    another at its first choice. If it does not compile (it should: both twins come from one
    translation), the compiled one runs from then on, and a warning says so."""
    choice = TwinChoice()
    runners = {twin: twin_runner(dynamic_shared, entry) for twin, entry in entries.items()}
    compile_lock = threading.Lock()
    perf_counter = time.perf_counter

    def runner_for(twin: str):
        with compile_lock:
            if twin not in runners:
                try:
                    entry = compile_twin(twin)
                except Exception as exc:  # noqa: BLE001 - the compiled twin still runs it
                    # Said aloud: a parallel twin that does not compile leaves every launch of
                    # the kernel on one core, a slowdown nothing else would explain.
                    first_line = (str(exc).splitlines() or [""])[0]
                    warnings.warn(NumbaPerformanceWarning(
                        f"kernel {kernel_name}: its {twin} variant does not compile "
                        f"({type(exc).__name__}: {first_line}); every launch of it runs its "
                        f"other variant from now on. This is a numba_cube bug: please report "
                        f"it with the kernel"), stacklevel=2)
                    log.debug("twin %s of %s does not compile", twin, kernel_name, exc_info=True)
                    runners[twin] = next(iter(runners.values()))
                else:
                    runners[twin] = twin_runner(dynamic_shared, entry)
            return runners[twin]

    def run(count, dim, args, shared_bytes=0):
        cubes = count[0] * count[1] * count[2]
        units = cubes * dim[0] * dim[1] * dim[2]
        twin = choice.choose(units, cubes)
        chosen = runners.get(twin) or runner_for(twin)
        start = perf_counter()
        chosen(count, dim, args, shared_bytes)
        choice.record(twin, units, perf_counter() - start)

    run.twin_choice = choice
    return run
