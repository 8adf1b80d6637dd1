"""The failure ledger and the execute scope (CONTRACT.md section 4.1), as units."""

from __future__ import annotations

import pytest

from numba_cube.errors import LaunchFailure
from numba_cube.runtime.ledger.ledger import (
    ExecuteScope, Failure, IncompleteLaunch, Ledger, failed_writing,
)

MEM = 1
OTHER = 2


def fail(msg="boom", kid="k"):
    return Failure(ValueError(msg), kid, (kid,))


# -- record / release / first_failure over byte ranges -------------------------------------------


def test_clean_by_default():
    """4.1: every buffer has a ledger entry; absent means clean."""
    ledger = Ledger()
    assert ledger.failure_of((MEM, 0, 16)) is None
    assert ledger.first_failure([(MEM, 0, 16), (OTHER, 0, 8)]) is None
    assert len(ledger) == 0


def test_failure_on_a_view_does_not_affect_a_disjoint_view():
    """4.1 (views): regions are byte ranges, so a failure on [0,8) does not poison [8,16) of the
    same buffer, and overlapping ranges see it."""
    ledger = Ledger()
    f = fail()
    ledger.record([(MEM, 0, 8)], f)
    assert ledger.failure_of((MEM, 0, 8)) is f
    assert ledger.failure_of((MEM, 8, 16)) is None
    assert ledger.failure_of((MEM, 4, 12)) is f          # overlaps the failed bytes
    assert ledger.failure_of((MEM, 0, 16)) is f          # the whole buffer contains them
    assert ledger.failure_of((OTHER, 0, 8)) is None      # another buffer, same coordinates


def test_record_none_repairs_exactly_the_rewritten_bytes():
    """4.2: rewriting a failed view repairs exactly that view (recording clean over a sub-range
    leaves the rest of the failure in place)."""
    ledger = Ledger()
    f = fail()
    ledger.record([(MEM, 0, 32)], f)
    ledger.record([(MEM, 8, 16)], None)
    assert ledger.failure_of((MEM, 8, 16)) is None
    assert ledger.failure_of((MEM, 0, 8)) is f
    assert ledger.failure_of((MEM, 16, 32)) is f
    ledger.record([(MEM, 0, 8), (MEM, 16, 32)], None)
    assert ledger.failure_of((MEM, 0, 32)) is None
    assert len(ledger) == 0


def test_last_record_wins():
    """4.1: updates to a region arrive in program order, so the last record is its state."""
    ledger = Ledger()
    a, b = fail("a"), fail("b")
    ledger.record([(MEM, 0, 16)], a)
    ledger.record([(MEM, 0, 16)], b)
    assert ledger.failure_of((MEM, 0, 16)) is b
    assert len(ledger) == 1


def test_first_failure_scans_regions_in_order():
    """4.1 skip: the scope inherits the failure of a failed read; first_failure finds it among
    clean regions and gives the first one in the read order."""
    ledger = Ledger()
    a, b = fail("a"), fail("b")
    ledger.record([(OTHER, 0, 8)], a)
    ledger.record([(MEM, 8, 16)], b)
    assert ledger.first_failure([(MEM, 0, 8), (OTHER, 0, 8), (MEM, 8, 16)]) is a
    assert ledger.first_failure([(MEM, 0, 8), (MEM, 8, 16)]) is b
    assert ledger.first_failure([(MEM, 0, 8)]) is None


def test_settled_failure_passes_over_claims_in_flight():
    """What a launch queued now would inherit whatever happens (the warm path's test): a claim
    in flight (a launch still running) is passed over, a settled failure behind it on another
    region is found, and a claim whose body raised counts as settled."""
    ledger = Ledger()
    claim = Failure.claim("running")
    ledger.record([(MEM, 0, 8)], claim)
    assert ledger.first_failure([(MEM, 0, 8)]) is claim
    assert ledger.settled_failure([(MEM, 0, 8)]) is None
    settled = fail("settled")
    ledger.record([(OTHER, 0, 8)], settled)
    assert ledger.settled_failure([(MEM, 0, 8), (OTHER, 0, 8)]) is settled
    claim.abandoned[0] = True                   # its body raised: the claim stays for good
    assert ledger.settled_failure([(MEM, 0, 8)]) is claim


