"""``frontend/decompiler/flow.py``: the control flow of kernels without source, re-nested from the IR.

Kernels made with ``exec`` (no source anywhere) with for and while loops, ``continue``,
``break``, early returns, nested loops and barriers inside loops are built with
``build_program`` and run in both generated variants against the same loops run in Python or
NumPy; what cannot be re-nested is refused by name.
"""

import textwrap

import numpy as np
import pytest
from numba import cuda, float64

from numba_cube.backends.cpu.translate import build_program
from numba_cube.errors import CompileError

from sourceless_helpers import VARIANTS, cache_dir, launch, made, rng  # noqa: F401 (fixtures)


LOOPS_SRC = """
    def loops(a, out, n):
        i = cuda.grid(1)
        if i >= out.size:
            return
        s = 0.0
        for j in range(n):
            if j == i:
                continue
            if a[j] > 0.9:
                break
            s += a[j]
        k = 0
        while k < i:
            k += 3
        for p in range(2):
            for q in range(p, 3):
                if q == 2 and i % 2:
                    break
                s += p * q
        for j in range(n):
            if a[j] < 0.01:
                out[i] = -1.0
                return
        out[i] = s + k
"""
LOOPS = made(LOOPS_SRC)


def loops_reference(a, size, n):
    """The same kernel body run per unit in Python (``loops`` is plain Python too)."""
    ns = {"cuda": None}
    exec(textwrap.dedent(LOOPS_SRC).replace("i = cuda.grid(1)", "i = unit"), ns)
    out = np.zeros(size)
    for unit in range(size):
        ns["unit"] = unit
        ns["loops"](a, out, n)
    return out


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("small", [False, True])
def test_loops_continue_break_and_returns(variant, small, rng):
    """for loops with continue and break, a while loop, nested loops breaking the inner one,
    and a return from inside a loop behave as the same code run in Python."""
    a = rng.random(50) + (0.0 if small else 0.02)
    if small:
        a[30] = 0.001                   # the return inside the last loop is taken
    out = np.zeros(40)
    launch(build_program(LOOPS["loops"]), variant, (2,), (32,), a, out, 50)
    np.testing.assert_allclose(out, loops_reference(a, 40, 50))


BARRIERS = made("""
    def block_sum(a, out):
        buf = cuda.shared.array(64, float64)
        tid = cuda.threadIdx.x
        i = cuda.grid(1)
        buf[tid] = a[i] if i < a.size else 0.0
        cuda.syncthreads()
        stride = 32
        while stride > 0:
            if tid < stride:
                buf[tid] += buf[tid + stride]
            cuda.syncthreads()
            stride //= 2
        if tid == 0:
            out[cuda.blockIdx.x] = buf[0]

    def rounds(a, out):
        buf = cuda.shared.array(64, float64)
        tid = cuda.threadIdx.x
        buf[tid] = a[tid]
        for r in range(3):
            cuda.syncthreads()
            v = buf[(tid + 1) % 64]
            cuda.syncthreads()
            buf[tid] = v + r
        out[tid] = buf[tid]
""")


@pytest.mark.parametrize("variant", VARIANTS)
def test_barriers_in_while_and_for_loops(variant, rng):
    """An exec'd tree reduction (barriers inside a while loop over a cube-uniform stride) and
    rounds of neighbour exchange (barriers inside a for loop) give NumPy's sums and rolls."""
    a = rng.random(200)
    out = np.zeros(4)
    launch(build_program(BARRIERS["block_sum"]), variant, (4,), (64,), a, out)
    np.testing.assert_allclose(out, [a[k * 64:(k + 1) * 64].sum() for k in range(4)])
    b = rng.random(64)
    out = np.zeros(64)
    launch(build_program(BARRIERS["rounds"]), variant, (1,), (64,), b, out)
    np.testing.assert_allclose(out, np.roll(b, -3) + 3.0)


def test_for_else_with_break_is_refused():
    """A for/else whose loop also breaks has two exits that continue: refused by name, at the
    loop's line."""
    ns = made("""
        def k(a):
            for j in range(3):
                if a[j] > 0:
                    break
            else:
                a[0] = 1
            a[1] = 2
    """)
    with pytest.raises(CompileError) as info:
        build_program(ns["k"])
    assert "several exits" in info.value.construct
    assert info.value.filename == "<string>"
