"""The server side of automatic graphs: the channel that flushes deferred launches first.

An automatic graph (``graphs/auto_graph.py``) *defers* the launches of a repeating sequence on the issuing
thread and replays the sequence's graph once it has matched in full. Until then the server has not
seen those launches, so before it does anything else for anybody (a read, a host write, a launch
of another stream or thread, a sync, a capture, an export) it must be given them, in order, as the
eager launches they stand for: a reader sees every launch issued before it, and the hazard tracker
orders other streams' work after them exactly as it would have.

``AutoGraphChannel`` wraps a server's channel once an ``auto_graph`` scope is first entered on it
(``install``): every ``call`` and ``submit`` flushes the deferred launches of every tracer first,
which over-synchronizes (the flush does not ask whether the operation touches those buffers) but
never under-synchronizes. ``post`` (what a handle's finalizer uses) passes through: a deferred
launch holds its handles, so no buffer it binds can be freed before it is flushed. A server no
scope was ever entered on keeps its own channel: nothing on its paths changes.

``lock`` orders tracers and flushes: the device lock of an ``InlineChannel`` (the tracer's step then
cannot interleave with any server operation), a lock of its own over a ``ThreadChannel`` (whose
submissions are queued in order; nothing done under that lock waits for the device thread).
"""

from __future__ import annotations

import logging
import threading

from numba_cube.runtime.streams.channel import InlineChannel

__all__ = ["AutoGraphChannel", "install", "replay_or_launch"]

log = logging.getLogger("numba_cube")

_install_lock = threading.Lock()


class AutoGraphChannel:
    """A server's channel that first flushes what automatic graphs deferred (module docstring)."""

    def __init__(self, inner, server):
        self.inner = inner
        self.server = server
        self.inline = isinstance(inner, InlineChannel)
        self.lock = inner.lock if self.inline else threading.RLock()
        #: tracers holding deferred launches (a dict used as an ordered set); written under
        #: ``lock``, read without it for its truth value only
        self.pending: dict = {}

    def __getattr__(self, name):
        # fault, alive, post, enter, leave, depth, close...: the wrapped channel's own
        return getattr(self.inner, name)

    def call(self, fn, *args):
        if self.pending:
            self.flush()
        return self.inner.call(fn, *args)

    def submit(self, fn, *args) -> None:
        if self.pending:
            self.flush()
        self.inner.submit(fn, *args)

    def flush(self, keep=None) -> None:
        """Hand every tracer's deferred launches to the server as eager launches (but ``keep``'s)."""
        with self.lock:
            for tracer in list(self.pending):
                if tracer is not keep:
                    tracer.flush_deferred()

    def run(self, fn, *args) -> None:
        """Run a server operation for a tracer, holding ``lock`` (the caller does): at once on an
        ``InlineChannel``, queued in order on a ``ThreadChannel``. A fire-and-forget operation
        that raises is a broken device, as ``submit`` would have it (``sync()`` reports it)."""
        if not self.inline:
            self.inner.submit(fn, *args)
            return
        try:
            self.inner.call(fn, *args)
        except BaseException as exc:  # noqa: BLE001 - what InlineChannel.submit does with it
            log.error("numba_cube: operation %s on %s failed", getattr(fn, "__name__", fn),
                      self.server.device, exc_info=exc)
            self.server.mark_broken(exc)


def install(server) -> AutoGraphChannel:
    """The server's ``AutoGraphChannel``, wrapping its channel the first time (then for good:
    a scope entered again finds it)."""
    with _install_lock:
        channel = server.channel
        if not isinstance(channel, AutoGraphChannel):
            channel = server.channel = AutoGraphChannel(channel, server)
        return channel


def replay_or_launch(server, graph, requests: tuple, regions: tuple) -> None:
    """One full match of a sequence, on the server: replay its graph, or, when a buffer it binds
    carries a settled failure or was freed, launch the requests one by one (the same inherited
    failures as the eager launches, by construction)."""
    ledger = server.ledger
    failed = ledger.first_failure(regions) is not None and any(
        f is not None and not f.in_flight for f in map(ledger.failure_of, regions))
    if failed or not server.memory.keys() >= graph.memory_ids:
        for req in requests:
            server.op_launch(req)
        server.counters["auto_graph_eager"] += len(requests)
        return
    server.op_replay(graph)
    server.counters["auto_graph_replays"] += 1
