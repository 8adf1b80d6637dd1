"""Bounds-checked CPU kernels (backends/cpu/passes/bounds/checks.py, kernel_runtime/bounds.py):
checked by default (issue 30) and with ``cube.client("cpu", boundscheck=True)``, an index out of
bounds is an IndexError, as numba-cuda's simulator raises (the ``cudasim`` backend runs the same
kernel as the reference), whose message names the kernel, the array (parameter, shared array, view),
the index, the axis and its size, and the cube and unit that went out of bounds; it is the failure
the launch's outputs carry, and the process goes on. In-bounds kernels give NumPy's results, a
negative index wraps as in numba-cuda, and without bounds checking the generated module has no
checks at all.

Each kernel goes out of bounds in exactly one unit, so the unit named is known in advance.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from numba import cuda, float64, types

import numba_cube as cube
from numba_cube.backends.cpu.server import CpuBackend
from numba_cube.backends.cpu.translate import translate_source

from traced import bytes_left_by


@cube.kernel
def shifted_copy(a, out, shift):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i + shift]


@cube.kernel
def one_unit_reads_past(a, out, di, dj):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        if i == 3 and j == 2:
            out[i, j] = a[i + di, j + dj]
        else:
            out[i, j] = a[i, j]


@cube.kernel
def shared_neighbour(a, out):
    sm = cuda.shared.array(8, dtype=float64)
    t = cuda.threadIdx.x
    sm[t] = a[cuda.grid(1)]
    cuda.syncthreads()
    if cuda.blockIdx.x == 1:
        out[cuda.grid(1)] = sm[t + 1]        # unit 7 of cube 1 reads sm[8]
    else:
        out[cuda.grid(1)] = sm[t]


@cube.kernel
def by_ids(a, out):
    i = cuda.threadIdx.x + 8 * cuda.blockIdx.x      # not cuda.grid's form: cube-by-cube loops
    if i < out.size:
        out[i] = a[i]


@cube.kernel
def literal_index(a, out):
    if cuda.grid(1) == 3:
        out[0] = a[12]


@pytest.fixture(scope="module")
def checked():
    return cube.client("cpu", boundscheck=True)


def _failure(client, kernel, count, dim, *args):
    """The root cause a bounds-checked launch of ``kernel`` on ``args`` (NumPy arrays become
    buffers; the last one is the output) leaves on its output; the simulator's launch of the same
    kernel must fail with the same class."""
    roots = []
    for device in (client, cube.client("cudasim")):
        bound = [device.create(a) if isinstance(a, np.ndarray) else a for a in args]
        out = [b for b in bound if isinstance(b, cube.Handle)][-1]
        device.launch(kernel, count, dim, *bound)
        with pytest.raises(cube.LaunchFailure) as info:
            device.read(out)
        roots.append(info.value.root)
    assert isinstance(roots[1], IndexError)
    return roots[0]


def test_1d_read_past_the_end_names_array_index_axis_and_unit(checked):
    """a of 10 elements read at i + 0 by units 0..10 of 2 cubes of 8: unit 2 of cube 1 reads
    a[10], and the IndexError says so, in numba's words for the axis and size."""
    root = _failure(checked, shifted_copy, 2, 8, np.arange(10.0), np.zeros(11), 0)
    assert type(root) is IndexError
    assert str(root) == ("kernel shifted_copy: a[10] out of bounds for axis 0 with size 10 "
                         "(cube (1, 0, 0), unit (2, 0, 0))")


def test_a_launch_large_enough_to_run_in_parallel_names_its_unit(checked):
    """A launch of 157 cubes of 256 units (past the size below which the serial variant runs)
    re-raises the failing chunk's IndexError with its unit: unit 40000 is unit 64 of cube 156."""
    root = _failure(checked, shifted_copy, 157, 256, np.arange(40000.0), np.zeros(40001), 0)
    assert str(root) == ("kernel shifted_copy: a[40000] out of bounds for axis 0 with size 40000 "
                         "(cube (156, 0, 0), unit (64, 0, 0))")


