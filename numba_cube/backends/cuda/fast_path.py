"""The warm launch: a launch that repeats one already made is one match and one driver call.

Why a separate path. The general launch (``CudaServer.op_launch``) builds a request, looks up the
launch plan, makes a task and a recorded dispatch, walks the hazard tracker, opens an execute
scope (claim, release) and records an event: about 25 us of Python per launch on an H200 host,
six times the driver's own ``cuLaunchKernel`` (3.8 us). Issue 7 asks for 8 us in all. Almost all
of that work depends only on *what* is launched (kernel, bound buffers, scalar types, geometry,
stream), which repeats from launch to launch in every real program: a loop, a pipeline per thread.

So after a general launch the server *arms* a ``HotLaunch`` for the kernel: its plan, its CUDA
stream, the hazard states of its buffers and its ledger regions, all resolved. The next launch of
that kernel with the same handles (by identity), scalar types, geometry, options and stream
*fires* it:

1. match (outside the device lock: the entry is immutable once armed);
2. under the device lock: the state that may have changed since arming is checked, and any
   change sends the launch to the general path, which is always correct:
   - a capture window open on the device (launches there are recorded, not run);
   - a failure in the ledger on any of its regions (the general path skips or repairs);
   - its stream's CUDA stream recycled (the entry's would then serve another stream id);
   - a buffer with live entries of another stream in the hazard tracker (a dependency to wait
     for: ``HazardTracker.register_solo`` declines);
3. the scalars are packed into the plan's parameter block and the kernel is launched. No event
   is recorded: the launch's ``HotTask`` gets one only when somebody must wait for it
   (``streams.HotTask``), which a loop of launches on one stream never needs.

What the warm path leaves out, and why that is the same contract:

- *the execute scope's claim*: a claim exists so that a reader that is not ordered after a
  launch still in progress does not report its failure. Here the claim would be made and released
  under the device lock around one asynchronous driver call; nobody can see it in between. A
  refused launch records its failure on the write set exactly as the scope's ``fail`` does;
- *observers, profiles, dry runs, exclusive use*: the client sends a launch down the warm path
  only when none of them is active (``client.quiet``);
- *dynamic counts, foreign (borrowed) buffers, compile failures, the baseline dependency rule*:
  never armed.

The entry holds the ``Binding`` objects of the handles it matched, never the handles: a binding
is matched by identity, and only a live handle carries it, so a matched entry's buffers are
alive. Entries that bind a freed buffer are dropped with its plans (``forget_memory``).
"""

from __future__ import annotations

import numpy as np

from ...runtime.handle import Handle
from ...runtime.ledger import Failure
from .streams import HotTask

__all__ = ["HotLaunch", "FastLaunchMixin"]

#: Scalar argument types an entry matches by type: those the client binds by value. Anything
#: else (a Handle subclass, a foreign array adopted without a copy) is never armed, because a
#: type match would not say *which* buffer it is.
_PLAIN_SCALAR_TYPES = frozenset({int, float, bool, complex})

#: Raw count/dim types an entry can match with ``==`` cheaply (a CubeCount object takes the
#: general path: it may be dynamic, and its equality is a Python-level dataclass ``__eq__``).
_PLAIN_GEOMETRY = (int, tuple)


class HotLaunch:
    """One armed launch (see the module docstring)."""

    __slots__ = ("count", "dim", "grid", "block", "match", "stream", "options", "cs", "plan",
                 "function", "address", "read_states", "write_states", "regions", "writes",
                 "memory_ids", "kernel_id")

    def __init__(self, count, dim, grid, block, match, stream, options, cs, plan, read_states,
                 write_states, kernel_id):
        self.count = count              # the caller's count and dim, as passed (int or tuple)
        self.dim = dim
        self.grid = grid                # the same as three ints each, for the driver
        self.block = block
        self.match = match              # per argument: its Binding (a handle) or its type (a scalar)
        self.stream = stream
        self.options = options
        self.cs = cs                    # the CUDA stream of ``stream`` when armed
        self.plan = plan.launch         # the LaunchPlan: packed parameters, loaded function
        self.function = plan.launch.kernel.function
        self.address = plan.launch.block.address
        self.read_states = read_states  # hazard states of the buffers only read
        self.write_states = write_states
        self.regions = plan.reads + plan.writes
        self.writes = plan.writes
        self.memory_ids = plan.read_mems | plan.write_mems
        self.kernel_id = kernel_id


