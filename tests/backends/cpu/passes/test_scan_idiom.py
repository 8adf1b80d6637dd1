"""Hillis-Steele scans on integer shared arrays run by one unit in one pass
(``passes/scan_idiom.py``, ``kernel_runtime/scans.py``).

Pinned here: against a NumPy emulation of the rounds as a GPU runs them (int64 arithmetic,
stored modulo the element's width), a rewritten scan gives the same numbers for every integer
dtype admitted (int8 and uint8 sums that wrap included), cube sizes that are and are not powers
of two, loop bounds below the cube size (windowed sums), at 1, at 0, as a float, and from a
parameter; in both variants, through a client, inside a uniform ``for`` loop over chunks, in
the ``if``-statement form, and with ``off`` read after the loop. Each written form of the round
is recognised; every near miss (a float or uint64 array, ``t`` read after the loop, a
``return``, a non-uniform test around the loop, another start, factor or statement, another
``tid``, a ``break`` around it, a bound read from memory) prints exactly the code the translator
prints without the pass."""

import importlib.util

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.backends.cpu.passes import scan_idiom
from numba_cube.backends.cpu.translate import build_program, translate_source

SM = 128


def rounds(values: np.ndarray, bound) -> tuple[np.ndarray, int]:
    """The GPU's rounds on each row of ``values``: ``(shared array after, off after)``."""
    sm = values.copy()
    nt = sm.shape[1]
    off = 1
    while off < bound:
        t = np.zeros(sm.shape, np.int64)
        if off < nt:
            t[:, off:] = sm[:, :nt - off]
        sm = (sm.astype(np.int64) + t).astype(sm.dtype)      # int64 sum, stored with wrap-around
        off *= 2
    return sm, off


def make_scan(dtype):
    @cuda.jit
    def scan(x, out, offs, bound):
        sm = cuda.shared.array(SM, dtype)
        tid = cuda.threadIdx.x
        i = cuda.grid(1)
        sm[tid] = x[i]
        cuda.syncthreads()
        off = 1
        while off < bound:
            t = sm[tid - off] if tid >= off else 0
            cuda.syncthreads()
            sm[tid] += t
            cuda.syncthreads()
            off *= 2
        out[i] = sm[tid]
        offs[i] = off
    return scan


SCANS = {np.dtype(d): make_scan(d) for d in (np.int8, np.uint8, np.int16, np.int32,
                                              np.uint32, np.int64)}


def run(kernel, variant, x, nt, *extra):
    cubes = x.size // nt
    out = np.zeros_like(x)
    offs = np.zeros(x.size, np.int64)
    getattr(build_program(kernel.py_func), variant)(cubes, 1, 1, nt, 1, 1, x, out, offs, *extra)
    return out, offs


def values(rng, dtype, size):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size, endpoint=True).astype(dtype)


@pytest.mark.parametrize("variant", ["serial", "parallel"])
@pytest.mark.parametrize("dtype", list(SCANS))
@pytest.mark.parametrize("nt,bound", [(128, 128), (100, 128), (128, 8), (37, 1000), (64, 1),
                                      (64, 0), (128, 5.5), (1, 128)])
def test_rewritten_scan_matches_the_rounds(variant, dtype, nt, bound, rng):
    """Every admitted dtype (sums that wrap included), cube size and bound: the numbers and the
    final ``off`` the GPU's rounds give."""
    kernel = SCANS[dtype]
    assert "__windowed_scan(" in translate_source(kernel.py_func)
    cubes = 3 if variant == "serial" else 300
    x = values(rng, dtype, cubes * nt)
    out, offs = run(kernel, variant, x, nt, bound)
    expected, off = rounds(x.reshape(cubes, nt), bound)
    np.testing.assert_array_equal(out.reshape(cubes, nt), expected)
    assert (offs == off).all()


@cuda.jit
def chunked_exclusive(sums):
    """numba_cube's benchmark shape: one cube scans an array chunk by chunk with a carry."""
    sm = cuda.shared.array(SM, np.int64)
    tid = cuda.threadIdx.x
    carry = 0
    for base in range(0, sums.size, SM):
        i = base + tid
        v = sums[i] if i < sums.size else 0
        sm[tid] = v
        cuda.syncthreads()
        off = 1
        while off < SM:
            t = sm[tid - off] if tid >= off else 0
            cuda.syncthreads()
            sm[tid] += t
            cuda.syncthreads()
            off *= 2
        if i < sums.size:
            sums[i] = carry + sm[tid] - v
        carry += sm[SM - 1]
        cuda.syncthreads()


@pytest.mark.parametrize("n", [1, 128, 1000])
def test_scan_inside_a_uniform_chunk_loop(n, rng):
    """Inside ``for base in range(0, n, SM)``: rewritten, and the exclusive scan NumPy gives."""
    assert "__windowed_scan(" in translate_source(chunked_exclusive.py_func)
    x = rng.integers(-1000, 1000, n)
    got = x.copy()
    build_program(chunked_exclusive.py_func).serial(1, 1, 1, SM, 1, 1, got)
    np.testing.assert_array_equal(got, np.cumsum(x) - x)


@cuda.jit
def if_form(x, out, offs):
    sm = cuda.shared.array(SM, np.int32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i]
    cuda.syncthreads()
    offset = 1
    while SM > offset:
        v = 0
        if offset <= tid:
            v = sm[tid - offset]
        cuda.syncthreads()
        sm[tid] = v + sm[tid]
        cuda.syncthreads()
        offset <<= 1
    out[i] = sm[tid]
    offs[i] = offset


