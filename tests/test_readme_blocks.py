"""Every Python block of README.md runs as written: each is extracted and executed in a fresh
interpreter on the CPU backend, so an example that names something undefined, or fails, fails CI.

A block is one program: it defines what it uses (blocks are not a session that continues from one
to the next). Every Python block of README.md is run, in every section, except:

- an excerpt of a repository file (its first line is a comment naming the file, as in
  ``plugins/README.md``): ``tests/test_readme.py`` checks that it is still verbatim that file;
- a block whose first line is ``# requires: <what>``: ``gpu`` (a CUDA device; skipped without one
  and under the simulator), or the name of a module that must be importable (skipped without it).
  New sections need nothing else: their blocks are found and run by the same rules.

The guide for plugin authors, ``plugins/README.md`` (where the README's former "Writing a backend
plugin" section lives), is ``tests/test_readme.py``'s: it checks the guide's excerpts and runs its
other Python blocks in the state they show (entry-point loading off, the plugin registered by hand).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

# A fenced block: ```lang, its lines, ``` (the README's blocks are not nested or indented).
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# The first line of an excerpt: a comment that is a path (`# plugins/x/y.py`).
_EXCERPT = re.compile(r"#\s+([\w./-]+\.\w+)\s*$")
# The first line of a block that needs what CI may not have: `# requires: gpu`, `# requires: dask`.
_REQUIRES = re.compile(r"#\s*requires:\s*([\w.,\s-]+?)\s*$")


def python_blocks() -> list[tuple[int, str]]:
    """``(line number, body)`` of each ```python block of the README, in order (the line is the
    fence's, 1-based, to find the block from a failure)."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, match.start()) + 1, match.group(2))
            for match in _BLOCK.finditer(text) if match.group(1) == "python"]


def is_excerpt(body: str) -> bool:
    """Whether the block is a verbatim excerpt of a repository file (tested by test_readme.py)."""
    header = _EXCERPT.fullmatch(body.partition("\n")[0])
    return bool(header and (REPO / header.group(1)).is_file())


def requirements(body: str) -> list[str]:
    """What the block's ``# requires:`` first line names (none without one)."""
    header = _REQUIRES.fullmatch(body.partition("\n")[0])
    return [] if header is None else [r for r in re.split(r"[,\s]+", header.group(1)) if r]


def gpu_present() -> bool:
    """A real CUDA device (not the simulator)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or importlib.util.find_spec("numba_cuda") is None:
        return False
    from numba import cuda

    return cuda.is_available()


def missing(requirement: str) -> str | None:
    """Why ``requirement`` is not met here, or ``None``."""
    if requirement == "gpu":
        return None if gpu_present() else "needs a CUDA GPU"
    return None if importlib.util.find_spec(requirement) is not None else f"needs {requirement}"


RUNNABLE = [(line, body) for line, body in python_blocks() if not is_excerpt(body)]


def test_the_readme_has_runnable_blocks():
    """The extraction sees the README's examples: the tour (the first block, with its axpy
    kernel), the failures-on-buffers example and the others."""
    assert len(RUNNABLE) >= 5
    assert "def axpy" in RUNNABLE[0][1]
    assert any("cube.LaunchFailure" in body for _, body in RUNNABLE)


def test_requires_marker_is_recognized():
    """A ``# requires:`` first line names what a block needs; an excerpt's path header is not a
    requirement, and a block without a header needs nothing."""
    assert requirements("# requires: gpu\nx = 1\n") == ["gpu"]
    assert requirements("# requires: dask, distributed\n") == ["dask", "distributed"]
    assert requirements("import numpy\n") == []
    assert is_excerpt("# numba_cube/config.py\nx\n") and not is_excerpt("# requires: gpu\n")


@pytest.mark.parametrize("line,body", RUNNABLE, ids=[f"README.md:{line}" for line, _ in RUNNABLE])
def test_readme_block_runs(line, body, tmp_path):
    """The block runs to the end in a fresh interpreter (exit status 0) on the CPU backend, with
    a private cache directory; warnings the block does not expect are not errors, exceptions are."""
    for requirement in requirements(body):
        reason = missing(requirement)
        if reason:
            pytest.skip(f"README.md:{line} {reason}")
    script = tmp_path / f"readme_{line}.py"
    script.write_text(body, encoding="utf-8")
    env = dict(os.environ, NUMBA_CUBE_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=600, cwd=str(tmp_path))
    assert proc.returncode == 0, f"README.md:{line}: the block failed:\n{body}\n{proc.stderr[-4000:]}"
