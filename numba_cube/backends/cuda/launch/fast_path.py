"""The warm launch: a launch that repeats one already made is one match and one driver call.

Why a separate path. The general launch (``DeviceServer.op_launch`` over the CUDA mechanism)
builds a request, looks up the bound launch, makes a task and a recorded dispatch, walks the hazard tracker, opens an execute
scope (claim, release) and records an event: 22-25 us per launch on an H200 host, five times
the driver's own ``cuLaunchKernel`` (4-5 us). Issue 7 asks for 8 us in all. Almost all
of that work depends only on *what* is launched (kernel, bound buffers, scalar types, geometry,
stream), which repeats from launch to launch in every real program: a loop, a pipeline per thread.

So after a general launch the mechanism *arms* a ``WarmLaunch`` (when the policy every warm
path keeps lets it: ``runtime/launch/warm_policy.py``): its bound launch, its CUDA
stream, the hazard states of its buffers and its buffers' memories, all resolved (a few per kernel, newest
first). The next launch of that kernel with the same handles (by identity), scalar types,
geometry, dynamic shared memory size, options and stream *fires* it:

1. match (outside the device lock: the entry is immutable once armed);
2. under the device lock: the state that may have changed since arming is checked, and any
   change sends the launch to the general path, which is always correct:
   - a capture window open on the device (launches there are recorded, not run);
   - a failure in the ledger on any of its regions (the general path skips or repairs); a
     *pending* state there (a kernel that can raise, unchecked yet: ``runtime/ledger/pending.py``) is
     handled here instead (``warm_checks.py``): the launch leaves its write set pending too;
   - its stream's CUDA stream recycled (``retired``: it would then serve another stream id);
3. dependencies: when this entry made the device's last registration and nobody has been handed
   its last task since (``runtime/streams/hazards.py``, "Renewal"; ``WarmTask.renew``), that task stands for
   this launch too: no task is made and the tracker is not called (a loop of one kernel on one
   stream). Else if every buffer is used by this stream only (``HazardTracker.register_solo``)
   there is nothing to wait for; otherwise (or straight away when the entry's last launch had
   to wait) the full walk (``register_states``) names the tasks of other streams to wait for,
   and the stream waits for them on the device (``CudaStreams.wait_for``);
4. the scalars are packed into the packed launch's parameter block and the kernel is launched. No
   event is recorded: the launch's ``WarmTask`` gets one only when somebody must wait for it
   (``tasks.WarmTask``), which a loop of launches on one stream never needs. The current
   context is not checked first either (see the comment at the launch).

Measured (``benchmarks/bench_cuda.py``, H200, before issue 18): 6.8-7.3 us per warm launch, of
which ~2.7 us were this module and the client's gates, the rest the driver call through
cuda-python; numba-cuda takes 28-45 us. The driver call is now one call of compiled code
(``launch_call.py``: a thunk of ``thunks.py``, else a Numba trampoline; the ``launch_floor``
section of the benchmark compares the forms): 4.7-5.8 us per warm launch on the H200 hosts of
2026-12-03, 1.25x cuda-python's bare ``cuLaunchKernel`` at the median.

What the warm path leaves out, and why that is the same contract:

- *the execute scope's claim*: a claim exists so that a reader that is not ordered after a
  launch still in progress does not report its failure. Here the claim would be made and released
  under the device lock around one asynchronous driver call; nobody can see it in between. A
  refused launch records its failure on the write set through ``ledger.failed_writing``, as the
  general path records work that never started;
- *observers, profiles, dry runs, exclusive use*: the client sends a launch down the warm path
  only when none of them is active (``runtime/client/watchers.py``, ``ExclusiveGate.owner``);
- *dynamic counts, foreign (borrowed) buffers, compile failures, the baseline dependency rule,
  debug kernels (their exception flag is read back after each launch)*: never armed.

A kernel that can raise (``exception_codegen.py``) is armed like any other: each warm launch
takes its own error word (``error_slots.py``) and packs its address into the parameter block
before the driver call, and its write set is left pending on it. In a loop of one such launch
the entry's pending state is *renewed* (``warm_checks.py``) instead of recorded again: a word
taken and a few attribute stores per launch; in a pipeline, launches reading its output renew
theirs too, holding frozen copies of it. A kernel that cannot raise pays a few tests more
than before (none of them a driver call): with nothing in the ledger anywhere, an attribute
load and three tests of a local; with pending states elsewhere on the device, a comparison of
the ledger's version with the one its last launch saw.
- *tuples, records, enum members, dates* (``runtime/launch/composite.py``): never armed either (``arm``
  arms handles and plain numbers only), so the match stays one type test per argument.

The entry holds the ``Binding`` objects of the handles it matched, never the handles: a binding
is matched by identity, and only a live handle carries it, so a matched entry's buffers are
alive. Entries that bind a freed buffer are dropped with its bound launches (``forget``).

``WarmPath`` is built by the CUDA mechanism when the policy server attaches it, with what it reads
bound once (the server's channel, ledger, hazard tracker, executor, capture windows, pending frees
and task ids: public attributes of ``runtime/server.py``), so a warm launch goes through no layer
of the server's: the client calls ``WarmPath.fast_launch`` itself (``DeviceServer.fast_launch``).
"""

