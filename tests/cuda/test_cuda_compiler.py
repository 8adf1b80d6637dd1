"""Contracts of ``jit_options`` (numba_cube.backends.cuda.compiler): the ``cuda.jit`` arguments a
kernel is compiled with. The reference is numba-cuda itself: a dispatcher made with them holds the
same target options as the user's own ``cuda.jit`` dispatcher. No GPU needed (nothing compiles).
"""

from __future__ import annotations

import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.backends.cuda import probe
from numba_cube.errors import CompileError

pytestmark = pytest.mark.skipif(probe.simulating(), reason="needs numba-cuda's real dispatcher")


def _fill(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0


def _jit_options(kernel, client_options):
    from numba_cube.backends.cuda.compiler import jit_options

    return jit_options(kernel, client_options)


@pytest.mark.parametrize("options", [
    {"fastmath": True},
    {"max_registers": 40, "lineinfo": True},
    {"opt": False, "launch_bounds": (128, 2)},
    {"inline": "always", "forceinline": True},
])
def test_kernel_compiles_with_the_dispatchers_options(options):
    """cube.kernel(cuda.jit(**o)(f)) compiles with arguments that make numba-cuda build a
    dispatcher with exactly the target options of cuda.jit(**o)(f)."""
    original = cuda.jit(**options)(_fill)
    rebuilt = cuda.jit(**_jit_options(cube.kernel(original), {}))(_fill)
    assert rebuilt.targetoptions == original.targetoptions


def test_client_options_win_and_client_boundscheck_is_ignored():
    """A client's cuda.jit option wins over the kernel's; a client's boundscheck (the CPU
    backend's option) does not reach cuda.jit."""
    k = cube.kernel(cuda.jit(fastmath=True, max_registers=40)(_fill))
    rebuilt = cuda.jit(**_jit_options(k, {"fastmath": False, "boundscheck": True}))(_fill)
    assert rebuilt.targetoptions == cuda.jit(fastmath=False, max_registers=40)(_fill).targetoptions


def test_boundscheck_is_refused_and_debug_passes_through():
    """boundscheck=True is refused as numba-cuda refuses it; boundscheck=False is dropped (it
    changes nothing on CUDA); debug=True reaches cuda.jit, the kernel's or a client's (its
    exceptions are then read back after each launch: kernel_exceptions.py)."""
    with pytest.raises(NotImplementedError):
        cuda.jit(boundscheck=True)(_fill)                  # numba-cuda's own answer
    with pytest.raises(CompileError, match="bounds checking is not supported for CUDA"):
        _jit_options(cube.kernel(_fill, boundscheck=True), {})
    assert _jit_options(cube.kernel(_fill, boundscheck=False), {}) == {}
    assert _jit_options(cube.kernel(cuda.jit(debug=True, opt=False)(_fill)), {})["debug"] is True
    assert _jit_options(cube.kernel(_fill), {"debug": True})["debug"] is True
