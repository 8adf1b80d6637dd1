"""What a dry run and the disk cache buy (issues 5 and 15).

1. First real launch of a fresh kernel, with and without a dry run before it, in one process
   (goal: at least 10x faster after the dry run: the dry run did the compiling).
2. A *new process* with a warm on-disk cache (translation, generated module, Numba's cache)
   against a cold one (an empty cache directory), for a tiny barrier-free kernel (saxpy) and a
   block reduction (shared memory, barriers, an atomic). Goal of issue 15: the warm process
   reaches its first launch in <= 0.1x of the cold time. Each child times, in this order:

   - ``import numba_cube``; ``import numba``; the kernel's module (its ``from numba import cuda``
     is numba-cuda's import); ``cube.client("cpu")``; the kernel id (``Kernel.id``);
   - the first launch (``client.launch`` + ``client.read``): the ``import`` of
     ``backends/cpu/translate.py`` it does (which imported the whole translator before issue
     15; done just before the launch here so that the launch's parts can be timed), the
     translation (the cache lookup, or the translator's imports and run), loading the generated
     module
     (``translations.load_module``), Numba (the outermost ``Dispatcher.compile``: its cache load,
     or the compile), the id check before compiling (``Kernel.check_frozen``), and the rest (the
     runtime, the kernel's run).

   The reference for Numba's own floor is a bare ``@njit(parallel=True, cache=True)`` function
   (and a serial ``@njit(cache=True)`` one) in a file, first called in a new process with a warm
   and a cold ``NUMBA_CACHE_DIR``. Times are medians over ``--repeats`` children of each kind
   (3 by default), warm and cold children alternating so that the drift of a shared machine
   hits both alike; the CPU-time rows (the process's, all its threads) move less than wall
   times with the machine's load.

Run: ``python benchmarks/bench_launch_modes.py [--repeats N]``
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from common import Table, alternate

KERNELS = {
    "saxpy": ("""from numba import cuda
SALT = {salt!r}


