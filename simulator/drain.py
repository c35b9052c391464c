"""The simulated job's inner loops, compiled with numba: how its workers drain their partitions, and its seconds.

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

numba's on-disk cache keys a compiled function on its own file only; ``lab.optimal`` inlines this rule
and drops its own cached kernels whenever this file's source changes, so they never run an old rule.

:func:`run_job` runs whole seconds of one job (:meth:`simulator.SimulatedFlinkJob.run_until`: arrivals,
the drain, busy time, checkpoints, CPU, the recorded metrics) between two of its stops or restarts;
:func:`moving_averages` gives the per-worker moving averages the job reports when a window is read.
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


@numba.njit(cache=True, nogil=True)
def run_job(
    start_s: int,
    arrivals: np.ndarray,
    capacity: np.ndarray,
    noise: np.ndarray,
    running: bool,
    parallelism: int,
    uptime_start: int,
    checkpoint_interval_s: int,
    cpu_idle: float,
    cpu_noise: float,
    end: np.ndarray,
    position: np.ndarray,
    committed: np.ndarray,
    workload: np.ndarray,
    lag: np.ndarray,
    committed_lag: np.ndarray,
    active: np.ndarray,
    uptime: np.ndarray,
    throughput: np.ndarray,
    cpu: np.ndarray,
    busy: np.ndarray,
    backlog: np.ndarray,
) -> tuple[int, int, int]:  # pragma: no cover - compiled; covered through every replay
    """The seconds ``start_s …`` (one per row of ``arrivals``) of a job that neither stops nor restarts
    in them, as :meth:`simulator.SimulatedFlinkJob.step` defines a second, in place: the offsets
    advance, each second's metrics go to its row of the output columns. Returns the records produced,
    read and newly checkpointed."""
    produced = 0
    processed = 0
    checkpointed = 0
    workers = end.shape[0]
    for k in range(arrivals.shape[0]):
        t = start_s + k
        produced_now = 0
        for p in range(workers):
            end[p] += arrivals[k, p]
            produced_now += arrivals[k, p]
        produced += produced_now
        read = throughput[k]
        load = busy[k]
        read[:] = 0.0
        load[:] = 0.0
        if running:
            processed += drain_job(end, position, parallelism, capacity[k], read)
            for w in range(parallelism):
                share = read[w] / capacity[k, w]
                load[w] = 1.0 if share > 1.0 else share
            seconds_up = t - uptime_start
            if seconds_up > 0 and seconds_up % checkpoint_interval_s == 0:
                for p in range(workers):
                    checkpointed += position[p] - committed[p]
                    committed[p] = position[p]
        else:
            seconds_up = 0
        for w in range(workers):
            value = cpu_idle + (1.0 - cpu_idle) * load[w]
            value += cpu_noise * noise[k, w]
            cpu[k, w] = 0.0 if value < 0.0 else (1.0 if value > 1.0 else value)
        waiting = 0
        uncommitted = 0
        pending = backlog[k]
        pending[:] = np.nan
        if running:
            pending[:parallelism] = 0.0
        for p in range(workers):
            waiting += end[p] - position[p]
            uncommitted += end[p] - committed[p]
            if running:
                pending[p % parallelism] += end[p] - position[p]
        workload[k] = float(produced_now)
        lag[k] = float(waiting)
        committed_lag[k] = float(uncommitted)
        active[k] = parallelism
        uptime[k] = float(seconds_up)
    return produced, processed, checkpointed


@numba.njit(cache=True, nogil=True)
def moving_averages(
    parallelism: np.ndarray, raw: np.ndarray, first: int, start: int, window_s: int, out: np.ndarray
) -> None:  # pragma: no cover - compiled; covered through every window read
    """Each worker's mean of ``raw`` (rows: seconds from ``first``) over the last ``window_s`` seconds
    it existed, for the seconds ``start …`` (one per row of ``out``), in place; NaN where it did not
    exist (worker ``i`` exists while ``parallelism`` exceeds ``i``). The sums are differences of
    running sums from ``first``, as ``numpy.cumsum`` would add them."""
    seconds = raw.shape[0]
    for i in range(raw.shape[1]):
        sums = np.empty(seconds + 1)
        sums[0] = 0.0
        last_absent = first - 1
        for k in range(seconds):
            sums[k + 1] = sums[k] + raw[k, i]
            s = first + k
            if parallelism[k] <= i:
                last_absent = s
            if s < start:
                continue
            fill = min(s - last_absent, window_s)
            if fill <= 0:
                out[s - start, i] = np.nan
            else:
                out[s - start, i] = (sums[k + 1] - sums[k + 1 - fill]) / fill
