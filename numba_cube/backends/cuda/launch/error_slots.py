"""Error words: where each GPU launch of a kernel that may raise stores its exception.

A kernel compiled by numba_cube without ``debug=True`` stores the status of a unit that raises
into the word its trailing parameter names (``exception_codegen.py``). ``ErrorSlots`` hands each
launch its own word, so two launches in flight, of one kernel or on two streams, are told apart,
and nothing is copied, cleared or waited for per launch:

- the words are a ring of ``size`` int32 in pinned host memory the GPU writes directly (zero
  copy: a store from the kernel, only when a unit raises), read by the host once the launch is
  known complete. Word ``g`` (a sequence number that only grows) sits at ``g & (size - 1)``;
- ``take`` gives a launch its word and counts it in its ``SlotRun``: a few stores. A run's first
  launch takes one word; a run that goes on (the warm path renewing one pending state, launch
  after launch of a loop) takes a *chunk* of ``CHUNK_WORDS`` consecutive words at its second,
  and its next launches step through the chunk without calling here: ``SlotRun.step`` is the
  whole per-launch cost of the word (``fast_path.py`` inlines it);
- the ring is reused half by half. When the ring first hands out a word of a half, the launches
  that used that half a round ago must be complete: an event recorded on each stream with work
  not known complete, when the ring left it, says so (``cuEventQuery``: done long ago, almost
  always; else waited for, counted in ``waits``). Leaving a half ends every chunk in it (the
  runs holding one take their next word in the new half), so no launch after those events uses
  a word of the half left. The half's nonzero words are then handed to their runs
  (``SlotRun.consumed``) and cleared: a word is zero whenever a launch gets it, and every word
  below ``consumed_below`` has been consumed.

A ``SlotRun`` is the own outcome (``pending.Run``) of the launches one ``Pending`` state stands
for: one launch, or, on the warm path, each repeat of an identical launch (``fast_path.py``).
For a kernel that reads what it writes (``self_reading``) the first launch that raised is the
root and every later one inherited it; otherwise a later launch rewrote the buffers and only the
last one counts. ``errors`` turns a word into the exception (``kernels.exceptions.KernelErrors``).

``sink`` is a word for kernels that have the parameter but cannot raise (their code may return a
device function's status, which the static analysis found always success): never read.
"""

from __future__ import annotations

import collections
import ctypes

import numpy as np

from numba_cube.runtime.ledger.pending import UNRESOLVED, Run
__all__ = ["ErrorSlots", "SlotRun", "WordRun", "DEFAULT_SLOTS", "CHUNK_WORDS"]

#: words in the ring (a power of two); ``NUMBA_CUBE_CUDA_ERROR_SLOTS`` changes it (tests)
DEFAULT_SLOTS = 8192

#: words of a chunk (a power of two; smaller in a ring whose half is smaller)
CHUNK_WORDS = 16