class FastLaunchMixin:
    """The warm path of ``CudaServer``: ``fast_launch`` (issuing thread) and ``_arm``."""

    def _init_fast_path(self) -> None:
        self._hot: dict = {}        # kernel object -> HotLaunch
        self._hot_fired = 0         # warm launches not yet folded into stats

    def fast_launch(self, kernel, count, dim, args: tuple, stream, options) -> str | None:
        """Fire the armed launch of ``kernel`` if this launch repeats it; return the kernel id,
        or None when the launch must take the general path (nothing was done then)."""
        hot = self._hot.get(kernel)
        if hot is None or hot.stream is not stream or hot.options != options \
                or count != hot.count or dim != hot.dim:
            return None
        match = hot.match
        if len(args) != len(match):
            return None
        for a, m in zip(args, match):
            if (a._binding if type(a) is Handle else type(a)) is not m:
                return None
        channel = self.channel
        with channel.lock:
            # InlineChannel.call's bookkeeping, inlined: a handle's finalizer that the garbage
            # collector runs inside this block defers its operation until we are done.
            channel.depth += 1
            try:
                return self._fire(hot, args)
            finally:
                channel.depth -= 1
                if channel.depth == 0 and channel._deferred:
                    channel.run_deferred()

    def _fire(self, hot: HotLaunch, args: tuple) -> str | None:
        """Steps 2-3 of the module docstring, under the device lock. Every ``return None`` comes
        before anything was changed."""
        if self._to_free:
            self._drain_frees()
        streams = self.streams
        if self.captures or streams._streams.get(hot.stream) is not hot.cs:
            return None
        ledger = self.ledger
        if ledger._entries and ledger.first_failure(hot.regions) is not None:
            return None
        plan = hot.plan
        if plan.pack is not None:
            try:
                plan.pack(args)
            except Exception:  # noqa: BLE001 - out of range for its type: the general path says so
                return None
        err, current = self._get_current()          # self.activate(), inlined
        if err != self._success or int(current) != self._ctx_int:
            self.activate()
        cs = hot.cs
        task = HotTask(hot.stream, cs, streams, next(self._task_ids))
        if not self.hazards.register_solo(task, hot.read_states, hot.write_states):
            return None
        cs.seq += 1
        task.seq = cs.seq
        cs.tail = task
        grid, block = hot.grid, hot.block
        err = plan._launch(hot.function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                           0, cs.handle, hot.address, 0)[0]
        if err != plan._success:
            kid = hot.kernel_id
            ledger.record(hot.writes, Failure(plan.refused(err, grid, block), kid, (kid,)))
        # No event here: the task borrows one when somebody has to wait for it (HotTask).
        self._hot_fired += 1
        return hot.kernel_id

    def _arm(self, req, plan, cs) -> None:
        """After a general launch that ran: make the next identical one warm, if it can be."""
        key, count, dim, raw_args = req.raw
        if self.hazards.baseline or plan.foreign or type(count) not in _PLAIN_GEOMETRY \
                or type(dim) not in _PLAIN_GEOMETRY:
            return
        match = []
        for a in raw_args:
            kind = type(a)
            if kind is Handle:
                match.append(a._binding)
            elif kind in _PLAIN_SCALAR_TYPES or (isinstance(a, np.generic) and a.dtype.kind in "biufc"):
                match.append(kind)
            else:
                return
        hazards = self.hazards
        write_mems = plan.write_mems
        read_only = tuple(m for m in plan.read_mems if m not in write_mems)
        if len(self._hot) >= 1024:          # bounded: a program generating kernels forever
            self._hot.clear()
        self._hot[key] = HotLaunch(
            count, dim, req.count.as_tuple(), req.dim.as_tuple(), tuple(match), req.stream, req.options,
            cs, plan, hazards.states(read_only), hazards.states(tuple(write_mems)), req.kernel.id)

    def _forget_hot(self, memory_id) -> None:
        """A buffer was freed: drop the armed launches that bind it."""
        dead = [k for k, hot in self._hot.items() if memory_id in hot.memory_ids]
        for k in dead:
            del self._hot[k]

    def _fold_hot_stats(self, stats) -> None:
        fired, self._hot_fired = self._hot_fired, 0
        if fired:
            stats["launched"] += fired
            stats["cache_hits"] += fired
            stats["warm"] += fired      # how many of the launches took the warm path
