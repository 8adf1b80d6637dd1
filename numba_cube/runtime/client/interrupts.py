"""Ctrl-C during a compile: taken when the compile ends, not in the middle of it.

Numba's compiler is not safe to interrupt at an arbitrary bytecode: its first compile in a
process imports modules whose import registers implementations (interrupted, a second import
registers them again: ``KeyError: duplicate registration``), and LLVM calls back into Python
(``ExecutionEngine._raw_object_cache_notify``), where a ``KeyboardInterrupt`` is printed and
dropped by ctypes, leaving a library without its object code (``no compiled object yet``). Both
break every later compile in the process. So while a compile runs on the main thread (the only
one Python interrupts), ``deferred_interrupt`` replaces the default SIGINT handler with one that
notes the signal; when the compile ends, a noted Ctrl-C is raised as ``KeyboardInterrupt``, and
the caller (``host_mechanism._compiled``) fails the launch with it and caches nothing. A second
Ctrl-C during the same compile is raised at once, for a user who will not wait (Numba's state
may then be left broken, as it would have been without this).

Nothing is changed on another thread, or when the program installed its own SIGINT handler.
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["deferred_interrupt"]


@contextlib.contextmanager
def deferred_interrupt():
    """Run the block with Ctrl-C deferred to its end (see the module docstring)."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    noted = []

    def note(signum, frame):
        if noted:           # the second one: now
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        noted.append(signum)

    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is note:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if noted:
            raise KeyboardInterrupt
