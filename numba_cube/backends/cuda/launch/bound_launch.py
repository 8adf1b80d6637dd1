"""What a launch binds to on the GPU, worked out once per kernel, bindings and options: the
``CudaBoundLaunch`` the server caches (``runtime/server.py``) and the warm path reuses.

Split from ``mechanism.py``, which answers the server's hooks by composing the CUDA parts: this
room is the one step where they meet for a launch. The kernel's compiled entry
(``kernels/entries.py``) is packed with the buffers' pointers, shapes and strides
(``packed_launch.py``), its IO answer becomes the read and write sets, and a dynamic count gets
the device-count form of the kernel when it compiles (``dynamic.py``), else a read-back.
"""

from __future__ import annotations

import logging

import numpy as np

from numba_cube.runtime.launch.composite import COMPOSITE_TYPES
from numba_cube.runtime.launch.dispatch import regions_of
from numba_cube.runtime.memory.handle import Binding
from numba_cube.backends.cuda.launch.packed_launch import PackedLaunch

__all__ = ["CudaBoundLaunch", "bound_launch_key", "bind_launch"]

log = logging.getLogger("numba_cube")

_U32 = np.dtype(np.uint32)


class CudaBoundLaunch:
    """A launch bound to its buffers on the GPU: everything a warm launch needs, worked out once."""

    __slots__ = ("packed", "error", "reads", "writes", "read_mems", "write_mems", "device_count",
                 "readback", "count_ptr", "foreign", "wrapper_grids")

    def __init__(self):
        self.packed = None          # PackedLaunch of the kernel (None on a compile failure)
        self.error = None           # the compile failure
        self.reads = ()
        self.writes = ()
        self.read_mems = frozenset()
        self.write_mems = frozenset()
        self.device_count = None    # PackedLaunch of the device-count wrapper, when eligible
        self.readback = False       # a dynamic count resolved by read-back
        self.count_ptr = 0
        self.foreign = ()           # memory ids of borrowed buffers it binds
        self.wrapper_grids = {}     # block threads -> wrapper grid (device count)


def bound_launch_key(req) -> tuple:
    """Kernel, bindings (scalars by type, composites by key), options and the count's
    binding: the geometry is not packed, so launches of any geometry share one."""
    return (req.kernel.id, tuple([a if type(a) is Binding
                                  else a.key if type(a) in COMPOSITE_TYPES else type(a)
                                  for a in req.args]), req.options, req.count_binding)


def bind_launch(req, entries, dynamic, driver, borrowed, pointer_of, checks=None) -> CudaBoundLaunch:
    """Compile (or find) ``req``'s kernel with ``entries`` (``KernelEntries``) and bind it:
    ``borrowed`` is the set of memory ids of foreign buffers, ``pointer_of`` a binding's device
    pointer, ``checks`` the device's error words (``error_slots.py``). A compile failure is
    kept on the result (``error``), not raised."""
    args = req.args
    kernel = req.kernel
    entry = entries.entry(kernel, args, req.options)
    bound = CudaBoundLaunch()
    reads, writes = regions_of(req, entry.access)
    bound.reads, bound.writes = reads, writes
    bound.read_mems = frozenset(r[0] for r in reads)
    bound.write_mems = frozenset(w[0] for w in writes)
    bound.foreign = tuple(m for m in bound.read_mems | bound.write_mems if m in borrowed)
    if entry.error is not None:
        bound.error = entry.error
        return bound
    bound.packed = PackedLaunch(entry.compiled, driver, args, pointer_of, checks)
    cb = req.count_binding
    if cb is not None:
        bound.count_ptr = pointer_of(cb)
        bound.readback = True
        if dynamic.mode == "auto":
            wrapper = dynamic.wrapper_of(kernel)
            if not isinstance(wrapper, Exception):
                count_arg = Binding(cb.memory_id, cb.offset, (3,), _U32)
                wargs = (count_arg,) + tuple(args)
                wentry = entries.entry(kernel, wargs, req.options, py_func=wrapper,
                                       kid=kernel.id + "#device-count",
                                       access=((True, False),) + tuple(entry.access))
                if wentry.error is None:
                    bound.device_count = PackedLaunch(wentry.compiled, driver, wargs, pointer_of,
                                                      checks)
                else:
                    log.info("numba_cube: device-count form of %s does not compile (%s); "
                             "dynamic counts are read back", kernel.name, wentry.error)
    return bound
