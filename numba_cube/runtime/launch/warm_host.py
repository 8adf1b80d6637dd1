"""The warm launch of a host backend: a repeated launch, or any short one, runs at once.

Why. The general path of a host server builds a request, looks up the bound launch, makes a
recorded dispatch and a task, walks the hazard tracker and queues the task to a stream worker,
which opens the execute scope and calls the kernel: 20-40 us of Python per launch, spread over
threads that share one GIL, for a kernel that may run in under a microsecond. Almost all of it
depends only on *what* is launched (kernel, handles, scalar types, geometry, stream), which
repeats from launch to launch in a real program; and the hop to a worker buys nothing when the
kernel is short and has nothing to wait for.

Two things, both only on a server whose channel is an ``InlineChannel`` (the CPU backend: the
issuing thread holds the device lock while the server works):

- **Inline dispatch.** A task marked ``inline`` (a host write; a launch whose kernel's last
  dispatch took at most ``NUMBA_CUBE_INLINE_US``, default 200 us; never a kernel's first one,
  which may be long) runs on the issuing thread when its stream is idle and everything it waits
  for is done (``HostStreams.enqueue``). A long kernel is still queued, so it blocks neither the
  issuing thread nor other threads' launches.
- **The warm path** (``WarmLaunches.fire``, the client's ``fast_launch``), under the policy
  every warm path keeps (``launch/warm_policy.py``). After a general launch
  the mechanism *arms* a ``HostWarmLaunch``: the recorded dispatch, the hazard states of its buffers
  and its ledger regions, resolved once. A later launch of that kernel on the same stream with the
  same handles (by identity), scalar types, geometry and options fires it, under the device lock:
  1. the state that may have changed since arming is checked, and any change sends the launch to
     the general path, which is always correct: a capture window open on the device, a settled
     failure in the ledger on one of its regions;
  2. dependencies: if every buffer's live entries are this stream's (``register_solo``), nothing
     to wait for; otherwise the full walk (``register``), and a launch that must wait for
     unfinished work of another stream is queued after it, as the general path queues it;
  3. a short kernel is then called right there (``_run_inline``), when its stream is idle and
     no launch is running on its buffers (a claim in the ledger); otherwise, and for a long
     kernel, it is queued: behind its own stream's work, which it must not overtake, and run in
     an execute scope that inherits whatever that work leaves on its inputs. (A loop of long
     launches, stumpy's one launch per row, keeps its stream busy: each launch is warm and
     queued, at a fraction of the general path's cost.)

Running inline *under the device lock* is what keeps the contract: no reader can look before the
dispatch ends (every read, check and dispatch touching its buffers needs the lock or is ordered
after it by the hazard tracker), so the execute scope's provisional claim, whose purpose is to
hide a dispatch in progress from readers not ordered after it, is not needed, and a warm
dispatch fires only when its inputs and outputs carry no failure, so there is nothing to inherit
or repair either: the kernel's own failure is recorded on its write set as the scope records it.
Such a dispatch registers a ``DoneTask`` with the hazard tracker: it is finished before anybody
can see it.

What the warm path leaves out: observers, profiles, dry runs and exclusive use never reach it
(the client tries it only when none is active: ``client/watchers.py``); dynamic counts, composite
arguments, dynamic shared memory, compile failures, launches that write nothing and the baseline
dependency rule are never armed. A kernel declared with signatures is armed with the NumPy type
each scalar converts to (``warm_match.declared_scalars``): a matching launch resolves to the same
signature, and a value the plain conversion cannot take exactly takes the general path. Entries hold
the ``Binding`` objects of the handles they matched, never the handles: a matched binding belongs to
a live handle, so its buffer is alive; entries that bind a freed buffer are dropped (``forget``).
"""

from __future__ import annotations

from time import perf_counter

from numba_cube import config
from numba_cube.runtime.launch.dispatch import Recorded, run_recorded
from numba_cube.runtime.streams.host_streams import Task
from numba_cube.runtime.ledger.ledger import IncompleteLaunch, failed_writing
from numba_cube.runtime.launch.warm_match import (
    NotWarm, convert_declared, declared_scalars, matcher,
)
from numba_cube.runtime.launch.warm_policy import armable_match, remember

__all__ = ["HostWarmLaunch", "WarmLaunches", "DoneTask", "INLINE_SECONDS"]

#: A kernel whose last dispatch ran longer than this (``NUMBA_CUBE_INLINE_US``'s default) is
#: queued to a stream worker rather than run on the issuing thread: past it, the ~20 us a queue
#: hop costs is a small share of the launch, and the issuing thread (and other threads'
#: launches) should not wait for it.
INLINE_SECONDS = 200e-6

#: Armed launches kept per kernel and stream: a loop often launches one kernel with a few sets of
#: arguments (ping-pong buffers, a ring of 8 buffers).
ENTRIES_PER_STREAM = 8


