"""CUDA warm starts (issue 18): a new process with a warm disk cache against a cold one.

Each measurement is a fresh Python process that reaches the first launch of a small kernel
(axpy on 2**16 float64; 256 on the fake driver) and checks its result against NumPy:

- numba_cube, **cold** (an empty ``NUMBA_CUBE_CACHE_DIR``: numba-cuda compiles) and **warm**
  (the cache a cold child filled: the kernel is loaded from ``backends/cuda/kernels/diskcache.py``);
- the reference, plain numba-cuda ``cuda.jit(cache=True)``, cold and warm (``NUMBA_CACHE_DIR``).

Printed: for both, warm against cold, of the first launch (``client.launch`` + ``client.read``;
numba-cuda's ``k[grid, block](...)`` + ``copy_to_host``; goal of issue 18: <= 0.1) and of the
whole process up to the checked result; then where the warm numba_cube process spends its time:
``import numba_cube``, the kernel's module (its ``from numba import cuda``), the CUDA backend's
import (the driver bindings, the mechanism), the client start (``cuInit``, the context), the
buffers, the kernel id, and inside the first launch: the cache key (versions, the digest of
numba_cube's sources), the cache lookup (reading and verifying the
entry), the module load (``cuModuleLoadData``/``cuModuleGetFunction``), numba-cuda's compile (0
when warm) and the rest (the runtime, the launch, the read). It also lists the modules the warm
first launch imported, and whether numba-cuda's driver layer started at all (it does when
numba-cuda compiles or loads a module).

Times are medians over ``--repeats`` children of each kind (3 by default), warm and cold
children alternating so that a shared machine's drift hits both alike.

Run on a GPU machine: ``PYTHONPATH=. python3 benchmarks/bench_cuda_warm_start.py``, well under a
minute. ``--fake`` runs the same children on the fake driver of ``tests/cuda/cases`` (its compiler
hands back fake cubins; the reference runs under numba-cuda's simulator, which caches nothing):
the numbers mean nothing there, it checks that the benchmark itself works before GPU time is
spent on it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Table, alternate  # noqa: E402

FAKE = "--fake" in sys.argv
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(REPO, "tests", "cuda", "cases")
N = 256 if FAKE else 1 << 16       # the simulator runs every unit in Python

KERNEL = """from numba import cuda


def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i] + {salt!r}
"""

REFERENCE_KERNEL = """from numba import cuda


@cuda.jit(cache=True)
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i] + {salt!r}
"""

#: what a numba_cube child times, in the order it prints them
STAGES = ("import numba_cube", "kernel module (numba.cuda)", "import CUDA backend", "client start",
          "buffers", "kernel id", "launch: cache key", "launch: cache lookup", "launch: module load",
          "launch: numba-cuda compile", "launch: the rest", "first launch", "whole process")

CHILD = """
import json, sys, time
T = {{}}
t0 = t = time.perf_counter()
def lap(name):
    global t
    now = time.perf_counter(); T[name] = now - t; t = now
import numpy as np
import numba_cube as cube
lap("import numba_cube")
sys.path.insert(0, {tmp!r})
import kernel_{tag} as mod
lap("kernel module (numba.cuda)")
from numba_cube.backends.cuda.kernels import diskcache  # what cube.client("cuda") imports
from numba_cube.backends.cuda.driver import driver
from numba_cube.backends.cuda import server
if {fake!r}:
    sys.path.insert(0, {cases!r})
    from _cuda_fake import register_fake_cuda
    api = register_fake_cuda("fakecuda", devices=1, images=True)
lap("import CUDA backend")
c = cube.client("fakecuda:0" if {fake!r} else "cuda")
c.sync()
lap("client start")
x, y = np.arange({n}, dtype=np.float64), np.ones({n})
hx, hy, out = c.create(x), c.create(y), c.empty({n})
c.sync()
lap("buffers")
k = cube.kernel(mod.axpy)
k.id
lap("kernel id")
spent = {{"key": 0.0, "lookup": 0.0, "module": 0.0, "compile": 0.0}}
def timing(owner, name, what):
    fn = getattr(owner, name)
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[what] += time.perf_counter() - start
    setattr(owner, name, timed)