def test_release_clears_only_its_own_claim():
    """4.1: a scope releases only its own claim, never a newer record over the same bytes (even
    one carrying an equal exception: claims compare by identity)."""
    ledger = Ledger()
    claim = fail("claim")
    ledger.record([(MEM, 0, 16)], claim)
    newer = Failure(claim.root, claim.kernel_id, claim.chain)   # equal fields, another record
    ledger.record([(MEM, 8, 16)], newer)
    ledger.release([(MEM, 0, 16)], claim)
    assert ledger.failure_of((MEM, 0, 8)) is None
    assert ledger.failure_of((MEM, 8, 16)) is newer


def test_release_only_touches_the_given_ranges():
    """4.1: release clears the claim over the scope's regions and nothing outside them."""
    ledger = Ledger()
    claim = fail()
    ledger.record([(MEM, 0, 32)], claim)
    ledger.release([(MEM, 8, 16)], claim)
    assert ledger.failure_of((MEM, 8, 16)) is None
    assert ledger.failure_of((MEM, 0, 8)) is claim
    assert ledger.failure_of((MEM, 16, 32)) is claim


def test_forget_drops_a_freed_buffer():
    """3/4: a freed buffer's entries die with it (the ledger does not grow with freed memory)."""
    ledger = Ledger()
    ledger.record([(MEM, 0, 8), (OTHER, 0, 8)], fail())
    ledger.forget(MEM)
    assert ledger.failure_of((MEM, 0, 8)) is None
    assert ledger.failure_of((OTHER, 0, 8)) is not None
    assert len(ledger) == 1


def test_to_exception_carries_root_kernel_and_chain():
    """API.md errors: LaunchFailure carries .root (the original exception, same object), .kernel_id
    and the chain of launches; its __cause__ is the root."""
    root = ValueError("x")
    exc = Failure(root, "k1", ("k1",)).through("k2").to_exception()
    assert isinstance(exc, LaunchFailure)
    assert exc.root is root
    assert exc.kernel_id == "k1"
    assert exc.chain == ("k1", "k2")
    assert exc.__cause__ is root


# -- ExecuteScope -------------------------------------------------------------------------------


def test_scope_enter_claims_provisionally_during_the_body_and_releases_on_exit():
    """4.1 enter: with clean inputs the write set is claimed with a provisional failure *before*
    the body runs (visible during it), and released (clean) on normal exit. Reads are not claimed."""
    ledger = Ledger()
    reads, writes = ((MEM, 0, 8),), ((OTHER, 0, 8),)
    with ExecuteScope(ledger, "k", reads, writes) as scope:
        assert scope.entered
        claim = ledger.failure_of((OTHER, 0, 8))
        assert claim is not None and claim.provisional
        assert isinstance(claim.root, IncompleteLaunch)
        assert claim.kernel_id == "k"
        assert ledger.failure_of((MEM, 0, 8)) is None
    assert ledger.failure_of((OTHER, 0, 8)) is None
    assert len(ledger) == 0


def test_a_claim_is_the_failure_the_constructor_makes():
    """``Failure.claim`` (what an execute scope makes per dispatch) has every field the
    dataclass constructor gives a provisional claim, is a new object each time (a scope releases
    only its own claim), is in flight until its body raises, and stays frozen."""
    claim = Failure.claim("k")
    made = Failure(IncompleteLaunch("k"), "k", ("k",), provisional=True, abandoned=[False])
    for field in ("kernel_id", "chain", "provisional", "abandoned"):
        assert getattr(claim, field) == getattr(made, field)
    assert type(claim.root) is IncompleteLaunch and str(claim.root) == str(made.root)
    assert claim.in_flight and claim is not Failure.claim("k") and claim != Failure.claim("k")
    claim.abandoned[0] = True
    assert not claim.in_flight
    with pytest.raises(AttributeError):
        claim.kernel_id = "other"


def test_scope_claims_in_the_constructor():
    """4.1: skip-or-enter, and the claim, are decided in the constructor (not in __enter__)."""
    ledger = Ledger()
    scope = ExecuteScope(ledger, "k", (), ((MEM, 0, 8),))
    assert ledger.failure_of((MEM, 0, 8)).provisional
    with scope:
        pass
    assert ledger.failure_of((MEM, 0, 8)) is None


