"""Dynamic shared memory on the CPU backend (``backends/cpu/lower/dynamic_shared.py``).

``cuda.shared.array(0, dtype)`` is a view of one per-cube buffer of the launch's size; every
such declaration aliases it with its own dtype (``nbytes // itemsize`` elements); slices are
views; the size is a run-time parameter of the compiled kernel, not a recompile. Expected values
are NumPy's (or numba-cuda's rules, which the docstring of ``lower/dynamic_shared.py`` quotes).
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32, float64, int32

import numba_cube as cube
from numba_cube.backends.cpu.translate import translate_source
from numba_cube.errors import CompileError, LaunchFailure


@pytest.fixture
def client():
    with cube.stream():
        yield cube.client("cpu")


@cube.kernel
def slices_of_dynamic(out):
    dyn = cuda.shared.array(0, int32)
    gaps = dyn[1:3]
    backwards = dyn[5:3:-1]
    strided = dyn[6::2]
    for k in range(dyn.size):
        dyn[k] = 99
    gaps[0] = 1
    gaps[1] = 2
    backwards[0] = 3
    backwards[1] = 4
    strided[0] = 5
    strided[1] = 6
    for k in range(out.size):
        out[k] = dyn[k]


def test_slices_are_views_of_the_one_buffer(client):
    """Slices of a dynamic shared array (plain, backwards, strided) write through to it, and
    nothing outside them: the result is what NumPy gives for the same slicing."""
    out = client.empty(10, np.int32)
    client.launch(slices_of_dynamic, 1, 1, out, shared_bytes=10 * 4)
    expected = np.full(10, 99, np.int32)
    expected[1:3] = [1, 2]
    expected[5:3:-1] = [3, 4]
    expected[6::2][:2] = [5, 6]
    np.testing.assert_array_equal(client.read(out), expected)


@cube.kernel
def alias_and_sizes(bits, as_float, sizes):
    ints = cuda.shared.array(0, int32)
    floats = cuda.shared.array(0, float32)
    wide = cuda.shared.array(shape=(0,), dtype=float64)
    t = cuda.threadIdx.x
    if t < ints.size:
        ints[t] = bits[t]
    cuda.syncthreads()
    if t < floats.size:
        as_float[t] = floats[t]
    if t == 0:
        sizes[0] = ints.size
        sizes[1] = floats.size
        sizes[2] = wide.size


@pytest.mark.parametrize("nbytes", [0, 3, 16, 8 * 4 + 3])
def test_declarations_alias_and_count_whole_items(client, nbytes):
    """Every declaration (``0`` or ``shape=(0,)``) views the same bytes with its own dtype, with
    ``nbytes // itemsize`` elements (a size that is not a multiple of the itemsize rounds
    down, as numba-cuda computes the shape); 0 bytes give empty arrays."""
    bits = np.arange(1, 9, dtype=np.float32).view(np.int32)
    hf = client.create(np.full(8, -1.0, np.float32))
    hs = client.empty(3, np.int64)
    client.launch(alias_and_sizes, 1, 8, client.create(bits), hf, hs, shared_bytes=nbytes)
    n = nbytes // 4
    expected = np.full(8, -1.0, np.float32)
    expected[:n] = bits.view(np.float32)[:n]
    np.testing.assert_array_equal(client.read(hf), expected)
    assert client.read(hs).tolist() == [nbytes // 4, nbytes // 4, nbytes // 8]


@cube.kernel
def reverse_blocks(x, out):
    buf = cuda.shared.array(0, float64)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    i = cuda.blockIdx.x * n + t
    buf[t] = x[i]
    cuda.syncthreads()
    out[i] = buf[n - 1 - t]


@pytest.mark.parametrize("cubes", [3, 2048])
def test_each_cube_has_its_own_dynamic_memory(client, cubes):
    """Cubes do not share dynamic shared memory, in the serial variant (a few cubes) and in the
    parallel one (many cubes over worker chunks): each reverses its own block like NumPy."""
    tpb = 32
    x = np.random.default_rng(1).random(cubes * tpb)
    out = client.empty(x.size, np.float64)
    client.launch(reverse_blocks, cubes, tpb, client.create(x), out, shared_bytes=tpb * 8)
    np.testing.assert_array_equal(client.read(out), x.reshape(cubes, tpb)[:, ::-1].reshape(-1))


@cube.kernel
def report_size(out):
    dyn = cuda.shared.array(0, np.uint8)
    out[0] = dyn.size


def test_size_is_a_run_time_parameter_not_a_recompile(client):
    """Launches with other sizes reuse the compiled kernel (the size is an argument of the
    generated function): no compile after the first."""
    out = client.empty(1, np.int64)
    client.launch(report_size, 1, 1, out, shared_bytes=5)
    assert client.read(out)[0] == 5
    compiles = client.server.stats["compiles"]
    for nbytes in (0, 17, 4096):
        client.launch(report_size, 1, 1, out, shared_bytes=nbytes)
        assert client.read(out)[0] == nbytes
    assert client.server.stats["compiles"] == compiles


def _plain(out):
    sm = cuda.shared.array(4, float32)
    sm[0] = 1.0
    out[0] = sm[0]


def test_kernels_without_dynamic_memory_keep_their_signature():
    """Only a kernel that declares dynamic shared memory takes the size: the generated text of
    any other kernel has no such parameter (its cache entries stay valid)."""
    assert "__dsb" not in translate_source(_plain)
    assert "__dsb" in translate_source(report_size.py_func)


def test_out_of_bounds_of_an_empty_dynamic_array_is_an_ordinary_out_of_bounds():
    """A kernel that declares dynamic shared memory launched without any gets an empty array
    (as numba-cuda gives it); indexing it is out of bounds like any other index: with bounds
    checking, an ``IndexError`` recorded on the launch's write set."""
    checked = cube.client("cpu", boundscheck=True)
    out = checked.empty(1, np.int64)
    checked.launch(report_size, 1, 1, out)
    assert checked.read(out)[0] == 0

    @cube.kernel
    def touch(out):
        dyn = cuda.shared.array(0, int32)
        dyn[0] = 1
        out[0] = dyn[0]

    checked.launch(touch, 1, 1, out)
    with pytest.raises(LaunchFailure) as info:
        checked.read(out)
    assert isinstance(info.value.root, IndexError)


