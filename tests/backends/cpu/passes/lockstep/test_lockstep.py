"""Warp-synchronous code gives the GPU's answer on the CPU backend
(``passes/lockstep/schedule.py``).

Where the units of a region exchange values through memory without a barrier, the CPU must run
the statements that do it in lockstep (every unit finishes one before any starts the next, loads
of one statement before its stores), as a warp does. Every kernel here is checked against an
independent NumPy reference of the GPU's semantics, never against numba_cube; the
property-based test generates random warp programs and interprets them in NumPy lockstep (one
warp of 32 lanes, where lockstep *is* what the hardware does). numba-cuda's simulator is no
reference here: it runs each thread as a Python thread that only yields at barriers, so it
gives the CPU's old, sequential answer for this code.
"""

import importlib.util
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda, float32, int64

import numba_cube as cube
from numba_cube.backends.cpu.passes.lockstep import schedule as lockstep
from numba_cube.backends.cpu.translate import translate_source
from numba_cube.errors import CompileError

TPB = 128


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


@pytest.fixture(scope="module")
def client():
    return cube.client("cpu")


def run(client, kernel, count, dim, *host):
    with client:
        cube.kernel(kernel)[count, dim](*host)


# ---- the unrolled last warp (Harris's reduction #5) and its variants ----------------------------

@cuda.jit
def unrolled_warp(x, out):
    sdata = cuda.shared.array(TPB, float32)
    tid = cuda.threadIdx.x
    sdata[tid] = x[cuda.blockIdx.x * TPB + tid]
    cuda.syncthreads()
    s = TPB // 2
    while s > 32:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid < 32:
        sdata[tid] += sdata[tid + 32]
        sdata[tid] += sdata[tid + 16]
        sdata[tid] += sdata[tid + 8]
        sdata[tid] += sdata[tid + 4]
        sdata[tid] += sdata[tid + 2]
        sdata[tid] += sdata[tid + 1]
    if tid == 0:
        out[cuda.blockIdx.x] = sdata[0]


@cuda.jit(device=True)
def warp_reduce(sdata, tid):
    sdata[tid] += sdata[tid + 32]
    sdata[tid] += sdata[tid + 16]
    sdata[tid] += sdata[tid + 8]
    sdata[tid] += sdata[tid + 4]
    sdata[tid] += sdata[tid + 2]
    sdata[tid] += sdata[tid + 1]


