"""Kernels written against numba-cuda-mlir (``from numba_cuda_mlir import cuda``), NVIDIA's
successor to numba-cuda, run on the CPU backend like numba.cuda's (``kernel/dialects.py``).

numba-cuda-mlir installs and imports without a GPU (its ``cuda.jit`` is lazy), so these tests
use the real package: its module, its builtins, its own copies of Numba's type objects and its
dispatchers. Expected values are NumPy's.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

if sys.version_info < (3, 11) or sys.platform != "linux":    # its wheels: CPython >= 3.11, Linux
    pytest.importorskip("numba_cuda_mlir")
from numba_cuda_mlir import cuda  # noqa: E402
from numba_cuda_mlir.cuda import float32, local, shared, syncthreads, threadIdx  # noqa: E402

import numba_cube as cube  # noqa: E402
from numba_cube.kernel import dialects  # noqa: E402
from dtype_walk import expected_values, run_every_type, write_kernel  # noqa: E402

#: numba-cuda-mlir's scalar types without a NumPy dtype, hence without CPU arithmetic here
CPU_REFUSED = {"bfloat16", "complex32"}


def mlir_scalar_types() -> dict[str, object]:
    """numba-cuda-mlir's exported scalar type objects (its copies of Numba's), by name."""
    return {name: getattr(cuda, name) for name in sorted(dir(cuda))
            if not name.startswith("_") and dialects.is_scalar_type_object(getattr(cuda, name))}


def test_its_types_are_its_own_objects_and_map_to_numbas():
    """numba-cuda-mlir's ``cuda.float32`` is not ``numba.float32`` (its own copy); the dialect
    maps each scalar type with a NumPy dtype to Numba's type of that dtype."""
    import numba

    assert cuda.float32 is not numba.float32 and str(cuda.float32) == "float32"
    types = mlir_scalar_types()
    assert {"float32", "int64", "boolean", "complex64", "uint8"} <= set(types)
    for name, value in types.items():
        mapped = dialects.numba_scalar_type(value)
        if name in CPU_REFUSED:
            continue
        assert mapped is not None, name
        assert numba.np.numpy_support.as_dtype(mapped) == np.dtype(str(value)), name


def test_every_scalar_type_it_exports_is_an_array_dtype_and_a_cast(tmp_path):
    """Every scalar type object numba-cuda-mlir's ``cuda`` exports (one name per distinct
    type) works as the dtype of shared and local arrays, by keyword and positionally, and as a
    cast, with NumPy's conversions of the same inputs."""
    first: dict[str, str] = {}
    for name, value in mlir_scalar_types().items():
        if name not in CPU_REFUSED:
            first.setdefault(str(value), name)
    names = sorted(first.values())
    kernel = write_kernel(tmp_path, "mlir_type_walk", "from numba_cuda_mlir import cuda", names)
    x = np.array([0.0, 1.75, 2.5, 100.25])
    got = run_every_type(kernel, len(names), x)
    dtypes = [np.dtype(str(getattr(cuda, n))) for n in names]
    np.testing.assert_array_equal(got, expected_values(dtypes, x))


@cuda.jit(device=True)
def stage_in_dynamic(t, value):
    """Dynamic shared memory declared in a device function, by keyword (as cubie does)."""
    scratch = cuda.shared.array(shape=0, dtype=cuda.float32)
    scratch[t] = value
    return scratch


