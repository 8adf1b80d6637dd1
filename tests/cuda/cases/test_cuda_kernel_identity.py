"""Kernel identity on the CUDA backend: kernels of one factory each run their own code, a
kernel's cuda.jit options reach numba-cuda, and what numba-cuda refuses is refused.

Answers are checked against NumPy; what reached numba-cuda is read from its own PTX.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import CompileError, LaunchFailure

from _cuda_setup import only


def make_add(k):
    @cube.kernel
    def add_k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + k
    return add_k


def make_block_sum(tpb):
    @cube.kernel
    def block_sum(x, out):
        buf = cuda.shared.array(tpb, np.float64)
        t = cuda.threadIdx.x
        buf[t] = x[cuda.grid(1)]
        cuda.syncthreads()
        if t == 0:
            acc = 0.0
            for j in range(tpb):
                acc += buf[j]
            out[cuda.blockIdx.x] = acc
    return block_sum


def _ratio(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] / y[i]


def test_factory_kernels_each_run_their_own_code(client):
    """Two kernels of one factory (a closure value; a closure value sizing a shared array),
    launched one after the other on one client, each give NumPy's answer."""
    x = np.arange(64.0)
    hx = client.create(x)
    for k in (1.0, 2.0):
        out = client.empty(64, np.float64)
        client.launch(make_add(k), 2, 32, hx, out)
        np.testing.assert_array_equal(client.read(out), x + k)
    for tpb in (16, 32):
        out = client.empty(64 // tpb, np.float64)
        client.launch(make_block_sum(tpb), 64 // tpb, tpb, hx, out)
        np.testing.assert_array_equal(client.read(out), x.reshape(-1, tpb).sum(axis=1))


@only("gpu", why="reads the PTX numba-cuda generated")
def test_fastmath_of_a_wrapped_dispatcher_reaches_numba_cuda(client):
    """cube.kernel(cuda.jit(fastmath=True)(f)) is compiled by numba-cuda with fast math (an
    approximate division in its PTX), cube.kernel(f) with IEEE division; both divide."""
    x, y = np.arange(1.0, 65.0, dtype=np.float32), np.full(64, 3.0, np.float32)
    hx, hy = client.create(x), client.create(y)
    cc = cuda.get_current_device().compute_capability
    ptx = {}
    for name, k in (("fast", cube.kernel(cuda.jit(fastmath=True)(_ratio))),
                    ("ieee", cube.kernel(_ratio))):
        out = client.empty(64, np.float32)
        client.launch(k, 2, 32, hx, hy, out)
        np.testing.assert_allclose(client.read(out), x / y, rtol=1e-6)
        entries = [e for key, e in client.server.mechanism.entries.compile_cache.items() if key[0] == k.id]
        ptx[name] = "\n".join(e.compiled.source.inspect_asm(cc) for e in entries)
    assert "div.approx" in ptx["fast"] or "div.full" in ptx["fast"]
    assert "div.rn.f32" in ptx["ieee"]


@only("gpu", "fake", why="the simulator checks every index with NumPy")
def test_boundscheck_kernel_is_refused_like_numba_cuda(client):
    """numba-cuda refuses cuda.jit(boundscheck=True) (its CUDA target never checks bounds): a
    kernel asking for it fails its launch with a CompileError saying so."""
    x = client.create(np.ones(32))
    out = client.empty(32, np.float64)
    client.launch(cube.kernel(make_add(1.0).py_func, boundscheck=True), 1, 32, x, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert isinstance(info.value.root, CompileError)
    assert "bounds checking is not supported for CUDA" in str(info.value.root)


@only("gpu", "fake", why="the simulator backend compiles nothing")
def test_global_changed_after_first_use_is_refused_for_a_new_signature(client):
    """After a global the kernel reads is rebound, a new signature fails with a CompileError
    naming it instead of compiling new code under the kernel's id."""
    def scaled(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] * SCALE      # noqa: F821 - from the globals below

    g = {"cuda": cuda, "SCALE": 2.0}
    k = cube.kernel(types.FunctionType(scaled.__code__, g, "scaled"))
    x = np.arange(32.0)
    out = client.empty(32, np.float64)
    client.launch(k, 1, 32, client.create(x), out)
    np.testing.assert_array_equal(client.read(out), x * 2.0)
    g["SCALE"] = 3.0
    out32 = client.empty(32, np.float32)
    client.launch(k, 1, 32, client.create(x.astype(np.float32)), out32)
    with pytest.raises(LaunchFailure) as info:
        client.read(out32)
    assert isinstance(info.value.root, CompileError)
    assert "global SCALE" in str(info.value.root)
