"""Shared by the CPU backend's memory tests: how many bytes a loop leaves allocated."""

from __future__ import annotations

import gc
import tracemalloc


def bytes_left_by(loop, warm_up: int, times: int):
    """``(bytes, result)``: what ``loop(times)`` leaves allocated after ``loop(warm_up)`` has run
    (traced by ``tracemalloc``, which sees the objects native code allocates, after a
    collection; not the process's resident memory, which moves by whole pages and with what
    other threads allocate), and ``loop(times)``'s own result."""
    loop(warm_up)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = loop(times)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, result
    finally:
        tracemalloc.stop()
