"""The on-disk cache of generated modules: content-addressed, private, never runs a foreign file,
never rewrites a good one, and lets Numba's own cache work across processes.
"""

import os
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from numba_cube.backends.cpu.cache import translations as codecache
from numba_cube.backends.cpu.translate import build_program, translate_source, translation_options

# the directory of the helper modules (kernels_cases.py), for the child processes
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(d))
    return d


def make_kernel(value):
    """A fresh kernel whose generated text (and so module name) depends on ``value``."""
    from numba import cuda

    @cuda.jit
    def fill(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = value
    return fill.py_func


def forget(prog):
    """Drop an imported generated module so the next build goes to the disk again."""
    sys.modules.pop(prog.module_name, None)


def test_cache_dir_is_created_private(cache_dir):
    """A missing cache dir is created with mode 0o700; files are named <kernel>_<sha16>.py."""
    prog = build_program(make_kernel(1.5))
    assert stat.S_IMODE(os.stat(cache_dir).st_mode) == 0o700
    name = os.path.basename(prog.path)
    assert os.path.dirname(prog.path) == str(cache_dir)
    assert name.startswith("fill_") and len(name) == len("fill_") + 16 + len(".py")
    with open(prog.path) as f:
        assert f.read() == prog.source


def test_same_kernel_twice_reuses_the_file(cache_dir):
    """Building the same kernel again (even after the module is forgotten) uses the same file
    and does not rewrite it: its mtime is part of Numba's cache key."""
    func = make_kernel(2.5)
    first = build_program(func)
    before = os.stat(first.path)
    forget(first)
    second = build_program(func)
    after = os.stat(second.path)
    assert second.path == first.path
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)