def block_sums(x, out, hits):
    """Reverse each cube's slice through dynamic shared memory (declared in a device function
    and again, aliasing it, in the kernel), add a static shared buffer's neighbour, count units
    with an atomic."""
    tile = cuda.shared.array(shape=(4,), dtype=cuda.float32, alignas=16)
    again = cuda.shared.array(0, cuda.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = cuda.float32(i) * 2
    stage_in_dynamic(t, x[i])
    cuda.syncthreads()
    out[i] = again[cuda.blockDim.x - 1 - t] + tile[(t + 1) % 4]
    cuda.atomic.add(hits, 0, 1)


@pytest.mark.parametrize("wrap", ["function", "dispatcher"])
def test_a_kernel_written_against_numba_cuda_mlir_runs(wrap):
    """A kernel using numba-cuda-mlir's builtins (grid, threadIdx, syncthreads, shared arrays by
    keyword, dynamic shared memory in a device function, atomics, casts with its types) runs on
    the CPU backend, given as a plain function or as its ``cuda.jit`` dispatcher, with NumPy's
    values; the IO analysis reads x, writes out, reads and writes hits; the kernel's id is the
    same in every process (its type objects and options have faithful encodings), so on-disk
    caches serve it."""
    kernel = cube.kernel(block_sums if wrap == "function" else cuda.jit(block_sums))
    x = np.arange(8, dtype=np.float32) + 0.5
    with cube.stream():
        client = cube.client("cpu")
        hx, out, hits = client.create(x), client.empty(8, np.float32), client.create(
            np.zeros(1, np.int64))
        client.launch(kernel, 2, 4, hx, out, hits, shared_bytes=4 * 4)
        got, counted = client.read(out), client.read(hits)
    i = np.arange(8)
    expected = x.reshape(2, 4)[:, ::-1].ravel() + ((i // 4) * 4 + (i + 1) % 4) * 2
    np.testing.assert_array_equal(got, expected.astype(np.float32))
    assert counted[0] == 8
    assert kernel.io(x, x, np.zeros(1, np.int64)) == {"x": "r", "out": "w", "hits": "rw"}
    assert kernel.id_is_stable


def reverse_by_imported_names(out):
    """Names imported from numba-cuda-mlir's module (its shared/local namespaces are modules)."""
    tile = shared.array(shape=4, dtype=float32)
    own = local.array(2, float32)
    t = threadIdx.x
    tile[t] = t * 2.0
    syncthreads()
    own[0] = tile[3 - t]
    out[t] = own[0]


def test_names_imported_from_its_module_are_its_builtins():
    """``from numba_cuda_mlir.cuda import shared, local, threadIdx, ...``: ``shared.array`` is
    ``cuda.shared.array`` (numba-cuda-mlir makes those namespaces modules, numba.cuda classes),
    with NumPy's values and the IO analysis's write."""
    kernel = cube.kernel(reverse_by_imported_names)
    with cube.stream():
        client = cube.client("cpu")
        out = client.empty(4, np.float32)
        client.launch(kernel, 1, 4, out)
        np.testing.assert_array_equal(client.read(out), np.arange(4.0)[::-1] * 2)
    assert kernel.io(np.zeros(4, np.float32)) == {"out": "w"}


def test_a_type_without_cpu_arithmetic_is_refused_naming_it():
    """numba-cuda-mlir's ``complex32`` (no NumPy dtype) as an array dtype: a CompileError naming
    the type and the line."""

    @cube.kernel
    def small_complex(out):
        s = cuda.local.array(2, dtype=cuda.complex32)
        out[0] = s[0].real

    with pytest.raises(cube.CompileError, match="complex32") as info:
        small_complex[1, 1](np.zeros(1, np.float32))
    assert info.value.lineno == small_complex.py_func.__code__.co_firstlineno + 2


def test_its_dispatchers_options_are_read_by_numba_cudas_names():
    """``cube.kernel(cuda.jit(f, **options))`` with numba-cuda-mlir's ``cuda.jit`` keeps the
    options that differ from its defaults, by numba-cuda's names (``fastmath``, ``debug``,
    ``opt``, ``max_registers``, ...), as for numba-cuda's dispatchers; a device function is no
    kernel."""
    assert dict(cube.kernel(cuda.jit(block_sums)).options) == {}
    options = {"fastmath": True, "debug": True, "opt": False, "max_registers": 32}
    assert dict(cube.kernel(cuda.jit(block_sums, **options)).options) == options
    with pytest.raises(cube.CompileError, match="device function"):
        cube.kernel(cuda.jit(device=True)(block_sums))
