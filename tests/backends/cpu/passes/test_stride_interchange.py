"""A region's grid-stride loop run row by row across the cube's units
(``passes/stride_interchange.py``).

Pinned here: kernels of the legal pattern (a shared-memory histogram over a grid-stride loop)
give what NumPy gives, for both variants, int32 and int64 bins, sizes that end inside a row, one
to many cubes, 1-D and 2-D cubes; the generated code of the legal pattern is interchanged; and
each near-miss of the legality rules prints exactly the code the translator prints without the
pass."""

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.emit import interchanged_region
from numba_cube.backends.cpu.passes import stride_interchange
from numba_cube.backends.cpu.translate import build_program, translate_source

NBINS = 64


_programs = {}


def prog(kernel):
    if kernel not in _programs:
        _programs[kernel] = build_program(kernel.py_func)
    return _programs[kernel]


def interchanged(kernel) -> bool:
    return "__range_item(" in translate_source(kernel.py_func)


def without_pass(kernel, monkeypatch) -> str:
    """The module the translator prints with the pass switched off."""
    with monkeypatch.context() as mp:
        mp.setattr(stride_interchange, "plan", lambda kernel: {})
        return translate_source(kernel.py_func)


# ---- the legal pattern -------------------------------------------------------------------


def _hist_kernel(dtype):
    @cuda.jit
    def hist(data, out):
        local = cuda.shared.array(NBINS, dtype)
        tid = cuda.threadIdx.x
        for b in range(tid, NBINS, cuda.blockDim.x):
            local[b] = 0
        cuda.syncthreads()
        for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
            cuda.atomic.add(local, data[i], 1)
        cuda.syncthreads()
        for b in range(tid, NBINS, cuda.blockDim.x):
            cuda.atomic.add(out, b, local[b])
    return hist


hist32 = _hist_kernel(np.int32)
hist64 = _hist_kernel(np.int64)


@cuda.jit
def hist_2d_cube(data, out):
    # 2-D cubes: the unit's linear id, a stride of the whole grid's units, named in a prefix
    local = cuda.shared.array(NBINS, np.int64)
    nt = cuda.blockDim.x * cuda.blockDim.y
    tid = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    if tid < NBINS:
        local[tid] = 0
    cuda.syncthreads()
    start = cuda.blockIdx.x * nt + tid
    stride = cuda.gridDim.x * nt
    for i in range(start, data.size, stride):
        v = data[i] % NBINS
        if v >= 0:
            cuda.atomic.add(local, v, 2)
        else:
            cuda.atomic.sub(local, 0, 1)
    cuda.syncthreads()
    if tid < NBINS:
        cuda.atomic.add(out, tid, local[tid])


@pytest.mark.parametrize("variant", ["parallel", "serial"])
@pytest.mark.parametrize("kernel", [hist32, hist64], ids=["int32", "int64"])
@pytest.mark.parametrize("cubes,block,n", [
    (1, 32, 1), (1, 32, 31), (1, 64, 1000), (3, 32, 96 * 7 + 5), (7, 64, 10_000),
    (40, 128, 40 * 128 * 3 - 1), (200, 64, 1 << 15), (5, 32, 0)])
def test_histogram_matches_bincount(kernel, variant, cubes, block, n, rng):
    """The interchanged shared-memory histogram gives np.bincount's counts, for grids of one to
    many cubes and sizes that end inside a row of the grid (and grids larger than the data)."""
    assert interchanged(kernel)
    data = rng.integers(0, NBINS, n).astype(np.int32)
    out = np.zeros(NBINS, np.int64)
    getattr(prog(kernel), variant)(cubes, 1, 1, block, 1, 1, data, out)
    np.testing.assert_array_equal(out, np.bincount(data, minlength=NBINS))


@pytest.mark.parametrize("variant", ["parallel", "serial"])
@pytest.mark.parametrize("cubes,bx,by,n", [(1, 8, 8, 500), (6, 16, 4, 6 * 64 * 5 + 17),
                                           (3, 8, 16, 7)])
