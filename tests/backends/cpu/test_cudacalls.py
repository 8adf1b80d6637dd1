"""Messages of ``backends/cpu/cudacalls.py`` for CUDA names it does not lower: a name numba.cuda
does not have at all (a typo) is "unknown" with the close names, not "not supported"."""

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
    from numba_cube.backends.cpu.cudacalls import unknown_cuda_name

    assert unknown_cuda_name("grid") is None
    assert unknown_cuda_name("atomic.add") is None
    assert "did you mean cuda.syncthreads" in unknown_cuda_name("syncthread")
    assert unknown_cuda_name("zzzz_qqq").endswith("has no attribute 'zzzz_qqq'")