@cuda.jit
def unrolled_warp_device(x, out):
    sdata = cuda.shared.array(TPB, float32)
    tid = cuda.threadIdx.x
    sdata[tid] = x[cuda.blockIdx.x * TPB + tid] + x[cuda.blockIdx.x * TPB + tid + 64] \
        if tid < 64 else 0
    cuda.syncthreads()
    if tid < 32:
        warp_reduce(sdata, tid)
    if tid == 0:
        out[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def register_cached_warp(x, out):
    """The 'volatile' form: each lane keeps its partial sum in a register and stores it."""
    sdata = cuda.shared.array(TPB, float32)
    tid = cuda.threadIdx.x
    sdata[tid] = x[cuda.blockIdx.x * TPB + tid]
    cuda.syncthreads()
    if tid < 64:
        sdata[tid] += sdata[tid + 64]
    cuda.syncthreads()
    if tid < 32:
        v = sdata[tid]
        v += sdata[tid + 32]
        sdata[tid] = v
        v += sdata[tid + 16]
        sdata[tid] = v
        v += sdata[tid + 8]
        sdata[tid] = v
        v += sdata[tid + 4]
        sdata[tid] = v
        v += sdata[tid + 2]
        sdata[tid] = v
        v += sdata[tid + 1]
        sdata[tid] = v
    if tid == 0:
        out[cuda.blockIdx.x] = sdata[0]


@pytest.mark.parametrize("kernel", [unrolled_warp, unrolled_warp_device, register_cached_warp])
def test_unrolled_last_warp_gives_the_block_sums(client, kernel, rng):
    """Each cube's sum of the classic reduction with its last warp unrolled (no barrier or
    syncwarp between the steps) is NumPy's, as on a GPU: the lanes read what the others
    wrote one statement before (the sequential order gave 224 instead of 2048)."""
    cubes = 37
    x = rng.integers(-8, 9, cubes * TPB).astype(np.float32)
    out = np.full(cubes, np.nan, np.float32)
    run(client, kernel, cubes, TPB, x, out)
    np.testing.assert_array_equal(out, x.reshape(cubes, TPB).sum(axis=1))


@cuda.jit
def warp_scan(x, out):
    """An inclusive scan of each warp through shared memory, unrolled, without syncwarp:
    ``s[tid] += s[tid - off]`` reads the value from before the statement on a GPU."""
    s = cuda.shared.array(64, int64)
    tid = cuda.threadIdx.x
    lane = tid % 32
    i = cuda.grid(1)
    s[tid] = x[i]
    cuda.syncthreads()
    for off in (1, 2, 4, 8, 16):
        if lane >= off:
            s[tid] += s[tid - off]
    out[i] = s[tid]


def test_warp_synchronous_scan_is_inclusive_per_warp(client, rng):
    """A Hillis-Steele scan inside each warp with no barrier between its rounds: loads before
    stores within a round, rounds in order (``s[tid] += s[tid - off]`` read in place would
    double count on the CPU)."""
    x = rng.integers(-50, 50, 64 * 5)
    out = np.zeros_like(x)
    run(client, warp_scan, 5, 64, x, out)
    np.testing.assert_array_equal(out, np.cumsum(x.reshape(-1, 32), axis=1).ravel())


@cuda.jit
def shift_down_in_place(a):
    """Every unit moves its right neighbour's element down: one statement, loads first."""
    s = cuda.shared.array(33, int64)
    tid = cuda.threadIdx.x
    s[tid] = a[tid]
    if tid == 0:
        s[32] = -1
    cuda.syncthreads()
    s[tid + 1] = s[tid]          # each lane reads its own slot before its left lane writes it
    cuda.syncthreads()
    a[tid] = s[tid + 1]


def test_a_statement_reads_before_it_writes(client, rng):
    """``s[tid + 1] = s[tid]`` within one warp moves every element one up, as the GPU's loads
    precede its stores; run unit after unit it would smear ``s[0]`` everywhere."""
    a = rng.integers(0, 1000, 32)
    expect = a.copy()
    run(client, shift_down_in_place, 1, 32, a)
    np.testing.assert_array_equal(a, expect)


@cuda.jit
def shift_up_global(a):
    """A kernel with no barrier and no shared memory that exchanges through global memory."""
    i = cuda.grid(1)
    if 0 < i < a.size:
        a[i] = a[i - 1]


def test_a_barrier_free_kernel_exchanging_through_global_memory_runs_in_lockstep(client, rng):
    """``a[i] = a[i - 1]`` in one warp: every lane loads before any stores, so the array moves
    up by one (unit after unit, it would copy ``a[0]`` everywhere). Such a kernel, flat
    otherwise, is run cube by cube so that its statement can be cut loads-first."""
    a = rng.integers(0, 1000, 32)
    expect = np.concatenate([a[:1], a[:-1]])
    run(client, shift_up_global, 1, 32, a)
    np.testing.assert_array_equal(a, expect)


# ---- what stays as it was --------------------------------------------------------------------

@cuda.jit
def tree_sum(x, out):
    sdata = cuda.shared.array(TPB, float32)
    tid = cuda.threadIdx.x
    sdata[tid] = x[cuda.grid(1)]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def interleaved_tree(x, out):
    sdata = cuda.shared.array(TPB, float32)
    tid = cuda.threadIdx.x
    sdata[tid] = x[cuda.grid(1)]
    cuda.syncthreads()
    s = 1
    while s < cuda.blockDim.x:
        if tid % (2 * s) == 0:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s *= 2
    if tid == 0:
        out[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def reads_through_builtins(x, error, n):
    """No exchange: scalars handed to range, arrays to enumerate/len, one element flagged."""
    sm = cuda.shared.array(4, int64)
    count = 0
    for i, v in enumerate(x):
        if v != x[i]:
            error[0] = 2
        count += 1
    for k in range(n):
        sm[0] = k
    if count != len(x):
        error[0] = 3


@pytest.mark.parametrize("kernel", [tree_sum, interleaved_tree, reads_through_builtins])
def test_code_without_exchange_is_translated_as_before(kernel, monkeypatch, client, rng):
    """A tree step ``sdata[tid] += sdata[tid + s]`` (``s >= 0``: the reading unit comes first,
    and reads the old value, as the GPU's lanes do) needs no lockstep, nor do arrays and scalars
    handed to builtins that only read them: the generated code is the same with the pass
    switched off (and the trees' sums are NumPy's)."""
    with_pass = translate_source(kernel.py_func)
    monkeypatch.setattr(lockstep, "insert_lockstep_points", lambda *a, **k: False)
    assert translate_source(kernel.py_func) == with_pass
    monkeypatch.undo()
    if kernel is reads_through_builtins:
        return
    x = rng.integers(-8, 9, 3 * TPB).astype(np.float32)
    out = np.zeros(3, np.float32)
    run(client, kernel, 3, TPB, x, out)
    np.testing.assert_array_equal(out, x.reshape(3, TPB).sum(axis=1))


def test_the_unrolled_warp_is_cut_into_lockstep_regions():
    """The unrolled warp's six statements land in six regions of their own (the translation
    without the pass had them in one region, unit after unit)."""
    source = translate_source(unrolled_warp.py_func)
    for k in (32, 16, 8, 4, 2, 1):
        lines = [ln for ln in source.splitlines() if f"sdata[tid + {k}]" in ln]
        assert lines, k
    assert source.count("# region") >= 8


@cuda.jit
def exchange_in_unit_loop(x, out):
    s = cuda.shared.array(32, int64)
    tid = cuda.threadIdx.x
    s[tid] = x[tid]
    cuda.syncthreads()
    for k in range(tid % 4):              # how often depends on the unit
        s[tid] = s[tid] + s[tid ^ 1]
    out[tid] = s[tid]


def test_an_exchange_in_a_unit_dependent_loop_runs_its_rounds_in_lockstep(client, rng):
    """A loop whose trip count differs between lanes: round ``k`` runs, loads first, for the
    lanes still in the loop, as a warp runs it (a NumPy replay of those rounds)."""
    x = rng.integers(-100, 100, 32)
    out = np.zeros_like(x)
    run(client, exchange_in_unit_loop, 1, 32, x, out)
    s, lanes = x.copy(), np.arange(32)
    for k in range(3):
        act = lanes[lanes % 4 > k]
        s[act] = s[act] + s[act ^ 1]
    np.testing.assert_array_equal(out, s)


@cuda.jit
def exchange_with_unit_exit(x, out):
    s = cuda.shared.array(32, int64)
    tid = cuda.threadIdx.x
    s[tid] = x[tid]
    cuda.syncthreads()
    for k in range(4):
        s[tid] = s[tid] + s[tid ^ 1]
        if s[tid] > 100:                  # units leave the loop at different rounds
            break
    out[tid] = s[tid]


def test_an_exchange_that_cannot_run_in_lockstep_is_refused_with_its_line():
    """Units exchanging values through shared memory in a loop they leave at different times
    (a ``break`` under a unit-dependent condition) cannot be run in lockstep: a CompileError
    naming the construct and the line, not a run in an order that changes the answer."""
    with pytest.raises(CompileError, match="exchange values through memory") as info:
        translate_source(exchange_with_unit_exit.py_func)
    assert info.value.lineno == exchange_with_unit_exit.py_func.__code__.co_firstlineno + 9   # the break
    assert "warp-synchronous" in info.value.construct


@cuda.jit
def grid_stride_broadcast(first, x, out):
    start = cuda.grid(1)
    for i in range(start, out.size, cuda.gridsize(1)):   # units run different round counts
        out[i] = x[i] * 2.0
        out[0] = first[0]                 # every unit writes one global element, stumpy-style
        x[i] = out[i] + 1.0               # ... which unit 0 reads back


def test_a_global_exchange_in_a_unit_dependent_loop_runs_as_a_gpu_may():
    """stumpy's ``gpu_stump`` shape: inside a grid-stride loop (units leave it at different
    rounds, so no lockstep is possible) every unit writes one global element that unit 0 reads
    back. Global memory has no lockstep guarantee there on a GPU (other cubes' warps,
    independent thread scheduling): units one after another is a schedule a GPU may run, so the
    kernel runs rather than being refused, and gives NumPy's answer (shared memory in the same
    position stays refused: the test above)."""
    client = cube.client("cpu")
    n = 1000
    x0 = np.arange(n, dtype=np.float64)
    first = np.array([-5.0])
    want_out = 2.0 * x0
    want_out[0] = first[0]
    want_x = want_out + 1.0
    x = client.create(x0)
    out = client.empty(n)
    client.launch(cube.kernel(grid_stride_broadcast), 3, 64, client.create(first), x, out)
    np.testing.assert_array_equal(client.read(out), want_out)
    np.testing.assert_array_equal(client.read(x), want_x)


# ---- random warp programs against a NumPy lockstep interpreter -----------------------------------

WARP = 32
PAD = 16                       # shared array: PAD + WARP + PAD, every index in range

_statement = st.tuples(
    st.integers(-PAD, PAD),                      # store offset a:  s[tid + a] = ...
    st.integers(-PAD, PAD),                      # load offset b
    st.integers(-PAD, PAD),                      # load offset c
    st.sampled_from(["+", "-"]),
    st.integers(1, WARP),                        # guard: tid < g
    st.booleans(),                               # through a local: v = ...; s[...] = v
)


def _source(name: str, program) -> str:
    lines = [
        "from numba import cuda, int64",
        "@cuda.jit",
        f"def {name}(x, out):",
        f"    s = cuda.shared.array({PAD + WARP + PAD}, int64)",
        "    tid = cuda.threadIdx.x",
        f"    s[tid] = x[tid]",
        f"    if tid < {2 * PAD}:",
        f"        s[tid + {WARP}] = x[tid + {WARP}]",
        "    cuda.syncthreads()",
    ]
    for a, b, c, op, g, via_local in program:
        lines.append(f"    if tid < {g}:")
        value = f"s[tid + {PAD + b}] {op} s[tid + {PAD + c}]"
        if via_local:
            lines += [f"        v = {value}", f"        s[tid + {PAD + a}] = v"]
        else:
            lines.append(f"        s[tid + {PAD + a}] = {value}")
    lines += ["    cuda.syncthreads()", f"    out[tid] = s[tid]",
              f"    if tid < {2 * PAD}:", f"        out[tid + {WARP}] = s[tid + {WARP}]"]
    return "\n".join(lines) + "\n"


def _lockstep_reference(x, program):
    """What one warp computes: per statement, every active lane loads, then every one stores."""
    s = x.copy()
    lanes = np.arange(WARP)
    for a, b, c, op, g, _ in program:
        act = lanes[lanes < g]
        left, right = s[act + PAD + b], s[act + PAD + c]
        s[act + PAD + a] = left + right if op == "+" else left - right
    return s


_counter = [0]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=st.lists(_statement, min_size=1, max_size=4),
       seed=st.integers(0, 2**32 - 1))
def test_random_warp_programs_match_the_lockstep_reference(client, tmp_path_factory, program,
                                                            seed):
    """Random straight-line programs of one warp that read and write a shared array at lane
    offsets without barriers (guards, locals, offsets of both signs: the analysis' exemptions
    and its lockstep both get exercised) give exactly what the warp's lockstep gives."""
    _counter[0] += 1
    name = f"warp_program_{_counter[0]}"
    path = tmp_path_factory.mktemp("programs") / f"{name}.py"
    path.write_text(_source(name, program))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    x = np.random.default_rng(seed).integers(-100, 100, PAD + WARP + PAD)
    out = np.zeros_like(x)
    run(client, getattr(module, name), 1, WARP, x, out)
    np.testing.assert_array_equal(out, _lockstep_reference(x, program))
