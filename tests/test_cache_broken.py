"""A hostile or broken cache directory costs speed, never a result (``cache_layout.py``: reading,
a cache that cannot be used).

Pinned here, each against NumPy's answer: a directory in place of the sealing key, a full disk
(injected, and a real full filesystem where one can be mounted), FIFOs in place of the key, the
translations, Numba's index files and ``autotune.json`` (never waited on: every such run is a
subprocess under a timeout, so a regression fails instead of hanging), and the private
temporary directory a refused cache directory falls back to (removed when the process exits).
A cache that cannot be used is reported by one warning naming it; the kernel runs uncached.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import cache_layout

#: a new process compiling a kernel takes seconds; one that waits on a FIFO never returns
TIMEOUT_S = 300

#: The child: kernels ``out = x + value`` for each value on the command line (a new value is a
#: new kernel: its globals are part of its id and translation key), and a tuner with the disk
#: cache on; prints the outputs and numba_cube's warnings as JSON.
CHILD = textwrap.dedent('''
    import json, sys, warnings
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        import numpy as np
        from numba import cuda
        import numba_cube as cube

        outs = {}
        c = cube.client("cpu")
        x = c.create(np.arange(100.0))
        for value in map(float, sys.argv[2:]):
            namespace = {"cuda": cuda, "VALUE": value}
            exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), namespace)
            kernel = cube.kernel(namespace["add_value"])
            out = c.create(np.zeros(100))
            c.launch(kernel, 1, 128, x, out)
            outs[value] = c.read(out).tolist()

        def only(client, x, out):
            client.launch(kernel, 1, 128, x, out)

        tuned = c.create(np.zeros(100))
        cube.Tuner("broken-cache", {"only": only}, key=lambda x, out: 0, samples=1)(c, x, tuned)
        outs["tuned"] = c.read(tuned).tolist()
    print(json.dumps({"outs": outs, "warnings": [str(w.message) for w in caught
                                                 if "numba_cube" in str(w.message)]}))
''')

KERNEL = '''
def add_value(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + VALUE
'''


def run_child(cache: Path, *values: float, prefix: list | None = None, scripts: Path | None = None):
    """Run ``CHILD`` (``prefix`` before it) on the cache directory ``cache`` for ``values``, its
    files in ``scripts`` (default: beside the cache); its JSON answer."""
    scripts = cache.parent if scripts is None else scripts
    script, source = scripts / "child.py", scripts / "kernel_source.py"
    script.write_text(CHILD)
    source.write_text(KERNEL)           # a real file: the translator reads the kernel's text
    done = subprocess.run([*(prefix or []), sys.executable, str(script), str(source),
                           *map(str, values)],
                          capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "NUMBA_CUBE_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_numpy(answer: dict, *values: float) -> None:
    x = np.arange(100.0)
    for value in values:
        np.testing.assert_array_equal(answer["outs"][str(value)], x + value)
    np.testing.assert_array_equal(answer["outs"]["tuned"], x + values[-1])


@pytest.fixture(scope="module")
def warm_template(tmp_path_factory):
    """A cache directory after one process ran kernel 1.0 and the tuner (key, translation,
    module, Numba's files, autotune.json), and where its scripts are: a kernel's translation
    key covers its file, so the runs that reuse the cache run the same files."""
    cache = tmp_path_factory.mktemp("warm") / "cache"
    assert_numpy(run_child(cache, 1.0), 1.0)
    return cache


def copy_of(template: Path, tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    shutil.copytree(template, cache)
    assert list(cache.glob(f"{cache_layout.TRANSLATION_PREFIX}*"))
    return cache


def unusable_reports(answer: dict, cache: Path) -> list[str]:
    return [w for w in answer["warnings"] if "cannot use the cache directory" in w
            and str(cache) in w]


def test_a_directory_in_place_of_the_key_is_one_warning_and_kernels_still_run(
        warm_template, tmp_path):
    """``numba-cache.key`` is a directory: kernels whose translation is on disk (whose check
    needs the key) and new kernels both run and give NumPy's answer, with one warning naming
    the cache directory; nothing is verified without the key, so nothing cached is used."""
    cache = copy_of(warm_template, tmp_path)
    (cache / cache_layout.KEY_NAME).unlink()
    (cache / cache_layout.KEY_NAME).mkdir()
    answer = run_child(cache, 1.0, 2.0, scripts=warm_template.parent)
    assert_numpy(answer, 1.0, 2.0)
    assert len(unusable_reports(answer, cache)) == 1, answer["warnings"]


def test_fifos_in_place_of_cache_files_are_never_waited_on(warm_template, tmp_path):
    """FIFOs in place of the key, the lock, every translation, generated module and Numba index
    file, and autotune.json: the process never blocks on one (a subprocess under a timeout),
    every kernel gives NumPy's answer, and the FIFOs read are replaced by good files (the
    cache heals)."""
    cache = copy_of(warm_template, tmp_path)
    victims = [cache / cache_layout.KEY_NAME, cache / cache_layout.LOCK_NAME,
               cache / "autotune.json", *cache.glob(f"{cache_layout.TRANSLATION_PREFIX}*"),
               *cache.glob("add_value_*.py"), *cache.glob("__pycache__/*.nbi")]
    assert len(victims) >= 6
    for path in victims:
        path.unlink()
        os.mkfifo(path, 0o600)
    assert_numpy(run_child(cache, 1.0, 3.0, scripts=warm_template.parent), 1.0, 3.0)
    assert (cache / cache_layout.KEY_NAME).is_file() and (cache / "autotune.json").is_file()


def test_an_injected_full_disk_runs_new_kernels_uncached_with_one_warning(tmp_path, monkeypatch):
    """Every new file fails with ENOSPC (``tempfile.mkstemp``, where every writer starts): a new
    kernel is translated, compiled and run uncached with NumPy's answer, and the cache
    directory is reported by exactly one warning; no file of the kernel is left behind."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(cache))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    source = tmp_path / "kernel.py"                 # a real file: the translator reads it
    source.write_text(KERNEL)
    namespace = {"cuda": cuda, "VALUE": 4.0}
    exec(compile(KERNEL, str(source), "exec"), namespace)
    kernel = cube.kernel(namespace["add_value"])
    client = cube.client("cpu")
    out = client.create(np.zeros(100))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client.launch(kernel, 1, 128, client.create(np.arange(100.0)), out)
        got = client.read(out)
    np.testing.assert_array_equal(got, np.arange(100.0) + 4.0)
    reports = [str(w.message) for w in caught if "cannot use the cache directory" in str(w.message)]
    assert len(reports) == 1 and str(cache) in reports[0] and "No space" in reports[0]
    assert not list(cache.glob("add_value_*")) and not list(cache.glob("translation-*"))


