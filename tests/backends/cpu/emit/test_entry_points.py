"""The entry points around a kernel's chunk (``emit/entry_points.py``): every kernel has a
parallel variant that compiles, a kernel that can raise included, however many parameters it
has, and its failures reach the caller.

Pinned because a guarded parallel variant of a kernel with 23 or more parameters once did not
compile (CPython passes more than 30 arguments as a list turned into a tuple, which Numba cannot
type inside ``try``), and the runtime then ran every launch of such a kernel on one core without
a word: stumpy's 26-parameter ``gpu_stump`` kernel on 16 cores. References: NumPy.
"""

import os

import numpy as np
import pytest
from numba import cuda, types

from numba_cube.backends.cpu.translate import build_program

NCUBES, TPB = 6, 64


pytestmark = pytest.mark.usefixtures("private_cache_dir")


@cuda.jit
def sum_of_26(out, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, n):
    """27 array parameters and a count: the chunk call passes 35 arguments."""
    i = cuda.grid(1)
    if i < n:
        out[i] = a0[i] + a1[i] + a2[i] + a3[i] + a4[i] + a5[i] + a6[i] + a7[i] + a8[i] + a9[i] + a10[i] + a11[i] + a12[i] + a13[i] + a14[i] + a15[i] + a16[i] + a17[i] + a18[i] + a19[i] + a20[i] + a21[i] + a22[i] + a23[i] + a24[i] + a25[i]


def _arguments(n_out: int, n: int):
    rng = np.random.default_rng(3)
    inputs = [rng.random(NCUBES * TPB) for _ in range(26)]
    return np.zeros(n_out), inputs, n


def _signature(out, inputs, n):
    array = types.Array(types.float64, 1, "C")
    return (types.int64,) * 6 + (array,) * 27 + (types.int64,)


@pytest.mark.parametrize("boundscheck", [True, False], ids=["checked", "unchecked"])
def test_the_parallel_variant_of_a_kernel_with_many_parameters_compiles_and_answers(boundscheck):
    """Checked (the guarded form: the kernel can raise) or not, the parallel variant compiles
    for a kernel whose chunk takes 35 arguments, and its launch gives NumPy's sums."""
    prog = build_program(sum_of_26.py_func, boundscheck=boundscheck)
    out, inputs, n = _arguments(NCUBES * TPB, NCUBES * TPB - 5)
    prog.parallel.compile(_signature(out, inputs, n))
    prog.parallel(NCUBES, 1, 1, TPB, 1, 1, out, *inputs, n)
    np.testing.assert_allclose(out[:n], np.sum(inputs, axis=0)[:n], rtol=1e-12)
    assert not out[n:].any()


def test_an_index_out_of_bounds_in_the_parallel_variant_raises_index_error():
    """A checked launch whose count runs past ``out`` raises ``IndexError`` from the parallel
    variant (the failed piece re-run serially), as the serial variant does."""
    prog = build_program(sum_of_26.py_func, boundscheck=True)
    out, inputs, _ = _arguments(NCUBES * TPB - 10, 0)
    for variant in (prog.parallel, prog.serial):
        with pytest.raises(IndexError):
            variant(NCUBES, 1, 1, TPB, 1, 1, out, *inputs, NCUBES * TPB)


def test_a_client_launch_of_many_parameters_takes_the_parallel_variant(run_script):
    """Through the runtime, with ``NUMBA_CUBE_SERIAL_UNITS`` fixing the parallel variant for any
    launch of more than one cube, a checked launch of the 28-parameter kernel answers as NumPy
    (it used to fail with a CompileError: the parallel variant did not compile)."""
    script = f"""
import sys
sys.path.insert(0, {os.path.dirname(__file__)!r})
import numpy as np
import numba_cube as cube
from test_entry_points import sum_of_26, _arguments, NCUBES, TPB
client = cube.client("cpu:63")
out, inputs, n = _arguments(NCUBES * TPB, NCUBES * TPB)
d_out = client.create(out)
client.launch(sum_of_26, NCUBES, TPB, d_out, *[client.create(a) for a in inputs], n)
print(bool(np.allclose(client.read(d_out), np.sum(inputs, axis=0), rtol=1e-12)))
"""
    assert run_script(script, env={"NUMBA_CUBE_SERIAL_UNITS": "1"}) == "True"
