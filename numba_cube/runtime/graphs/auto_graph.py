"""Automatic graphs: a repeating sequence of launches is replayed as one graph (CONTRACT.md 6.1).

``with client.auto_graph():`` opens a scope on the calling thread for the client's device. In it,
each ``client.launch`` is seen by a *tracer* of (this thread, its stream), which keys it: kernel,
count, dim, dynamic shared bytes, options, the bound handles by their bindings (equal bindings
are the same bytes in the same layout), the scalars by type and exact value.

- **Tracing.** Launches run eagerly (the general path, or the warm path when it fires) and their
  requests are kept. When the last P keys equal the P before them (P up to ``MAX_PERIOD``), the
  last P requests are recorded as a graph (``capture.record_launches``: the resolved dispatches;
  a CUDA graph on a GPU, a software graph on host backends) without running anything.
- **Armed.** A launch whose key is the next one expected is *deferred*: counted, its arguments
  held (so no handle it binds can be freed), nothing sent to the server. When the whole sequence
  has matched, the graph is replayed once (``auto_graph_channel.replay_or_launch``).
- **Flush.** Anything else hands the deferred prefix to the server first, in order, as the
  eager launches it stands for (the requests made when the sequence was traced: the same
  kernel, bindings, scalars, geometry and stream), then proceeds, and the tracer starts tracing
  afresh: a launch that does not match; one that cannot be keyed (composite or foreign
  arguments, ``CubeCount``/``CubeDim`` objects, a dynamic count); anything that watches
  launches (observers, profiles, dry runs); exclusive use; an open capture window on the
  device; deferred launches of another tracer; and every operation of any thread on the device's
  channel (``graphs/auto_channel.py``): reads, checks, syncs, host writes, allocations, other
  launches, captures, exports. The scope's exit flushes too. Nothing is lost or reordered: over
  the same sequence of operations the server sees what eager launches would have given it, at
  the latest at the first operation that could observe the difference.

What is never recorded (the tracer then stays eager for that sequence): a launch whose kernel does
not compile or whose geometry is refused, one that writes no buffer (its failure would be reported
by no buffer), one the mechanism cannot capture (a read-back dynamic count, a debug kernel on
CUDA), and any sequence while a capture window is open on its stream. A replay whose buffers carry
a settled failure is run as the eager launches instead.

**Held launches.** A deferred launch is the hot path of a scope (a training loop spends its
time there), so the client meets it first (``client/launch.py``): this thread's last armed tracer
is kept in ``HELD.tracer`` (a thread-local; set by ``launch`` whenever it finds a tracer, cleared
when the thread's scope on that server closes), and a launch of that tracer's server and stream
while nothing but scopes watches launches and nobody holds the device is matched against it
there, under the channel's lock, with the checks ``launch`` makes (armed, no capture window open,
no other tracer's launches deferred), written out. Any miss goes to ``launch``, which makes them
all again. The tracer is only ever armed, held and completed on its own thread; other threads
only flush it, under the same lock, which resets it (``graph`` None), so a tracer the fast check
finds armed under the lock is in the state ``launch`` would have found it in.

Off by default (measured: ``benchmarks/bench_auto_graph.py``); while a scope is open on any
thread, the warm launch paths are taken only by threads whose launches no tracer defers (the scope
counts itself in ``watchers.WATCHING``, so the warm path pays nothing when no scope is open).
"""

from __future__ import annotations

import threading

from numba_cube.errors import CaptureError
from numba_cube.runtime.graphs import auto_channel as auto_graph_channel
from numba_cube.runtime.graphs.auto_match import expectation
from numba_cube.runtime.graphs.capture import record_launches
from numba_cube.runtime.memory.handle import Handle
from numba_cube.runtime.client.launch_log import note_launch
from numba_cube.runtime.streams.identity import StreamId
from numba_cube.runtime.client.watchers import WATCHING, watch

__all__ = ["AutoGraphScope", "AUTO_SCOPES", "HELD", "MAX_PERIOD", "launch", "launch_key"]

#: The longest sequence recognised (launches per period).
MAX_PERIOD = 128

#: Open ``auto_graph`` scopes over all threads (each also counts in ``WATCHING``).
AUTO_SCOPES = [0]
_count_lock = threading.Lock()

# this thread's open scopes: server -> ScopeState
_local = threading.local()

#: ``HELD.tracer``: this thread's tracer that ``launch`` found last (on any server), which the
#: client matches a launch against first ("Held launches" above); absent before the thread's
#: first one, None once the scope it belongs to closed.
HELD = threading.local()

_SCALARS = (int, bool)