timing(diskcache, "entry_key", "key")
timing(diskcache.DiskCache, "load", "lookup")
timing(driver.Driver, "module_load_data", "module")
timing(driver.Driver, "module_get_function", "module")
compiler = c.server.mechanism.compiler
timing(type(compiler), "compile", "compile")
before = set(sys.modules)
launch_start = time.perf_counter()
c.launch(k, ({n} + 255) // 256, 256, 2.0, hx, hy, out)
result = c.read(out)
T["first launch"] = time.perf_counter() - launch_start
T["whole process"] = time.perf_counter() - t0
assert np.array_equal(result, 2.0 * x + y + {salt!r}), "wrong result"
T["launch: cache key"] = spent["key"]
T["launch: module load"] = spent["module"]
T["launch: cache lookup"] = spent["lookup"] - spent["module"]
T["launch: numba-cuda compile"] = spent["compile"]
T["launch: the rest"] = T["first launch"] - spent["key"] - spent["lookup"] - spent["compile"]
stats = c.server.stats
T["hits"] = stats["cuda_disk_cache_hits"]
T["imported"] = sorted(set(sys.modules) - before)
numba_cuda_driver = sys.modules.get("numba.cuda.cudadrv.driver")   # its own driver layer: did it start?
T["numba-cuda started"] = bool(getattr(getattr(numba_cuda_driver, "driver", None), "pid", None))
print("TIMES", json.dumps(T))
"""

REFERENCE_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
sys.path.insert(0, {tmp!r})
import reference_{tag} as mod
from numba import cuda
x, y = np.arange({n}, dtype=np.float64), np.ones({n})
dx, dy, dout = cuda.to_device(x), cuda.to_device(y), cuda.device_array({n})
cuda.synchronize()
t1 = time.perf_counter()
mod.axpy[({n} + 255) // 256, 256](2.0, dx, dy, dout)
result = dout.copy_to_host()
t2 = time.perf_counter()
assert np.array_equal(result, 2.0 * x + y + {salt!r}), "wrong result"
print("TIMES", json.dumps({{"first launch": t2 - t1, "whole process": t2 - t0}}))
"""


def run_child(code: str, env_extra: dict) -> dict:
    env = {**os.environ, **env_extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)    # imports as from an installed package
    env.pop("NUMBA_CUBE_TEST_CUDA_DEVICE", None)
    if not (FAKE and "NUMBA_ENABLE_CUDASIM" in env_extra):
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    if out.returncode:
        raise RuntimeError(out.stderr[-4000:])
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("TIMES "))
    return json.loads(line[len("TIMES "):])


def medians(runs: list[dict], keys) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in keys}


def main(repeats: int = 3) -> None:
    salt = float(os.getpid())          # a kernel no earlier run of this benchmark cached
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "kernel_b.py"), "w") as f:
            f.write(KERNEL.format(salt=salt))
        with open(os.path.join(tmp, "reference_b.py"), "w") as f:
            f.write(REFERENCE_KERNEL.format(salt=salt))
        code = CHILD.format(tmp=tmp, tag="b", n=N, salt=salt, fake=FAKE, cases=CASES)
        reference = REFERENCE_CHILD.format(tmp=tmp, tag="b", n=N, salt=salt)
        sim = {"NUMBA_ENABLE_CUDASIM": "1"} if FAKE else {}

        def ours(cache):
            return run_child(code, {"NUMBA_CUBE_CACHE_DIR": os.path.join(tmp, cache)})

        def theirs(cache):
            return run_child(reference, {"NUMBA_CACHE_DIR": os.path.join(tmp, cache), **sim})

        colds, warms = alternate(lambda r: ours(f"cube{r}"), lambda: ours("cube0"), repeats)
        ref_colds, ref_warms = alternate(lambda r: theirs(f"nb{r}"), lambda: theirs("nb0"), repeats)

    warm, cold = medians(warms, STAGES), medians(colds, STAGES)
    ref_keys = ("first launch", "whole process")
    ref_warm, ref_cold = medians(ref_warms, ref_keys), medians(ref_colds, ref_keys)
    where = " (fake driver: numbers mean nothing)" if FAKE else ""
    t = Table(f"CUDA warm start vs cold start, new processes (median of {repeats}){where}")
    t.row("numba_cube: first launch", warm["first launch"], cold["first launch"],
          "cold (empty cache dir)", goal=0.1)
    t.row("numba_cube: whole process to checked result", warm["whole process"],
          cold["whole process"], "cold (empty cache dir)")
    t.row("numba-cuda cache=True: first launch", ref_warm["first launch"], ref_cold["first launch"],
          "cold (empty NUMBA_CACHE_DIR)")
    t.row("numba-cuda cache=True: whole process", ref_warm["whole process"],
          ref_cold["whole process"], "cold (empty NUMBA_CACHE_DIR)")
    t.row("first launch: numba_cube warm vs numba-cuda warm", warm["first launch"],
          ref_warm["first launch"], "numba-cuda cache=True, warm")
    t = Table("where a warm numba_cube process spends its time (warm vs cold, medians)")
    for stage in STAGES:
        t.row(stage, warm[stage], cold[stage], "cold")
    print(f"\nwarm children found their kernel on disk: {[w['hits'] for w in warms]} "
          f"(cold: {[c['hits'] for c in colds]})")
    print(f"numba-cuda's driver layer started (cuInit through numba-cuda) in warm children: "
          f"{[w['numba-cuda started'] for w in warms]}, cold: {[c['numba-cuda started'] for c in colds]}")
    imported = warms[-1]["imported"]
    print(f"modules the warm first launch imported ({len(imported)}):",
          ", ".join(imported[:60]) + (" ..." if len(imported) > 60 else "") if imported else "none")
    print("modules the cold first launch imported:", len(colds[-1]["imported"]))


if __name__ == "__main__":
    main(repeats=int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 3)