def test_histogram_2d_cubes(variant, cubes, bx, by, n, rng):
    """2-D cubes, the loop's start and stride named in the region, an ``if``/``else`` of add
    and sub in the body: NumPy's counts (twice each value; negatives counted down in bin 0)."""
    assert interchanged(hist_2d_cube)
    data = rng.integers(-NBINS, NBINS, n).astype(np.int64)
    out = np.zeros(NBINS, np.int64)
    getattr(prog(hist_2d_cube), variant)(cubes, 1, 1, bx, by, 1, data, out)
    expect = np.zeros(NBINS, np.int64)
    np.add.at(expect, data % NBINS, 2)      # Python's % is never negative: every item adds
    np.testing.assert_array_equal(out, expect)


@cuda.jit
def hist_reversed(data, out, step):
    # the loop walks down, by a step read from a parameter; every unit also counts bin 0 once
    # per cube through a loop over the same range in every unit
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    for i in range(data.size - 1 - cuda.grid(1), -1, -step * cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for j in range(3):
        cuda.atomic.add(local, 0, 1)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid])


@pytest.mark.parametrize("variant", ["parallel", "serial"])
@pytest.mark.parametrize("cubes,step,n", [(1, 1, 1000), (4, 1, 4 * NBINS * 3 + 9), (3, 2, 5000)])
def test_downward_loop_and_parameter_step(variant, cubes, step, n, rng):
    """A loop that walks down (negative step, from a parameter), and a range that every unit
    shares: both interchanged, and NumPy's counts (every step-th item from the end)."""
    src = translate_source(hist_reversed.py_func)
    assert "__range_item(__si1_k" in src and "__range_item(__si2_k" in src
    data = rng.integers(0, NBINS, n).astype(np.int64)
    out = np.zeros(NBINS, np.int64)
    getattr(prog(hist_reversed), variant)(cubes, 1, 1, NBINS, 1, 1, data, out, step)
    units = cubes * NBINS
    picked = np.concatenate([data[n - 1 - u::-step * units] for u in range(min(units, n))])
    expect = np.bincount(picked, minlength=NBINS)
    expect[0] += 3 * units
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("variant", ["parallel", "serial"])
def test_zero_step_raises_as_the_loop_did(variant, monkeypatch):
    """A zero step raises what the loop run unit by unit raises (range's ValueError; the raw
    parallel entry point wraps it in a SystemError, with the pass or without)."""
    def raised(program):
        with pytest.raises(Exception) as info:
            getattr(program, variant)(2, 1, 1, NBINS, 1, 1, np.zeros(100, np.int64),
                                      np.zeros(NBINS, np.int64), 0)
        return info.type

    with monkeypatch.context() as mp:
        mp.setattr(stride_interchange, "plan", lambda kernel: {})
        today = build_program(hist_reversed.py_func)
    assert "__range_item" not in today.source
    kind = raised(prog(hist_reversed))
    assert kind is raised(today)
    assert kind is (ValueError if variant == "serial" else SystemError)


def test_generated_code_is_interchanged():
    """The legal pattern's loop runs row by row: the trip counts per unit, then full rows
    without a test, then the ragged rows with one; the other regions are printed as before."""
    src = translate_source(hist64.py_func)
    assert "# region 1\n" in src and "passes/stride_interchange.py" in src
    assert src.count("__range_item(__si1_k, (") == 2
    assert "for __si1_k in range(__si1_lo):" in src
    assert "for __si1_k in range(__si1_lo, __si1_hi):" in src
    assert "if __si1_k < len(range(" in src
    assert "__si0_" not in src and "__si2_" not in src
    assert interchanged_region.IMPORT in src


# ---- near-misses: exactly today's code ---------------------------------------------------


@cuda.jit
def plain_store_in_body(data, out, copy):
    local = cuda.shared.array(NBINS, np.int64)
    local[cuda.threadIdx.x] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
        copy[i] = data[i]
    cuda.syncthreads()
    cuda.atomic.add(out, cuda.threadIdx.x, local[cuda.threadIdx.x])


