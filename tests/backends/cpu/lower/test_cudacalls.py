"""Messages of ``backends/cpu/lower/cuda_calls.py`` for CUDA names it does not lower: a name
numba.cuda does not have at all (a typo) is "unknown" with the close names, not "not supported"."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


@cube.kernel
def misspelt_grid(out):
    i = cuda.gird(1)
    out[i] = 1.0


@cube.kernel
def misspelt_atomic(out):
    cuda.atomic.ad(out, 0, 1.0)


@pytest.mark.parametrize("kernel,name,suggestion", [
    (misspelt_grid, "cuda.gird", "cuda.grid"),
    (misspelt_atomic, "cuda.atomic.ad", "cuda.atomic.add"),
])
def test_a_misspelt_cuda_name_is_unknown_with_close_names(kernel, name, suggestion):
    """A name numba.cuda itself lacks is a CompileError that says "unknown", names the kernel's
    line, and offers the close names of numba.cuda (difflib), instead of "not supported"."""
    assert not hasattr(cuda, "gird") and hasattr(cuda, "grid")   # the reference: numba.cuda's names
    with pytest.raises(cube.CompileError) as info:
        kernel[1, 4](np.zeros(4))
    message = str(info.value)
    assert f"{name}: unknown name" in message and f"did you mean {suggestion}" in message
    assert "not supported" not in message
    assert __file__ in message and "line" in message


def test_a_real_cuda_name_the_cpu_lacks_is_still_not_supported():
    """A name numba.cuda has but the CPU backend does not lower keeps the "not supported (CPU
    backend)" message: it is no typo."""
    from numba_cube.backends.cpu.lower.cuda_calls import unknown_cuda_name

    assert unknown_cuda_name("grid") is None
    assert unknown_cuda_name("atomic.add") is None
    assert "did you mean cuda.syncthreads" in unknown_cuda_name("syncthread")
    assert unknown_cuda_name("zzzz_qqq").endswith("has no attribute 'zzzz_qqq'")


# ---- cuda.shared.array / cuda.local.array arguments, as numba-cuda binds them -----------------

@cube.kernel
def declared_every_way(x, out):
    by_keyword = cuda.shared.array(shape=4, dtype=cuda.float32)
    reversed_keywords = cuda.local.array(dtype=cuda.float64, shape=(2, 3))
    mixed = cuda.local.array(3, dtype=np.int32)
    aligned = cuda.shared.array(4, cuda.float32, 16)
    aligned_by_keyword = cuda.local.array(shape=2, dtype="float64", alignment=64)
    constant = cuda.const.array_like(ndarray=x)
    t = cuda.threadIdx.x
    by_keyword[t] = constant[t] * 2
    aligned[t] = constant[t] + 1
    reversed_keywords[1, 2] = constant[t] - 1
    mixed[2] = t
    aligned_by_keyword[1] = 0.5
    cuda.syncthreads()
    out[t] = (by_keyword[3 - t] + aligned[3 - t] + reversed_keywords[1, 2] + mixed[2]
              + aligned_by_keyword[1])


def test_array_declarations_take_numba_cudas_keywords_and_alignment():
    """``cuda.shared.array`` / ``cuda.local.array`` take ``shape=``, ``dtype=`` (in any order,
    mixed with positional arguments) and an ``alignment`` (positional or keyword), and
    ``cuda.const.array_like`` its ``ndarray=`` keyword, as numba-cuda's typing binds them: the
    values are NumPy's."""
    x = np.array([1.0, 2.5, -3.0, 4.0])
    out = np.zeros(4)
    declared_every_way[1, 4](x, out)
    rev = x[::-1]
    np.testing.assert_array_equal(out, rev * 2 + rev + 1 + (x - 1) + np.arange(4) + 0.5)


@cube.kernel
def misaligned(out):
    s = cuda.shared.array(4, cuda.float32, alignment=12)
    out[0] = s[0]


@cube.kernel
def unknown_keyword(out):
    s = cuda.local.array(4, cuda.float32, order="C")
    out[0] = s[0]


@cube.kernel
def shape_twice(out):
    s = cuda.local.array(4, cuda.float32, shape=4)
    out[0] = s[0]


@pytest.mark.parametrize("kernel,words", [
    (misaligned, "constant power of two that is a multiple of 8"),
    (unknown_keyword, "unexpected keyword argument 'order'"),
    (shape_twice, "multiple values for argument 'shape'"),
])
def test_bad_array_declaration_arguments_are_refused_with_the_line(kernel, words):
    """An alignment numba-cuda refuses (not a power of two multiple of 8), a keyword it does not
    take, or an argument given twice: a CompileError saying so, at the declaration's line."""
    with pytest.raises(cube.CompileError, match=words) as info:
        kernel[1, 1](np.zeros(1, np.float32))
    assert info.value.lineno == kernel.py_func.__code__.co_firstlineno + 2    # (decorator)
