"""Dependency inference from the buffers a launch binds (CONTRACT.md section 3).

For each buffer (memory id) the tracker remembers the last task that wrote it and the tasks that
read it since. A new task must wait for:

- read after write:  the last writer of every buffer it reads;
- write after write: the last writer of every buffer it writes;
- write after read:  every reader since that write, for every buffer it writes.

Two tasks that only read a buffer do not wait for each other. A buffer written on A, read on B,
then written on C orders C after both A (WAW) and B (WAR).

The baseline rule (CubeCL's, kept for comparison and as a fallback): any shared buffer last
touched on another stream T makes the task wait for *all* of T's queued work, i.e. for T's last
task. It over-synchronizes read-read sharing; the hazard rule does not.

Views: hazards are tracked per allocation, not per byte range. Two launches that touch disjoint
views of one buffer are therefore ordered although they need not be: over-synchronizing is
allowed, under-synchronizing never is.

Tasks only need ``done`` (a bool property) and ``stream``. Finished tasks are pruned as new ones
register, so the state per buffer stays small in a long loop.

The warm path (``register_solo``). Most launches touch buffers that only their own stream has
used since the buffers were last written: a loop on one thread, a pipeline per thread. Such a
launch waits for nothing (its stream already orders it), so the tracker keeps, per buffer, the
stream that *all* its live entries belong to (``solo``; ``None`` when entries of several streams
are live). A launch whose buffers are all solo on its own stream skips the dependency walk and
only moves the entries to itself; any other launch takes the full walk, which also prunes
finished entries of other streams so that a buffer becomes solo again once they are done.

Renewal (``register_solo``'s ``owner``). A warm launch that repeats itself in a loop finds its
buffers exactly as its own previous launch left them, unless some other registration came in
between. So the tracker remembers who made the last registration (``last_solo``: the ``owner``
of the last ``register_solo`` that succeeded, None after anything else that changes a state or
hands a task out: ``register``, ``register_states``, a ``register_solo`` that fails or names
another owner, ``forget``, ``writer_of``, ``users_of``). When the same owner registers again,
every one of its buffers is still solo on its stream, its written buffers have no readers and
nothing can have to be waited for: only the task is moved in, without asking any buffer. Any
doubt (another owner, anything in between) means the full check. While ``last_solo`` is still
the owner, nobody outside the tracker was handed the tasks its states hold: the CUDA warm path
relies on that to let its last task stand for the next launch (``WarmTask.renew``).
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["HazardTracker"]


class _BufferState:
    __slots__ = ("writer", "readers", "last_stream", "last_task", "solo")

    def __init__(self):
        self.writer = None
        # stream -> the last task of that stream that read the buffer since the last write. One
        # per stream is enough: a stream runs its work in order, so waiting for its last reader
        # waits for all of them, and the state stays as small as the number of streams.
        self.readers: dict = {}
        self.last_stream = None
        self.last_task = None
        # The stream every live entry (writer, readers) belongs to, or None if they are of
        # several streams. A fresh buffer has no entries: no stream can have to wait for it, but
        # None keeps the first registration on the full walk, which sets it.
        self.solo = None


#: The fewest stream tails (and readers of one buffer) before finished ones are looked for.
_MIN_PRUNE = 64


def _drop_finished_readers(st: _BufferState) -> None:
    """Forget the finished readers of ``st`` (nothing can have to wait for them): a buffer read
    by ever new streams and never written keeps its live readers only."""
    st.readers = {s: t for s, t in st.readers.items() if not t.done}


class HazardTracker:
    """Per buffer: the last writer and the readers since. Owned by the server's thread."""

    def __init__(self, baseline: bool = False):
        self.baseline = baseline
        self._buffers: dict[int, _BufferState] = {}
        self._stream_tail: dict = {}  # stream -> last task registered on it (baseline rule)
        # Past this many tails, those of finished streams are dropped (``_bound_streams``): a
        # program that makes ever new streams (short-lived threads, ``cube.stream()`` blocks)
        # keeps the entries of the streams with work in flight only, sync() or not.
        self._prune_tails_at = _MIN_PRUNE
        # The owner of the last registration, while it was a successful ``register_solo`` and
        # nothing changed a state since (module docstring, "Renewal"); None otherwise.
        self.last_solo = None

    def register(self, task, reads: Iterable[int], writes: Iterable[int]) -> list:
        """Record ``task`` as reading ``reads`` and writing ``writes``; return what it waits for.

        The answer holds unfinished tasks of *other* streams only: a stream runs its own work in
        order, so a same-stream dependency is already satisfied by the queue.
        """
        self.last_solo = None
        writes = set(writes)
        touched = writes.union(reads)
        deps = {}
        stream = task.stream
        for mem in touched:
            st = self._buffers.get(mem)
            if st is None:
                st = self._buffers[mem] = _BufferState()
            if self.baseline:
                if st.last_stream is not None and st.last_stream != stream:
                    tail = self._stream_tail.get(st.last_stream)
                    if tail is not None:
                        deps[id(tail)] = tail
            else:
                if st.writer is not None:
                    deps[id(st.writer)] = st.writer
                if mem in writes:
                    for r in st.readers.values():
                        deps[id(r)] = r
            st.last_stream = stream
            st.last_task = task
            if mem in writes:
                st.writer = task
                st.readers = {}
                st.solo = stream
            else:
                if len(st.readers) >= _MIN_PRUNE:
                    _drop_finished_readers(st)
                st.readers[stream] = task
                if st.solo is not stream:
                    st.solo = stream if self._only(st, stream) else None
        self._stream_tail[stream] = task
        if len(self._stream_tail) > self._prune_tails_at:
            self._bound_streams()
        return [t for t in deps.values() if t is not task and t.stream != stream and not t.done]

    def _bound_streams(self) -> None:
        """Drop the tails of finished streams; look again when twice as many are left."""
        self.prune_streams()
        self._prune_tails_at = max(_MIN_PRUNE, 2 * len(self._stream_tail))

    @staticmethod
    def _only(st: _BufferState, stream) -> bool:
        """Whether ``stream`` is the only stream with live entries on ``st``, after dropping the
        finished entries of other streams (nothing can have to wait for a finished task)."""
        writer = st.writer
        if writer is not None and writer.stream != stream:
            if not writer.done:
                return False
            st.writer = None
        for other, reader in list(st.readers.items()):
            if other != stream:
                if not reader.done:
                    return False
                del st.readers[other]
        return True

    def states(self, mems: Iterable[int]) -> tuple:
        """The state objects of ``mems`` (created if new), for ``register_solo``. A state lives as
        long as its buffer: ``forget`` drops it only when the buffer is freed."""
        out = []
        for mem in mems:
            st = self._buffers.get(mem)
            if st is None:
                st = self._buffers[mem] = _BufferState()
            out.append(st)
        return tuple(out)

    def register_solo(self, task, read_states: tuple, write_states: tuple, owner=None) -> bool:
        """The warm path of ``register`` (see the module docstring): if every buffer's live
        entries are of ``task``'s own stream (once the finished entries of other streams are
        dropped), record ``task`` on them and return True (it waits for nothing). Otherwise
        change nothing that matters and return False: the caller uses ``register``.

        ``read_states`` are the states of the buffers only read, ``write_states`` those written
        (read or not), as ``states`` returned them. ``owner``: what stands for this set of states
        on this stream from one call to the next (the CUDA warm path's entry), so that a repeat
        with nothing in between is a renewal (module docstring). Not for the baseline rule."""
        stream = task.stream
        if owner is not None and self.last_solo is owner:
            # Renewal: this owner's own success was the last change to any state, so its written
            # buffers are solo on ``stream`` with no readers and its read buffers are solo too.
            for st in write_states:
                st.writer = task
            for st in read_states:
                st.readers[stream] = task
            self._stream_tail[stream] = task
            return True
        self.last_solo = None
        # Two plain loops (the CUDA warm path's cost is counted in tenths of a microsecond).
        # Entries of other streams that are all finished order nothing: ``_only`` drops them,
        # and the buffer is this stream's alone (the truth, whatever else happens next).
        for st in write_states:
            if st.solo is not stream:
                if not self._only(st, stream):
                    return False
                st.solo = stream
        for st in read_states:
            if st.solo is not stream:
                if not self._only(st, stream):
                    return False
                st.solo = stream
        # Same effect as register's loop: a write replaces the writer and clears the readers
        # (all of this stream, which ordered them), a read becomes this stream's last reader.
        # last_stream/last_task serve the baseline rule only, which never comes here.
        for st in write_states:
            st.writer = task
            if st.readers:
                st.readers = {}
        for st in read_states:
            st.readers[stream] = task
        self._stream_tail[stream] = task
        self.last_solo = owner
        return True

    def register_states(self, task, read_states: tuple, write_states: tuple) -> list:
        """``register`` for a warm launch whose buffers are not all solo (``register_solo`` said
        False): the same effect and the same answer, over the states ``states`` returned (buffers
        only read, buffers written), without building sets or looking buffers up. Not for the
        baseline rule.

        One pass per state, the dependencies read before the state is updated: a buffer is in
        one of the two tuples only, so updating it cannot change what another buffer names. (A
        chain alternating two streams comes here every launch: CUDA's warm path, goal 3 of
        issue 18.)"""
        self.last_solo = None
        stream = task.stream
        deps = []
        for st in write_states:
            writer = st.writer
            if writer is not None and writer.stream != stream and writer not in deps:
                deps.append(writer)
            readers = st.readers
            if readers:
                for other, reader in readers.items():
                    if other != stream and reader not in deps:
                        deps.append(reader)
                st.readers = {}
            st.writer = task
            st.solo = stream
        for st in read_states:
            writer = st.writer
            if writer is not None and writer.stream != stream and writer not in deps:
                deps.append(writer)
            if len(st.readers) >= _MIN_PRUNE:
                _drop_finished_readers(st)
            st.readers[stream] = task
            if st.solo is not stream:
                # Not worked out here (``_only`` asks every reader whether it is done): None sends
                # the next warm launch on this buffer to ``_only`` in ``register_solo``, which
                # sets it; a buffer read by several streams in turn never asks at all.
                st.solo = None
        self._stream_tail[stream] = task
        if len(self._stream_tail) > self._prune_tails_at:
            self._bound_streams()
        if len(deps) > 1:
            return [t for t in deps if not t.done]
        if deps and deps[0].done:     # the usual answer, one task: no comprehension (a call)
            return []
        return deps

    def writer_of(self, mem: int):
        """The last unfinished task that writes ``mem`` (what a read must wait for), or None."""
        self.last_solo = None         # it hands a task out (the CUDA warm path's WarmTask.renew)
        st = self._buffers.get(mem)
        if st is None or st.writer is None or st.writer.done:
            return None
        return st.writer

    def users_of(self, mem: int) -> list:
        """Every unfinished task that may still touch ``mem`` (what a free or a host write waits for)."""
        self.last_solo = None         # it hands tasks out (the CUDA warm path's WarmTask.renew)
        st = self._buffers.get(mem)
        if st is None:
            return []
        users = list(st.readers.values())
        if st.writer is not None:
            users.append(st.writer)
        if self.baseline and st.last_task is not None:
            users.append(st.last_task)
        return [t for t in users if not t.done]

    def forget(self, mem: int) -> None:
        self.last_solo = None
        self._buffers.pop(mem, None)

    def prune_streams(self) -> None:
        """Drop the tails of streams whose work is done: a program that makes many short-lived
        threads (each with its own stream) must not accumulate one entry per thread."""
        self._stream_tail = {s: t for s, t in self._stream_tail.items() if not t.done}

    def __len__(self) -> int:
        return len(self._buffers)
