"""``frontend/decompiler/function.py`` and its hook in ``frontend.load_function``: which source is used, and what a
kernel without source becomes.

Kernels made with ``exec`` (so ``inspect`` finds no source) are built with ``build_program`` and
both generated variants are run against NumPy. Source found by ``inspect`` (a file, or
``linecache`` for a pseudo-file) is used when it compiles to the function's own bytecode, and
only then. Refusals pin the construct and the ``<string>`` line the error names. Statement and
control-flow shapes are in ``test_sourceless_block.py`` and ``test_sourceless_flow.py``.
"""

import ast
import linecache

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.backends.cpu.frontend.source import load_function
from numba_cube.backends.cpu.translate import build_program
from numba_cube.errors import CompileError

from sourceless_helpers import VARIANTS, cache_dir, launch, made, rng  # noqa: F401 (fixtures)


@pytest.mark.parametrize("variant", VARIANTS)
def test_guarded_elementwise_is_a_flat_loop(variant, rng):
    """An exec'd ``if i < n`` kernel computes NumPy's result, and is compiled as the flat loop
    with the guard hoisted into its bounds, as the same kernel with source would be."""
    prog = build_program(made("""
        def guarded(a, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a[i] * 2.0 + 1.0
    """)["guarded"])
    assert prog.shape == "flat" and "__bound_lt(" in prog.source
    a = rng.random(1000)
    out = np.zeros_like(a)
    launch(prog, variant, (4,), (256,), a, out)
    np.testing.assert_allclose(out, a * 2.0 + 1.0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_device_function_without_source(variant, rng):
    """A device function made by exec, called from a kernel made by exec, is rebuilt too."""
    dev = made("""
        def clamp(v, lo, hi):
            if v < lo:
                return lo
            return hi if v > hi else v
    """)["clamp"]
    ns = made("""
        def k(a, out):
            i = cuda.grid(1)
            if i < a.size:
                out[i] = clamp(a[i], 0.25, 0.75)
    """, clamp=cuda.jit(device=True)(dev))
    a = rng.random(300)
    out = np.zeros_like(a)
    launch(build_program(ns["k"]), variant, (2,), (256,), a, out)
    np.testing.assert_allclose(out, np.clip(a, 0.25, 0.75))


def test_different_bodies_do_not_share_a_program():
    """Two exec'd kernels with one name and different bodies get different kernel ids and
    different generated modules."""
    first = made("def fill(out):\n    out[cuda.grid(1)] = 1.5\n")["fill"]
    second = made("def fill(out):\n    out[cuda.grid(1)] = 2.5\n")["fill"]
    assert cube.kernel(first).id != cube.kernel(second).id
    p1, p2 = build_program(first), build_program(second)
    assert p1.path != p2.path
    out = np.zeros(4)
    p2.serial(1, 1, 1, 4, 1, 1, out)
    assert (out == 2.5).all()


# ---- refusals ------------------------------------------------------------------------------

def refusal(src, name="k", **names):
    with pytest.raises(CompileError) as info:
        build_program(made(src, **names)[name])
    return info.value


def test_nested_function_is_refused_with_its_line():
    """A lambda in a kernel without source is refused, naming the construct and the
    ``<string>`` line it is on."""
    err = refusal("def k(a):\n    f = lambda x: x\n    a[0] = f(1)\n")
    assert "nested function" in err.construct and err.lineno == 2
    assert err.filename == "<string>"


def test_translator_refusals_name_the_user_line():
    """What the translator refuses in a rebuilt kernel (returning a value) is reported as for a
    kernel with source, at the exec'd text's line."""
    err = refusal("""
        def k(a):
            i = cuda.threadIdx.x
            if i < 3:
                return i
            a[i] = 1
    """)
    assert err.construct == "return with a value"
    assert err.lineno == 5 and err.filename == "<string>"


# ---- linecache -----------------------------------------------------------------------------

def registered(filename, text, code_text=None):
    """Compile ``code_text`` (default ``text``) under ``filename`` and register ``text`` in
    linecache under that name, as IPython and code generators do."""
    lines = text.splitlines(keepends=True)
    linecache.cache[filename] = (len(text), None, lines, filename)
    ns = {"cuda": cuda}
    exec(compile(code_text or text, filename, "exec"), ns)
    return ns


def test_source_registered_in_linecache_is_used():
    """A function compiled from a registered pseudo-file is translated from that source (its
    own spelling survives: the conditional expression, the docstring's absence of effect)."""
    text = ("def k(a, out):\n    i = cuda.grid(1)\n"
            "    if i < a.size:\n        out[i] = a[i] if a[i] > 0.5 else 0.0\n")
    try:
        fn = load_function(registered("<cube-test-cell-1>", text)["k"])
    finally:
        linecache.cache.pop("<cube-test-cell-1>", None)
    assert fn.filename == "<cube-test-cell-1>"
    assert "a[i] if a[i] > 0.5 else 0.0" in ast.unparse(fn.node)


def test_other_text_under_the_same_pseudo_file_is_not_used(rng):
    """When linecache holds other text under the function's pseudo-file name, the kernel is
    rebuilt from its bytecode and computes its own result, not the registered text's."""
    shown = "def k(a, out):\n    i = cuda.grid(1)\n    if i < a.size:\n        out[i] = 7.0\n"
    real = ("def k(a, out):\n    i = cuda.grid(1)\n"
            "    if i < a.size:\n        out[i] = a[i] + 1.0\n")
    try:
        kernel = registered("<cube-test-cell-2>", shown, code_text=real)["k"]
        prog = build_program(kernel)
    finally:
        linecache.cache.pop("<cube-test-cell-2>", None)
    a = rng.random(10)
    out = np.zeros(10)
    prog.serial(1, 1, 1, 16, 1, 1, a, out)
    np.testing.assert_allclose(out, a + 1.0)


def test_file_edited_after_import_is_not_read(tmp_path, monkeypatch, rng):
    """A kernel whose file changed on disk after import is translated from the bytecode that
    was imported (what numba-cuda compiles), not from the edited text."""
    module = tmp_path / "cube_edited_kernel.py"
    module.write_text("from numba import cuda\n\n\ndef k(a, out):\n    i = cuda.grid(1)\n"
                      "    if i < a.size:\n        out[i] = a[i] * 3.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import cube_edited_kernel
    module.write_text("from numba import cuda\n\n\ndef k(a, out):\n    i = cuda.grid(1)\n"
                      "    if i < a.size:\n        out[i] = a[i] - 100.0  # edited\n")
    linecache.checkcache(str(module))
    prog = build_program(cube_edited_kernel.k)
    a = rng.random(10)
    out = np.zeros(10)
    prog.serial(1, 1, 1, 16, 1, 1, a, out)
    np.testing.assert_allclose(out, a * 3.0)