class HostWarmLaunch:
    """One armed launch of a host backend (see the module docstring)."""

    __slots__ = ("count", "dim", "match", "matcher", "stream", "options", "kernel_id", "recorded",
                 "scalars", "read_mems", "write_mems", "read_states", "write_states", "regions",
                 "arrays", "artifact", "count3", "dim3", "writes", "done", "declared")

    def __init__(self, count, dim, match, stream, options, kernel_id, recorded: Recorded, scalars,
                 read_mems, write_mems, read_states, write_states):
        self.count = count              # as the caller passed them (int or tuple)
        self.dim = dim
        self.match = match
        self.matcher = matcher(tuple(type(m) is not type for m in match))
        self.stream = stream
        self.options = options
        self.kernel_id = kernel_id
        self.recorded = recorded        # the dispatch, scalars filled in per launch
        self.scalars = scalars          # positions of the scalar arguments
        self.read_mems = read_mems
        self.write_mems = write_mems
        self.read_states = read_states
        self.write_states = write_states
        self.regions = recorded.reads + recorded.writes
        # what an inline run reads, unpacked once
        self.arrays = recorded.arrays
        self.artifact = recorded.artifact
        self.count3 = recorded.count
        self.dim3 = recorded.dim
        self.writes = recorded.writes
        # The task an inline run registers with the hazard tracker: it is done before anybody
        # can see it (the run ends before the device lock is released), and one done task is
        # as good as another, so each entry has one.
        self.done = DoneTask(stream, kernel_id)
        # a kernel declared with signatures: ((position, NumPy type), ...) its scalars convert to
        self.declared = None


