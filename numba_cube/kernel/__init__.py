"""The compile stage's front: ``@cube.kernel``, kernel ids, and the IO analysis on Numba IR.

Nothing here depends on a backend: a ``Kernel`` is the user's Python function (in numba.cuda's
dialect) plus what can be known about it without compiling it for a device.
"""

from .kernel import Kernel, kernel, resolve_access

__all__ = ["Kernel", "kernel", "resolve_access"]
