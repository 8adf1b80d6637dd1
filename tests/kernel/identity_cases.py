"""Kernels for the identity tests: one of each thing a kernel id must cover.

Imported by ``test_identity.py`` and, for the cross-process check, by a subprocess that calls
``print_ids()``: the ids of ``all_kernels()`` as JSON (made twice there, so that the check also
covers two makings in one process). Imported, not run as a script: a kernel's module name is
part of its identity, and a script's module is ``__main__``.
"""

from __future__ import annotations

import collections
import enum
import json
import math
import sys

import numba
import numpy as np
from numba import cuda

import numba_cube as cube

TPB = 64
LUT = np.arange(16, dtype=np.float32) * 0.5
Pair = collections.namedtuple("Pair", ["lo", "hi"])
BOUNDS = Pair(1, 7)


class Mode(enum.IntEnum):
    ADD = 1
    MUL = 2


@cuda.jit(device=True)
def dev_scale(v):
    return v * TPB


@cuda.jit(device=True)
def dev_even(n):
    return True if n == 0 else dev_odd(n - 1)


@cuda.jit(device=True)
def dev_odd(n):
    return False if n == 0 else dev_even(n - 1)


@numba.njit
def njit_clamp(v):
    return min(max(v, BOUNDS.lo), BOUNDS.hi)


def make_add(k):
    """A factory: the kernels differ only in the closure value ``k``."""
    @cube.kernel
    def add_k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + k
    return add_k


def make_block_sum(tpb):
    """A factory whose closure value sizes a shared array."""
    @cube.kernel
    def block_sum(x, out):
        buf = cuda.shared.array(tpb, np.float64)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        buf[t] = x[i] if i < x.size else 0.0
        cuda.syncthreads()
        if t == 0:
            acc = 0.0
            for j in range(tpb):
                acc += buf[j]
            out[cuda.blockIdx.x] = acc
    return block_sum


def make_apply(dev):
    """A factory whose closure value is a device function."""
    @cube.kernel
    def apply(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = dev(x[i])
    return apply


def uses_everything(x, out, mode):
    i = cuda.grid(1)
    if i < out.size:
        v = LUT[i % LUT.size] + dev_scale(x[i]) + njit_clamp(x[i]) + math.pi
        if dev_even(i % 4):
            v += np.float32(TPB)
        out[i] = v * BOUNDS.hi if mode == Mode.MUL else v + BOUNDS.lo


def all_kernels() -> dict[str, cube.Kernel]:
    """Freshly made kernels, by a name that says what each one covers."""
    return {
        "factory k=1.0": make_add(1.0),
        "factory k=2.0": make_add(2.0),
        "shared 32": make_block_sum(32),
        "shared 64": make_block_sum(64),
        "device scale": make_apply(dev_scale),
        "device clamp": make_apply(njit_clamp),
        "everything": cube.kernel(uses_everything),
        "everything, fastmath": cube.kernel(cuda.jit(fastmath=True)(uses_everything)),
        "everything, writes=": cube.kernel(uses_everything, writes=("out",)),
    }


def print_ids() -> None:
    first = {name: k.id for name, k in all_kernels().items()}
    second = {name: k.id for name, k in all_kernels().items()}
    json.dump([first, second], sys.stdout)