from __future__ import annotations

import ctypes
import weakref

from numba_cube.runtime.ledger.ledger import failed_writing
from numba_cube.runtime.launch.warm_match import entry_matcher
from numba_cube.runtime.launch.warm_policy import armable_match, remember
from numba_cube.backends.cuda.streams.tasks import WarmTask
from numba_cube.backends.cuda.launch.warm_checks import (
    CLEAR, entry_facts, fresh, record, refreshed, same_inputs,
)

__all__ = ["WarmLaunch", "WarmPath"]

#: Armed launches kept per kernel (see ``WarmPath.arm``).
WARM_ENTRIES_PER_KERNEL = 4


class WarmLaunch:
    """One armed launch (see the module docstring)."""

    __slots__ = ("count", "dim", "grid", "block", "match", "matcher", "stream", "options", "cs",
                 "source", "packed", "pack", "fire", "read_states", "write_states", "kernel_id", "shared_bytes", "crossed", "last_task", "node", "checks", "errors",
                 "word_offset", "word", "mems", "read_only", "read_only_mems", "renewable",
                 "self_reading", "inputs", "version", "quiet", "__weakref__")

    def __init__(self, count, dim, grid, block, match, stream, options, cs, bound, read_states,
                 write_states, kernel_id, shared_bytes=0):
        self.count = count              # the caller's count and dim, as passed (int or tuple)
        self.dim = dim
        self.grid = grid                # the same as three ints each, for the driver
        self.block = block
        self.match = match              # per argument: its Binding (a handle) or its type (a scalar)
        # stream, geometry, options, shared bytes and arguments in one call (runtime/launch/warm_match.py)
        self.matcher = entry_matcher(stream, count, dim, options, shared_bytes, match)
        self.stream = stream
        self.options = options
        self.cs = cs                    # the CUDA stream of ``stream`` when armed
        self.source = bound             # the bound launch: read/write sets, memory ids
        self.packed = bound.packed      # the PackedLaunch: packed parameters, loaded function
        self.pack = bound.packed.pack   # its scalar packing (None without scalars), bound once
        # Dynamic shared memory is part of what is matched: a launch with another size is
        # another entry (the general path armed this one after opting the function in to it).
        self.shared_bytes = shared_bytes
        # The driver call with all of cuLaunchKernel's arguments fixed for the entry (the stream
        # is ``cs``, checked per launch): on a GPU one call of compiled code (launch_call.py:
        # a thunk, else a trampoline) once the entry has fired COMPILE_AFTER times, cuda-python's
        # before.
        self.fire = bound.packed.launcher(grid, block, shared_bytes, cs.handle, _fire_installer(self))
        self.read_states = read_states  # hazard states of the buffers only read
        self.write_states = write_states
        self.kernel_id = kernel_id
        self.crossed = False            # its last launch waited for another stream (see fast_launch)
        self.last_task = None           # the task of its last launch that register_solo accepted
        # Checking (warm_checks.py): the device's error words if the kernel can raise, how its
        # word becomes the exception, where the word's address goes in the parameter block, its
        # buffers, and its own pending state while it may be renewed.
        for name, value in entry_facts(bound).items():
            setattr(self, name, value)
        # the error word's address in the parameter block, as a ctypes cell over those bytes
        self.word = (ctypes.c_uint64.from_buffer(bound.packed.block.buf, self.word_offset)
                     if self.checks is not None else None)
        self.node = None
        self.inputs = ()                # the pending states of ``read_only`` when ``node`` was made
        self.version = -1               # the ledger's version after this entry's last launch
        self.quiet = False              # that launch found nothing on its buffers, left nothing




def _identity(armed: WarmLaunch) -> tuple:
    """What makes two armed launches of one kernel the same launch."""
    return (armed.stream, armed.count, armed.dim, armed.options, armed.match,
            armed.shared_bytes)


def _fire_installer(entry: WarmLaunch):
    """What ``Driver.launcher`` hands the compiled driver call to: it replaces ``entry.fire``.
    Weak, so that the first call (which holds it) does not keep a dropped entry alive."""
    entry_ref = weakref.ref(entry)

    def install(fire) -> None:
        alive = entry_ref()
        if alive is not None:
            alive.fire = fire
    return install


