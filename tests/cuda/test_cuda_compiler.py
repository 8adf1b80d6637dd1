"""Contracts of ``jit_options`` (numba_cube.backends.cuda.kernels.compiler): the ``cuda.jit`` arguments a
kernel is compiled with. The reference is numba-cuda itself: a dispatcher made with them holds the
same target options as the user's own ``cuda.jit`` dispatcher. No GPU needed (nothing compiles).
And of ``image_of``: what of a compiled kernel the on-disk cache (``diskcache.py``) may keep.
"""

from __future__ import annotations

import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.backends.cuda.driver import probe
from numba_cube.errors import CompileError

pytestmark = pytest.mark.skipif(probe.simulating(), reason="needs numba-cuda's real dispatcher")


def _fill(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0


def _jit_options(kernel, client_options):
    from numba_cube.backends.cuda.kernels.compiler import jit_options

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
    exceptions are then read back after each launch: kernels/exceptions.py)."""
    with pytest.raises(NotImplementedError):
        cuda.jit(boundscheck=True)(_fill)                  # numba-cuda's own answer
    with pytest.raises(CompileError, match="bounds checking is not supported for CUDA"):
        _jit_options(cube.kernel(_fill, boundscheck=True), {})
    assert _jit_options(cube.kernel(_fill, boundscheck=False), {}) == {}
    assert _jit_options(cube.kernel(cuda.jit(debug=True, opt=False)(_fill)), {})["debug"] is True
    assert _jit_options(cube.kernel(_fill), {"debug": True})["debug"] is True


# -- image_of: what the on-disk cache may keep of a compiled kernel ------------------------------
# numba-cuda compiles only on a GPU, so its compiled kernel is stood in for by an object with the
# attributes image_of reads; the GPU case (tests/cuda/cases/test_cuda_warm_start.py) uses the
# real one.

class _ObjectCode:
    """What numba-cuda's linker returns (cuda.core's ObjectCode): the bytes and their kind."""

    def __init__(self, code, code_type="cubin"):
        self.code, self.code_type = code, code_type


class _Library:
    def __init__(self, linking_files=(), setup=()):
        self._linking_files = set(linking_files)
        self._setup_functions, self._teardown_functions = list(setup), []

    def get_cubin(self, cc=None):
        return _ObjectCode(b"\x7fELF cubin")

    def get_asm_str(self, cc=None):
        return ".entry _Z4fill"


class _CompiledKernel:
    def __init__(self, library=None, **attrs):
        self._codelibrary = library or _Library()
        self.entry_name = "_Z4fill"
        self.debug, self.shared_memory_carveout = False, None
        for name, value in attrs.items():
            setattr(self, name, value)


def test_image_of_hands_back_the_linked_cubin_and_entry_name():
    """A plain kernel's image is the cubin numba-cuda linked, its mangled entry name and its
    PTX; numba-cuda's own helper files linked in do not stop it."""
    import os

    import numba_cuda

    from numba_cube.backends.cuda.kernels.compiler import image_of

    helper = os.path.join(os.path.dirname(numba_cuda.__file__), "numba", "cuda", "reshape_funcs.cu")
    image = image_of(_CompiledKernel(_Library(linking_files=[helper])))
    assert (image.kind, image.data, image.entry, image.asm) == ("cubin", b"\x7fELF cubin", "_Z4fill",
                                                                ".entry _Z4fill")


@pytest.mark.parametrize("kernel, reason", [
    (_CompiledKernel(debug=True), "debug"),
    (_CompiledKernel(target_context=type("T", (), {"enable_nrt": True})()), "NRT"),
    (_CompiledKernel(_Library(setup=[print])), "setup callbacks"),
    (_CompiledKernel(shared_memory_carveout=50), "carveout"),
    (_CompiledKernel(_Library(linking_files=["/home/user/mine.cu"])), "mine.cu"),
], ids=["debug", "nrt", "setup", "carveout", "user-file"])
def test_image_of_refuses_what_an_image_alone_cannot_reproduce(kernel, reason):
    """What numba-cuda sets up beyond loading the image (a debug kernel's exception flag, NRT,
    module setup callbacks, a carveout), and files whose contents no kernel id covers, make the
    compile uncacheable, with a reason naming it."""
    from numba_cube.backends.cuda.kernels.compiler import image_of

    answer = image_of(kernel)
    assert isinstance(answer, str) and reason in answer