def test_ids_used_apart_name_their_unit_and_a_literal_index_is_named_too(checked):
    """A kernel indexing by threadIdx.x + 8 * blockIdx.x (its units looped cube by cube) reports
    unit 2 of cube 1 for a[10]; a literal a[12] (checked through the array, the literal staying
    in the subscript) is reported the same way, by the unit that reads it."""
    root = _failure(checked, by_ids, 2, 8, np.arange(10.0), np.zeros(11))
    assert str(root) == ("kernel by_ids: a[10] out of bounds for axis 0 with size 10 "
                         "(cube (1, 0, 0), unit (2, 0, 0))")
    root = _failure(checked, literal_index, 1, 8, np.arange(10.0), np.zeros(1))
    assert str(root) == ("kernel literal_index: a[12] out of bounds for axis 0 with size 10 "
                         "(cube (0, 0, 0), unit (3, 0, 0))")


def test_1d_negative_index_below_the_start(checked):
    """A negative index wraps around as in numba-cuda (a[-1] is the last element); one below
    -size is out of bounds and reported with its value."""
    a = checked.create(np.arange(10.0))
    out = checked.empty(10)
    checked.launch(shifted_copy, 1, 16, a, out, -1)
    np.testing.assert_array_equal(checked.read(out), np.arange(10.0)[np.arange(10) - 1])
    root = _failure(checked, shifted_copy, 1, 16, np.arange(10.0), np.zeros(10), -11)
    assert str(root) == ("kernel shifted_copy: a[-11] out of bounds for axis 0 with size 10 "
                         "(cube (0, 0, 0), unit (0, 0, 0))")


@pytest.mark.parametrize("di, dj, shown, axis, size", [
    (0, 5, "3, 7", 1, 5),
    (2, 0, "5, 2", 0, 4),
])
def test_2d_names_both_indices_and_the_axis(checked, di, dj, shown, axis, size):
    """On a (4, 5) array only unit (i, j) = (3, 2) reads a[3 + di, 2 + dj]: with cubes of (2, 4)
    units that is cube (1, 0, 0), unit (1, 2, 0); the message shows both indices and the axis
    that is out of range. The other units' writes are NumPy's a[i, j]."""
    root = _failure(checked, one_unit_reads_past, (2, 1), (2, 4), np.arange(20.0).reshape(4, 5),
                    np.zeros((4, 4)), di, dj)
    assert str(root) == (f"kernel one_unit_reads_past: a[{shown}] out of bounds for axis {axis} "
                         f"with size {size} (cube (1, 0, 0), unit (1, 2, 0))")


def test_shared_array_names_the_shared_array(checked):
    """Unit 7 of cube 1 reads its cube's shared array sm (8 elements) at 8: the IndexError names
    sm, not a parameter."""
    root = _failure(checked, shared_neighbour, 2, 8, np.arange(16.0), np.zeros(16))
    assert str(root) == ("kernel shared_neighbour: sm[8] out of bounds for axis 0 with size 8 "
                         "(cube (1, 0, 0), unit (7, 0, 0))")


def test_in_bounds_kernels_are_unchanged(checked):
    """Checked kernels that stay in bounds compute NumPy's values (1-D, 2-D, shared memory)."""
    host = np.arange(20.0).reshape(4, 5)
    out = checked.empty((4, 4))
    checked.launch(one_unit_reads_past, (2, 1), (2, 4), checked.create(host), out, 0, 1)
    expected = host[:, :4].copy()
    expected[3, 2] = host[3, 3]
    np.testing.assert_array_equal(checked.read(out), expected)
    out = checked.empty(8)
    checked.launch(shared_neighbour, 1, 8, checked.create(np.arange(8.0)), out)   # cube 0 only
    np.testing.assert_array_equal(checked.read(out), np.arange(8.0))