class WarmPath:
    """The warm path of one CUDA device: ``fast_launch`` (issuing thread), ``arm``, ``forget``.

    ``server``: the policy server, read for its public state once, here; ``streams``: the
    device's executor (``CudaStreams``); ``activate``: makes the device's context current
    (``CudaContext.activate``)."""

    def __init__(self, server, streams, activate):
        self._channel = server.channel
        self._captures = server.captures
        self._pending_frees = server.pending_frees
        self._drain_frees = server.drain_frees
        self._streams = streams
        self._ledger = server.ledger
        self._hazards = server.hazards
        self._task_ids = server.task_ids
        self._activate = activate
        self._armed: dict = {}      # kernel object -> its armed launches, newest first
        self._fired = 0             # warm launches not yet folded into the server's counters

    def fast_launch(self, kernel, count, dim, args: tuple, stream, options,
                    shared_bytes=0) -> str | None:
        """Fire the armed launch of ``kernel`` if this launch repeats it; return the kernel id,
        or None when the launch must take the general path (nothing was done then)."""
        entries = self._armed.get(kernel)
        if entries is None:
            return None
        for armed in entries:             # newest first; usually the first one matches
            try:
                if armed.matcher(args, count, dim, stream, options, shared_bytes):
                    break
            except (AttributeError, ValueError):    # a scalar where a handle was; arity
                pass
        else:
            return None
        channel = self._channel
        lock = channel.lock
        # ``acquire``/``release`` called, not ``with lock``: the statement costs about twice the
        # two calls, a visible share of a warm launch. Nothing between the acquire and the
        # ``try`` can raise but an asynchronous exception, which ``with`` does not guard either.
        lock.acquire()
        try:
            # InlineChannel.call's bookkeeping, inlined (``enter``/``leave`` written out, a method
            # call each less): a handle's finalizer that the garbage collector runs inside this
            # block defers its operation until we are done.
            channel.depth += 1
            try:
                # Steps 2-4 of the module docstring. Every ``return None`` comes before anything
                # was changed. (One function with the match above: it saves a call frame.)
                if self._pending_frees:
                    self._drain_frees()
                streams = self._streams
                cs = armed.cs
                if self._captures or cs.retired:
                    return None
                ledger = self._ledger
                # ``failed_memories`` empty: nothing failed or pending anywhere (first_failure's
                # own test, without its call). Else, or for a kernel that can raise, what the
                # launch leaves in the ledger (warm_checks.py): ``state`` is the entry's own
                # pending state renewed, a fresh state recorded after the launch, or None. The
                # ledger's ``version`` unchanged since this entry's last launch means nothing
                # changed there meanwhile: what that launch found still holds.
                failed = ledger.failed_memories
                state = None
                checking = failed or armed.checks is not None
                if checking:
                    same = armed.version == ledger.version
                    if same and armed.quiet:
                        checking = False    # as at its last launch: nothing on its buffers
                    elif (node := armed.node) is not None and not node.sealed and (
                            same or not armed.read_only_mems
                            or failed.keys().isdisjoint(armed.read_only_mems)
                            or same_inputs(ledger, armed)):
                        state = node        # renewed (its inputs as they were)
                        checking = not same
                    else:
                        state, inputs = fresh(ledger, armed, failed)
                        if state is False:
                            return None
                pack = armed.pack
                if pack is not None:
                    try:
                        pack(args)
                    except Exception:  # noqa: BLE001 - out of range: the general path says so
                        return None
                seq = cs.seq + 1
                hazards = self._hazards
                task = armed.last_task
                if hazards.last_solo is armed and task is not None and cs.renewable is task \
                        and not task.known_done and task.mark is None:
                    # This entry made the device's last registration and nobody was handed its
                    # task since (runtime/streams/hazards.py, "Renewal"): the states already name that task,
                    # which now stands for this launch. No task, no walk. The test and the
                    # assignment are ``WarmTask.renew`` written out: a call less per launch of
                    # a loop (tests/cuda/test_cuda_tasks.py pins that method's rule; the two
                    # must say the same).
                    task.seq = seq
                    deps = None
                else:
                    task = WarmTask(armed.stream, cs, streams, next(self._task_ids), seq)
                    # The entry is register_solo's owner: a repeat with no other registration in
                    # between is renewed there (its states are not asked).
                    if not armed.crossed and hazards.register_solo(
                            task, armed.read_states, armed.write_states, armed):
                        deps = None
                        armed.last_task = task
                        cs.renewable = task   # until anybody is handed it (WarmTask.renew)
                    else:
                        # A buffer another stream still uses: the full walk finds what to wait
                        # for, and the stream waits for it on the device, as the general path
                        # does. An entry whose last launch needed it goes there straight away (a
                        # chain that alternates streams always does; register_solo would only
                        # say no first).
                        deps = hazards.register_states(task, armed.read_states, armed.write_states)
                        armed.crossed = bool(deps)
                        cs.renewable = None
                if state is not None and armed.checks is not None:
                    # Its own error word (error_slots.py), for its renewed or fresh state, its
                    # address written into the parameter block: the next of the run's chunk
                    # (``SlotRun.step`` written out: a call less per launch of a loop), else
                    # one the ring hands out.
                    run = state.run
                    g = run.last + 1
                    if g != run.chunk_end:
                        run.last = g
                        addr = run.addr = run.addr + 4
                        if run.seqs is not None:
                            run.counted(g)
                    else:
                        addr = armed.checks.take(run, cs, seq)
                    armed.word.value = addr
                cs.seq = seq
                cs.tail = task
                if deps:
                    streams.wait_for(cs, deps)
                # The context is not checked first (a cuCtxGetCurrent per launch): the
                # function and stream are our context's, so with another context current (a
                # library switched it on this thread) the driver refuses the launch, it is
                # not run. Then we make ours current and launch again; a second refusal is the
                # kernel's own (too many threads, ...).
                fire = armed.fire
                err = fire()                  # a CUresult: falsy on success
                if err:
                    self._activate()
                    err = fire()
                if err:
                    # recorded as the general path records work that never started
                    refused = armed.packed.refused(err, armed.grid, armed.block, armed.shared_bytes)
                    failed_writing(ledger, armed.kernel_id, armed.source.writes, refused)
                elif state is not None:
                    if state is armed.node:
                        state.task = task   # renewed: it now stands for this launch too
                        state.seq = seq
                        if armed.checks is None:
                            state.run.launches += 1     # (a kernel that cannot raise: Repeats)
                        if state.parents and not armed.self_reading:
                            # it read them as they are now (their producers may have renewed)
                            state.parents = refreshed(armed)
                    else:
                        record(ledger, armed, state, task, seq, inputs)
                if checking:
                    armed.version = ledger.version
                    # quiet: the launch found nothing on its buffers and left nothing there
                    armed.quiet = not err and (state is None or state is CLEAR)
                # No event here: the task borrows one when somebody has to wait for it (WarmTask).
                self._fired += 1
                return armed.kernel_id
            finally:
                channel.depth -= 1            # InlineChannel.leave, inlined
                if not channel.depth and channel.deferred:
                    channel.run_deferred()
        finally:
            lock.release()

    def arm(self, req, bound, cs) -> None:
        """After a general launch that ran: make the next identical one warm, if the policy
        (``runtime/launch/warm_policy.py``) lets it be; CUDA also refuses foreign buffers,
        declared signatures and debug kernels."""
        armable = armable_match(req, self._hazards)
        if armable is None or bound.foreign:
            return
        if req.kernel.signatures is not None:
            return      # its scalars are converted per launch (kernel/signatures.py): general path
        if bound.packed is not None and bound.packed.kernel.exceptions is not None:
            return      # a debug kernel: each launch reads its exception flag back (PackedLaunch)
        key, count, dim, match = armable
        hazards = self._hazards
        write_mems = bound.write_mems
        read_only = tuple(m for m in bound.read_mems if m not in write_mems)
        armed = WarmLaunch(
            count, dim, req.count.as_tuple(), req.dim.as_tuple(), tuple(match), req.stream, req.options,
            cs, bound, hazards.states(read_only), hazards.states(tuple(write_mems)), req.kernel.id,
            req.shared_bytes)
        remember(self._armed, key, armed, _identity, WARM_ENTRIES_PER_KERNEL)

    def forget(self, memory_id) -> None:
        """A buffer was freed: drop the armed launches that bind it."""
        if not self._armed:
            return
        for key, entries in list(self._armed.items()):
            kept = [armed for armed in entries
                    if memory_id not in armed.source.read_mems and memory_id not in armed.source.write_mems]
            if len(kept) != len(entries):
                if kept:
                    self._armed[key] = kept
                else:
                    del self._armed[key]

    def armed_for(self, kernel) -> list:
        """The launches armed for ``kernel``, newest first (what ``benchmarks/bench_cuda.py``
        reaches to time the driver call of an entry one way and another)."""
        return list(self._armed.get(kernel, ()))

    def armed_count(self) -> int:
        """How many launches are armed (for ``server.cache_sizes()``)."""
        return sum(map(len, self._armed.values()))

    def fold_counts(self, counters) -> None:
        """Add the warm launches fired since the last fold to the server's counters. Under the
        device lock: a fold racing a warm launch would lose it."""
        with self._channel.lock:
            fired, self._fired = self._fired, 0
        if fired:
            counters["launched"] += fired
            counters["cache_hits"] += fired
            counters["warm"] += fired   # how many of the launches took the warm path
