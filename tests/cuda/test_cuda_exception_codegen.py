"""What numba_cube asks numba-cuda to compile for kernels that raise (``exception_codegen.py``).

numba-cuda lowers a kernel to LLVM IR without a GPU (only NVVM, which turns it into PTX, needs
the CUDA toolkit), so the transformation is checked here on the IR itself: numba-cuda's own
lowering (``compile_cuda``), then its ``kernel_fixup`` as numba_cube wraps it, then LLVM's
verifier. The device is faked only where numba-cuda asks for the current device's compute
capability (compiling a device function).

(PYTEST_DONT_REWRITE: pytest's assertion rewriting would turn the ``assert`` inside a kernel
below into a call numba cannot compile.)
"""

from __future__ import annotations

import pytest

pytest.importorskip("numba_cuda")

from numba import cuda, types  # noqa: E402

from numba_cube.backends.cuda.kernels import compiler as cube_compiler  # noqa: E402
from numba_cube.backends.cuda.kernels import exception_codegen as codegen  # noqa: E402

ARRAY = types.Array(types.int64, 1, "C")


@cuda.jit(device=True)
def _raises_in_device(v):
    if v > 2:
        raise KeyError("from the device function")
    return v + 1


@cuda.jit(device=True)
def _safe_device(v):
    return v + 1


def _raising(out, x):
    i = cuda.grid(1)
    if i < out.size:
        if x[i] < 0:
            raise ValueError("negative input")
        assert x[i] != 7, "seven"
        out[i] = _raises_in_device(x[i])


def _raising_alone(out, x):
    i = cuda.grid(1)
    if i < out.size:
        if x[i] < 0:
            raise ValueError("negative input")
        out[i] = x[i]