def test_a_real_full_filesystem_runs_kernels_uncached(tmp_path):
    """The cache directory on a filesystem with no space left (a small tmpfs, mounted in a
    user and mount namespace of the child): new kernels and the tuner give NumPy's answer,
    with one warning naming the directory."""
    unshare = shutil.which("unshare")
    probe = unshare and subprocess.run([unshare, "--user", "--map-root-user", "--mount", "true"],
                                       capture_output=True)
    if not unshare or probe.returncode != 0:
        pytest.skip("needs unshare with user and mount namespaces")
    mount = tmp_path / "small"
    mount.mkdir()
    cache = mount / "cache"
    # Inside the namespace: mount, make the cache directory, fill what is left, run the child.
    fill = (f"mount -t tmpfs -o size=256k tmpfs {mount} && mkdir -m 700 -p {cache}/__pycache__ "
            f"&& (cat /dev/zero > {mount}/filler 2>/dev/null; true) && exec \"$@\"")
    answer = run_child(cache, 5.0, scripts=tmp_path, prefix=[
        unshare, "--user", "--map-root-user", "--mount", "sh", "-c", fill, "sh"])
    assert_numpy(answer, 5.0)
    reports = unusable_reports(answer, cache)
    assert len(reports) == 1 and "No space" in reports[0], answer["warnings"]


def test_the_fallback_directory_of_a_refused_cache_dir_is_removed_at_exit(tmp_path):
    """A refused cache directory (writable by others) sends a process to a private temporary
    directory: the process uses it (its kernel gives NumPy's answer), a child it forks and that
    exits does not remove it, and it is gone once the process itself has exited."""
    temp = tmp_path / "tmp"
    temp.mkdir(mode=0o700)
    refused = tmp_path / "shared"
    refused.mkdir()
    os.chmod(refused, 0o777)
    script = tmp_path / "fallback.py"
    script.write_text(textwrap.dedent(f'''
        import os, sys, tempfile
        import numpy as np
        from numba import cuda
        import numba_cube as cube
        from numba_cube import config

        @cube.kernel
        def twice(x, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = 2.0 * x[i]

        c = cube.client("cpu")
        out = c.create(np.zeros(10))
        c.launch(twice, 1, 32, c.create(np.arange(10.0)), out)
        assert (c.read(out) == 2.0 * np.arange(10.0)).all()
        root = config.cache_root()
        assert str(root).startswith({str(temp)!r}), root
        pid = os.fork()
        if pid == 0:
            sys.exit(0)                 # a normal exit: the exit handlers run in the child
        os.waitpid(pid, 0)
        assert root.is_dir(), "the forked child removed its parent's directory"
        print("OK", root)
    '''))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=TIMEOUT_S, env={**os.environ, "TMPDIR": str(temp),
                                                  "NUMBA_CUBE_CACHE_DIR": str(refused)})
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-3000:]
    assert [p.name for p in temp.iterdir() if p.name.startswith("numba_cube-")] == []
    assert os.listdir(refused) == []
