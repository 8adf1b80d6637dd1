"""Every optional pass of the CPU translator can be switched off by name, and the kernels compute
the same without it (``passes/__init__.py``): a wrong answer can be bisected to a pass.

The corpus is ``benchmarks/bench_kernels.py``'s ten classic programs (reductions, histograms, a
stencil, a tiled matmul, a three-launch scan, a transpose, a softmax, a warp-shuffle reduction), at
small sizes, each checked against NumPy as the benchmark checks it, plus a ping-pong kernel in
stumpy's shape for the uniform prologue. For each optional pass, the programs whose translation
changes with the pass off are run with ``NUMBA_CUBE_DISABLE_PASSES`` naming it, on a fresh device,
and every pass must change at least one program (otherwise the switch would be untested). The
unknown-name and ``all`` forms of the variable are pinned too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.backends.cpu.passes import OPTIONAL_PASSES, disabled, enabled
from numba_cube.backends.cpu.translate import build_program, translate

sys.path.insert(0, str(Path(__file__).parents[4] / "benchmarks"))
import bench_kernels  # noqa: E402


@cuda.jit
def pingpong(row, even, odd, x, n):
    # stumpy's shape: the buffers picked from the row's parity, a grid-stride loop, every unit
    # storing the same value into element 0 (shared_stores)
    if row % 2 == 0:
        out = even
        src = odd
    else:
        out = odd
        src = even
    start = cuda.grid(1)
    for i in range(start, n, cuda.gridsize(1)):
        out[i] = src[i] + x[i] * row
        out[0] = src[0] + x[0] * row


def _pingpong_case():
    class Case:
        def __init__(self, rng):
            self.x = rng.standard_normal(1000)

        def run(self, client):
            even, odd = client.create(np.zeros(1000)), client.create(np.zeros(1000))
            hx = client.create(self.x)
            for row in range(1, 6):
                client.launch(pingpong, 4, 64, row, even, odd, hx, 1000)
            return [client.read(even), client.read(odd)]

        def expected(self):
            even, odd = np.zeros(1000), np.zeros(1000)
            for row in range(1, 6):
                if row % 2 == 0:
                    even = odd + self.x * row
                else:
                    odd = even + self.x * row
            return [even, odd]
    return Case


class _BenchCase:
    """One of bench_kernels.CASES at its smallest (simulator) size."""

    def __init__(self, entry, rng):
        self.name, make, self._expected, _, _, self.tolerance, sizes = entry
        self.program = make(sizes[2], rng)

    def run(self, client):
        run, outputs = self.program.on_client(client)
        run()
        return outputs()

    def expected(self):
        return [self._expected(self.program.buffers)]


def _corpus(rng):
    cases = [_BenchCase(entry, rng) for entry in bench_kernels.CASES]
    pp = _pingpong_case()(rng)
    pp.name, pp.tolerance = "ping-pong (stumpy's shape)", 1e-12
    return cases + [pp]


def _kernels(case):
    if isinstance(case, _BenchCase):
        return [k for k, _, _, _ in case.program.launches]
    return [pingpong]


def _translations(kernels):
    return [translate(getattr(k, "py_func", k)) for k in kernels]


@pytest.fixture(autouse=True)
def cache_dir(monkeypatch, tmp_path):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path / "cube_cache"))


def test_an_unknown_pass_name_is_refused_naming_the_passes(monkeypatch):
    """A misspelt name must not leave the pass on silently: ``ValueError`` naming the known ones."""
    monkeypatch.setenv("NUMBA_CUBE_DISABLE_PASSES", "interior,no_such_pass")
    with pytest.raises(ValueError, match="no_such_pass.*interior"):
        disabled()
    monkeypatch.setenv("NUMBA_CUBE_DISABLE_PASSES", "all")
    assert disabled() == frozenset(OPTIONAL_PASSES)
    assert not any(enabled(name) for name in OPTIONAL_PASSES)
    monkeypatch.delenv("NUMBA_CUBE_DISABLE_PASSES")
    assert all(enabled(name) for name in OPTIONAL_PASSES)


def test_a_translation_kept_on_disk_is_not_reused_with_other_passes_off(monkeypatch):
    """The set switched off is part of the translation's key: a kernel translated (and kept on
    disk under its id) with every pass on is translated again with ``interior`` off, and the
    translation kept for the full pipeline is found again afterwards."""
    kernel_id = "test-optional-passes-matmul"
    full = build_program(bench_kernels.fast_matmul.py_func, kernel_id=kernel_id).source
    monkeypatch.setenv("NUMBA_CUBE_DISABLE_PASSES", "interior")
    without = build_program(bench_kernels.fast_matmul.py_func, kernel_id=kernel_id).source
    assert "interior" in full and "interior" not in without
    monkeypatch.delenv("NUMBA_CUBE_DISABLE_PASSES")
    assert build_program(bench_kernels.fast_matmul.py_func, kernel_id=kernel_id).source == full


@pytest.mark.parametrize("name", sorted(OPTIONAL_PASSES))
def test_the_corpus_computes_the_same_with_the_pass_off(name, monkeypatch):
    """With ``name`` off, every corpus program whose translation it changes still gives NumPy's
    answer; and it changes at least one (``block_shape``: every cube kernel, whose module is
    specialized for its launch's block shape after translation)."""
    rng = np.random.default_rng(7)
    corpus = _corpus(rng)
    touched = []
    for case in corpus:
        kernels = _kernels(case)
        full = _translations(kernels)
        if name == "block_shape":
            changed = any(t.shape == "cube" for t in full)
        else:
            monkeypatch.setenv("NUMBA_CUBE_DISABLE_PASSES", name)
            changed = [t.source for t in _translations(kernels)] != [t.source for t in full]
            monkeypatch.delenv("NUMBA_CUBE_DISABLE_PASSES")
        if changed:
            touched.append(case)
    assert touched, f"no corpus program is changed by switching {name} off"
    monkeypatch.setenv("NUMBA_CUBE_DISABLE_PASSES", name)
    client = cube.client(f"cpu:{400 + sorted(OPTIONAL_PASSES).index(name)}")
    for case in touched:
        got = case.run(client)
        for g, e in zip(got, case.expected()):
            np.testing.assert_allclose(g, e, rtol=case.tolerance, atol=case.tolerance,
                                       err_msg=f"{case.name} with {name} off")