class SlotRun(Run):
    """The error words of the launches one pending state stands for (see the module docstring)."""

    __slots__ = ("ring", "errors", "self_reading", "last", "addr", "chunk_end", "codes", "excs",
                 "seqs", "first", "dropped", "launches")

    def __init__(self, ring: "ErrorSlots", errors, self_reading: bool):
        self.ring = ring
        self.errors = errors            # code -> exception
        self.self_reading = self_reading
        self.last = -1                  # ring sequence number of its last launch's word
        self.addr = 0                   # that word's device address
        self.chunk_end = 0              # the first word past its chunk: the next launch takes
        self.codes = None               # {g: value} of its words the ring consumed nonzero
        self.excs = None                # {g: exception} of its words decoded (pure runs)
        self.seqs = collections.deque() if self_reading else None   # words not consumed yet
        self.first = None               # (launch index, code) of the first launch that raised
        self.dropped = 0                # launches whose words were consumed clean (self-reading)
        self.launches = 0               # counted for a self-reading run only (see ``counted``)

    def step(self) -> int:
        """The next launch's word inside the run's chunk (the caller checked that there is
        one: ``last + 1 != chunk_end``): its device address. ``fast_path.py`` writes this out."""
        g = self.last = self.last + 1
        addr = self.addr = self.addr + 4
        if self.seqs is not None:
            self.counted(g)
        return addr

    def counted(self, g: int) -> None:
        """One more launch of a self-reading run, with word ``g`` (a pure run's last launch
        decides its outcome: it counts nothing)."""
        self.launches += 1
        if self.first is None:
            seqs = self.seqs
            seqs.append(g)
            if len(seqs) > self.ring.size:
                self._trim()

    def consumed(self, g: int, code: int) -> None:
        """The ring reuses word ``g``, which holds ``code`` (nonzero; its launch is complete)."""
        if self.seqs is None:
            # Kept for its last launch, and for any frozen copy made of an earlier one (a
            # launch that read this run's buffers then: ``WordRun``); only nonzero words.
            if self.codes is None:
                self.codes = {}
            self.codes[g] = code
            return
        seqs = self.seqs
        # The ring hands nonzero words over in order, so earlier words still listed were zero.
        while seqs and seqs[0] < g:
            seqs.popleft()
            self.dropped += 1
        if self.first is None and seqs and seqs[0] == g:
            self.first = (self.dropped, code)
            seqs.clear()

    def _trim(self) -> None:
        """Drop the leading words the ring consumed clean."""
        seqs, below = self.seqs, self.ring.consumed_below
        while seqs and seqs[0] < below:
            seqs.popleft()
            self.dropped += 1

    def inheriting(self) -> int:
        return self.launches if self.seqs is not None else 1

    def frozen(self):
        return WordRun(self, self.last) if self.seqs is None else None

    def word_outcome(self, g: int, complete: bool):
        """The outcome of the launch with word ``g`` alone."""
        ring = self.ring
        if g < ring.consumed_below:
            codes = self.codes
            code = codes.get(g, 0) if codes is not None else 0   # not handed over: it was zero
        elif not complete:
            return UNRESOLVED
        else:
            code = ring.word(g)
        if not code:
            return None
        # One exception object per raised word: the run and its frozen copies answer with the
        # same root (a reader downstream and one of the buffer itself see the same exception).
        excs = self.excs
        if excs is None:
            excs = self.excs = {}
        exc = excs.get(g)
        if exc is None:
            exc = excs[g] = self.errors.exception(code)
        return exc, 0

    def outcome(self, complete: bool):
        ring = self.ring
        if self.seqs is None:
            return self.word_outcome(self.last, complete)
        if self.first is not None:
            index, code = self.first
            return self.errors.exception(code), self.launches - 1 - index
        self._trim()
        if not self.seqs:
            return None                 # every word consumed clean
        if not complete:
            return UNRESOLVED
        for j, g in enumerate(self.seqs):
            code = ring.word(g)
            if code:
                return self.errors.exception(code), self.launches - 1 - (self.dropped + j)
        return None


class WordRun(Run):
    """One launch of a ``SlotRun`` (its word ``g``), frozen: what a launch that read the run's
    buffers then inherits, while the run goes on standing for later launches."""

    __slots__ = ("run", "g")

    def __init__(self, run: SlotRun, g: int):
        self.run = run
        self.g = g

    def outcome(self, complete: bool):
        return self.run.word_outcome(self.g, complete)


