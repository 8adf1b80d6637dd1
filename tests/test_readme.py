"""plugins/README.md, the guide for plugin authors, is working code: every code block whose first
line is a comment naming a file of the repository is an exact excerpt of that file (so the guide
cannot drift from the plugin it walks through), and its other Python blocks run.

The top-level README.md keeps only a short "Plugins" section pointing here; its own Python blocks
are ``tests/test_readme_blocks.py``'s."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "plugins" / "README.md"
SECTION = "## Writing a backend plugin"   # the walk-through whose excerpts the first test expects

# A fenced block: ```lang, its lines, ``` (the guide's blocks are not nested or indented).
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# The first line of an excerpt: a comment that is a path (`# plugins/x/y.py`).
_HEADER = re.compile(r"#\s+([\w./-]+\.\w+)\s*$")


def guide() -> str:
    """The whole guide: every block of it is checked, whatever section it is in."""
    return GUIDE.read_text(encoding="utf-8")


def blocks() -> list[tuple[str, str | None, str]]:
    """``(language, named file or None, body)`` for each code block of the guide; the body of an
    excerpt is the block without its header line."""
    out = []
    for lang, text in _BLOCK.findall(guide()):
        first, _, rest = text.partition("\n")
        header = _HEADER.fullmatch(first)
        if header and (REPO / header.group(1)).is_file():
            out.append((lang, header.group(1), rest))
        else:
            out.append((lang, None, text))
    return out


def test_the_guide_is_found_with_excerpts_and_examples():
    """The parser the next tests rely on sees the guide's blocks: the backend walk-through, with
    excerpts of the plugin's three files and of the core's cuda backend, and a runnable Python
    example."""
    assert SECTION in guide()
    named = {path for _, path, _ in blocks() if path is not None}
    assert {"plugins/numba_cube_cudasim/numba_cube_cudasim/__init__.py",
            "plugins/numba_cube_cudasim/numba_cube_cudasim/backend.py",
            "plugins/numba_cube_cudasim/pyproject.toml",
            "numba_cube/backends/cuda/__init__.py"} <= named
    assert any(lang == "python" and path is None for lang, path, _ in blocks())


EXCERPTS = [(path, body) for _, path, body in blocks() if path is not None]


@pytest.mark.parametrize("path,body", EXCERPTS, ids=[f"{i}:{p}" for i, (p, _) in enumerate(EXCERPTS)])
def test_block_is_an_exact_excerpt_of_its_file(path, body):
    """Each block headed by a file's path is a run of whole lines of that file, verbatim."""
    source = (REPO / path).read_text(encoding="utf-8")
    assert body.strip(), f"empty excerpt of {path}"
    assert ("\n" + body) in ("\n" + source), \
        f"plugins/README.md's block is not an excerpt of {path}:\n{body}"


@pytest.mark.parametrize("body", [b[2] for b in blocks() if b[0] == "python" and b[1] is None])
def test_other_python_blocks_run(body, tmp_path):
    """Each Python block of the guide that is no excerpt runs as it is written, in a fresh
    interpreter with entry-point loading off: the state it shows, a checkout where the plugin is
    registered by hand."""
    pytest.importorskip("numba_cuda")
    script = tmp_path / "block.py"
    script.write_text(body)
    plugin_root = REPO / "plugins" / "numba_cube_cudasim"
    env = dict(os.environ, NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(plugin_root)]
                                        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, f"plugins/README.md block failed:\n{body}\n{proc.stderr}"
