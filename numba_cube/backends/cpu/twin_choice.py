"""Which twin runs a CPU launch: the serial one or the parallel one, chosen from measurements.

Every kernel is compiled as two twins (``translate.py``): ``parallel`` spreads the cubes over
Numba's thread pool with ``prange``, ``serial`` runs them on the calling thread. The parallel
twin pays a floor per call (the fork and join of a parallel region: about 2.5 us with an idle
``omp`` pool on the 2-core development VM, milliseconds when the calling thread's team must
first be created or the pool is busy) and then divides the work by the threads. Which is faster
for a launch depends on the kernel's work per unit and on the machine, so a fixed unit count
(the old ``NUMBA_CUBE_SERIAL_UNITS`` rule) is right for neither a light kernel at 40k units nor
a heavy one at 20k (stumpy's ``gpu_stump``: ~20k units, each an O(m) loop, ran on one core).

The rule, per compiled kernel (one ``TwinChoice`` per artifact), from its own runs:

- a launch of one cube runs serial (the parallel twin divides cubes, not units);
- with no run measured yet, the prior: serial below ``PRIOR_UNITS`` units, parallel from there;
- every run is timed (two ``perf_counter`` calls), and the fastest time of each twin is kept per
  launch size; when both twins were measured at a size, the faster runs;
- otherwise a model predicts both: the serial cost per unit ``c`` (the smallest seen) and the
  parallel floor ``F`` (the smallest ``t - n c / T`` of the parallel runs, ``T`` threads) give
  ``n c`` against ``F + n c / T``;
- a twin not measured yet is tried when the model cannot rule it out: parallel once the predicted
  serial time reaches ``EXPLORE_SECONDS`` (below that no thread pool can repay the compile of the
  parallel twin, which is made at its first use). A twin that lost on its first run at a size
  gets a second (its first run may have paid a thread team's creation).

Minimums, not means: a run can only be slowed by the machine (other processes, a cold cache),
never sped up, so the smallest time is the best estimate of the kernel's own cost.
``NUMBA_CUBE_SERIAL_UNITS`` set in the environment restores the fixed rule (``fixed_twin``).
"""

from __future__ import annotations

import numba

__all__ = ["TwinChoice", "PRIOR_UNITS", "EXPLORE_SECONDS", "fixed_twin"]

#: the prior's threshold (units), used until a kernel's own runs say otherwise
PRIOR_UNITS = 32768
#: a predicted serial run at least this long is worth trying in parallel: shorter ones save too
#: little per launch to repay the parallel twin's compile (0.5-2 s, once per process and signature
#: unless the disk cache has it)
EXPLORE_SECONDS = 200e-6
#: launch sizes remembered per kernel (a sweep over sizes must not grow memory without bound)
MAX_SIZES = 64

SERIAL = "serial"
PARALLEL = "parallel"


def fixed_twin(units: int, cubes: int, serial_units: int) -> str:
    """The fixed rule: serial for one cube or fewer than ``serial_units`` units."""
    return SERIAL if cubes == 1 or units < serial_units else PARALLEL


class TwinChoice:
    """The measured choice between the two twins of one compiled kernel."""

    __slots__ = ("_best", "_tries", "_unit_cost", "_floor")

    def __init__(self):
        self._best: dict = {}       # (twin, units) -> fastest seconds seen
        self._tries: dict = {}      # (twin, units) -> runs measured
        self._unit_cost = None      # fastest serial seconds per unit
        self._floor = None          # smallest parallel floor implied by the parallel runs

    def __len__(self) -> int:
        """How many (twin, launch size) timings are remembered."""
        return len(self._best)

    def choose(self, units: int, cubes: int, threads: int | None = None) -> str:
        """The twin to run a launch of ``units`` units in ``cubes`` cubes."""
        if cubes == 1:
            return SERIAL
        best = self._best
        serial_time = best.get((SERIAL, units))
        parallel_time = best.get((PARALLEL, units))
        if serial_time is not None and parallel_time is not None:
            winner = SERIAL if serial_time <= parallel_time else PARALLEL
            loser = PARALLEL if winner == SERIAL else SERIAL
            if self._tries.get((loser, units), 0) < 2:
                return loser            # one more look: its first run may have been unlucky
            return winner
        cost = self._unit_cost
        if cost is None:                # no serial run yet: the prior
            return SERIAL if units < PRIOR_UNITS else PARALLEL
        predicted_serial = units * cost
        if self._floor is None:
            return PARALLEL if predicted_serial >= EXPLORE_SECONDS else SERIAL
        if threads is None:
            threads = numba.get_num_threads()
        predicted_parallel = self._floor + predicted_serial / max(threads, 1)
        return PARALLEL if predicted_parallel < predicted_serial else SERIAL

    def record(self, twin: str, units: int, seconds: float, threads: int | None = None) -> None:
        """A run of ``twin`` over ``units`` units took ``seconds`` (failed runs are not
        recorded: an exception cut them short)."""
        key = (twin, units)
        best = self._best
        if key not in best and len(best) >= 2 * MAX_SIZES:
            best.clear()                # a sweep: start over rather than grow
            self._tries.clear()
        previous = best.get(key)
        improved = previous is None or seconds < previous
        if improved:
            best[key] = seconds
        self._tries[key] = self._tries.get(key, 0) + 1
        if twin == SERIAL:
            per_unit = seconds / units
            if self._unit_cost is None or per_unit < self._unit_cost:
                self._unit_cost = per_unit
                improved = True
        # The floor depends only on the minimums: recomputed when one of them moved, which a
        # steady stream of launches rarely does (it asks Numba for the thread count, a lock).
        if improved and self._unit_cost is not None:
            self._update_floor(threads)

    def _update_floor(self, threads: int | None) -> None:
        if threads is None:
            threads = numba.get_num_threads()
        cost = self._unit_cost
        floors = [t - n * cost / max(threads, 1)
                  for (twin, n), t in self._best.items() if twin == PARALLEL]
        if floors:
            self._floor = max(0.0, min(floors))