def saxpy_{tag}(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + y[i] + SALT
""", "c.launch(k, 256, 256, 2.0, x, y)"),
    "block reduction": ("""import numpy as np
from numba import cuda
SALT = {salt!r}
TPB = 256


def block_sum_{tag}(x, y):
    sm = cuda.shared.array(TPB, np.float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[tid] = x[i] + SALT if i < x.size else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if tid < s:
            sm[tid] += sm[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        cuda.atomic.add(y, 0, sm[0])
""", "c.launch(k, 256, 256, x, y)"),
}

#: what a child measures, in the order it prints them
STAGES = ("import numba_cube", "import numba", "kernel module (numba.cuda)", "client",
          "kernel id", "buffers", "launch: import translate.py", "launch: translation",
          "launch: load module", "launch: Numba cache load/compile", "launch: id check",
          "launch: the rest", "first launch", "first launch, CPU time", "whole process",
          "whole process, CPU time")

CHILD = """
import json, importlib, sys, time
T = {{}}
t0 = t = time.perf_counter()
cpu0 = time.process_time()
def lap(name):
    global t
    now = time.perf_counter(); T[name] = now - t; t = now
import numpy as np
import numba_cube as cube
lap("import numba_cube")
import numba
lap("import numba")
sys.path.insert(0, {tmp!r})
mod = importlib.import_module("k_{tag}")
lap("kernel module (numba.cuda)")
c = cube.client("cpu")
lap("client")
k = cube.kernel(getattr(mod, {fname!r}))
k.id
lap("kernel id")
x, y = c.create(np.ones(1 << 16)), c.create(np.zeros(1 << 16))
c.sync()
lap("buffers")
# The first launch imports translate.py (before issue 15 that was the whole translator): timed
# here, as the launch's first part, so that the launch's own pieces can be timed below.
launch_start, launch_cpu = t, time.process_time()
from numba_cube.backends.cpu import codecache, translate
lap("launch: import translate.py")
from numba.core.dispatcher import Dispatcher
spent = {{"build": 0.0, "load": 0.0, "numba": 0.0, "check": 0.0}}
depth = [0]
def timing(fn, what, outermost=False):
    def timed(*args, **kwargs):
        depth[0] += 1
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
            if not outermost or depth[0] == 0:
                spent[what] += time.perf_counter() - start
    return timed
translate.build_program = timing(translate.build_program, "build")
codecache.load_module = timing(codecache.load_module, "load")
Dispatcher.compile = timing(Dispatcher.compile, "numba", outermost=True)
type(k).check_frozen = timing(type(k).check_frozen, "check")
if {mode!r} == "dry":
    with cube.dry_run():
        {launch}
    c.sync()
    spent.update(build=0.0, load=0.0, numba=0.0, check=0.0)
    launch_start = t = time.perf_counter()
    launch_cpu = time.process_time()
{launch}
c.read(y)
lap("launch itself")
T["first launch"] = time.perf_counter() - launch_start
T["first launch, CPU time"] = time.process_time() - launch_cpu
T["whole process"] = time.perf_counter() - t0
T["whole process, CPU time"] = time.process_time() - cpu0
T["launch: translation"] = spent["build"] - spent["load"]
T["launch: load module"] = spent["load"]
T["launch: Numba cache load/compile"] = spent["numba"]
T["launch: id check"] = spent["check"]
T["launch: the rest"] = T["launch itself"] - spent["build"] - spent["numba"] - spent["check"]
print("TIMES", json.dumps(T))
"""

REFERENCE = """import numba
from numba import prange


@numba.njit(parallel=True, cache=True, nogil=True)
def par(a, x, y):
    for i in prange(y.size):
        y[i] = a * x[i] + y[i] + {salt!r}


@numba.njit(cache=True, nogil=True)
def ser(a, x, y):
    for i in range(y.size):
        y[i] = a * x[i] + y[i] + {salt!r}
"""

REFERENCE_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import numba
t1 = time.perf_counter()
sys.path.insert(0, {tmp!r})
import bare_{tag} as m
x, y = np.ones(1 << 16), np.zeros(1 << 16)
t2, c2 = time.perf_counter(), time.process_time()
m.{fname}(2.0, x, y)
t3, c3 = time.perf_counter(), time.process_time()
print("TIMES", json.dumps({{"import numba": t1 - t0, "first call": t3 - t2,
                           "first call, CPU time": c3 - c2, "whole process": t3 - t0}}))
"""


def run_child(code: str, env_extra: dict) -> dict:
    env = {**os.environ, **env_extra}
    # Imports as from an installed package: .pyc files written once and then read (a new
    # process without them compiles numba_cube's modules again, tens of milliseconds).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("TIMES "))
    return json.loads(line[len("TIMES "):])


def kernel_child(kind: str, mode: str, cache_dir: str, tag: str, salt: float, tmp: str) -> dict:
    source, launch = KERNELS[kind]
    fname = ("saxpy_" if kind == "saxpy" else "block_sum_") + tag
    with open(os.path.join(tmp, f"k_{tag}.py"), "w") as f:
        f.write(source.format(salt=salt, tag=tag))
    code = CHILD.format(tag=tag, fname=fname, mode=mode, tmp=tmp, launch=launch)
    return run_child(code, {"NUMBA_CUBE_CACHE_DIR": cache_dir})


def medians(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def breakdown(title: str, warm: dict, cold: dict, stages, goal_row: str) -> None:
    t = Table(title)
    for stage in stages:
        t.row(stage, warm[stage], cold[stage], "cold (empty cache dir)",
              goal=0.1 if stage == goal_row else None)


def main(repeats: int = 3):
    with tempfile.TemporaryDirectory() as tmp:
        salt = time.time()
        t = Table(f"launch modes: what a dry run buys (median of {repeats})")
        plain, dry = [], []
        for r in range(repeats):             # each child its own kernel module and cache
            plain.append(kernel_child("saxpy", "plain", os.path.join(tmp, f"p{r}"), f"p{r}",
                                      salt, tmp))
            dry.append(kernel_child("saxpy", "dry", os.path.join(tmp, f"d{r}"), f"d{r}", salt,
                                    tmp))
        t.row("first real launch after a dry run", medians(dry)["first launch"],
              medians(plain)["first launch"], "first launch without one", goal=0.1)

        for n, kind in enumerate(KERNELS):
            tag = f"w{n}"                    # one kernel module; each cold child its own cache
            def child(cache):
                return kernel_child(kind, "plain", os.path.join(tmp, cache), tag, salt, tmp)
            colds, warms = alternate(lambda r: child(f"{tag}c{r}"), lambda: child(f"{tag}c0"),
                                     repeats)
            breakdown(f"new process, warm vs cold cache: {kind} (median of {repeats})",
                      medians(warms), medians(colds), STAGES, "first launch")

        with open(os.path.join(tmp, "bare_r.py"), "w") as f:
            f.write(REFERENCE.format(salt=salt))
        for fname, what in (("par", "njit(parallel=True, cache=True)"),
                            ("ser", "njit(cache=True)")):
            def bare_child(r):
                code = REFERENCE_CHILD.format(tmp=tmp, tag="r", fname=fname)
                return run_child(code, {"NUMBA_CACHE_DIR": os.path.join(tmp, f"nb_{fname}{r}")})
            colds, warms = alternate(bare_child, lambda: bare_child(0), repeats)
            breakdown(f"Numba's own floor: a bare {what} function (median of {repeats})",
                      medians(warms), medians(colds), ("import numba", "first call",
                                                       "first call, CPU time", "whole process"),
                      "first call")


if __name__ == "__main__":
    main(repeats=int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 3)
