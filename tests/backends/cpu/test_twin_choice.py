"""The serial/parallel choice of a CPU launch (backends/cpu/twin_choice.py): made from the kernel's
own timed runs on the machine it runs on, not from a fixed unit count. The policy is pinned here
with the durations fed in (tests never time anything); end to end, a launch answers as NumPy
whichever twin runs it, and ``NUMBA_CUBE_SERIAL_UNITS`` set in the environment keeps the fixed
rule."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.backends.cpu.twin_choice import (EXPLORE_SECONDS, MAX_SIZES, PRIOR_UNITS,
                                                 TwinChoice, fixed_twin)


def test_before_any_run_the_prior_decides_and_one_cube_is_always_serial():
    """With nothing measured: serial below PRIOR_UNITS units, parallel from there; a launch of
    one cube is serial at any size (the parallel twin divides cubes)."""
    choice = TwinChoice()
    assert choice.choose(PRIOR_UNITS - 1, 8, threads=4) == "serial"
    assert choice.choose(PRIOR_UNITS, 8, threads=4) == "parallel"
    assert choice.choose(10 * PRIOR_UNITS, 1, threads=4) == "serial"


def test_a_heavy_kernel_below_the_prior_is_tried_in_parallel_and_kept_there_if_faster():
    """A kernel whose serial run at 20k units is long (stumpy's shape: each unit a loop) is tried
    in parallel; measured faster twice, parallel is what it runs from then on."""
    choice = TwinChoice()
    units = 20_000
    choice.record("serial", units, 20e-3, threads=4)
    assert choice.choose(units, 80, threads=4) == "parallel"
    choice.record("parallel", units, 6e-3, threads=4)
    assert choice.choose(units, 80, threads=4) == "serial"     # the loser's second look
    choice.record("serial", units, 21e-3, threads=4)
    assert choice.choose(units, 80, threads=4) == "parallel"
    choice.record("parallel", units, 6.5e-3, threads=4)
    assert all(choice.choose(units, 80, threads=4) == "parallel" for _ in range(5))


def test_a_light_kernel_stays_serial_and_a_slow_parallel_run_sends_it_back():
    """A serial run predicted shorter than EXPLORE_SECONDS is never tried in parallel (no thread
    pool repays the parallel twin's compile). A kernel whose parallel runs are slower than its
    serial ones (a busy machine, a large fork/join floor) goes back to serial."""
    light = TwinChoice()
    light.record("serial", 4096, 4096 * 1e-9, threads=2)
    assert light.choose(8192, 32, threads=2) == "serial"
    busy = TwinChoice()
    busy.record("serial", 50_000, 1e-3, threads=2)
    busy.record("parallel", 50_000, 3e-3, threads=2)
    busy.record("parallel", 50_000, 2.5e-3, threads=2)
    assert busy.choose(50_000, 200, threads=2) == "serial"


def test_a_size_not_yet_run_is_predicted_from_the_floor_and_the_unit_cost():
    """Between sizes, the model: serial ``n c`` against parallel ``F + n c / T``, with ``c`` the
    fastest serial cost per unit and ``F`` the smallest floor the parallel runs imply. A floor of
    1 ms on 4 threads makes 100k units of 10 ns (1 ms serial) serial and 1M units parallel."""
    choice = TwinChoice()
    choice.record("serial", 100_000, 1e-3, threads=4)          # c = 10 ns
    choice.record("parallel", 400_000, 2e-3, threads=4)        # F = 2 ms - 1 ms = 1 ms
    assert choice.choose(200_000, 800, threads=4) == "parallel"  # 2 ms vs 1.5 ms
    assert choice.choose(120_000, 800, threads=4) == "serial"   # 1.2 ms vs 1.3 ms
    assert choice.choose(1_000_000, 4000, threads=4) == "parallel"  # 10 ms vs 3.5 ms


def test_the_remembered_sizes_are_bounded():
    """A sweep over launch sizes does not grow a kernel's record without bound."""
    choice = TwinChoice()
    for units in range(1000, 1000 + 10 * MAX_SIZES):
        choice.record("serial", units, units * 1e-9)
        assert len(choice) <= 2 * MAX_SIZES
    # what was learnt across the sweep stays: 1 ns a unit, so 10k units stay serial
    assert 10_000 * 1e-9 < EXPLORE_SECONDS
    assert choice.choose(10_000, 40) == "serial"


def test_the_fixed_rule():
    """``NUMBA_CUBE_SERIAL_UNITS``'s rule: serial for one cube or fewer units than the bound."""
    assert fixed_twin(100, 1, 10) == "serial"
    assert fixed_twin(100, 4, 1000) == "serial"
    assert fixed_twin(1000, 4, 1000) == "parallel"


@cube.kernel
def windowed_sum(x, out, m):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for k in range(m):
            acc += x[(i + k) % x.size]
        out[i] = acc


def test_repeated_launches_answer_as_numpy_whichever_twin_runs():
    """Launched again and again at sizes on both sides of the prior (so both twins run and the
    choice may move between them), every launch gives NumPy's windowed sums."""
    client = cube.client("cpu")
    rng = np.random.default_rng(7)
    for n in (3000, PRIOR_UNITS + 100):
        xh = rng.random(n)
        want = sum(np.roll(xh, -k) for k in range(20))
        x, out = client.create(xh), client.empty(n)
        for _ in range(6):
            client.write(out, np.zeros(n))
            client.launch(windowed_sum, (n + 127) // 128, 128, x, out, 20)
            np.testing.assert_allclose(client.read(out), want, rtol=1e-12)


def test_the_environment_variable_fixes_the_rule():
    """With ``NUMBA_CUBE_SERIAL_UNITS`` set, a fresh process keeps the fixed rule and still
    answers right."""
    script = textwrap.dedent("""
        import numpy as np
        from numba_cube.backends.cpu.server import CpuBackend
        from numba_cube.runtime.launch.geometry import CubeCount, CubeDim
        backend = CpuBackend()
        print(backend.cache_extras(CubeCount(8), CubeDim(64)))
        print(backend.cache_extras(CubeCount(64), CubeDim(64)))
    """)
    env = dict(os.environ, NUMBA_CUBE_SERIAL_UNITS="1024")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=True).stdout.split("\n")
    assert out[0] == "('serial', (64, 1, 1), False)"
    assert out[1] == "('parallel', (64, 1, 1), False)"


def test_a_twin_that_does_not_compile_is_said_aloud_and_the_other_runs():
    """A parallel twin compiled at its first choice that does not compile: a
    ``NumbaPerformanceWarning`` names the kernel and the error (every launch is on one core from
    then on, which nothing else would explain), and the launch still answers, on the serial twin.
    The compile failure is mocked: no kernel is known to produce one any more (a kernel of 23 or
    more parameters that could raise did: ``tests/backends/cpu/emit/test_entry_points.py``)."""
    from numba import types
    from numba.core.errors import NumbaPerformanceWarning

    from numba_cube.backends.cpu import server
    from numba_cube.backends.cpu.translate import build_program
    from numba_cube.backends.cpu.twin_runners import measured_runner

    prog = build_program(windowed_sum.py_func)
    arg_types = (types.float64[::1], types.float64[::1], types.int64)
    sig = (types.int64,) * 6 + arg_types

    def compile_twin(twin):
        if twin == "parallel":
            raise RuntimeError("mocked: the parallel variant does not compile")
        return server._compile_twin(windowed_sum, prog, twin, sig, arg_types)

    run = measured_runner("windowed_sum", False, {"serial": compile_twin("serial")}, compile_twin)
    n = 4 * 128
    run.twin_choice.record("serial", n, 10.0)        # a slow serial run: parallel is tried next
    x, out = np.random.default_rng(1).random(n), np.zeros(n)
    with pytest.warns(NumbaPerformanceWarning, match="windowed_sum: its parallel variant does "
                      "not compile .*mocked"):
        run((4, 1, 1), (128, 1, 1), (x, out, 3))
    np.testing.assert_allclose(out, x + np.roll(x, -1) + np.roll(x, -2), rtol=1e-12)