class ErrorSlots:
    """The error words of one device (see the module docstring). Used under the device lock."""

    def __init__(self, driver, streams, ledger, activate, size: int = DEFAULT_SLOTS):
        size = 1 << max(2, (int(size) - 1).bit_length())   # a power of two (halves, a mask)
        self._driver = driver
        self._streams = streams
        self._ledger = ledger
        self._activate = activate
        self.size = size
        self._mask = size - 1
        self._half = size // 2
        self._half_mask = self._half - 1
        # A chunk divides a half, and a half holds at least four (a half of chunks held by
        # runs that stopped would turn the ring at every chunk taken).
        self.chunk = max(1, min(CHUNK_WORDS, self._half // 4))
        self._words = None              # int32 view of the ring (allocated on first use)
        self.base = 0                   # device address of word 0
        self.sink = 0
        self.owner: list = [None] * size
        self.next = 0
        self.consumed_below = 0         # every word g below it was consumed (handed over, cleared)
        self._holders = ([], [])        # per half: the runs that took a chunk in it
        self._fences = ([], [])         # (stream, position, event) recorded when a half was left
        self.waits = 0                  # turns that had to wait for a launch (ring too small)

    def _allocate(self) -> None:
        self._activate()
        drv = self._driver
        nbytes = 4 * (self.size + 1)
        ptr = drv.mem_alloc_host(nbytes)
        ctypes.memset(ptr, 0, nbytes)
        self._words = np.ctypeslib.as_array((ctypes.c_int32 * (self.size + 1)).from_address(ptr))
        self.base = drv.host_device_pointer(ptr)
        self.sink = self.base + 4 * self.size

    def sink_pointer(self) -> int:
        if self._words is None:
            self._allocate()
        return self.sink

    def word(self, g: int) -> int:
        """The word of ring sequence number ``g`` (its launch is complete), 0 if consumed."""
        return 0 if g < self.consumed_below else int(self._words[g & self._mask])

    def consumed(self, g: int) -> bool:
        """Whether word ``g`` was consumed (its launch is complete; a nonzero value was handed
        to its run)."""
        return g < self.consumed_below

    def take(self, run: SlotRun, cs, seq: int) -> int:
        """A word for the launch at position ``seq`` of stream ``cs`` that ``run`` stands for:
        its device address (the kernel's trailing parameter). A run's first launch takes one
        word; a later one (its chunk used up) a new chunk, which it steps through."""
        g = self.next
        if run.last >= 0 and self.chunk > 1:
            g = -(-g // self.chunk) * self.chunk      # chunks are aligned: none spans two halves
            width = self.chunk
        else:
            width = 1
        i = g & self._mask
        if not g & self._half_mask:
            self._turn(g, cs, seq)      # the first word of a half: reuse it (module docstring)
        if width == 1:
            self.owner[i] = run
        else:
            self.owner[i:i + width] = [run] * width
            self._holders[1 if i & self._half else 0].append(run)
        self.next = g + width
        run.chunk_end = g + width
        run.last = g
        run.addr = address = self.base + 4 * i
        if run.seqs is not None:
            run.counted(g)
        return address

    def take_dispatching(self, run: SlotRun) -> int:
        """``take`` for the dispatch the executor is running now (``ledger.dispatching``)."""
        task = self._ledger.dispatching
        if task is None or task.cs is None:
            raise RuntimeError("a launch of a kernel that may raise outside a stream task")
        return self.take(run, task.cs, task.seq)

    def _turn(self, g: int, cs, seq: int) -> None:
        """Word ``g``, the first of a half, is taken for the launch at ``seq`` of ``cs``."""
        if self._words is None:
            self._allocate()
        entering = 1 if g & self._half else 0
        leaving = 1 - entering
        # Chunks in the half being left end here: their runs take their next word in this one,
        # after the events below (which cover every launch issued so far).
        for run in self._holders[leaving]:
            if run.chunk_end > run.last + 1:
                run.chunk_end = run.last + 1
        self._holders[leaving].clear()
        streams = self._streams
        record = self._driver.api.cuEventRecord
        # Every stream that has work not known complete gets an event: the launches that used
        # the half being left are among them (cheaper than noting each launch's stream).
        for s in streams.live():
            position = seq - 1 if s is cs else s.seq    # (this launch is not issued yet)
            if position <= s.done_seq or s.retired:
                continue                # known complete (a recycled stream's work is)
            event = streams.events.get()
            if record(event, s.handle)[0] != self._driver.SUCCESS:
                streams.events.put(event)
                continue                # a broken device: nothing to wait for (it is reported)
            self._fences[leaving].append((s, position, event))
        for s, position, event in self._fences[entering]:
            if position > s.done_seq:
                if not streams.query(event):
                    self.waits += 1
                    streams.synchronize(event)
                if s.done_seq < position:
                    s.done_seq = position
            streams.events.put(event)
        self._fences[entering].clear()
        lo, hi = entering * self._half, (entering + 1) * self._half
        # The words of this half were taken a round ago, by sequence numbers ``g - size`` on
        # (or never: the first round's are zero).
        previous = g - self.size
        words = self._words[lo:hi]
        for j in np.flatnonzero(words).tolist():
            run = self.owner[lo + j]
            if run is not None:
                run.consumed(previous + j, int(words[j]))
        words[:] = 0
        self.owner[lo:hi] = [None] * self._half
        self.consumed_below = max(self.consumed_below, previous + self._half)
