"""Progress bars for long operations (autotune, dry runs that compile many kernels), on a
terminal only.

A bar is tqdm's (``pip install 'numba_cube[progress]'``), drawn on stderr when stderr is a TTY
and the process does not run under CI (the ``CI`` variable set, as CI services do). Anywhere
else (piped, redirected, in CI, or without tqdm) ``progress_bar`` returns a bar that draws
nothing, so logs and captured output never carry control characters.

``DeferredCounter`` is for work whose size is not known in advance and is usually small (the
launches a dry run compiles, counted by ``runtime/client/modes.py``): it counts, and draws a counter
only once the count passes a threshold, so a dry run of two kernels never flashes a bar.
"""

from __future__ import annotations

import importlib.util
import os
import sys

__all__ = ["progress_bar", "bars_shown", "DeferredCounter"]


class _NoBar:
    """Takes the calls a tqdm bar takes and draws nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def bars_shown() -> bool:
    """Whether a bar would be drawn here: stderr is a terminal, not under CI, tqdm installed."""
    if os.environ.get("CI") or not sys.stderr.isatty():
        return False
    return importlib.util.find_spec("tqdm") is not None


def progress_bar(total: int | None, description: str, unit: str = "it", initial: int = 0):
    """A bar of ``total`` steps (``None``: a counter) of ``unit`` labelled ``description``,
    ``initial`` of them done already (not counted in the rate): tqdm's where ``bars_shown()``,
    else one that draws nothing. The caller calls ``update()`` per step and ``close()`` at the
    end."""
    if not bars_shown():
        return _NoBar()
    from tqdm import tqdm     # here: only a process that shows a bar pays for the import

    # leave=False: the bar is gone when the work is, as the output it interrupted continues
    return tqdm(total=total, desc=description, unit=unit, initial=initial, file=sys.stderr,
                leave=False, dynamic_ncols=True)


class DeferredCounter:
    """Counts steps; once there are more than ``show_after``, draws them as a ``progress_bar``
    counter (where ``bars_shown()``), the steps before included. Not thread-safe: the caller
    serializes ``update`` and ``close``."""

    def __init__(self, description: str, show_after: int, unit: str):
        self.description = description
        self.show_after = show_after
        self.unit = unit
        self.count = 0
        self._bar = None       # made at the first step past show_after (then a bar or a _NoBar)

    def update(self, postfix: str | None = None) -> None:
        """One more step; ``postfix`` (e.g. what the step was) is shown after the count."""
        self.count += 1
        if self._bar is None and self.count <= self.show_after:
            return
        try:
            if self._bar is None:
                # Decided here, not at construction: most counters never get this far, and
                # need not look for a terminal or for tqdm.
                self._bar = progress_bar(None, self.description, self.unit, initial=self.count)
            else:
                self._bar.update()
            if postfix:
                self._bar.set_postfix_str(postfix)
        except Exception:  # noqa: BLE001 - e.g. stderr closed, a broken tqdm
            # The caller reports work as it goes (a dry run, from a server's thread): a bar that
            # cannot draw stops drawing, it never fails that work.
            self._bar = _NoBar()

    def close(self) -> None:
        try:
            if self._bar is not None:
                self._bar.close()
        except Exception:  # noqa: BLE001 - as in update
            pass
        self._bar = _NoBar()