def _calls_safe(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _safe_device(x[i])


def _plain(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + 1


class _Device:
    compute_capability = (9, 0)


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch):
    import numba.cuda.dispatcher as dispatcher

    monkeypatch.setattr(dispatcher, "get_current_device", lambda: _Device())


def _lowered(py_func, debug=False, lineinfo=False):
    """numba-cuda's kernel function (still returning its status) and its code library."""
    from numba.cuda.compiler import compile_cuda

    cres = compile_cuda(py_func, types.void, (ARRAY, ARRAY), debug=debug, lineinfo=lineinfo,
                        cc=(9, 0))
    return cres, cres.library.get_function(cres.fndesc.llvm_func_name)


def _fixed(py_func, record=True, debug=False, lineinfo=False):
    """Lower and fix up ``py_func`` as numba-cuda's ``_Kernel`` does, inside the window."""
    import sys

    from numba.cuda.dispatcher import _Kernel

    with codegen.compiling(record=record) as found:
        cres, fn = _lowered(py_func, debug, lineinfo)
        sys.modules[_Kernel.__module__].kernel_fixup(fn, debug)
    return cres, fn, found


def _verify(fn) -> None:
    """LLVM's verifier, and every typed reference to the kernel (``@llvm.used``, the NVVM
    annotations) of the kernel's final type: NVVM reads typed pointers, where LLVM's own parser
    upgrades them to opaque ones and would not see a stale reference."""
    import re

    import llvmlite.binding as llvm

    text = str(fn.module)
    llvm.parse_assembly(text).verify()
    prototype = re.search(r'define void @"?' + re.escape(fn.name) + r'"?\((.*)\)', text).group(1)
    params = [p.rsplit(" ", 1)[0] for p in prototype.split(", ")]
    references = re.findall(r'void \(([^()]*)\)\* @"?' + re.escape(fn.name) + '"?', text)
    assert references and all(r.split(", ") == params for r in references), (params, references)


@pytest.mark.parametrize("lineinfo", [False, True])
def test_a_kernel_that_can_raise_stores_its_status_in_a_trailing_word(lineinfo):
    """Its last parameter is the error word; the raise paths store their status there; the IR
    verifies (also with line info); the fixup reports it, and numba-cuda's own parameters are
    unchanged before it."""
    _, plain_fn, _ = _fixed(_plain)
    cres, fn, found = _fixed(_raising, lineinfo=lineinfo)
    fixup, = found
    assert fixup.entry == fn.name and fixup.word
    assert fn.args[-1].name == codegen.WORD_PARAM
    assert [a.type for a in fn.args[:-1]] == [a.type for a in plain_fn.args]
    text = str(fn)
    assert text.count(f'%"{codegen.WORD_PARAM}"') >= 3          # prototype and the stores
    _verify(fn)
    assert fixup.may_raise(cres.library.modules)


def test_exception_ids_are_unique_and_decode_to_the_exception_as_written():
    """Ids come from one counter above ``ID_BASE`` for kernel and device functions alike, so a
    status a device function returns names its own exception; decoding gives the class and the
    message as written (no location prefix)."""
    cres, _, _ = _fixed(_raising)
    own = cres.call_helper.exceptions
    assert min(own) >= codegen.ID_BASE
    kinds = {codegen.decode(code, None).__class__ for code in own}
    assert kinds == {ValueError, AssertionError}
    assert str(codegen.decode(min(own), None)) == "negative input"
    device = [c for c, (cls, _, _) in codegen.EXCEPTIONS.items() if cls is KeyError]
    assert device and not set(device) & set(own)
    assert isinstance(codegen.decode(3, None), SystemError)          # numbered elsewhere


def test_which_kernels_can_raise_looks_through_device_functions():
    """A kernel returning a device function's status can raise only if that function can; a
    kernel with neither gets no word at all."""
    cres, _, (fixup,) = _fixed(_calls_safe)
    assert fixup.word and not fixup.may_raise(cres.library.modules)
    cres, fn, (fixup,) = _fixed(_plain)
    assert not fixup.word and not fixup.may_raise(cres.library.modules)
    assert fn.args[-1].name != codegen.WORD_PARAM
    _verify(fn)


def test_observing_only_adds_nothing():
    """``compiling(record=False)`` (the user's own dispatcher) reports the kernel without
    changing its parameters: numba-cuda can still launch it."""
    _, fn, (fixup,) = _fixed(_raising, record=False)
    assert not fixup.word and fn.args[-1].name != codegen.WORD_PARAM


def test_debug_and_the_world_outside_the_window_are_numba_cudas():
    """With debug=True numba-cuda's own fixup runs (its exception globals, no word, nothing
    reported); outside the window ids are numba-cuda's own again (from 1)."""
    _, fn, found = _fixed(_raising, debug=True)
    assert found == [] and fn.args[-1].name != codegen.WORD_PARAM
    assert "__errcode__" in str(fn.module)
    cres, _ = _lowered(_raising_alone)
    assert min(cres.call_helper.exceptions) == 1


class _Kernel:
    """numba-cuda's compiled kernel, as ``_compile`` reads it."""

    def __init__(self, entry, modules=(), debug=False):
        self.entry_name = entry
        self.debug = debug
        self._codelibrary = type("Lib", (), {"modules": list(modules)})()


class _Dispatcher:
    """Compiles by running the wrapped fixup on a lowered kernel, as ``_Kernel.__init__`` does."""

    def __init__(self, py_func):
        self.py_func = py_func
        self.compiled = 0

    def compile(self, sig):
        import sys

        from numba.cuda.dispatcher import _Kernel as NumbaKernel

        self.compiled += 1
        cres, fn = _lowered(self.py_func)
        sys.modules[NumbaKernel.__module__].kernel_fixup(fn, False)
        return _Kernel(fn.name, cres.library.modules)


def _compiler(monkeypatch, private):
    made = []

    def dispatcher(key, py_func, options, on_disk):
        made.append((key, on_disk))
        return private

    comp = cube_compiler.NumbaCudaCompiler(None, 0)
    monkeypatch.setattr(comp, "_dispatcher", dispatcher)
    return comp, made


def test_the_users_dispatcher_keeps_numba_cudas_kernel_unless_it_can_raise(monkeypatch):
    """The user's ``cuda.jit`` dispatcher compiles as numba-cuda would (only observed); a kernel
    that can raise is compiled again by a private dispatcher, without numba-cuda's disk cache,
    and gets the word. One that cannot stays the user's, without a word."""
    comp, made = _compiler(monkeypatch, _Dispatcher(_raising))
    users = _Dispatcher(_raising)
    kernel, fixup = comp._compile(("k", ()), _raising, {}, users, None, "check")
    assert users.compiled == 1 and made == [((("k", ()), "check"), False)]
    assert fixup.word
    comp, made = _compiler(monkeypatch, _Dispatcher(_plain))
    kernel, fixup = comp._compile(("k", ()), _plain, {}, _Dispatcher(_plain), None, "check")
    assert fixup is None and made == []


def test_off_compiles_as_before(monkeypatch):
    """``NUMBA_CUBE_CUDA_KERNEL_ERRORS=off``: no window, no word (the exception is lost again)."""
    private = _Dispatcher(_raising)
    comp, made = _compiler(monkeypatch, private)
    kernel, fixup = comp._compile(("k", ()), _raising, {}, None, None, "off")
    assert fixup is None and made == [((("k", ()), "off"), True)]
    monkeypatch.setenv("NUMBA_CUBE_CUDA_KERNEL_ERRORS", "off")
    assert cube_compiler.kernel_errors_mode() == "off"
