"""``numba_cube.testing``: helpers for tests of programs that use numba_cube."""

from __future__ import annotations

import threading

import pytest

from numba_cube.testing import take_turns


def test_take_turns_issues_steps_in_list_order_on_their_threads():
    """Each step runs on the thread it names, and step k starts only after step k-1 returned."""
    steps = [(0, "a"), (2, "b"), (0, "c"), (1, "d"), (2, "e")]
    seen = []

    def issue(k, step):
        seen.append((k, step[1], threading.current_thread().name))

    take_turns(steps, issue, threads=3)
    assert [s[:2] for s in seen] == [(k, step[1]) for k, step in enumerate(steps)]
    assert [s[2] for s in seen] == [f"take_turns-{step[0]}" for step in steps]


def test_take_turns_reraises_the_first_failure_and_stops_the_rest():
    """A step that raises ends the program: later steps do not run, and the caller gets the
    exception."""
    ran = []

    def issue(k, step):
        if step[1] == "boom":
            raise ValueError("boom")
        ran.append(k)

    with pytest.raises(ValueError, match="boom"):
        take_turns([(0, "x"), (1, "boom"), (0, "y"), (1, "z")], issue, threads=2)
    assert ran == [0]


def test_record_launches_sees_the_blocks_launches_and_leaves_the_log_whole():
    """``record_launches`` lists the kernel ids noted inside the block (nested blocks too, past
    the log's 1024 bound) and ``launched()`` afterwards reads as if nobody had recorded."""
    from numba_cube import testing

    testing.clear_launched()
    testing.note_launch("before")
    with testing.record_launches() as outer:
        testing.note_launch("a")
        with testing.record_launches() as inner:
            for _ in range(1500):
                testing.note_launch("b")
        assert inner == ["b"] * 1500
    assert outer == ["a"] + ["b"] * 1500
    assert testing.launched() == (["before", "a"] + ["b"] * 1500)[-1024:]
