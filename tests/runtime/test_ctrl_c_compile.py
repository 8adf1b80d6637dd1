"""Ctrl-C during a first launch's compile (``server.op_launch``, ``host_mechanism._compiled``).

A real process, a real SIGINT: the child launches a kernel on the CPU backend with an empty cache
directory, so the launch compiles; a Numba compiler event listener of the child says so on
stdout when the chosen compiler pass starts, then blocks on its stdin, and the parent sends
``SIGINT`` then closes the child's stdin (no sleeps: the child waits in the compile until then).
A Ctrl-C during a compile is taken when the compile ends (``runtime/client/interrupts.py``). Pinned
(CONTRACT.md section 4.1, README's failure section): ``KeyboardInterrupt`` is raised at the
launch; a read of the launch's output raises ``LaunchFailure`` whose root is that
``KeyboardInterrupt`` (never the buffer's uninitialised bytes); the device stays usable
(``sync()`` raises nothing, the same kernel compiles again and computes what NumPy computes,
another kernel runs); nothing broken is cached, in memory (the relaunch) or on disk (a second
process on the same cache directory computes right).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

_CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    from numba import cuda
    from numba.core import event
    import numba_cube as cube

    @cube.kernel
    def fill(out, v):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = v * 2.0 + i

    @cube.kernel
    def seven(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 7.0

    client = cube.client("cpu")
    out = client.empty(3, np.float64)
    wanted = [sys.argv[1]]          # a compiler pass name, or "" for no interrupt

    class StopAt(event.Listener):
        def on_start(self, ev):
            if wanted[0] and ev.data["name"].startswith(wanted[0]):
                wanted[0] = ""
                print("compiling", flush=True)
                sys.stdin.readline()        # until the parent has sent SIGINT and closed stdin

        def on_end(self, ev):
            pass

    listener = StopAt()
    event.register("numba:run_pass", listener)
    try:
        client.launch(fill, 1, 32, out, 1.5)
        print("launch returned", flush=True)
    except KeyboardInterrupt:
        print("interrupted at launch", flush=True)
    event.unregister("numba:run_pass", listener)
    try:
        print("read", client.read(out).tolist(), flush=True)
    except cube.LaunchFailure as failure:
        print("read failed", type(failure.root).__name__, flush=True)
    client.sync()
    print("synced", flush=True)
    client.launch(fill, 1, 32, out, 1.5)
    print("relaunch", client.read(out).tolist(), flush=True)
    other = client.empty(3, np.float64)
    client.launch(seven, 1, 32, other)
    print("other", client.read(other).tolist(), flush=True)
''')


def _child(script, cache_dir, wanted):
    env = dict(os.environ, NUMBA_CUBE_CACHE_DIR=str(cache_dir), PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, str(script), wanted], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.parametrize("compiler_pass", ["translate_bytecode", "native_lowering"])
def test_ctrl_c_during_the_first_compile_fails_the_launch_and_caches_nothing(tmp_path,
                                                                            compiler_pass):
    """Interrupted as Numba starts compiling the generated module, or as it lowers it to LLVM:
    ``KeyboardInterrupt`` at the launch, the output failed with it as root, ``sync()`` clean,
    the same kernel compiles again and is right, another kernel runs, and a later process on
    the same cache directory computes right (nothing broken was written)."""
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    expected = (1.5 * 2.0 + np.arange(3.0)).tolist()
    proc = _child(script, tmp_path / "cache", compiler_pass)
    try:
        first = proc.stdout.readline()
        assert first == "compiling\n", first + proc.stderr.read()
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.splitlines() == ["interrupted at launch", "read failed KeyboardInterrupt", "synced",
                                f"relaunch {expected}", f"other {[7.0] * 3}"], err
    proc = _child(script, tmp_path / "cache", "")
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.splitlines()[:2] == ["launch returned", f"read {expected}"], err


_CHILD_WAITING = textwrap.dedent('''
    import sys, threading
    import numpy as np
    from numba import cuda
    from numba.core import event
    import numba_cube as cube

    @cube.kernel
    def fill(out, v):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = v * 2.0 + i

    client = cube.client("cpu")
    out, other = client.empty(3, np.float64), client.create(np.arange(3.0))
    go_on = threading.Event()

    class Hold(event.Listener):
        def on_start(self, ev):
            if threading.current_thread().name == "launcher" and not go_on.is_set():
                print("compiling", flush=True)
                go_on.wait()            # the compile holds the device until main was interrupted

        def on_end(self, ev):
            pass

    event.register("numba:run_pass", Hold())
    launcher = threading.Thread(target=client.launch, args=(fill, 1, 32, out, 1.5),
                                name="launcher")
    launcher.start()
    sys.stdin.readline()                # the parent's line: the launcher is compiling
    try:
        print("reading", flush=True)
        client.read(other)              # waits for the device, which the compile holds
        print("read returned", flush=True)
    except KeyboardInterrupt:
        print("interrupted at read", flush=True)
    go_on.set()
    launcher.join()
    print("out", client.read(out).tolist(), flush=True)
    print("other", client.read(other).tolist(), flush=True)
''')


def test_ctrl_c_while_waiting_for_another_threads_compile_interrupts_the_wait_only(tmp_path):
    """Another thread's first launch compiles, holding the device; the main thread's ``read``
    waits for it and gets Ctrl-C: ``KeyboardInterrupt`` there, the other thread's launch is not
    disturbed (its output is NumPy's) and the device answers the next read."""
    script = tmp_path / "child.py"
    script.write_text(_CHILD_WAITING)
    proc = _child(script, tmp_path / "cache", "")
    try:
        assert proc.stdout.readline() == "compiling\n"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "reading\n"
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    expected = (1.5 * 2.0 + np.arange(3.0)).tolist()
    assert out.splitlines() == ["interrupted at read", f"out {expected}", "other [0.0, 1.0, 2.0]"]
