"""A failure as the ledger records it (CONTRACT.md section 4.1): a root cause, the kernel that
caused it, and the launches it travelled through. Apart from ``ledger/ledger.py`` so that the ledger's
third state, a launch whose outcome is not checked yet (``ledger/pending.py``), can make failures
without an import cycle; ``ledger/ledger.py`` re-exports both names.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba_cube.errors import LaunchFailure

__all__ = ["Failure", "IncompleteLaunch"]


class IncompleteLaunch(RuntimeError):
    """The provisional root of a claim: the launch started and has not (yet) completed."""

    def __str__(self) -> str:
        # Made with just the kernel id (a claim is made per dispatch: no string formatting there).
        return f"launch of {self.args[0]} did not complete" if self.args else "launch did not complete"


@dataclass(frozen=True, eq=False)
class Failure:
    """A root cause, the kernel that caused it, and the launches it travelled through.

    Compared by identity: a scope releases only *its own* claim, never a newer record that
    happens to carry the same exception.
    """

    root: BaseException
    kernel_id: str | None
    chain: tuple = ()
    provisional: bool = False
    # For a provisional claim: [True] once the body that made it raised (the claim then stays for
    # good). A provisional claim whose body is still running is *in flight*: a reader that is not
    # ordered after that launch (it waited for the writers it is ordered after) must not report
    # it, or a read racing another thread's later launch would see a spurious failure.
    abandoned: list | None = None

    @classmethod
    def claim(cls, kernel_id: str) -> "Failure":
        """A launch's provisional claim (``ExecuteScope``): ``Failure(IncompleteLaunch(kernel_id),
        kernel_id, (kernel_id,), provisional=True, abandoned=[False])``, the same fields of a new
        object, set straight into its ``__dict__``: a frozen dataclass's ``__init__`` sets each
        field through ``object.__setattr__``, which was a third of a graph replay's execute scope
        (every dispatch and every replay makes one)."""
        claim = object.__new__(cls)
        fields = claim.__dict__
        fields["root"] = IncompleteLaunch(kernel_id)
        fields["kernel_id"] = kernel_id
        fields["chain"] = (kernel_id,)
        fields["provisional"] = True
        fields["abandoned"] = [False]
        return claim

    @property
    def in_flight(self) -> bool:
        return self.provisional and not (self.abandoned and self.abandoned[0])

    def through(self, kernel_id: str) -> "Failure":
        """The same root cause, inherited by one more launch (it was skipped)."""
        return Failure(self.root, self.kernel_id, self.chain + (kernel_id,), self.provisional,
                       self.abandoned)

    def to_exception(self) -> LaunchFailure:
        exc = LaunchFailure(self.root, self.kernel_id, self.chain)
        exc.__cause__ = self.root
        return exc
