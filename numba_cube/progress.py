"""Progress bars for long operations (autotune), on a terminal only.

A bar is tqdm's (``pip install 'numba_cube[progress]'``), drawn on stderr when stderr is a TTY
and the process does not run under CI (the ``CI`` variable set, as CI services do). Anywhere
else (piped, redirected, in CI, or without tqdm) ``progress_bar`` returns a bar that draws
nothing, so logs and captured output never carry control characters.
"""

from __future__ import annotations

import importlib.util
import os
import sys

__all__ = ["progress_bar", "bars_shown"]


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


def progress_bar(total: int | None, description: str):
    """A bar of ``total`` steps (``None``: a counter) labelled ``description``: tqdm's where
    ``bars_shown()``, else one that draws nothing. The caller calls ``update()`` per step and
    ``close()`` at the end."""
    if not bars_shown():
        return _NoBar()
    from tqdm import tqdm     # here: only a process that shows a bar pays for the import

    # leave=False: the bar is gone when the work is, as the output it interrupted continues
    return tqdm(total=total, desc=description, file=sys.stderr, leave=False, dynamic_ncols=True)
