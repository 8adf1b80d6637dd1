"""The CUDA backend's costs against numba-cuda and the raw driver, on one GPU, in one process.

Sections (each prints its table; a section that fails prints why and the others still run):

1. **Launch host time** of a 3-array + int kernel (1 cube of 32 units): numba_cube
   ``client.launch`` vs plain numba-cuda ``k[1, 32](...)`` vs raw ``cuda.core.launch`` of the
   *same* compiled kernel (its flattened numba-cuda parameters) vs raw ``cuLaunchKernel`` with a
   pre-packed parameter block (numba_cube's floor). Plus where numba_cube's time goes: the same
   launch on the general path (the warm path of ``backends/cuda/launch/fast_path.py`` off), the general
   server operation alone, the driver calls. Goal: <= 8 us per launch with inferred dependencies.
1b. **Launch floor** (``launch_floor``): the warm launch's driver call six ways in one process:
   cuda-python's ``cuLaunchKernel``, libcuda's symbol through ctypes with argtypes and with
   pre-built ctypes arguments, the Numba-compiled trampoline of ``backends/cuda/driver/launch_call.py``
   and its thunk (``thunks.py``); the whole warm launch with its driver call through the thunk vs
   through the trampoline vs through cuda-python; and a cross-stream wait (``cuEventRecord`` +
   ``cuStreamWaitEvent``) through cuda-python vs the one compiled call of ``Driver.stream_waiter``.
2. **Dependent launches across two streams**: a chain of launches, each reading the previous
   one's output, on one stream vs alternating between two (each launch then waits on the other
   stream's event), the two taking turns round by round: the added host cost per dependent
   launch.
3. **Dynamic counts**: read-back vs device-count wrapper, host time per launch, on an idle stream
   and behind ~50 us of queued work (where the read-back blocks the host).
4. **Graphs**: replay of a 100-launch capture vs the same 100 launches issued eagerly, per kernel.
5. **Bandwidth**: a large elementwise kernel (``out = a*x + y``, float32, 2**26 elements, 768 MiB
   moved per launch) through numba_cube vs numba-cuda, GB/s. Goal: ratio >= 0.99 (the runtime adds nothing on the device); both sides end with the same cuCtxSynchronize.
6. **Kernel errors** (``kernel_errors``, issue 30): a kernel that can raise (a ``raise`` never
   taken) checked as numba_cube now compiles it (an error word per launch:
   ``backends/cuda/kernels/exception_codegen.py``, ``error_slots.py``) vs the same code compiled as before
   (``NUMBA_CUBE_CUDA_KERNEL_ERRORS=off``: the exception would be lost), in one process: warm
   launch host time (the section 1 kernel, alone and followed by a kernel reading its output),
   and the section 5 bandwidth kernel's device time. Goals: +0.3 us per warm launch at most, no
   device-side cost (ratio >= 0.99). A kernel that cannot raise is timed alongside: it takes the
   code path it took before (no word), so its number is section 1's.

Run on a GPU machine: ``PYTHONPATH=. python3 benchmarks/bench_cuda.py`` (``--only=launch_host_time,
bandwidth`` runs some sections). A JSON copy of every
number goes to ``$OUT/bench_cuda.json`` when ``OUT`` is set. Times are medians of repeats after a
warm-up (in section 1 the cases take turns round by round); host times are launch-loop wall time
/ launches, with the device synchronized outside the timed loop.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Table  # noqa: E402

RESULTS: dict = {}
SUMMARY: list[str] = []
#: ``--smoke``: tiny counts, numba_cube parts only, on the fake driver of tests/cuda/cases (no GPU
#: needed): checks that the benchmark itself runs before device time is spent on it.
SMOKE = "--smoke" in sys.argv
DEVICE = "fakecuda" if SMOKE else "cuda"
N_LAUNCH = 200 if SMOKE else 20000


def host_time(fn, n: int, sync, repeats: int = 5, warm: int = 300) -> float:
    """Median seconds per call of ``fn`` over ``n`` back-to-back calls (sync outside the loop)."""
    if SMOKE:
        n, repeats, warm = min(n, 20), 2, min(warm, 2)
    for _ in range(warm):
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
        sync()
    return statistics.median(samples)


def interleaved_host_time(cases: dict, n: int, rounds: int = 7, warm: int = 300) -> dict:
    """Median seconds per call of each case ``name -> (fn, sync)``, the cases taking turns round
    by round: a host whose speed drifts during the run (clock, other tenants) then biases none of
    them, and the ratios printed are between numbers measured side by side. Each round starts one
    case later than the round before, so no case always runs first after the previous round's
    sync (or always right after the same neighbour)."""
    if SMOKE:
        n, rounds, warm = min(n, 20), 2, 2
    for fn, sync in cases.values():
        for _ in range(warm):
            fn()
        sync()
    samples: dict = {name: [] for name in cases}
    names = list(cases)
    for r in range(rounds):
        turn = names[r % len(names):] + names[:r % len(names)]
        for name in turn:
            fn, sync = cases[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - t0) / n)
            sync()
    return {name: statistics.median(v) for name, v in samples.items()}


def wall_time(fn, sync, repeats: int = 5, warm: int = 2) -> float:
    """Median seconds of ``fn(); sync()``."""
    if SMOKE:
        repeats, warm = 1, 1
    for _ in range(warm):
        fn()
        sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def section(fn):
    def run():
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - one broken section must not lose the others
            print(f"\n!! section {fn.__name__} failed: {type(exc).__name__}: {exc}")
            traceback.print_exc(limit=6)
            RESULTS[fn.__name__] = {"error": f"{type(exc).__name__}: {exc}"}
            SUMMARY.append(f"{fn.__name__}: FAILED ({type(exc).__name__}: {exc})")
    run.__name__ = fn.__name__
    return run


# ----------------------------------------------------------------------------- kernels
try:
    from numba import cuda  # noqa: E402
except ImportError as exc:  # pragma: no cover - a machine without numba-cuda
    print(f"bench_cuda: numba-cuda is not importable here ({exc})")
    sys.exit(2)

import numba_cube as cube  # noqa: E402


def k4_py(a, b, c, n):
    i = cuda.grid(1)
    if i < n:
        c[i] = a[i] + b[i]


def axpy_py(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def busy_py(x, spin):
    # ~spin iterations of dependent work in one unit: a kernel of a chosen duration.
    if cuda.grid(1) == 0:
        acc = x[0]
        for k in range(spin):
            acc = acc * 0.999999 + 1e-9
        x[0] = acc


def write_count_py(count, blocks):
    if cuda.grid(1) == 0:
        count[0] = blocks
        count[1] = 1
        count[2] = 1


def k4r_py(a, b, c, n):
    # Section 6: can raise (a path never taken), so each launch is checked.
    i = cuda.grid(1)
    if i < n:
        if n < 0:
            raise ValueError("negative size")
        c[i] = a[i] + b[i]


def k4r_off_py(a, b, c, n):
    # The same code under another name (another kernel id): compiled with checking off.
    i = cuda.grid(1)
    if i < n:
        if n < 0:
            raise ValueError("negative size")
        c[i] = a[i] + b[i]


def axpyr_py(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        if a != a:
            raise ValueError("the coefficient is NaN")
        out[i] = a * x[i] + y[i]


def axpyr_off_py(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        if a != a:
            raise ValueError("the coefficient is NaN")
        out[i] = a * x[i] + y[i]


K4 = cube.kernel(k4_py)
K4_PYTHON_CALL = cube.kernel(k4_py)     # the same kernel, its warm entry firing through cuda-python
K4_TRAMPOLINE = cube.kernel(k4_py)      # and again, firing through the Numba trampoline, not a thunk
AXPY = cube.kernel(axpy_py)
BUSY = cube.kernel(busy_py)
WRITE_COUNT = cube.kernel(write_count_py)
K4R, K4R_OFF = cube.kernel(k4r_py), cube.kernel(k4r_off_py)
AXPYR, AXPYR_OFF = cube.kernel(axpyr_py), cube.kernel(axpyr_off_py)


def sync_all(client):
    def s():
        client.sync()
    return s


# ----------------------------------------------------------------------------- 1. launch
@section
def launch_host_time():
    client = cube.client(DEVICE)
    server = client.server
    n = 1024
    ha, hb, hc = client.create(np.ones(n, np.float32)), client.create(np.ones(n, np.float32)), client.empty(n, np.float32)
    sync = sync_all(client)
    cases = {"ours": (lambda: client.launch(K4, 1, 32, ha, hb, hc, n), sync)}

    if not SMOKE:
        nk = cuda.jit(k4_py)
        da, db, dc = (cuda.to_device(np.ones(n, np.float32)), cuda.to_device(np.ones(n, np.float32)),
                      cuda.device_array(n, np.float32))
        cases["numba"] = (lambda: nk[1, 32](da, db, dc, n), cuda.synchronize)

        # The same kernel through cuda.core.launch, with numba-cuda's flattened parameters.
        try:
            from cuda.core import Device, LaunchConfig, launch
        except ImportError:
            from cuda.core.experimental import Device, LaunchConfig, launch
        nk[1, 32](da, db, dc, n)
        kernel = nk.overloads[next(iter(nk.overloads))]
        ck = kernel._codelibrary.get_cufunc().kernel
        dev = Device(server.mechanism.index)
        dev.set_current()
        st = dev.create_stream()
        cfg = LaunchConfig(grid=1, block=32)

        def flat(arr):
            p = arr.device_ctypes_pointer.value
            return (np.uint64(0), np.uint64(0), np.int64(arr.size), np.int64(4), np.uint64(p),
                    np.int64(arr.size), np.int64(4))

        args = flat(da) + flat(db) + flat(dc) + (np.int64(n),)
        cases["core"] = (lambda: launch(st, cfg, ck, *args), st.sync)
        server.mechanism.activate()

    # Raw cuLaunchKernel with numba_cube's packed launch (the floor of our launch path), and
    # the event record the general path adds per launch.
    from numba_cube.runtime.server import LaunchRequest
    from numba_cube.runtime.client.modes import LaunchMode

    req = LaunchRequest(K4, cube.CubeCount.coerce(1), cube.CubeDim.coerce(32),
                        (ha.binding(), hb.binding(), hc.binding(), np.int64(n)), None, client.stream_id,
                        LaunchMode.EXECUTE, ())
    drv = server.mechanism.driver.api
    packed = server.channel.call(server.mechanism.packed_launch_of, req)
    handle = server.streams.handle_of(client.stream_id)
    func, addr = packed.kernel.function, packed.block.address
    cases["raw"] = (lambda: drv.cuLaunchKernel(func, 1, 1, 1, 32, 1, 1, 0, handle, addr, 0), sync)
    ev = server.streams.events.get()
    cases["record"] = (lambda: drv.cuEventRecord(ev, handle), sync)
    # Where numba_cube's time goes: the same launch on the general path (a client with the warm
    # path off, on the same stream), and the general server operation alone.
    general_client = client.set_stream(client.stream_id)
    general_client._fast = None
    cases["general"] = (lambda: general_client.launch(K4, 1, 32, ha, hb, hc, n), sync)
    cases["server_op"] = (lambda: server.channel.call(server.op_launch, req), sync)

    t_ = interleaved_host_time(cases, N_LAUNCH)
    ours, raw_t, rec_t, general, server_only = (t_[k] for k in ("ours", "raw", "record", "general", "server_op"))
    numba_t, core_t = t_.get("numba", ours), t_.get("core", ours)
    server.streams.events.put(ev)

    t = Table("1. launch host time, 3 arrays + int, 1 cube of 32 units (us per launch)")
    t.row("numba_cube client.launch vs numba-cuda k[1,32]", ours, numba_t, "numba-cuda")
    t.row("numba_cube vs raw cuda.core.launch (same kernel)", ours, core_t, "cuda.core")
    t.row("numba_cube vs raw cuLaunchKernel (packed launch)", ours, raw_t, "cuLaunchKernel")
    t.row("  general path (warm path off) vs warm path", general, ours, "warm path")
    t.row("  general path's server op_launch alone", server_only, ours, "warm path")
    t.row("  cuLaunchKernel + cuEventRecord (driver)", raw_t + rec_t, ours, "warm path")
    met = ours <= 8e-6
    RESULTS["launch"] = dict(numba_cube_us=ours * 1e6, numba_cuda_us=numba_t * 1e6, cuda_core_us=core_t * 1e6,
                             raw_culaunch_us=raw_t * 1e6, event_record_us=rec_t * 1e6,
                             general_path_us=general * 1e6, server_op_us=server_only * 1e6)
    SUMMARY.append(f"launch: numba_cube {ours * 1e6:.1f} us | numba-cuda {numba_t * 1e6:.1f} us "
                   f"({ours / numba_t:.2f}x) | cuda.core {core_t * 1e6:.1f} us | raw cuLaunchKernel "
                   f"{raw_t * 1e6:.1f} us | general path {general * 1e6:.1f} us | goal <= 8 us: "
                   f"{'met' if met else 'NOT met'}")


# ----------------------------------------------------------------------------- 1b. launch floor
@section
def launch_floor():
    """The driver call of a warm launch, five ways, in one process (the cases take turns): what
    ``backends/cuda/driver/launch_call.py`` chose against what it replaced."""
    import ctypes

    from numba_cube.backends.cuda.driver import launch_call
    from numba_cube.runtime.client.modes import LaunchMode
    from numba_cube.runtime.server import LaunchRequest

    client = cube.client(DEVICE)
    server = client.server
    n = 1024
    ha, hb, hc = client.create(np.ones(n, np.float32)), client.create(np.ones(n, np.float32)), client.empty(n, np.float32)
    sync = sync_all(client)
    mech = server.mechanism
    driver = mech.driver
    # Two kernel objects of one function: both warm, one of them firing through cuda-python.
    for k in (K4, K4_PYTHON_CALL, K4_TRAMPOLINE):
        for _ in range(2):
            client.launch(k, 1, 32, ha, hb, hc, n)
    sync()
    # Past the warm-up in which an entry still calls cuda-python (launch_call.COMPILE_AFTER).
    for _ in range(launch_call.COMPILE_AFTER + 1):
        client.launch(K4, 1, 32, ha, hb, hc, n)
    sync()
    (ours_entry,) = mech.warm.armed_for(K4)
    fire_form = type(ours_entry.fire).__name__     # Thunk, partial (a trampoline) or function
    (entry,) = mech.warm.armed_for(K4_PYTHON_CALL)
    entry.fire = launch_call.api_launcher(driver.api.cuLaunchKernel, entry.packed.kernel.function,
                                          entry.grid, entry.block, 0, entry.cs.handle,
                                          entry.packed.block.address)
    req = LaunchRequest(K4, cube.CubeCount.coerce(1), cube.CubeDim.coerce(32),
                        (ha.binding(), hb.binding(), hc.binding(), np.int64(n)), None, client.stream_id,
                        LaunchMode.EXECUTE, ())
    packed = server.channel.call(mech.packed_launch_of, req)
    handle = server.streams.handle_of(client.stream_id)
    func, addr = packed.kernel.function, packed.block.address
    api = driver.api
    cases = {
        "ours": (lambda: client.launch(K4, 1, 32, ha, hb, hc, n), sync),
        "ours_cuda_python": (lambda: client.launch(K4_PYTHON_CALL, 1, 32, ha, hb, hc, n), sync),
        "ours_trampoline": (lambda: client.launch(K4_TRAMPOLINE, 1, 32, ha, hb, hc, n), sync),
        "cuda_python": (lambda: api.cuLaunchKernel(func, 1, 1, 1, 32, 1, 1, 0, handle, addr, 0), sync),
    }
    entry_point = 0 if SMOKE else driver.c_entry_point("cuLaunchKernel")
    if entry_point:
        u32, u64 = ctypes.c_uint32, ctypes.c_uint64
        typed = ctypes.CFUNCTYPE(ctypes.c_int, u64, u32, u32, u32, u32, u32, u32, u32, u64, u64, u64)(entry_point)
        f_int, s_int = int(func), int(handle)
        cases["ctypes_typed"] = (lambda: typed(f_int, 1, 1, 1, 32, 1, 1, 0, s_int, addr, 0), sync)
        untyped = ctypes.CFUNCTYPE(ctypes.c_int)(entry_point)
        prebuilt = (u64(f_int), u32(1), u32(1), u32(1), u32(32), u32(1), u32(1), u32(0), u64(s_int), u64(addr), u64(0))
        cases["ctypes_prebuilt"] = (lambda: untyped(*prebuilt), sync)
        trampoline = launch_call.c_launcher(entry_point, f_int, (1, 1, 1), (32, 1, 1), 0, s_int, addr,
                                            thunk=False)
        cases["njit_trampoline"] = (trampoline, sync)
        cases["thunk"] = (launch_call.c_launcher(entry_point, f_int, (1, 1, 1), (32, 1, 1), 0, s_int, addr), sync)
        (tramp_entry,) = mech.warm.armed_for(K4_TRAMPOLINE)
        tramp_entry.fire = launch_call.c_launcher(entry_point, int(tramp_entry.packed.kernel.function),
                                                  tramp_entry.grid, tramp_entry.block, 0,
                                                  int(tramp_entry.cs.handle),
                                                  tramp_entry.packed.block.address, thunk=False)
    # A cross-stream wait: record an event on one stream, wait on it from another.
    s_producer = server.streams.stream(cube.StreamId.new())
    s_consumer = server.streams.stream(cube.StreamId.new())
    pair_event = server.streams.events.get()
    p_handle, c_handle = s_producer.handle, s_consumer.handle

    def record_wait_cuda_python():
        api.cuEventRecord(pair_event, p_handle)
        api.cuStreamWaitEvent(c_handle, pair_event, 0)
    cases["record_wait_cuda_python"] = (record_wait_cuda_python, sync)
    cases["record_wait_ours"] = (driver.stream_waiter(pair_event, p_handle, c_handle)[0], sync)
    if entry_point:
        cases["record_wait_trampoline"] = (launch_call.c_stream_waiter(
            driver.c_entry_point("cuEventRecord"), driver.c_entry_point("cuStreamWaitEvent"),
            int(pair_event), int(p_handle), int(c_handle), thunk=False)[0], sync)
    t_ = interleaved_host_time(cases, N_LAUNCH)
    t = Table(f"1b. launch floor: the driver call of a warm launch (us per launch; ours fires its {fire_form})")
    t.row("warm launch: its call vs cuda-python driver call", t_["ours"], t_["ours_cuda_python"], "cuda-python call")
    t.row("warm launch: its call vs the Numba trampoline", t_["ours"], t_["ours_trampoline"], "trampoline call")
    t.row("warm launch vs raw cuda-python cuLaunchKernel", t_["ours"], t_["cuda_python"], "cuda-python")
    for name in ("ctypes_typed", "ctypes_prebuilt", "njit_trampoline", "thunk"):
        if name in t_:
            t.row(f"  {name} vs raw cuda-python cuLaunchKernel", t_[name], t_["cuda_python"], "cuda-python")
    t.row("cross-stream record + wait: ours vs cuda-python", t_["record_wait_ours"],
          t_["record_wait_cuda_python"], "cuda-python")
    if "record_wait_trampoline" in t_:
        t.row("cross-stream record + wait: ours vs the Numba trampoline", t_["record_wait_ours"],
              t_["record_wait_trampoline"], "trampoline")
    server.streams.events.put(pair_event)
    RESULTS["launch_floor"] = {f"{k}_us": v * 1e6 for k, v in t_.items()}
    parts = " | ".join(f"{k} {v * 1e6:.2f} us" for k, v in t_.items())
    SUMMARY.append(f"launch floor: {parts} | goal: warm launch <= 5.0 us and <= 1.25x cuda-python "
                   f"({t_['ours'] / t_['cuda_python']:.2f}x)")


# ----------------------------------------------------------------------------- 2. two streams
@section
def dependent_two_streams():
    client = cube.client(DEVICE)
    n = 1024
    a, b = client.create(np.ones(n, np.float32)), client.create(np.ones(n, np.float32))
    s1 = client.set_stream(cube.StreamId.new())
    s2 = client.set_stream(cube.StreamId.new())
    zero = client.create(np.zeros(n, np.float32))

    def one_stream():
        s1.launch(K4, 1, 32, a, zero, b, n)    # b <- a
        s1.launch(K4, 1, 32, b, zero, a, n)    # a <- b: depends on the previous launch

    def two_streams():
        s1.launch(K4, 1, 32, a, zero, b, n)
        s2.launch(K4, 1, 32, b, zero, a, n)    # waits on s1's event (and s1's next on s2's)

    sync = sync_all(client)
    # Taking turns (one process's host drifts by more than the difference measured here).
    t_ = interleaved_host_time({"one": (one_stream, sync), "two": (two_streams, sync)}, N_LAUNCH // 2,
                               rounds=15)
    same, cross = t_["one"] / 2, t_["two"] / 2
    t = Table("2. dependent launches: one stream vs alternating two streams (us per launch)")
    t.row("chain alternating 2 streams vs 1 stream", cross, same, "one stream")
    RESULTS["two_streams"] = dict(one_stream_us=same * 1e6, two_streams_us=cross * 1e6,
                                  added_us=(cross - same) * 1e6)
    SUMMARY.append(f"cross-stream dependency: +{(cross - same) * 1e6:.2f} us per dependent launch "
                   f"({same * 1e6:.1f} -> {cross * 1e6:.1f} us)")


# ----------------------------------------------------------------------------- 3. dynamic counts
@section
def dynamic_counts():
    client = cube.client(DEVICE)
    server = client.server
    n = 1024
    a, b, c = client.create(np.ones(n, np.float32)), client.create(np.ones(n, np.float32)), client.empty(n, np.float32)
    count = client.create(np.zeros(3, np.uint32))
    client.launch(WRITE_COUNT, 1, 1, count, np.uint32(n // 32))
    busy = client.create(np.zeros(1, np.float64))
    dyn = cube.CubeCount.dynamic(count)
    spin = 20000

    def set_mode(mode):
        server.mechanism.dynamic.mode = mode
        server.channel.call(server.forget_bound_launches)

    def measure(mode):
        set_mode(mode)
        idle = host_time(lambda: client.launch(K4, dyn, 32, a, b, c, n), 2000, sync_all(client), warm=50)

        def behind():
            client.launch(BUSY, 1, 1, busy, spin)
            client.launch(K4, dyn, 32, a, b, c, n)

        queued = host_time(behind, 300, sync_all(client), warm=10)
        device = any(b.device_count is not None for b in server.channel.call(server.bound_launches)
                     if getattr(b, "readback", False))
        np.testing.assert_allclose(client.read(c), np.full(n, 2.0, np.float32))
        return idle, queued, device

    static = host_time(lambda: client.launch(K4, n // 32, 32, a, b, c, n), 5000, sync_all(client))
    busy_only = host_time(lambda: client.launch(BUSY, 1, 1, busy, spin), 300, sync_all(client), warm=10)
    try:
        rb_idle, rb_queued, _ = measure("readback")
        dc_idle, dc_queued, used_device = measure("auto")
    finally:
        set_mode(os.environ.get("NUMBA_CUBE_CUDA_DYNAMIC_COUNT", "auto"))
    t = Table("3. dynamic cube count: device-count wrapper vs read-back (host us per launch)")
    t.row("idle stream: device count vs read-back", dc_idle, rb_idle, "read-back")
    t.row("idle stream: device count vs static launch", dc_idle, static, "static count")
    t.row("behind a busy kernel: device count vs read-back", dc_queued, rb_queued, "read-back (per pair)")
    t.row("  (the busy kernel alone)", busy_only, rb_queued, "read-back pair")
    best = "device count" if dc_idle <= rb_idle and dc_queued <= rb_queued else "read-back"
    RESULTS["dynamic"] = dict(static_us=static * 1e6, readback_idle_us=rb_idle * 1e6,
                              device_idle_us=dc_idle * 1e6, readback_queued_us=rb_queued * 1e6,
                              device_queued_us=dc_queued * 1e6, recommended_default=best)
    SUMMARY.append(f"dynamic count: device-count {dc_idle * 1e6:.1f} us vs read-back {rb_idle * 1e6:.1f} us "
                   f"idle; behind queued work {dc_queued * 1e6:.1f} vs {rb_queued * 1e6:.1f} us; "
                   f"faster: {best} (device-count form used by the default mode: {used_device})")


# ----------------------------------------------------------------------------- 4. graphs
@section
def graph_replay():
    client = cube.client(DEVICE).set_stream(cube.StreamId.new())
    n = 1024
    a, b, c = client.create(np.ones(n, np.float32)), client.create(np.ones(n, np.float32)), client.empty(n, np.float32)
    nodes = 100

    def eager():
        for _ in range(nodes):
            client.launch(K4, 1, 32, a, b, c, n)

    client.graph_prepare()
    eager()
    client.sync()
    client.start_capture()
    eager()
    graph = client.stop_capture()
    sync = sync_all(client)
    eager_t = wall_time(eager, sync, repeats=9) / nodes
    replay_t = wall_time(graph.replay, sync, repeats=9) / nodes
    replay_host = host_time(graph.replay, 200, sync, warm=5) / nodes
    t = Table(f"4. graph of {nodes} launches: replay vs eager (us per kernel, until the device is idle)")
    t.row("graph replay vs eager launches", replay_t, eager_t, "eager")
    t.row("  graph replay host time per kernel", replay_host, eager_t, "eager")
    RESULTS["graph"] = dict(eager_us=eager_t * 1e6, replay_us=replay_t * 1e6, replay_host_us=replay_host * 1e6)
    SUMMARY.append(f"graph: replay {replay_t * 1e6:.2f} us/kernel vs eager {eager_t * 1e6:.2f} us/kernel "
                   f"({eager_t / replay_t:.1f}x faster)")


# ----------------------------------------------------------------------------- 5. bandwidth
def interleaved_wall_times(first, second, sync, repeats: int = 9) -> tuple[float, float]:
    """Median seconds of ``first(); sync()`` and of ``second(); sync()``, taking turns round by
    round so that clocks, heat and a shared host treat both alike."""
    first(); sync(); second(); sync()               # warm-up
    a, b = [], []
    for _ in range(repeats):
        for fn, out in ((first, a), (second, b)):
            t0 = time.perf_counter()
            fn()
            sync()
            out.append(time.perf_counter() - t0)
    return statistics.median(a), statistics.median(b)


@section
def bandwidth():
    client = cube.client(DEVICE)
    n = 1 << 26
    tpb = 256
    blocks = (n + tpb - 1) // tpb
    if SMOKE:
        n, tpb = 256, 32
        blocks = n // tpb
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    hx, hy, ho = client.create(x), client.create(x), client.empty(n, np.float32)
    if not SMOKE:
        nk = cuda.jit(axpy_py)
        dx, dy, do = cuda.to_device(x), cuda.to_device(x), cuda.device_array(n, np.float32)
    reps = 2 if SMOKE else 20
    a = np.float32(2.0)

    def ours():
        for _ in range(reps):
            client.launch(AXPY, blocks, tpb, a, hx, hy, ho)

    def theirs():
        for _ in range(reps):
            nk[blocks, tpb](a, dx, dy, do)

    moved = 3 * n * 4 * reps
    if SMOKE:
        t_ours = t_theirs = wall_time(ours, sync_all(client), repeats=1)
    else:
        # One synchronization for both, the context's (cuCtxSynchronize waits for every stream
        # of it, numba_cube's included): client.sync() also asks for faults and settles the
        # runtime's books, which is host time the device-bandwidth comparison must not count.
        t_ours, t_theirs = interleaved_wall_times(ours, theirs, cuda.synchronize)
    np.testing.assert_allclose(client.read(ho)[:1000], 2.0 * x[:1000] + x[:1000], rtol=1e-6)
    gb_ours, gb_theirs = moved / t_ours / 1e9, moved / t_theirs / 1e9
    t = Table("5. elementwise a*x+y, float32, 2**26 elements (seconds per 20 launches; ratio is time)")
    t.row("numba_cube vs numba-cuda", t_ours, t_theirs, "numba-cuda")
    print(f"  numba_cube {gb_ours:8.1f} GB/s   numba-cuda {gb_theirs:8.1f} GB/s   ratio {gb_ours / gb_theirs:.3f} "
          f"(goal >= 0.99: {'met' if gb_ours / gb_theirs >= 0.99 else 'NOT met'})")
    RESULTS["bandwidth"] = dict(numba_cube_gbs=gb_ours, numba_cuda_gbs=gb_theirs, ratio=gb_ours / gb_theirs)
    SUMMARY.append(f"bandwidth: numba_cube {gb_ours:.0f} GB/s vs numba-cuda {gb_theirs:.0f} GB/s "
                   f"(ratio {gb_ours / gb_theirs:.3f}, goal >= 0.99: {'met' if gb_ours / gb_theirs >= 0.99 else 'NOT met'})")


# ----------------------------------------------------------------------------- 6. kernel errors
class _errors_off:
    """Compile inside with ``NUMBA_CUBE_CUDA_KERNEL_ERRORS=off`` (read at each compile; a
    kernel compiled once keeps its form, so both forms run side by side afterwards)."""

    def __enter__(self):
        self.saved = os.environ.get("NUMBA_CUBE_CUDA_KERNEL_ERRORS")
        os.environ["NUMBA_CUBE_CUDA_KERNEL_ERRORS"] = "off"

    def __exit__(self, *exc):
        if self.saved is None:
            os.environ.pop("NUMBA_CUBE_CUDA_KERNEL_ERRORS", None)
        else:
            os.environ["NUMBA_CUBE_CUDA_KERNEL_ERRORS"] = self.saved


@section
def kernel_errors():
    client = cube.client(DEVICE)
    server = client.server
    n = 1024
    ones = np.ones(n, np.float32)
    ha, hb = client.create(ones), client.create(ones)
    outs = {name: client.empty(n, np.float32) for name in
            ("plain", "off", "checked", "off_mid", "off_end", "checked_mid", "checked_end")}
    sync = sync_all(client)

    def launch(kernel, out, *, a=ha):
        return lambda: client.launch(kernel, 1, 32, a, hb, outs[out], n)

    def pipeline(first, mid, end):
        def run():
            client.launch(first, 1, 32, ha, hb, outs[mid], n)
            client.launch(K4, 1, 32, outs[mid], hb, outs[end], n)   # reads what may have raised
        return run

    cases = {"plain": (launch(K4, "plain"), sync),
             "off": (launch(K4R_OFF, "off"), sync),
             "checked": (launch(K4R, "checked"), sync),
             "pipeline_off": (pipeline(K4R_OFF, "off_mid", "off_end"), sync),
             "pipeline_checked": (pipeline(K4R, "checked_mid", "checked_end"), sync)}
    with _errors_off():
        cases["off"][0]()
        cases["pipeline_off"][0]()
    for fn, _ in cases.values():
        fn()
        fn()                        # armed: the timed launches are warm
    bound = {b.packed.kernel.name: b.packed.checks is not None for b in server.bound_launches()
             if b.packed is not None}
    if bound.get("k4r_off_py") or not bound.get("k4r_py"):
        raise RuntimeError(f"the two forms were not compiled as asked: {bound}")
    t_ = interleaved_host_time(cases, N_LAUNCH, rounds=15)
    for name in ("plain", "off", "checked", "off_end", "checked_end"):
        # (one cube of 32 units writes the first 32 elements)
        np.testing.assert_array_equal(client.read(outs[name])[:32], 2.0 if "end" not in name else 3.0)
    added = t_["checked"] - t_["off"]
    added_pipe = (t_["pipeline_checked"] - t_["pipeline_off"]) / 2

    # Device side: the bandwidth kernel that can raise, checked vs off.
    nb = 256 if SMOKE else 1 << 26
    tpb = 32 if SMOKE else 256
    blocks = (nb + tpb - 1) // tpb
    x = np.random.default_rng(0).random(nb, dtype=np.float32)
    hx, hy, ho, ho_off = client.create(x), client.create(x), client.empty(nb, np.float32), \
        client.empty(nb, np.float32)
    reps = 2 if SMOKE else 20
    coef = np.float32(2.0)
    with _errors_off():
        client.launch(AXPYR_OFF, blocks, tpb, coef, hx, hy, ho_off)
    client.launch(AXPYR, blocks, tpb, coef, hx, hy, ho)

    def checked():
        for _ in range(reps):
            client.launch(AXPYR, blocks, tpb, coef, hx, hy, ho)

    def off():
        for _ in range(reps):
            client.launch(AXPYR_OFF, blocks, tpb, coef, hx, hy, ho_off)

    device_sync = sync if SMOKE else cuda.synchronize
    t_checked, t_off = interleaved_wall_times(checked, off, device_sync,
                                              repeats=1 if SMOKE else 9)
    np.testing.assert_allclose(client.read(ho)[:1000], 2.0 * x[:1000] + x[:1000], rtol=1e-6)
    ratio = t_off / t_checked

    t = Table("6. kernels that can raise: checked (error word per launch) vs compiled as before "
              "(us per launch; bandwidth: seconds per 20 launches)")
    t.row("warm launch, kernel that can raise: checked vs off", t_["checked"], t_["off"], "off")
    t.row("  raising kernel -> reader, per launch: checked vs off", t_["pipeline_checked"] / 2,
          t_["pipeline_off"] / 2, "off")
    t.row("  kernel that cannot raise (no word) vs raising off", t_["plain"], t_["off"], "off")
    t.row("bandwidth a*x+y that can raise: checked vs off", t_checked, t_off, "off")
    waits = server.stats["cuda_error_slot_waits"]
    print(f"  added host time per warm launch {added * 1e6:+.2f} us (goal <= +0.3 us: "
          f"{'met' if added <= 0.3e-6 else 'NOT met'}); after a raising launch {added_pipe * 1e6:+.2f} "
          f"us per launch; device time ratio off/checked {ratio:.3f} (goal >= 0.99: "
          f"{'met' if ratio >= 0.99 else 'NOT met'}); error-word ring waits {waits}")
    RESULTS["kernel_errors"] = dict(
        plain_us=t_["plain"] * 1e6, raising_off_us=t_["off"] * 1e6,
        raising_checked_us=t_["checked"] * 1e6, added_us=added * 1e6,
        pipeline_off_us=t_["pipeline_off"] * 1e6 / 2, pipeline_checked_us=t_["pipeline_checked"] * 1e6 / 2,
        pipeline_added_us=added_pipe * 1e6, bandwidth_checked_s=t_checked, bandwidth_off_s=t_off,
        device_ratio=ratio, ring_waits=waits)
    SUMMARY.append(f"kernel errors: warm launch of a kernel that can raise {t_['checked'] * 1e6:.2f} us "
                   f"checked vs {t_['off'] * 1e6:.2f} us off ({added * 1e6:+.2f} us, goal <= +0.3: "
                   f"{'met' if added <= 0.3e-6 else 'NOT met'}); behind it {added_pipe * 1e6:+.2f} us; "
                   f"cannot raise {t_['plain'] * 1e6:.2f} us; device off/checked {ratio:.3f} "
                   f"(goal >= 0.99: {'met' if ratio >= 0.99 else 'NOT met'})")


def main() -> int:
    from numba_cube.backends.cuda.driver import probe

    if SMOKE:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        sys.path.insert(0, os.path.join(root, "tests", "cuda", "cases"))
        from _cuda_fake import register_fake_cuda

        register_fake_cuda(DEVICE, devices=1)
        print("bench_cuda --smoke: fake driver, tiny counts; the numbers mean nothing")
    else:
        reason = probe.available()
        if reason is not None or probe.simulating():
            print(f"bench_cuda: no GPU to measure ({reason or 'NUMBA_ENABLE_CUDASIM is set'})")
            return 2
    client = cube.client(DEVICE)
    server = client.server
    import numba_cuda
    print(f"device {server.device}: {server.mechanism.device_name}, {server.mechanism.sm_count} SMs; numba-cuda "
          f"{getattr(numba_cuda, '__version__', '?')}, python {sys.version.split()[0]}")
    sections = (launch_host_time, launch_floor, dependent_two_streams, dynamic_counts, graph_replay, bandwidth,
                kernel_errors)
    only = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--only=")]
    for fn in sections:
        if not only or fn.__name__ in only[0].split(","):
            fn()
    print("\n== bench_cuda summary ==")
    for line in SUMMARY:
        print("  " + line)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "bench_cuda.json"), "w") as f:
            json.dump(RESULTS, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