def _zero_sized_2d(out):
    sm = cuda.shared.array((0, 4), float32)
    out[0] = sm.size


def _zero_sized_local(out):
    lc = cuda.local.array(0, float32)
    out[0] = lc.size


@pytest.mark.parametrize("fn, construct", [(_zero_sized_2d, "cuda.shared.array of size <= 0"),
                                           (_zero_sized_local, "cuda.local.array of size <= 0")])
def test_other_empty_arrays_are_refused(fn, construct):
    """Only a 1-D shared array of size 0 is dynamic shared memory; any other array without
    elements is refused at compile time, as numba-cuda refuses it ('array length <= 0')."""
    with pytest.raises(CompileError) as info:
        translate_source(fn)
    assert info.value.construct == construct


def test_device_functions_declare_the_same_dynamic_memory_as_the_kernel(client):
    """``cuda.shared.array(shape=0, dtype=...)`` in device functions (and by keyword in the
    kernel) is the launch's one dynamic buffer, each declaration with its own dtype, sized by the
    launch (``kernel[grid, block, stream, nbytes]``'s 4th element, ``shared_bytes``): the
    outputs equal numba-cuda's simulator's for the same program and NumPy's view of the bytes."""
    import json
    import os
    import pathlib
    import subprocess
    import sys

    import dynamic_shared_cases as case

    script = pathlib.Path(case.__file__)
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=script.parent, timeout=300)
    assert proc.returncode == 0, proc.stderr
    simulated = json.loads(proc.stdout.strip().splitlines()[-1])

    x, bits, back, sizes = (client.create(a) for a in case.inputs())
    kernel = cube.kernel(case.through_device_functions)
    client.launch(kernel, 1, case.N, x, bits, back, sizes, shared_bytes=case.NBYTES)
    got = {"bits": client.read(bits).tolist(), "back": client.read(back).tolist(),
           "sizes": client.read(sizes).tolist()}
    assert got == simulated
    staged = case.inputs()[0]
    assert got["bits"] == staged.view(np.int32).tolist()
    assert got["back"] == staged[::-1].tolist() and got["sizes"] == [case.N, case.N]
    numba_style = client.empty(case.N, np.float32)
    kernel[1, case.N, 0, case.NBYTES](x, bits, numba_style, sizes)
    assert client.read(numba_style).tolist() == got["back"]