class WarmLaunches:
    """The armed launches of one host server, and ``fire`` (the client's ``fast_launch``).

    Built by the server with what it needs (no reaching back into the server): its channel (an
    ``InlineChannel``), ledger, hazard tracker, host streams, a ``drain`` callable that frees
    what finalizers released, the server's open captures (a dict), a task-id counter and the
    ``stats`` counter the warm launches are counted in."""

    def __init__(self, *, channel, ledger, hazards, streams, drain, captures, task_ids, stats):
        self._channel = channel
        self._ledger = ledger
        self._hazards = hazards
        self._streams = streams
        self._drain = drain
        self._captures = captures
        self._task_ids = task_ids
        self._stats = stats
        # (kernel object, stream) -> its armed launches, newest first. Per stream: a program that
        # spreads a loop over streams (buffer k on stream k % 4) keeps a few entries per stream.
        self._entries: dict = {}
        # compiled kernels (artifacts) -> how short they are known to be (``note_duration``); one
        # never run is not in it, and its first dispatch is queued (it may be long)
        self._short: dict = {}
        #: dispatches that last took longer than this are queued (0: every one is)
        self.inline_seconds = config.get_int("NUMBA_CUBE_INLINE_US",
                                             round(INLINE_SECONDS * 1e6), 0) * 1e-6

    def __len__(self) -> int:
        return sum(map(len, self._entries.values()))

    def clear(self) -> None:
        """Disarm every launch: each one takes the general path again."""
        self._entries.clear()

    def fire(self, kernel, count, dim, args: tuple, stream, options, shared_bytes=0) -> str | None:
        """Run (or queue) the armed launch of ``kernel`` if this launch repeats it; return the
        kernel id, or None when the launch must take the general path (nothing was done then)."""
        entries = self._entries.get((kernel, stream))
        if entries is None or shared_bytes:
            return None
        for warm in entries:
            if count == warm.count and dim == warm.dim \
                    and warm.options == options:
                try:
                    if warm.matcher(args, warm.match):
                        break
                except (AttributeError, ValueError):    # a scalar where a handle was; arity
                    pass
        else:
            return None
        arrays = warm.arrays
        if warm.scalars:
            arrays = list(arrays)
            if warm.declared is None:
                for i in warm.scalars:
                    arrays[i] = args[i]
            else:
                try:
                    convert_declared(warm.declared, args, arrays)
                except NotWarm:
                    return None
        channel = self._channel
        with channel.lock:
            channel.enter()
            try:
                self._drain()
                # A settled failure: the general path skips the launch and records the root.
                # A claim in flight (a launch still running on these bytes) is no failure yet:
                # the queued dispatch's execute scope sees its outcome, as the general path's.
                if self._captures or self._ledger.settled_failure(warm.regions) is not None:
                    return None
                self._stats["warm"] += 1
                # Work of its own stream not done, or a launch running on its buffers: the
                # launch is queued behind it (the stream runs its tasks in order), never run
                # here, where it would overtake it.
                inline = self._short.get(warm.artifact, 0) > 0 and self._streams.idle(stream) \
                    and self._ledger.first_failure(warm.regions) is None
                if inline and self._hazards.register_solo(warm.done, warm.read_states,
                                                          warm.write_states):
                    self._run_inline(warm, arrays)
                    return warm.kernel_id
                # Another stream used a buffer: the full walk. If what it names is done, the
                # dispatch still runs here; else it is queued after it, as the general path does.
                task = Task(None, stream, warm.kernel_id)
                task.task_id = next(self._task_ids)
                deps = self._hazards.register(task, warm.read_mems, warm.write_mems)
                if inline and all(d.done for d in deps):
                    try:
                        self._run_inline(warm, arrays)
                    finally:
                        task.finish()
                    return warm.kernel_id
                rec = warm.recorded
                rec = Recorded(rec.kernel_id, rec.artifact, rec.count, rec.dim, arrays, None,
                               rec.reads, rec.writes)
                task.run = self.timed_run(rec, task)
                self._streams.enqueue(task, deps)
                return warm.kernel_id
            finally:
                channel.leave()

    def _run_inline(self, warm: "HostWarmLaunch", arrays) -> None:
        """The dispatch, on this thread, holding the device lock. No execute scope: its claim
        exists so that a reader not ordered after a dispatch in progress does not report its
        failure, and here no reader can look before it ends (every read, check and dispatch
        that touches these buffers needs this lock or is ordered after it by the hazard
        tracker). Its inputs and outputs carry no failure (``fire`` checked), so there is
        nothing to inherit or repair: only the kernel's own failure is recorded, as
        ``ExecuteScope`` records it."""
        start = perf_counter()
        try:
            warm.artifact(warm.count3, warm.dim3, arrays)
        except Exception as exc:  # noqa: BLE001 - the kernel's own failure, on its write set
            failed_writing(self._ledger, warm.kernel_id, warm.writes, exc)
        except BaseException:
            # Interrupted (KeyboardInterrupt): the outputs are not known to be written
            failed_writing(self._ledger, warm.kernel_id, warm.writes,
                           IncompleteLaunch(warm.kernel_id))
            raise
        self.note_duration(warm.artifact, perf_counter() - start)

    def arm(self, req, plan, recorded: Recorded) -> None:
        """After a general launch was queued: make the next identical one warm, if the policy
        (``warm_policy.py``) lets it be; a host backend also refuses composites, dynamic counts
        and dynamic shared memory."""
        armable = armable_match(req, self._hazards)
        if armable is None or plan.composites or plan.count_view is not None \
                or req.shared_bytes:
            return
        kernel, count, dim, match = armable
        raw_args = req.as_called[3]
        key = (kernel, req.stream)
        declared = None
        if req.kernel.signatures is not None:
            # its scalars convert to the declared types (kernel/signatures.py), per launch
            declared = declared_scalars(raw_args, recorded.arrays, plan.scalars)
            if declared is None:
                return
        hazards = self._hazards
        read_only = tuple(m for m in plan.read_mems if m not in plan.write_mems)
        warm = HostWarmLaunch(count, dim, match, req.stream, req.options, req.kernel.id, recorded,
                          plan.scalars, plan.read_mems, plan.write_mems, hazards.states(read_only),
                          hazards.states(tuple(plan.write_mems)))
        warm.declared = declared
        remember(self._entries, key, warm, _identity, ENTRIES_PER_STREAM)

    def may_inline(self, artifact) -> bool:
        """May a dispatch of ``artifact`` run on the issuing thread (when it has nothing to wait
        for: ``HostStreams.enqueue`` checks that)? When it is known short; never the first one,
        which may be long (a launch stays asynchronous until it is known short)."""
        return self._short.get(artifact, 0) > 0

    def note_duration(self, artifact, seconds) -> None:
        """A dispatch of ``artifact`` took ``seconds`` (None: it did not run). One short
        dispatch makes it short; it turns long only after two long ones in a row, so that one
        pause of the machine (a page fault, the garbage collector, another process) does not
        queue a loop of short launches behind a worker it then outruns. Called from stream
        workers too: one dict store, atomic under the GIL."""
        if seconds is None or not self.inline_seconds:
            return
        if len(self._short) > 4096:         # bounded: a program generating kernels forever
            self._short.clear()
        # 2: short; 1: short, one long dispatch since; 0 (or absent): long or never run
        if seconds <= self.inline_seconds:
            self._short[artifact] = 2
        else:
            self._short[artifact] = max(self._short.get(artifact, 0) - 1, 0)

    def timed_run(self, rec: Recorded, task: Task):
        """The body of a task that runs ``rec`` on a stream worker, its duration noted."""
        ledger = self._ledger

        def run():
            task.duration = run_recorded(ledger, rec)
            self.note_duration(rec.artifact, task.duration)

        return run

    def forget(self, memory_id) -> None:
        """A buffer was freed: drop the armed launches that bind it."""
        for key, entries in list(self._entries.items()):
            kept = [w for w in entries if memory_id not in w.read_mems and memory_id not in w.write_mems]
            if len(kept) != len(entries):
                if kept:
                    self._entries[key] = kept
                else:
                    del self._entries[key]


def _identity(warm: HostWarmLaunch) -> tuple:
    """What makes two armed launches of one kernel and stream the same launch."""
    return warm.stream, warm.count, warm.dim, warm.options, warm.match


class DoneTask:
    """A finished task: what the hazard tracker holds for a dispatch that ran inline. It has what
    the tracker, the worker pool and readers ask of a task (``done``, ``finished``, ``wait``)."""

    __slots__ = ("stream", "label")
    done = True
    finished = True
    fault = None
    failure_hint = None
    deps = ()
    task_id = 0
    duration = None

    def __init__(self, stream, label: str):
        self.stream = stream
        self.label = label

    def wait(self, timeout: float | None = None) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<DoneTask {self.label} on {self.stream}>"