@pytest.mark.parametrize("content", ["marker", "truncated"])
def test_corrupt_or_foreign_file_is_regenerated_not_executed(cache_dir, tmp_path, content):
    """A file with the right name but the wrong content is replaced and never executed."""
    func = make_kernel(3.5 if content == "marker" else 4.5)
    source = translate_source(func)
    modname, stem = codecache.module_name("fill", source)
    sys.modules.pop(modname, None)
    marker = tmp_path / "was_executed"
    cache_dir.mkdir(mode=0o700)
    path = cache_dir / f"{stem}.py"
    if content == "marker":
        path.write_text(f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(3)\n")
    else:
        path.write_text(source[: len(source) // 2])
    prog = build_program(func)
    assert not marker.exists()
    assert path.read_text() == source
    a = np.zeros(5)
    prog.serial(1, 1, 1, 8, 1, 1, a)
    assert (a == (3.5 if content == "marker" else 4.5)).all()


def test_unsafe_cache_dir_is_not_used(cache_dir):
    """A group/world-writable cache dir is refused: a private temp dir is used, with a warning."""
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o777)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prog = build_program(make_kernel(5.5))
    assert not prog.path.startswith(str(cache_dir))
    assert stat.S_IMODE(os.stat(os.path.dirname(prog.path)).st_mode) == 0o700
    assert any("writable by group or others" in str(w.message) for w in caught)
    assert os.listdir(cache_dir) == []


@pytest.mark.parametrize("problem", ["writable by others", "owned by another user"])
def test_unsafe_pycache_is_not_used(cache_dir, problem):
    """Numba's cache directory ``<cache dir>/__pycache__`` is held to the same rule as the cache
    dir: group/world-writable or owned by another user, it is refused (the whole cache moves to
    a private temp dir, with a warning) and nothing is read from or written to it."""
    if problem == "owned by another user" and os.getuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    pycache = cache_dir / "__pycache__"
    pycache.mkdir(parents=True)
    os.chmod(cache_dir, 0o700)
    if problem == "writable by others":
        os.chmod(pycache, 0o777)
    else:
        os.chmod(pycache, 0o700)
        os.chown(pycache, 54321, -1)
    value = 6.5 if problem == "writable by others" else 7.5     # a module not imported yet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prog = build_program(make_kernel(value))
        a = np.zeros(3)
        prog.serial(1, 1, 1, 4, 1, 1, a)
    assert (a == value).all()
    assert not prog.path.startswith(str(cache_dir))
    assert os.listdir(pycache) == [] and os.listdir(cache_dir) == ["__pycache__"]
    assert os.listdir(os.path.join(os.path.dirname(prog.path), "__pycache__"))   # used instead
    assert any("__pycache__" in str(w.message) and problem.split()[0] in str(w.message)
               for w in caught), [str(w.message) for w in caught]


def test_concurrent_writers_never_tear_the_file(cache_dir):
    """Many threads publishing the same text end with one intact file (link/replace, no
    partial writes)."""
    import threading
    cache_dir.mkdir(mode=0o700)
    path = cache_dir / "k_0123456789abcdef.py"
    data = ("x = 1\n" * 20000).encode()
    errors = []

    def writer():
        try:
            codecache.ensure_file(path, data)
        except Exception as exc:          # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert path.read_bytes() == data
    assert [p for p in os.listdir(cache_dir) if p.startswith(".tmp-")] == []


SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import numpy as np
    from numba import types
    from numba_cube.backends.cpu.translate import build_program
    import kernels_cases as K

    prog = build_program(K.vec_add.py_func)
    arr = types.Array(types.float64, 1, "C")
    prog.serial.compile((types.int64,) * 6 + (arr, arr, arr))
    a = np.arange(100.0); c = np.zeros(100)
    prog.serial(2, 1, 1, 64, 1, 1, a, a, c)
    assert (c == 2 * a).all()
    print("HITS", sum(prog.serial.stats.cache_hits.values()), prog.path)
""")


def test_second_process_hits_numbas_cache(cache_dir, tmp_path):
    """A second process loading the same generated module gets the compiled code from Numba's
    on-disk cache (index file in <cache dir>/__pycache__, cache_hits > 0). Corrupt index and data
    files make the next process recompile (it still works), and the process after it hits the
    rewritten entries again."""
    script = tmp_path / "child.py"
    script.write_text(SCRIPT.format(here=HERE))
    env = dict(os.environ, NUMBA_CUBE_CACHE_DIR=str(cache_dir))
    env.pop("NUMBA_CACHE_DIR", None)

    def run():
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout.split()

    first, second = run(), run()
    assert first[0] == "HITS" and first[1] == "0"
    assert int(second[1]) > 0
    assert first[2] == second[2]
    pycache = cache_dir / "__pycache__"
    index = [p for p in os.listdir(pycache) if p.endswith(".nbi")]
    assert any(p.startswith(os.path.basename(first[2])[:-3]) for p in index), index
    for name in os.listdir(pycache):
        if name.endswith((".nbi", ".nbc")):
            (pycache / name).write_bytes(b"\x80\x04garbage")
    assert run()[1] == "0"
    assert int(run()[1]) > 0


def test_translation_is_kept_sealed_and_a_forged_one_never_runs(cache_dir, tmp_path):
    """With a kernel id, ``build_program`` keeps its translation on disk, sealed; a file whose
    payload was changed (here: to code that leaves a marker) fails verification, is never
    executed, and the kernel is translated again and kept anew."""
    import json

    from numba_cube.backends.cpu.cache import key as cachekey

    func = make_kernel(8.5)
    kernel_id = f"fill-forged-{os.getpid()}"
    prog = build_program(func, kernel_id=kernel_id)
    key = cachekey.translation_key(kernel_id, func, translation_options(False, False, "numpy"))
    assert codecache.load_translation(key)["source"] == prog.source
    [path] = cache_dir.glob("translation-*.json")
    raw = path.read_bytes()
    start = raw.index(b'{"dynamic_shared"')     # MAGIC + tag (random bytes), then the JSON
    record = json.loads(raw[start:])
    marker = tmp_path / "was_executed"
    record["source"] = f"open({str(marker)!r}, 'w').write('x')\n" + record["source"]
    path.write_bytes(raw[:start] + json.dumps(record, sort_keys=True).encode())
    forget(prog)
    again = build_program(func, kernel_id=kernel_id)
    assert not marker.exists()
    assert again.source == prog.source
    assert codecache.load_translation(key)["source"] == prog.source     # sealed again
    a = np.zeros(5)
    again.serial(1, 1, 1, 8, 1, 1, a)
    assert (a == 8.5).all()


WARM_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tmp!r})
    import numpy as np
    import numba_cube as cube
    import kmod

    client = cube.client("cpu")
    out = client.empty(64, np.float64)
    client.launch(cube.kernel(kmod.fill), 1, 64, out)
    print(json.dumps({{"values": client.read(out).tolist(),
                      "translated": "numba_cube.backends.cpu.emit.module" in sys.modules}}))
""")

KMOD = textwrap.dedent("""
    from numba import cuda
    from kdev import scale
    {blank}
    def fill(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = scale(i) + {value}
""")

KDEV = textwrap.dedent("""
    from numba import cuda

    @cuda.jit(device=True)
    def scale(i):
        return i * {factor}
""")


def test_new_process_reuses_the_translation_and_an_edit_is_never_stale(cache_dir, tmp_path):
    """A second process launching the same kernel does not run the translator (its modules are
    never imported) and computes what NumPy computes; after an edit of the kernel, of a device
    function it calls from another module, or a move of the kernel in its file, the next process
    translates again and computes the edited kernel's values."""
    import json

    script = tmp_path / "child.py"
    script.write_text(WARM_SCRIPT.format(tmp=str(tmp_path)))
    env = dict(os.environ, NUMBA_CUBE_CACHE_DIR=str(cache_dir), PYTHONDONTWRITEBYTECODE="1")
    env.pop("NUMBA_CACHE_DIR", None)

    def run(value, factor, blank=""):
        (tmp_path / "kmod.py").write_text(KMOD.format(value=value, blank=blank))
        (tmp_path / "kdev.py").write_text(KDEV.format(factor=factor))
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=env, timeout=300, cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr[-2000:]
        found = json.loads(r.stdout.strip().splitlines()[-1])
        expected = np.arange(64) * factor + value
        np.testing.assert_array_equal(found["values"], expected)
        return found["translated"]

    assert run(1.5, 2.0) is True              # cold: translated and kept
    assert run(1.5, 2.0) is False             # warm: the kept translation, no translator
    assert run(2.5, 2.0) is True              # the kernel edited
    assert run(2.5, 3.0) is True              # its device function edited
    assert run(2.5, 3.0, blank="\n\n") is True    # moved: the generated text names its line
    assert run(2.5, 3.0, blank="\n\n") is False


def test_without_a_kernel_id_no_translation_is_kept(cache_dir):
    """``build_program`` without a kernel id (or for a kernel whose id is salted, which the CPU
    backend passes as none) translates and keeps no translation file."""
    build_program(make_kernel(9.5))
    assert list(cache_dir.glob("translation-*.json")) == []