def test_without_boundscheck_the_module_has_no_checks():
    """Bounds checking off, the generated module neither imports nor calls the checker (the
    kernel's code is what it is without this feature); on, every checked subscript calls it."""
    for kernel in (shifted_copy, one_unit_reads_past, shared_neighbour):
        off = translate_source(kernel.py_func, boundscheck=False)
        assert "bounds_runtime" not in off and "__checked" not in off
        assert "__checked(" in translate_source(kernel.py_func, boundscheck=True)


# ---- the default (issue 30): checked, and the process goes on ---------------------------------

_DEFAULT_CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    from numba import cuda
    import numba_cube as cube

    @cube.kernel
    def scan_one_past(x, out):
        # a user's inclusive scan of 5 values, one unit walking them: its loop runs one item
        # too far and writes out[5]
        if cuda.grid(1) == 0:
            acc = 0
            for k in range(x.size + 1):
                acc += x[k] if k < x.size else 0
                out[k] = acc

    @cube.kernel
    def wild_read(x, out, far):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i + far] if i == out.size - 1 else x[i]

    client = cube.client("cpu")                 # nothing said about bounds checking
    assert "boundscheck" not in client.options
    case = sys.argv[1]
    if case == "scan":
        x, out = client.create(np.arange(1, 6)), client.empty(5, np.int64)
        client.launch(scan_one_past, 1, 32, x, out)
    else:                                       # 2^16 units: the parallel variant runs it
        n = 1 << 16
        x, out = client.create(np.arange(float(n))), client.empty(n)
        client.launch(wild_read, n // 256, 256, x, out, 10 ** 9)
    try:
        client.read(out)
        print("NO FAILURE")
    except cube.LaunchFailure as failure:
        print(type(failure.root).__name__)
        print(failure.root)
    y = client.create(np.arange(4.0))           # the process and its client go on
    print(client.read(y).sum())
''')


@pytest.mark.parametrize("case, message", [
    ("scan", "kernel scan_one_past: out[5] out of bounds for axis 0 with size 5 "
             "(cube (0, 0, 0), unit (0, 0, 0))"),
    ("wild", "kernel wild_read: x[1000065535] out of bounds for axis 0 with size 65536 "
             "(cube (255, 0, 0), unit (255, 0, 0))"),
])
def test_default_settings_turn_a_wild_access_into_a_launch_failure(tmp_path, case, message):
    """With default settings (no client or kernel option, neither NUMBA_CUBE_BOUNDSCHECK nor
    NUMBA_BOUNDSCHECK) a kernel writing one past its array (a scan of 5 values whose loop runs
    one item too far) or reading 10^9 past it (the last unit of a launch large enough for the
    parallel variant) fails its launch with LaunchFailure[IndexError] naming array, index, cube
    and unit, and the process exits normally (before issue 30: rc 139, a crash somewhere else)."""
    script = tmp_path / "child.py"
    script.write_text(_DEFAULT_CHILD)
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CUBE_BOUNDSCHECK", "NUMBA_BOUNDSCHECK")}
    r = subprocess.run([sys.executable, str(script), case], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    assert r.stdout.splitlines() == ["IndexError", message, "6.0"], r.stdout


def test_explicit_false_compiles_unchecked_and_the_default_checked():
    """``boundscheck=False`` on the client means unchecked, as before issue 30: the generated
    module says ``boundscheck=False`` in its header and every ``njit``, and has no checks. With
    nothing said it is checked: another module (another file, so Numba caches the two apart),
    whose header says ``boundscheck=True``."""
    backend = CpuBackend()
    sig = (types.Array(types.float64, 1, "C"), types.Array(types.float64, 1, "C"), types.int64)
    extras = ("serial", (8, 1, 1))
    kernel = cube.kernel(shifted_copy.py_func)
    off = backend.compile(kernel, sig, extras, {"boundscheck": False}).program
    on = backend.compile(kernel, sig, extras, {}).program
    assert "boundscheck=False" in off.source and "boundscheck=True" not in off.source
    assert "__checked" not in off.source and "bounds_runtime" not in off.source
    header = [line for line in on.source.splitlines() if line.startswith("# translator")]
    assert len(header) == 1 and header[0].endswith("boundscheck=True")
    assert "__checked(" in on.source
    assert on.path != off.path


@cube.kernel
def sum_row_past(a, out, extra):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for k in range(a.shape[1] + (extra if i == 2 else 0)):
            acc += a[i, k]
        out[i] = acc


@cube.kernel
def loop_guarded(a, out, extra):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for k in range(a.size + extra):
            if k < a.size:
                acc += a[k]
        out[i] = acc


@cube.kernel
def loop_broken(a, out, extra):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for k in range(a.size + extra):
            if k == a.size:
                break
            acc += a[k]
        out[i] = acc


@cube.kernel
def loop_from(a, out, start, count):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for k in range(start, start + (count if i == 1 else a.size)):
            acc += a[k - start]
        out[i] = acc


def test_a_loops_accesses_are_checked_once_and_still_name_the_unit(checked):
    """An innermost range loop whose index is affine in its variable is checked at the range's
    ends before it runs (the generated loop indexes through ``__prechecked``): in bounds it
    computes NumPy's row sums; unit 2's loop running one column too far fails with the access
    it would make, a[2, 5], and the unit that makes it."""
    assert "__prechecked(" in translate_source(sum_row_past.py_func, boundscheck=True)
    host = np.arange(20.0).reshape(4, 5)
    out = checked.empty(4)
    checked.launch(sum_row_past, 1, 4, checked.create(host), out, 0)
    np.testing.assert_array_equal(checked.read(out), host.sum(axis=1))
    root = _failure(checked, sum_row_past, 1, 4, host, np.zeros(4), 1)
    assert str(root) == ("kernel sum_row_past: a[2, 5] out of bounds for axis 1 with size 5 "
                         "(cube (0, 0, 0), unit (2, 0, 0))")


@pytest.mark.parametrize("kernel", [loop_guarded, loop_broken])
def test_a_loop_running_past_its_array_without_touching_it_does_not_fail(checked, kernel):
    """A loop whose range runs past the array but that reads it only under ``if k < a.size``,
    or leaves with ``break`` before the end: no access is out of bounds, so nothing fails (a
    check of the range's ends would; these accesses are checked where they are made)."""
    out = checked.empty(3)
    checked.launch(kernel, 1, 3, checked.create(np.arange(10.0)), out, 5)
    np.testing.assert_array_equal(checked.read(out), np.full(3, 45.0))


@cube.kernel
def loop_upto(a, out, n):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        if i == 1:
            for k in range(n):
                acc += a[k]
        else:
            for k in range(a.size):
                acc += a[k]
        out[i] = acc


@pytest.mark.parametrize("kernel, args, too_far", [
    (loop_upto, (), (np.uint64(11),)),
    (loop_from, (1 << 45,), (1 << 45, 11)),
], ids=["unsigned-range", "ends-beyond-2^40"])
def test_loops_the_ends_cannot_vouch_for_are_checked_item_by_item(checked, kernel, args,
                                                                  too_far):
    """A range of unsigned integers, or one whose ends lie beyond 2^40 (where an index could wrap
    around int64 between them), is checked at every item before the loop runs: in bounds the
    sums are NumPy's; one item too many for unit 1 fails naming a[10] and unit 1."""
    host = np.arange(10.0)
    out = checked.empty(3)
    in_bounds = (np.uint64(10),) if kernel is loop_upto else (*args, 10)
    checked.launch(kernel, 1, 3, checked.create(host), out, *in_bounds)
    np.testing.assert_array_equal(checked.read(out), np.full(3, 45.0))
    root = _failure(checked, kernel, 1, 3, host, np.zeros(3), *too_far)
    assert str(root) == (f"kernel {kernel.name}: a[10] out of bounds for axis 0 with size 10 "
                         "(cube (0, 0, 0), unit (1, 0, 0))")


@cube.kernel
def row_of(a, out, j):
    i = cuda.grid(1)
    if i < out.size:
        row = a[i]
        out[i] = row[j if i == 1 else 0]


@cuda.jit(device=True)
def _read_at(a, k):
    return a[k]


@cube.kernel
def through_device(a, out, shift):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _read_at(a, i + shift)


@cube.kernel
def five_axes(a, out, k):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[0, 0, 0, i, k if i == 1 else 0]


@cube.kernel
def gather(a, picks, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[picks][i]


def test_views_device_functions_many_axes_and_array_indices_are_checked(checked):
    """Not only parameters and shared arrays: a row view (``row = a[i]; row[j]``) is checked
    and named, and so is an index of five components; a device function that is not inlined
    keeps Numba's own check (its plain IndexError), and so does an index that is an array
    (``a[picks]``, one pick out of bounds). Each is an IndexError, as the simulator's."""
    root = _failure(checked, row_of, 1, 4, np.arange(20.0).reshape(4, 5), np.zeros(4), 5)
    assert str(root) == ("kernel row_of: row[5] out of bounds for axis 0 with size 5 "
                         "(cube (0, 0, 0), unit (1, 0, 0))")
    root = _failure(checked, five_axes, 1, 2, np.zeros((1, 1, 1, 2, 3)), np.zeros(2), 3)
    assert str(root) == ("kernel five_axes: a[0, 0, 0, 1, 3] out of bounds for axis 4 with "
                         "size 3 (cube (0, 0, 0), unit (1, 0, 0))")
    source = translate_source(through_device.py_func, boundscheck=True)
    device = source.split("def _read_at__dev")[0].splitlines()[-1]
    assert "boundscheck=True" in device          # Numba's own check guards it
    root = _failure(checked, through_device, 1, 8, np.arange(8.0), np.zeros(8), 1)
    assert type(root) is IndexError
    root = _failure(checked, gather, 1, 4, np.arange(4.0), np.array([0, 1, 4, 2]), np.zeros(4))
    assert type(root) is IndexError


@cube.kernel
def literal_in_a_branch(a, out, flag):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[3] if flag else 0.0


def test_what_the_rewrite_leaves_keeps_numbas_own_check(checked):
    """A literal index in a branch of a conditional expression is not checked in front of its
    statement (the branch may not run): the function holding it keeps Numba's own check, so
    reading a[3] of a 2-element array is still an IndexError, and not taking the branch is
    no error at all."""
    source = translate_source(literal_in_a_branch.py_func, boundscheck=True)
    chunk = source.split("def literal_in_a_branch__chunk")[0].splitlines()[-1]
    assert "boundscheck=True" in chunk
    root = _failure(checked, literal_in_a_branch, 1, 2, np.arange(2.0), np.zeros(2), 1)
    assert type(root) is IndexError
    out = checked.empty(2)
    checked.launch(literal_in_a_branch, 1, 2, checked.create(np.arange(2.0)), out, 0)
    np.testing.assert_array_equal(checked.read(out), np.zeros(2))


def test_functions_whose_every_access_is_checked_drop_numbas_own_check():
    """Numba's own check costs what the named checks do not (module docstring of
    passes/bounds/checks.py): every function of a checked module whose subscripts all go through the
    checker (or index the translator's own storage) is compiled with ``boundscheck=False``; a
    non-inlined device function keeps ``boundscheck=True``."""
    for kernel in (shifted_copy, shared_neighbour, sum_row_past, row_of):
        source = translate_source(kernel.py_func, boundscheck=True)
        decorators = [line for line in source.splitlines() if line.startswith("@__njit")]
        assert decorators and all("boundscheck=False" in d for d in decorators), kernel
    source = translate_source(through_device.py_func, boundscheck=True)
    kernel_part = source.split("def _read_at__dev")[1]
    assert all("boundscheck=False" in line for line in kernel_part.splitlines()
               if line.startswith("@__njit"))


@cube.kernel
def sum_into_first(x):
    i = cuda.grid(1)
    if i < x[0].size:
        x[0][i] = x[1][i] + x[2][i]


def test_a_tuple_of_arrays_is_written_back_on_the_default_settings():
    """The case that kept checks off by default once: numba-cuda's ``test_tuple_of_arrays``
    (``x[0][i] = x[1][i] + x[2][i]``, the arrays inside a tuple argument) launched numba-style on
    the default (checked) client writes ``x[0]`` back with NumPy's sum; and an element past the
    end of a tuple member is the same named IndexError as a parameter's."""
    x = (np.zeros(10), np.arange(10.0), 2 * np.arange(10.0))
    with cube.client("cpu"):
        sum_into_first[1, 32](x)
    np.testing.assert_array_equal(x[0], x[1] + x[2])
    short = (np.zeros(12), np.arange(10.0), np.arange(12.0))
    with pytest.raises(IndexError, match=r"\[10\] out of bounds for axis 0 with size 10"):
        with cube.client("cpu"):
            sum_into_first[1, 32](short)


def test_failing_launches_reach_a_steady_state_in_memory(checked):
    """A loop of launches that each go out of bounds holds no more memory as it goes on: after a
    warm-up of 300 failing launches, 2,000 more leave less than 16 bytes per launch allocated
    (traced by ``tracemalloc``, which sees the objects native code allocates, after a
    collection), and every read still raises the named IndexError.

    The bound, from what it caught: when a failed check raised ``IndexError`` with its run-time
    values as arguments, Numba kept the pickled exception and the tuple of boxed arguments of
    every one (770 traced bytes per launch); a failed check now raises a constant exception and
    its values go through ``bounds.record_failure``. Then 48 bytes per launch remained: Numba
    leaks one allocation when an exception leaves a jitted function through a nested jitted call
    (numba/numba#10783), and the serial twin called its chunk function. The server now calls the
    chunk itself (``server._compile_twin``): under a byte per launch is left. Traced bytes, not
    the process's resident memory: they do not move by whole pages or with what other threads
    allocate. Nothing is timed."""
    a, out = checked.create(np.arange(10.0)), checked.empty(11)

    def fail(times):
        for _ in range(times):
            checked.launch(shifted_copy, 2, 8, a, out, 0)
            try:
                checked.read(out)
            except cube.LaunchFailure as failure:
                root = failure.root
        checked.sync()
        return root

    grown, root = bytes_left_by(fail, 300, 2000)
    assert grown < 2000 * 16, f"{grown} bytes over 2000 failing launches"
    assert str(root) == ("kernel shifted_copy: a[10] out of bounds for axis 0 with size 10 "
                         "(cube (1, 0, 0), unit (2, 0, 0))")


def test_checks_failing_on_threads_at_once_each_name_their_own_index(checked):
    """A failed check's values are kept per thread (``bounds.record_failure``): two
    threads, each on its own stream, launching kernels that go out of bounds in different units
    at the same time, 100 times each, read back each launch's own unit, never the other
    thread's."""
    a = checked.create(np.arange(10.0))
    seen = {1: set(), 4: set()}

    def fail_with(shift):
        out = checked.empty(16)
        with cube.stream():
            for _ in range(100):
                checked.launch(shifted_copy, 2, 8, a, out, shift)
                try:
                    checked.read(out)
                except cube.LaunchFailure as failure:
                    seen[shift].add(str(failure.root))

    threads = [threading.Thread(target=fail_with, args=(shift,)) for shift in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # unit i reads a[i + shift]: a[10] is read first by unit 10 - shift (units of 8 per cube)
    assert seen == {
        1: {"kernel shifted_copy: a[10] out of bounds for axis 0 with size 10 "
            "(cube (1, 0, 0), unit (1, 0, 0))"},
        4: {"kernel shifted_copy: a[10] out of bounds for axis 0 with size 10 "
            "(cube (0, 0, 0), unit (6, 0, 0))"}}
