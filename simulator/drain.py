"""One second of reading: how the simulated job's workers drain their partitions (compiled with numba).

The rule, for a job at scale-out ``n``: worker ``i`` reads the partitions ``p ≡ i (mod n)``
(:func:`simulator.job.round_robin`); with ``B_i`` the records waiting in them and ``c_i`` what the
worker can read this second, each of its partitions gives up ``⌊backlog_p · min(c_i, B_i)/B_i⌋``
records (nothing when ``B_i`` is 0), so a worker with spare capacity empties its partitions and a
saturated one reads them in proportion to their backlog.

One function holds the rule, :func:`drain_job`, for one job (:class:`simulator.SimulatedFlinkJob`,
integer offsets) and for every schedule prefix of the optimal schedule's model (``lab.optimal``,
offsets held as whole float64 numbers). numba compiles it once per offset type with the same IEEE
operations, and sums of whole numbers below 2⁵³ are exact in any order,
so the optimal schedule's model is the simulator to the last record, which
``lab.optimal.optimal_run`` checks on every solve by replaying the schedule through the job.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def drain_job(
    end: np.ndarray, position: np.ndarray, parallelism: int, capacity: np.ndarray, per_worker: np.ndarray
) -> int:  # pragma: no cover - compiled; covered through every replay
    """Read one second of a job at ``parallelism``, in place: advances ``position`` (whole numbers per
    partition, int64 or float64), writes each worker's records into ``per_worker[:parallelism]`` and
    returns the records read."""
    partitions = end.shape[0]
    read = 0
    for i in range(parallelism):
        backlog = 0.0
        for p in range(i, partitions, parallelism):
            backlog += float(end[p] - position[p])
        fraction = min(capacity[i], backlog) / backlog if backlog > 0.0 else 0.0
        taken = 0
        for p in range(i, partitions, parallelism):
            take = math.floor(float(end[p] - position[p]) * fraction)
            position[p] += take
            taken += take
        per_worker[i] = taken
        read += taken
    return read