def launch_key(kernel, count, dim, args, shared_bytes, options) -> tuple | None:
    """The identity of a launch for matching, or None when it cannot be keyed cheaply and
    exactly. Floats equal with ``==`` are the same number except for the zeros (``-0.0 == 0.0``),
    which are told apart by their ``repr``; a NaN never equals itself, so it never matches."""
    if not (type(count) is int or (type(count) is tuple and all(type(c) is int for c in count))):
        return None
    if not (type(dim) is int or (type(dim) is tuple and all(type(d) is int for d in dim))):
        return None
    key = [kernel, count, dim, shared_bytes, options]
    for a in args:
        kind = type(a)
        if kind is Handle:
            key.append(a.binding())
        elif kind in _SCALARS:
            key.append((kind, a))
        elif kind is float:
            key.append((kind, a) if a else (kind, repr(a)))
        elif kind is complex:
            key.append((kind, repr(a)))
        elif hasattr(a, "dtype") and hasattr(a, "tobytes") and getattr(a, "ndim", 1) == 0 \
                and a.dtype.kind in "biufc":
            key.append((kind, a.tobytes()))     # a NumPy scalar: its exact bits
        else:
            return None
    if type(shared_bytes) is not int:
        return None
    return tuple(key)


class Tracer:
    """The automatic graph of one (thread, server, stream): see the module docstring."""

    def __init__(self, channel, stream):
        self.channel = channel          # the server's AutoGraphChannel
        self.server = channel.server
        self.stream = stream
        self.reset()
        self.refused: tuple | None = None   # the last sequence that could not be recorded

    def reset(self) -> None:
        """Start tracing afresh (the armed graph, if any, is dropped)."""
        self.keys: list = []
        self.requests: list = []
        self.seen: dict = {}            # key -> its latest index in ``keys``
        self.candidate = 0              # a period under test
        self.run = 0                    # positions that repeat ``candidate`` back, in a row
        self.graph = None
        self.expected: tuple = ()
        self.matchers: tuple = ()       # per position, ``auto_graph_match.expectation``
        self.kernel_ids: tuple = ()
        self.sequence: tuple = ()       # the requests of the armed sequence
        self.regions: tuple = ()
        self.position = 0               # launches of the armed sequence deferred so far
        self.last = -1                  # the position of the armed sequence's last launch
        self.held: list = []            # their arguments (keeping their handles alive)

    # -- armed: under the channel's lock -------------------------------------------------------------
    def defer(self, kernel, count, dim, args, shared_bytes, options) -> str | None:
        """Defer this launch if it is the next one expected, holding its ``args`` (the caller
        holds the lock); on the last one, replay. Returns the kernel id of the deferred launch,
        or None: nothing was deferred."""
        position = self.position
        if not self.matchers[position](kernel, count, dim, args, shared_bytes, options):
            return None
        if position < self.last:
            if position == 0:
                self.channel.pending[self] = None
            self.position = position + 1
            self.held.append(args)
            return self.kernel_ids[position]
        return self.complete()

    def complete(self) -> str:
        """The last launch of the armed sequence matched (the caller holds the lock): replay the
        sequence once and start expecting it again. Returns that launch's kernel id."""
        kernel_id = self.kernel_ids[self.position]
        self.channel.pending.pop(self, None)   # (absent for a sequence of one launch)
        self.position = 0
        self.held = []
        channel = self.channel
        channel.run(auto_graph_channel.replay_or_launch, channel.server, self.graph,
                    self.sequence, self.regions)
        return kernel_id

    def flush_deferred(self) -> None:
        """Hand the deferred launches to the server, in order, as eager launches, and start
        tracing afresh (the caller holds the lock)."""
        channel = self.channel
        channel.pending.pop(self, None)
        deferred, self.held = self.sequence[:self.position], []
        server = channel.server
        for req in deferred:
            channel.run(server.op_launch, req)
        if deferred:
            server.counters["auto_graph_flushed"] += len(deferred)
        self.reset()

    # -- tracing -----------------------------------------------------------------------------------
    def traced(self, key, req) -> None:
        """An eager launch of ``key`` went out as ``req``: look for a period; record it when the
        last P keys repeat the P before them."""
        keys = self.keys
        n = len(keys)
        keys.append(key)
        self.requests.append(req)
        period = self.candidate
        if period and keys[n - period] == key:
            self.run += 1
        else:
            try:
                previous = self.seen.get(key)
            except TypeError:           # an unhashable option value: not traced
                self.reset()
                return
            period = 0 if previous is None or n - previous > MAX_PERIOD else n - previous
            self.candidate = period
            run = 0
            if period:
                while run < period and n - run - period >= 0 \
                        and keys[n - run] == keys[n - run - period]:
                    run += 1
            self.run = run
        self.seen[key] = n
        if period and self.run >= period:
            self._arm(period)
        elif n + 1 >= 4 * MAX_PERIOD:
            self.reset()                # bounded: a program that never repeats

    def _arm(self, period: int) -> None:
        expected = tuple(self.keys[-period:])
        if expected == self.refused:
            self.reset()
            return
        sequence = tuple(self.requests[-period:])
        channel = self.channel
        server = channel.server
        graph = channel.inner.call(record_launches, server, self.stream, sequence)
        self.reset()
        if graph is None:
            self.refused = expected
            return
        self.graph, self.expected, self.sequence = graph, expected, sequence
        # the traced arguments (the requests hold them anyway) let a handle match by identity
        self.matchers = tuple(
            expectation(key, launch_key, server, req.as_called[3] if req.as_called else None)
            for key, req in zip(expected, sequence))
        self.last = len(sequence) - 1
        self.kernel_ids = tuple(req.kernel.id for req in sequence)
        self.regions = tuple({r: None for req_rec in graph.recorded
                              for r in req_rec.reads + req_rec.writes})
        server.counters["auto_graph_recorded"] += 1


