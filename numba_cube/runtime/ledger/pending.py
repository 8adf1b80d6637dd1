"""The ledger's third state for a write set: written by work whose outcome nobody checked yet.

On a GPU a kernel that raises (``raise``, a failed ``assert``) writes its exception into an
*error word* the launch gave it (``backends/cuda/launch/error_slots.py``), and the host learns it only
once the launch is complete. The runtime must not wait for that (a launch is asynchronous), so a
launch that may raise, and every launch that reads what such a launch wrote, leaves its write set
``Pending`` instead of clean (CONTRACT.md section 4.1): it *runs* (its inputs carry no failure
known yet), and its outcome is decided later, when somebody needs it:

- its own **run** (``run``, the mechanism's: the error words of its launches) says whether it
  raised, once its launch is complete;
- its **parents** (the pending states of the regions it read, in read order) say whether it ran
  on garbage: if one of them failed, the launch counts as skipped, and its writes carry that
  same root cause one launch further down the chain (``Failure.through``), as a CPU launch that
  is skipped for a failed input leaves them.

``resolve`` decides, without waiting: the first parent (in read order) that failed, else the
run's own exception, else clean; ``UNRESOLVED`` while something it depends on is not known to be
complete. A launch is known complete when its position (``task``'s stream and ``seq``) is at or
before the stream's ``done_seq``, which waits and queries move; a node known complete makes its
parents complete too (its launch waited for theirs on the device). The answer is kept
(``outcome``), and the references to parents and run are dropped then, so resolved history does
not pile up.

A node is **sealed** once anybody looked at it (a resolve, a launch that inherits it, a ledger
record that cuts it): until then a mechanism may let it stand for one more identical launch
instead of making a new one (the CUDA warm path, ``fast_path.py``); afterwards never, so an
answer given, or a parent link, always means the launches it meant then. A launch may instead
inherit a frozen copy (``inherited``) of a node that stands for its last launch alone: the
copy keeps meaning that launch, and the node stays free.
"""

from __future__ import annotations

from numba_cube.runtime.ledger.failure import Failure

__all__ = ["Pending", "Run", "UNRESOLVED", "CLEAN"]


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: ``resolve``'s answer while something the node depends on is not known to be complete
UNRESOLVED = _Marker("UNRESOLVED")
#: a resolved node's ``outcome`` when it did not fail
CLEAN = _Marker("CLEAN")


class Run:
    """A launch's own outcome, known once it completes (or that of several identical launches a
    node stands for): the mechanism's, e.g. the CUDA backend's error words (``error_slots.py``).
    A body of an execute scope returns one to say its outcome is checked later
    (``dispatch.run_recorded``)."""

    __slots__ = ()

    def outcome(self, complete: bool):
        """UNRESOLVED (not known complete, and nothing decided yet), None (it raised nothing),
        or ``(exception, n)``: the exception of the launch that raised first, and how many of
        the node's launches came after it (they inherited it: the node's chain is one longer
        for each)."""
        raise NotImplementedError

    def inheriting(self) -> int:
        """Through how many launches a failure of the node's inputs travels: 1, or each of
        several identical launches of a kernel that reads what it writes (each inherits it from
        the one before)."""
        return 1

    def frozen(self):
        """A run standing for this one's last launch alone, as it is now, which later launches
        added to this one do not change; None where that cannot be (the outcome depends on
        every launch: a kernel that reads what it writes)."""
        return None


class Pending:
    """A write set whose outcome is decided once the launches it depends on are checked."""

    __slots__ = ("kernel_id", "parents", "run", "task", "seq", "sealed", "outcome", "__weakref__")

    # What a ledger entry's state answers (``Failure`` has the same names): not a failure yet.
    provisional = True
    in_flight = True

    def __init__(self, kernel_id: str, parents: tuple = (), run=None, task=None, seq: int = 0):
        self.kernel_id = kernel_id
        self.parents = parents      # Pending states of the regions it read, in read order
        # Its launches' own outcome, or None (a kernel that cannot raise): ``run.outcome(complete)``
        # is UNRESOLVED, None, or ``(exception, launches after the one that raised)``.
        self.run = run
        self.task = task            # the task of its (last) launch: ``task.cs.done_seq``, ``wait()``
        self.seq = seq              # that launch's position in the task's stream
        self.sealed = False
        self.outcome = None         # CLEAN or a Failure, once resolved

    def __repr__(self) -> str:
        return f"<Pending {self.kernel_id} {self.outcome or ('sealed' if self.sealed else 'open')}>"

    def known_complete(self) -> bool:
        """Whether this node's last launch is known to be complete (no driver call)."""
        task = self.task
        return task is not None and self.seq <= task.cs.done_seq

    def resolve(self, complete: bool = False):
        """The ``Failure`` this write set carries, None when it is clean, or ``UNRESOLVED``.
        ``complete``: the caller knows this node's launch completed."""
        outcome = self.outcome
        if outcome is None:
            outcome = _resolve(self, complete)
        return None if outcome is CLEAN else outcome

    def inherited(self) -> "Pending":
        """What a launch that reads this state now inherits: a frozen copy of it, when it stands
        for its last launch alone (its run can be ``frozen``), so that it stays free to be
        renewed for later launches (a pipeline of warm launches: ``fast_path.py``); else the
        state itself, sealed."""
        run = self.run
        if self.outcome is None and not self.sealed and run is not None:
            frozen = run.frozen()
            if frozen is not None:
                return Pending(self.kernel_id, self.parents, frozen, self.task, self.seq)
        self.sealed = True
        return self

    def wait(self) -> None:
        """Block until this node's last launch is complete (a reader that must answer)."""
        task = self.task
        if task is not None:
            task.wait()

    def settle(self, outcome) -> None:
        self.outcome = outcome
        self.sealed = True
        self.parents = ()
        self.run = None
        self.task = None


def _resolve(top: Pending, complete: bool):
    """Iterative post-order over the unresolved ancestors (chains can be long)."""
    known: dict = {top: complete or top.known_complete()}
    answers: dict = {}
    expanded = set()
    stack = [top]
    while stack:
        node = stack[-1]
        if node.outcome is not None or node in answers:
            stack.pop()
            continue
        node.sealed = True
        if node not in expanded:
            expanded.add(node)
            done = known[node]
            for p in node.parents:
                # A launch waited for its inputs' writers on the device: complete implies theirs.
                if p.outcome is None:
                    known[p] = known.get(p, False) or done or p.known_complete()
                    if p not in answers:
                        stack.append(p)
            continue
        stack.pop()
        answers[node] = _decide(node, known[node], answers)
    return answers.get(top, top.outcome)


def _decide(node: Pending, complete: bool, answers: dict):
    run = node.run
    for parent in node.parents:
        got = parent.outcome if parent.outcome is not None else answers.get(parent, UNRESOLVED)
        if got is UNRESOLVED:
            return UNRESOLVED       # an earlier input may be the root: not decided yet
        if got is not CLEAN:
            n = run.inheriting() if run is not None else 1
            failure = Failure(got.root, got.kernel_id, got.chain + (node.kernel_id,) * n)
            node.settle(failure)
            return failure
    if run is not None:
        got = run.outcome(complete)
        if got is UNRESOLVED:
            return UNRESOLVED
        if got is not None:
            exc, after = got
            kid = node.kernel_id
            failure = Failure(exc, kid, (kid,) * (1 + after))
            node.settle(failure)
            return failure
    node.settle(CLEAN)
    return CLEAN
