"""What a warm launch (``fast_path.py``) leaves in the ledger when checking is involved.

A launch of a kernel that can raise leaves its write set ``Pending`` on its error word
(``runtime/ledger/pending.py``, ``error_slots.py``), and so does any launch that reads a buffer still
pending; the general path does that in the execute scope. The warm path does the same without
the scope, in three ways, cheapest first:

- **renew**: the entry's own pending state (``WarmLaunch.node``) is still what its write set
  holds and nobody looked at it (not ``sealed``), and its other inputs hold what they held when
  the state was made (nothing, or the same pending states: ``same_inputs``): it stands for this
  launch too, which only takes an error word (``ErrorSlots.take``) or, for a kernel that cannot
  raise, counts itself (``Repeats``). For a kernel that reads what it writes every launch after
  the first inherits what the first inherited; otherwise the last launch rewrote everything and
  read the same inputs. That is the steady state of a loop, also one reading a buffer that a
  kernel that can raise wrote once: one state for the whole loop, not one per launch. In a
  pipeline (a producer that can raise, a consumer of its output, in a loop) the consumer holds
  frozen copies of its producer's state (``Pending.inherited``), refreshed at each renewal
  (``refreshed``), so neither seals the other and both renew.
- **fresh** (``fresh_state``): a new state, recorded after the launch: pending on the inputs'
  states (parents, read order) and on the launch's own word; or clean, where stale pending
  states on the outputs must go (a kernel that cannot raise rewriting them).
- the **general path**, where a failure is settled on an input (the launch is skipped) or on an
  output (the scope's claim repairs it), exactly as before.

A kernel that cannot raise, on buffers with nothing in the ledger, does none of this (one truth
test of the ledger's dict, as before). The ledger's ``version`` (bumped by every change of an
entry) spares the look at the buffers when nothing changed since the entry's last launch: one
that found nothing on them (``quiet``) does nothing more, a renewing one skips ``same_inputs``.
"""

from __future__ import annotations

from numba_cube.runtime.ledger.ledger import Pending, pending_inputs
from numba_cube.runtime.ledger.pending import Run
from numba_cube.backends.cuda.launch.error_slots import SlotRun

__all__ = ["CLEAR", "Repeats", "entry_facts", "fresh", "fresh_state", "record", "refreshed",
           "same_inputs"]

#: ``fresh_state``'s answer when the launch leaves its write set clean
CLEAR = object()


class Repeats(Run):
    """The own outcome of launches of a kernel that cannot raise: none. It counts them, for the
    chain of one that reads what it writes (each launch passes an inherited failure on)."""

    __slots__ = ("launches", "self_reading")

    def __init__(self, self_reading: bool):
        self.launches = 1
        self.self_reading = self_reading

    def outcome(self, complete: bool):
        return None

    def inheriting(self) -> int:
        return self.launches if self.self_reading else 1

    def frozen(self):
        return None if self.self_reading else _ONE


_ONE = Repeats(False)       # one launch of a kernel that cannot raise, frozen (never changed)


def entry_facts(bound) -> dict:
    """What an armed entry needs for the above, worked out once (``WarmPath.arm``)."""
    packed = bound.packed
    reads, writes = bound.reads, bound.writes
    write_mems = bound.write_mems
    # An input that is exactly an output is the entry's own (its own state sits there); one in
    # an output's memory but not equal to an output could carry anything: never renewed.
    renewable = all(r in writes or r[0] not in write_mems for r in reads)
    self_reading = any(r[0] == w[0] and r[1] < w[2] and w[1] < r[2] for r in reads for w in writes)
    other_reads = tuple(r for r in reads if r not in writes)
    return {
        "checks": packed.checks,                     # the device's words, if it can raise
        "errors": packed.kernel.raises,
        "word_offset": packed.word_offset,
        "mems": frozenset(bound.read_mems | write_mems),
        "read_only": other_reads,
        "read_only_mems": frozenset(r[0] for r in other_reads),
        "renewable": renewable and bool(writes),
        "self_reading": self_reading,
    }


def fresh_state(ledger, armed):
    """``(state, inputs)``: the state a warm launch of ``armed`` leaves on its write set, when
    the ledger has something on its buffers (a new ``Pending``, task and position set by the
    caller, or ``CLEAR``; None when the general path must take the launch: a settled failure on
    a buffer), and the pending states then on its other inputs (what ``same_inputs`` compares
    with later)."""
    source = armed.source
    found = ledger.inputs_of(source.reads, source.writes)     # one look, one lock
    if found is None:
        return None, ()
    # A kernel reading what it writes seals what it inherits (its state's later launches read
    # those inputs again); any other takes frozen copies, leaving its producers free to renew.
    inherited, parents = pending_inputs(ledger, source.reads, found,
                                        frozen=not armed.self_reading)
    if inherited is not None:
        return None, ()             # known failed now: the general path skips it
    if armed.checks is not None:
        state = Pending(armed.kernel_id, parents, SlotRun(armed.checks, armed.errors,
                                                          armed.self_reading))
    elif parents:
        state = Pending(armed.kernel_id, parents, Repeats(armed.self_reading))
    else:
        return CLEAR, ()
    if not parents:
        return state, ()
    # The other inputs' states: all of them, unless some inputs are the entry's own outputs.
    inputs = found if len(armed.read_only) == len(source.reads) else \
        ledger.inputs_of(armed.read_only, ())
    return state, inputs


def same_inputs(ledger, armed) -> bool:
    """Whether the inputs that are not the entry's own outputs hold what they held when its
    state was made (no failure; the same pending states, in order): renewal's condition."""
    return ledger.inputs_of(armed.read_only, ()) == armed.inputs


def refreshed(armed) -> tuple:
    """The parents of a renewed state of an entry that does not read what it writes: what its
    other inputs hold now, frozen (their producers may have renewed theirs since; the state
    stands for this launch alone, which read them as they are now)."""
    return tuple(node.inherited() for node in armed.inputs)


def fresh(ledger, armed, failed) -> tuple:
    """``(state, inputs)``: the state a warm launch of ``armed`` that cannot renew its own leaves
    (recorded after the launch, ``record``): None (nothing to record), a ``Pending``,
    ``CLEAR``, or False when the general path must take it; and what its other inputs hold.
    ``failed``: the ledger's dict of memories with entries."""
    if failed and not failed.keys().isdisjoint(armed.mems):
        state, inputs = fresh_state(ledger, armed)
        return (False if state is None else state), inputs
    if armed.checks is not None:
        return Pending(armed.kernel_id, (), SlotRun(armed.checks, armed.errors,
                                                     armed.self_reading)), ()
    return None, ()


def record(ledger, armed, state, task, seq: int, inputs: tuple) -> None:
    """Record ``fresh``'s state on the write set after the launch (at position ``seq`` of
    ``task``'s stream); a pending one may be renewed by the entry's next launch while its other
    inputs hold ``inputs`` (``same_inputs``)."""
    if state is CLEAR:
        ledger.record(armed.source.writes, None)
        armed.node = None
        return
    state.task = task
    state.seq = seq
    ledger.record(armed.source.writes, state)
    armed.node = state if armed.renewable else None
    armed.inputs = inputs