class ScopeState:
    """This thread's open scope on one server: its depth and its tracers (one per stream)."""

    def __init__(self, channel):
        self.channel = channel
        self.depth = 0
        self.tracers: dict = {}


class AutoGraphScope:
    """``with client.auto_graph():`` -- see the module docstring. Re-entrant on its thread."""

    def __init__(self, server):
        self._server = server
        self._thread: int | None = None
        self._entered = 0

    def __enter__(self) -> "AutoGraphScope":
        channel = auto_graph_channel.install(self._server)
        scopes = getattr(_local, "scopes", None)
        if scopes is None:
            scopes = _local.scopes = {}
        state = scopes.get(self._server)
        if state is None:
            state = scopes[self._server] = ScopeState(channel)
        state.depth += 1
        self._thread = threading.get_ident()
        self._entered += 1
        with _count_lock:
            AUTO_SCOPES[0] += 1
        watch(+1)
        return self

    def __exit__(self, *exc) -> bool:
        if not self._entered or self._thread != threading.get_ident():
            raise CaptureError("an auto_graph scope was left without being entered on this thread")
        self._entered -= 1
        state = _local.scopes[self._server]
        state.depth -= 1
        try:
            if state.depth == 0:
                del _local.scopes[self._server]
                if getattr(HELD, "tracer", None) is not None and HELD.tracer.server is self._server:
                    HELD.tracer = None
                with state.channel.lock:
                    for tracer in state.tracers.values():
                        tracer.flush_deferred()
        finally:
            with _count_lock:
                AUTO_SCOPES[0] -= 1
            watch(-1)
        return False


def launch(client, kernel, count, dim, args, shared_bytes, options, stream) -> bool:
    """``client.launch`` while some auto_graph scope is open (on any thread): True when the launch
    was taken care of here (deferred, or issued eagerly), False for the caller's general path.
    ``options`` and ``stream``: the client's options key and the launch's stream (its pinned
    stream, or the thread's current one; None: the thread's current one)."""
    server = client.server
    channel = server.channel
    try:
        state = _local.scopes.get(server)
    except AttributeError:
        state = None
    # Nothing but scopes watches launches, nobody holds the device, no capture window is open.
    quiet = (WATCHING[0] == AUTO_SCOPES[0] and server.exclusive.owner is None
             and not server.captures)
    if state is None or not quiet:
        if type(channel) is auto_graph_channel.AutoGraphChannel and channel.pending:
            channel.flush()
        # A thread without a scope (or a launch someone watches): the warm path may fire now
        # that nothing is deferred, else the caller's general path.
        return quiet and client.fire_warm(kernel, count, dim, args, shared_bytes, None, note=True)
    if stream is None:
        stream = StreamId.current()
    tracer = state.tracers.get(stream)
    if tracer is None:
        tracer = state.tracers[stream] = Tracer(channel, stream)
    HELD.tracer = tracer                # the client's fast check meets it first next time
    if tracer.graph is not None:
        # The lock is kept for a held launch too: another thread's flush must see every launch
        # deferred before it, and ``defer`` updates ``pending`` and the position together.
        with channel.lock:
            if tracer.graph is not None:        # (another thread's flush may have reset it)
                pending = channel.pending
                if pending and (tracer not in pending or len(pending) > 1):
                    channel.flush(keep=tracer)     # older deferred launches go out first
                # (The client's check, client/launch.py, holds the launches of a thread's last
                # tracer without coming here: this is the way of the others.)
                kernel_id = tracer.defer(kernel, count, dim, args, shared_bytes, options)
                if kernel_id is not None:
                    note_launch(kernel_id)          # gate 3
                    return True
                tracer.flush_deferred()
    key = launch_key(kernel, count, dim, args, shared_bytes, options)
    if key is None:
        tracer.reset()
        return False                    # (the general path flushes what is deferred)
    req = client.launch_request(kernel, count, dim, args, shared_bytes)
    if req is None:
        return True                     # a zero grid: nothing happens, nothing to trace
    if channel.pending:
        channel.flush()                 # the warm path does not go through the channel
    if not client.fire_warm(kernel, count, dim, args, shared_bytes, stream):
        client.submit_launch(req)
    tracer.traced(key, req)
    return True