@cuda.jit
def carried_accumulator(data, out):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    s = 0
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        s += data[i]
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid] + s)


@cuda.jit
def accumulator_carried_in_body(data, out):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    s = 0
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        s += 1
        cuda.atomic.add(local, data[i], s)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid])


@cuda.jit
def unit_dependent_step(data, out):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1) + tid):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid])


@cuda.jit
def unit_dependent_stop(data, out):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size - tid, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid])


@cuda.jit
def breaks(data, out):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        if data[i] == 0:
            break
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid])


@cuda.jit
def reads_what_it_updates(data, out):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], local[0] + 1)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid])


@cuda.jit
def reads_an_alias_of_what_it_updates(data, out):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    view = local[1:]
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], view[0] + 1)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid])


@cuda.jit
def reads_another_name_of_what_it_updates(data, out):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    view = local
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], view[0] + 1)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid])


@cuda.jit
def float_bins(data, out):
    local = cuda.shared.array(NBINS, np.float64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1.0)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid])


@cuda.jit
def global_atomic_in_body(data, out):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
        cuda.atomic.add(out, data[i], 1)
    cuda.syncthreads()


@cuda.jit
def atomic_result_used(data, out, seen):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        old = cuda.atomic.add(local, data[i], 1)
        cuda.atomic.max(seen, 0, old)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid])


@cuda.jit
def loop_variable_read_later(data, out):
    local = cuda.shared.array(NBINS, np.int64)
    tid = cuda.threadIdx.x
    local[tid] = 0
    i = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    cuda.atomic.add(out, tid, local[tid] + i)


NEAR_MISSES = [plain_store_in_body, carried_accumulator, accumulator_carried_in_body,
               unit_dependent_step, unit_dependent_stop, breaks, reads_what_it_updates,
               reads_an_alias_of_what_it_updates, reads_another_name_of_what_it_updates,
               float_bins, global_atomic_in_body, atomic_result_used, loop_variable_read_later]


@pytest.mark.parametrize("kernel", NEAR_MISSES, ids=[k.py_func.__name__ for k in NEAR_MISSES])
def test_near_miss_prints_todays_code(kernel, monkeypatch):
    """A region that breaks one rule (a non-atomic store, a value carried across iterations or
    out of the loop, a unit-dependent step or stop, a break, a read of the updated array or of
    an alias of it, float bins, a global atomic, an atomic's result used) is printed exactly as
    without the pass."""
    src = translate_source(kernel.py_func)
    assert "__range_item" not in src and "__si1_" not in src
    assert src == without_pass(kernel, monkeypatch)


def test_pass_changes_only_the_region_it_interchanges(monkeypatch):
    """Everything outside the interchanged region (and the one import) is today's text."""
    new = translate_source(hist64.py_func)
    assert new.count(interchanged_region.IMPORT + "\n") == 1
    new = new.replace(interchanged_region.IMPORT + "\n", "")
    old = without_pass(hist64, monkeypatch)
    head, _, rest = old.partition("        # region 1\n")
    assert new.startswith(head + "        # region 1\n")
    assert new.endswith(rest[rest.index("        # region 2\n"):])


@pytest.mark.parametrize("variant", ["parallel", "serial"])
def test_near_miss_still_counts(variant, rng):
    """A near-miss (the carried accumulator) still runs and gives NumPy's results."""
    data = rng.integers(0, NBINS, 5000).astype(np.int64)
    out = np.zeros(NBINS, np.int64)
    cubes, block = 3, NBINS
    getattr(prog(carried_accumulator), variant)(cubes, 1, 1, block, 1, 1, data, out)
    # each unit adds its own running sum s (its grid-stride items' total) to bin tid
    units = cubes * block
    sums = np.array([data[u::units].sum() for u in range(units)]).reshape(cubes, block).sum(0)
    np.testing.assert_array_equal(out, np.bincount(data, minlength=NBINS) + sums)
