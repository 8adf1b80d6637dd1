"""The Python the CUDA backend adds to a warm launch and to a held launch, on a stubbed driver.

Runs without a GPU: the CUDA backend (``CudaMechanism``, the warm path of
``backends/cuda/launch/fast_path.py``, automatic graphs) over the fake driver of ``tests/cuda/cases``,
whose ``cuLaunchKernel`` and ``cuGraphLaunch`` are replaced by a stub that returns success and
does nothing. The warm path's compiled calls (``launch_call.py``) call C functions of the
driver's prototypes that return at once (``Driver.use_entry_points``), as they call libcuda's
on a GPU. What is left of a launch is then the runtime's own Python and the cost of reaching C,
which is what issue 18's goals are about (the driver call itself costs the same whoever makes
it). Each case is timed in the same process against a reference, the two taking turns round by
round:

1. **warm launch**: ``client.launch`` of a 3-array + int kernel repeated (the warm path fires)
   vs the stubbed driver call alone, made the way the warm path makes it (its compiled call over
   the same arguments). ``ours - reference`` is what the runtime adds to the driver call. And the
   same warm launch with its driver call through the Numba trampoline instead of the thunk
   (``thunks.py``), another kernel object of the same kernel: what the thunk saves.
2. **held launch**: the steady state of ``with client.auto_graph():`` over an iteration of
   ``CHAIN`` launches, per kernel (a held launch, plus the replay's share), vs an explicit
   capture of the same iteration replayed, per kernel. ``ours - reference`` is what a held
   launch costs.
3. **cross-stream chain**: a chain of warm launches each reading the previous one's output,
   alternating between two streams (``bench_cuda.py``'s section 2: each launch waits on the
   other stream's event, ``cuEventRecord`` + ``cuStreamWaitEvent``) vs the same chain on one
   stream, per launch. This case runs on a device of its own whose ``cuEventRecord`` and
   ``cuStreamWaitEvent`` are stubbed too (the fake driver's take a lock and queue an op, which
   a real driver's cost already stands for on a GPU; the compiled record-and-wait calls C
   functions that return at once). ``ours - reference`` is the Python a cross-stream dependency
   adds (issue 18 goal 3 asks <= 2 us with the driver calls).
4. **a kernel that can raise** (issue 30): the warm launch of a kernel with a ``raise`` it never
   takes, checked (an error word per launch: ``launch/error_slots.py``) vs the same code compiled
   with checking off (``NUMBA_CUBE_CUDA_KERNEL_ERRORS=off``: what numba-cuda compiles), both on
   the stubbed driver: ``ours - reference`` is the Python checking adds per launch (issue 30's
   goal: at most +0.3 us on an H200 host, where ``bench_cuda.py`` section 6 times it with the
   driver).

Run: ``python benchmarks/bench_launch_python.py`` (numbers are per launch, fastest rounds);
``--only=warm,held,cross,errors`` runs some of the cases.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
from numba import cfunc, types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "cuda", "cases"))

from bench_auto_graph import CHAIN, halve, scale_add  # noqa: E402  (its loop, its kernels)
from bench_cuda import k4_py, k4r_py  # noqa: E402  (section 1's and 6's kernels)
from common import Table  # noqa: E402

import numba_cube as cube  # noqa: E402

ROUNDS = 15

_U32, _U64 = types.uint32, types.uint64


# C functions with the prototypes of the driver's that the warm path calls, returning success.
@cfunc(types.int32(_U64, _U32, _U32, _U32, _U32, _U32, _U32, _U32, _U64, _U64, _U64))
def _noop_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    return 0


@cfunc(types.int32(_U64, _U64))
def _noop_record(event, stream):
    return 0


@cfunc(types.int32(_U64, _U64, _U32))
def _noop_wait(stream, event, flags):
    return 0


NOOP_ENTRY_POINTS = {"cuLaunchKernel": _noop_launch.address, "cuEventRecord": _noop_record.address,
                     "cuStreamWaitEvent": _noop_wait.address}


k4 = cube.kernel(k4_py)
k4_trampoline = cube.kernel(k4_py)     # the same kernel, its driver call made the other way


k4r = cube.kernel(k4r_py)
k4r_off = cube.kernel(k4r_py)          # the same code, compiled with checking off


def interleaved(cases: dict, n: int, rounds: int = ROUNDS) -> dict:
    """Seconds per call of each case ``name -> fn`` (``fn(n)`` makes ``n`` calls) in its fastest
    round, the cases taking turns round by round: on a shared host the fastest round is the one
    least disturbed, which a median of a few rounds is not reliably."""
    samples: dict = {name: [] for name in cases}
    for fn in cases.values():
        fn(max(1, n // 10))                          # warm-up
    for _ in range(rounds):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn(n)
            samples[name].append((time.perf_counter() - t0) / n)
    return {name: min(s) for name, s in samples.items()}


def cross_stream_chain(rounds: int = 3 * ROUNDS, n: int = 4000) -> tuple[float, float]:
    """Case 3: seconds per launch of the chain alternating two streams and of the same chain
    on one stream (fastest rounds, taking turns; shorter rounds than the other cases, and more:
    the difference is a small part of each, so it needs rounds nobody else disturbed)."""
    from _cuda_fake import OK, register_fake_cuda

    from numba_cube.backends.cuda.driver import launch_call

    api = register_fake_cuda("fakecuda_bench_cross", devices=1)

    def stub(*args):
        return (OK,)
    # Before the client exists: the executor binds cuEventRecord/cuStreamWaitEvent when it is
    # made, a pair of streams its waiter when first needed, an entry its launch when armed.
    api.cuLaunchKernel = api.cuEventRecord = api.cuStreamWaitEvent = stub
    client = cube.client("fakecuda_bench_cross:0")
    client.server.mechanism.driver.use_entry_points(NOOP_ENTRY_POINTS)
    n = 1024
    a, b = client.create(np.ones(n, np.float32)), client.create(np.ones(n, np.float32))
    zero = client.create(np.zeros(n, np.float32))
    first = client.set_stream(cube.StreamId.new()).launch
    second = client.set_stream(cube.StreamId.new()).launch

    def one_stream(reps):
        for _ in range(reps // 2):
            first(k4, 1, 32, a, zero, b, n)     # b <- a
            first(k4, 1, 32, b, zero, a, n)     # a <- b: depends on the previous launch

    def two_streams(reps):
        for _ in range(reps // 2):
            first(k4, 1, 32, a, zero, b, n)
            second(k4, 1, 32, b, zero, a, n)    # waits on the first stream's event, and back

    for _ in range(launch_call.COMPILE_AFTER + 3):  # past the warm-up of every compiled call
        one_stream(2)
        two_streams(2)
    client.sync()
    before, events = client.server.stats, client.server.streams.events.created
    t_ = interleaved({"two": two_streams, "one": one_stream}, n, rounds)
    after = client.server.stats
    # What is timed is the warm path: a launch that left it would be timed as the general path;
    # and each stream records its one reusable event again, creating none.
    assert after["launched"] - before["launched"] == after["warm"] - before["warm"], \
        "a launch of the chain took the general path"
    assert client.server.streams.events.created == events, "the chain created events"
    client.sync()
    return t_["two"], t_["one"]


def main() -> None:
    from _cuda_fake import OK, register_fake_cuda

    from numba_cube.backends.cuda.driver import launch_call

    only = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--only=")),
                ["warm", "held", "cross", "errors"])
    if "cross" in only:
        cross, same = cross_stream_chain()
        t = Table("dependent launches alternating two streams on a stubbed driver (per launch)")
        t.row("chain alternating 2 streams vs 1 stream", cross, same, "one stream")
        print(f"  a cross-stream dependency adds {(cross - same) * 1e9:.0f} ns per launch "
              f"(one stream {same * 1e9:.0f} ns, two {cross * 1e9:.0f} ns)")
    if not {"warm", "held", "errors"} & set(only):
        return
    api = register_fake_cuda("fakecuda_bench", devices=1)

    def stub(*args):
        return (OK,)
    # Before anything is armed: the warm path binds the api's method when it arms an entry.
    api.cuLaunchKernel = stub
    api.cuGraphLaunch = stub
    client = cube.client("fakecuda_bench:0")
    client.server.mechanism.driver.use_entry_points(NOOP_ENTRY_POINTS)
    n = 1024
    ha, hb = client.create(np.ones(n, np.float32)), client.create(np.ones(n, np.float32))
    hc = client.empty(n, np.float32)
    for _ in range(launch_call.COMPILE_AFTER + 3):
        client.launch(k4, 1, 32, ha, hb, hc, n)
        client.launch(k4_trampoline, 1, 32, ha, hb, hc, n)
    client.sync()
    (entry,) = client.server.mechanism.warm.armed_for(k4)
    args = (_noop_launch.address, int(entry.packed.kernel.function), entry.grid, entry.block, 0,
            int(entry.cs.handle), entry.packed.block.address)
    bare = launch_call.c_launcher(*args)
    (other,) = client.server.mechanism.warm.armed_for(k4_trampoline)
    other.fire = launch_call.c_launcher(*args, thunk=False)
    form = type(entry.fire).__name__
    launch = client.launch

    def warm(reps):
        for _ in range(reps):
            launch(k4, 1, 32, ha, hb, hc, n)

    def warm_trampoline(reps):
        for _ in range(reps):
            launch(k4_trampoline, 1, 32, ha, hb, hc, n)

    def driver(reps):
        for _ in range(reps):
            bare()

    t_ = interleaved({"warm": warm, "driver": driver, "trampoline": warm_trampoline}, 20000)
    client.sync()
    t = Table(f"warm launch on a stubbed driver (per launch; its driver call: {form})")
    t.row("warm client.launch vs the bare driver call", t_["warm"], t_["driver"], "driver call")
    t.row("warm client.launch: thunk vs Numba trampoline", t_["warm"], t_["trampoline"],
          "trampoline")
    print(f"  the runtime adds {(t_['warm'] - t_['driver']) * 1e9:.0f} ns per warm launch; the "
          f"thunk saves {(t_['trampoline'] - t_['warm']) * 1e9:.0f} ns of the trampoline's")

    if "errors" in only:
        kernel_errors(client, ha, hb, n)
    if "held" not in only:
        return
    x, y, z = (client.create(np.ones(256)), client.create(np.zeros(256)),
               client.create(np.zeros(256)))

    def iteration():
        for k in range(CHAIN // 2):
            launch(scale_add, 2, 128, 0.25 / (k + 1), x, y if k % 2 else z)
            launch(halve, 2, 128, z if k % 2 else y)

    client.graph_prepare()
    for _ in range(3):
        iteration()
    client.sync()
    client.start_capture()
    iteration()
    graph = client.stop_capture()

    def explicit(reps):
        for _ in range(reps):
            graph.replay()

    scope = client.auto_graph()
    scope.__enter__()
    try:
        for _ in range(5):
            iteration()
        before = client.server.stats["auto_graph_replays"]

        def held(reps):
            for _ in range(reps):
                iteration()

        t_ = interleaved({"held": held, "explicit": explicit}, 500)
        replays = client.server.stats["auto_graph_replays"] - before
    finally:
        scope.__exit__(None, None, None)
    client.sync()
    per_held, per_explicit = t_["held"] / CHAIN, t_["explicit"] / CHAIN
    t = Table(f"automatic graph steady state on a stubbed driver (per kernel, {CHAIN} a period)")
    t.row("held launch + replay share vs explicit replay", per_held, per_explicit,
          "explicit capture + replay")
    print(f"  a held launch costs {(per_held - per_explicit) * 1e9:.0f} ns more than its share of "
          f"an explicit replay ({replays} replays timed)")


def kernel_errors(client, ha, hb, n) -> None:
    """Case 4 (module docstring): checked vs off, both warm, on the stubbed driver."""
    outs = [client.empty(n, np.float32) for _ in range(2)]
    saved = os.environ.get("NUMBA_CUBE_CUDA_KERNEL_ERRORS")
    os.environ["NUMBA_CUBE_CUDA_KERNEL_ERRORS"] = "off"     # read at each compile
    try:
        client.launch(k4r_off, 1, 32, ha, hb, outs[1], n)
        client.sync()
    finally:
        if saved is None:
            del os.environ["NUMBA_CUBE_CUDA_KERNEL_ERRORS"]
        else:
            os.environ["NUMBA_CUBE_CUDA_KERNEL_ERRORS"] = saved
    launch = client.launch

    def checked(reps):
        for _ in range(reps):
            launch(k4r, 1, 32, ha, hb, outs[0], n)

    def off(reps):
        for _ in range(reps):
            launch(k4r_off, 1, 32, ha, hb, outs[1], n)

    checked(3)
    off(3)
    forms = {b.packed.kernel.name: b.packed.checks is not None
             for b in client.server.bound_launches() if b.packed is not None}
    if not forms.get("k4r_py") or sum(forms.values()) != 1:
        raise RuntimeError(f"the two forms were not compiled as asked: {forms}")
    t_ = interleaved({"checked": checked, "off": off}, 20000)
    client.sync()
    t = Table("warm launch of a kernel that can raise on a stubbed driver (per launch)")
    t.row("checked (error word) vs compiled without checking", t_["checked"], t_["off"], "off")
    print(f"  checking adds {(t_['checked'] - t_['off']) * 1e9:.0f} ns of Python per warm launch")


if __name__ == "__main__":
    main()