def test_if_statement_form_and_other_spellings(rng):
    """``v = 0; if offset <= tid: v = ...``, ``N > offset``, ``sm[tid] = v + sm[tid]``,
    ``offset <<= 1``: rewritten, and the rounds' numbers."""
    assert "__windowed_scan(" in translate_source(if_form.py_func)
    x = values(rng, np.int32, 4 * 96)
    out, offs = run(if_form, "serial", x, 96)
    expected, off = rounds(x.reshape(4, 96), SM)
    np.testing.assert_array_equal(out.reshape(4, 96), expected)
    assert (offs == off).all()


def test_through_a_client(rng):
    """Launched through the CPU client (its module specialized for the block shape)."""
    client = cube.client("cpu")
    kernel = cube.kernel(SCANS[np.dtype(np.int64)])
    x = values(rng, np.int64, 50 * SM)
    out, offs = client.empty(x.size, np.int64), client.empty(x.size, np.int64)
    client.launch(kernel, 50, SM, client.create(x), out, offs, SM)
    expected, off = rounds(x.reshape(50, SM), SM)
    np.testing.assert_array_equal(client.read(out).reshape(50, SM), expected)
    assert (client.read(offs) == off).all()


# ---- near misses: the code the translator prints without the pass ---------------------------

def _kernel(src: str, tmp_path):
    """The kernel ``k`` of ``src``, from a real file (so the translator reads this source, not
    a rebuild from bytecode)."""
    path = tmp_path / f"near_miss_{len(list(tmp_path.iterdir()))}.py"
    path.write_text("import numpy as np\nfrom numba import cuda\nSM = %d\n%s" % (SM, src))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k


NEAR_MISSES = {
    "float array": ("np.int64", "np.float64", None),
    "uint64 array": ("np.int64", "np.uint64", None),
    "another start": ("    off = 1\n", "    off = 2\n", None),
    "another factor": ("off *= 2", "off *= 3", None),
    "another statement": ("        off *= 2\n", "        off *= 2\n        out[0] += 0\n", None),
    "another tid": ("tid = cuda.threadIdx.x", "tid = cuda.threadIdx.x + 0", None),
    "t read after": ("    out[i] = sm[tid]\n", "    out[i] = sm[tid] + t\n", None),
    "a return": ("    out[i] = sm[tid]\n", "    if i > 10 ** 9:\n        return\n    out[i] = sm[tid]\n",
                 None),
    "bound from memory": ("while off < bound", "while off < x[0]", None),
    "non-uniform test around": ("    off = 1\n    while", "    if x[0] > 0:\n      off = 1\n      while",
                                "indent"),
    "break around": ("    off = 1\n    while", "    for r in range(2):\n      if r == 1:\n"
                     "        break\n      off = 1\n      while", "indent"),
}

BASE = '''
@cuda.jit
def k(x, out, bound):
    sm = cuda.shared.array(SM, np.int64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i]
    cuda.syncthreads()
    off = 1
    while off < bound:
        t = sm[tid - off] if tid >= off else 0
        cuda.syncthreads()
        sm[tid] += t
        cuda.syncthreads()
        off *= 2
    out[i] = sm[tid]
'''


def _variant(old, new, how):
    assert old in BASE
    src = BASE.replace(old, new, 1)
    if how == "indent":             # the loop's body moves under the new statement
        head, _, tail = src.partition("      while")
        body, _, after = tail.partition("    out[i]")
        body = "\n".join(("  " + line) if line.startswith("        ") else line
                         for line in body.split("\n"))
        src = head + "      while" + body + "    out[i]" + after
    return src


REWRITTEN = {
    "as written": ("", "", None),
    "under a uniform if": ("    off = 1\n    while", "    if bound > 0:\n      off = 1\n      while",
                           "indent"),
    "threadIdx.x itself": ("t = sm[tid - off] if tid >= off else 0\n        cuda.syncthreads()\n"
                           "        sm[tid] += t",
                           "t = sm[cuda.threadIdx.x - off] if cuda.threadIdx.x >= off else 0\n"
                           "        cuda.syncthreads()\n        sm[cuda.threadIdx.x] += t", None),
}


@pytest.mark.parametrize("name", list(REWRITTEN))
def test_variants_of_the_base_are_rewritten(name, tmp_path, rng):
    """The base of the near misses, under a uniform ``if`` and indexing with
    ``cuda.threadIdx.x`` itself, is rewritten and gives the rounds' numbers."""
    kernel = _kernel(_variant(*REWRITTEN[name]), tmp_path)
    assert "__windowed_scan(" in translate_source(kernel.py_func)
    x = values(rng, np.int64, 2 * SM)
    out = np.zeros_like(x)
    build_program(kernel.py_func).serial(2, 1, 1, SM, 1, 1, x, out, 100)
    np.testing.assert_array_equal(out.reshape(2, SM), rounds(x.reshape(2, SM), 100)[0])


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_near_misses_print_the_code_without_the_pass(name, monkeypatch, tmp_path):
    """Each near miss of the rules leaves the loop exactly as the translator prints it
    without the pass."""
    kernel = _kernel(_variant(*NEAR_MISSES[name]), tmp_path)
    with_pass = translate_source(kernel.py_func)
    with monkeypatch.context() as mp:
        mp.setattr(scan_idiom, "rewrite", lambda body, *args: body)
        without = translate_source(kernel.py_func)
    assert "__windowed_scan(" not in with_pass
    assert with_pass == without