def test_scope_fail_replaces_the_claim_with_the_error():
    """4.1 enter: when the body reports an error (scope.fail), the claim is replaced by that error
    as the root cause, with this kernel as its origin."""
    ledger = Ledger()
    err = RuntimeError("driver refused")
    with ExecuteScope(ledger, "k", (), ((MEM, 0, 8),)) as scope:
        scope.fail(err)
        assert ledger.failure_of((MEM, 0, 8)).provisional   # still the claim until exit
    f = ledger.failure_of((MEM, 0, 8))
    assert f.root is err
    assert f.kernel_id == "k"
    assert f.chain == ("k",)
    assert not f.provisional


def test_scope_claims_stay_when_the_body_raises():
    """4.1 enter: if the body raises unexpectedly the claims stay (the buffers are marked as not
    written) and the exception propagates."""
    ledger = Ledger()
    with pytest.raises(KeyError):
        with ExecuteScope(ledger, "k", (), ((MEM, 0, 8),)):
            raise KeyError("unexpected")
    f = ledger.failure_of((MEM, 0, 8))
    assert f is not None and f.provisional
    assert isinstance(f.root, IncompleteLaunch)


def test_scope_early_return_still_releases():
    """4.1: the claim on entry serves early returns: a body that leaves the block early still
    releases it on exit."""
    ledger = Ledger()

    def body():
        with ExecuteScope(ledger, "k", (), ((MEM, 0, 8),)):
            return "early"

    assert body() == "early"
    assert ledger.failure_of((MEM, 0, 8)) is None


def test_scope_skips_over_a_failed_input_and_points_writes_at_the_same_root():
    """4.1 skip: a failed read makes the scope skip (decided in the constructor); its write set is
    pointed at the same root cause with the chain extended by this launch, and on_skip is told."""
    ledger = Ledger()
    root = fail("root", "producer")
    ledger.record([(MEM, 0, 8)], root)
    told = []
    scope = ExecuteScope(ledger, "consumer", ((MEM, 0, 8),), ((OTHER, 0, 8),), on_skip=told.append)
    assert not scope.entered
    assert scope.inherited is root
    assert told == [root]
    f = ledger.failure_of((OTHER, 0, 8))
    assert f.root is root.root
    assert f.kernel_id == "producer"
    assert f.chain == ("producer", "consumer")
    with scope:
        pass
    # Exit of a skipped scope leaves the propagated failure (no claim to release).
    assert ledger.failure_of((OTHER, 0, 8)) is f


def test_scope_skip_only_considers_overlapping_bytes_of_the_read_set():
    """4.1 + views: a failure on bytes the launch does not read does not skip it."""
    ledger = Ledger()
    ledger.record([(MEM, 8, 16)], fail())
    with ExecuteScope(ledger, "k", ((MEM, 0, 8),), ((OTHER, 0, 8),)) as scope:
        assert scope.entered
    assert ledger.failure_of((OTHER, 0, 8)) is None


def test_scope_does_not_skip_for_a_failed_pure_output():
    """4.2: a failed buffer that is only written is not in the read set, so the scope enters and
    rewriting it repairs it."""
    ledger = Ledger()
    ledger.record([(OTHER, 0, 8)], fail())
    with ExecuteScope(ledger, "k", ((MEM, 0, 8),), ((OTHER, 0, 8),)) as scope:
        assert scope.entered
    assert ledger.failure_of((OTHER, 0, 8)) is None


def test_skip_chain_grows_through_several_launches():
    """4.1: readers downstream see the root cause, not a new error, however far it travelled."""
    ledger = Ledger()
    ledger.record([(1, 0, 8)], fail("root", "a"))
    ExecuteScope(ledger, "b", ((1, 0, 8),), ((2, 0, 8),))
    ExecuteScope(ledger, "c", ((2, 0, 8),), ((3, 0, 8),))
    f = ledger.failure_of((3, 0, 8))
    assert f.root is ledger.failure_of((1, 0, 8)).root
    assert f.chain == ("a", "b", "c")
    assert f.kernel_id == "a"


def test_failed_writing_claims_outputs_with_the_error():
    """4.1 failed_writing: work that never started still claims its destinations with the error."""
    ledger = Ledger()
    err = ValueError("compile")
    f = failed_writing(ledger, "k", [(MEM, 0, 8), (OTHER, 8, 16)], err)
    assert f.root is err and f.kernel_id == "k" and f.chain == ("k",)
    assert not f.provisional
    assert ledger.failure_of((MEM, 0, 8)) is f
    assert ledger.failure_of((OTHER, 8, 16)) is f
    assert ledger.failure_of((OTHER, 0, 8)) is None
