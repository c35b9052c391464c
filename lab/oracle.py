"""The oracle's analyzer: ground truth from the simulator in place of the online models.

Used by the replay when the policy is ``oracle``. Where the real analyzer estimates, this one reads
the truth: the trace's future workload (the mean rate the simulator draws around) as the forecast,
the simulator's true capacity per scale-out, and recovery times computed from the true future
workload, the true backlog and the simulator's downtime model. It only exists next to a simulated
job; nothing in production can be an oracle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from agent.analyze import Analysis
from agent.observation import Observation
from lab.settings import LabSettings
from simulator import JobState, SimulatedFlinkJob

RECOVERY_SEARCH_S = 3600
"""How far past a stop the true recovery is searched for; longer counts as never."""
DOWNTIME_QUANTILE_SIGMAS = 2.0
"""The oracle plans for a downtime this many log-normal sigmas above the median (about the 98th percentile)."""


def true_recovery_time(
    *,
    future: np.ndarray,
    capacity: float,
    downtime_s: float,
    lag_now: float,
    replay_records: float,
) -> float:
    """Seconds from a stop now until the lag is back to normal, given the true future workload per second.

    The backlog at restart is the lag now, the records since the last checkpoint (replayed) and what
    arrives during the downtime; after that it shrinks by ``capacity - workload`` each second. The
    job has recovered when the backlog is no more than the lag before the stop or one second of input,
    the criterion the replay summary uses.
    """
    down = max(0, int(math.ceil(downtime_s)))
    if len(future) <= down:
        return math.inf
    backlog = lag_now + replay_records + float(np.sum(future[:down]))
    after = future[down:]
    remaining = backlog + np.cumsum(after - capacity)
    threshold = np.maximum(max(lag_now, 1.0), after)
    done = np.flatnonzero(remaining <= threshold)
    return float(down + done[0] + 1) if done.size else math.inf


class OracleAnalyzer:
    """An Analyzer substitute that knows the simulated job's truth (for the oracle policy only)."""

    def __init__(self, job: SimulatedFlinkJob, settings: LabSettings) -> None:
        self.job = job
        self.settings = settings
        self._recovered_restarts = 0

    # The loop's knowledge-store hooks: the oracle learns nothing, so it keeps nothing.
    def to_dict(self) -> dict[str, Any]:
        """Nothing to persist."""
        return {}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Nothing to restore."""
        return None

    def reset(self) -> None:
        """Nothing learned to forget."""
        return None

    def observed_scale_outs(self) -> list[int]:
        """The oracle observes nothing: it knows."""
        return []

    def set_forecasting(self, enabled: bool) -> None:
        """Nothing to switch: the oracle reads the trace's true future, it forecasts nothing."""
        return None

    def downtime(self, kind: str, parallelism: int) -> float:
        """The simulated job's downtime of a stop at ``parallelism`` (its quantile, as :meth:`analyze` reads)."""
        return self._downtime_s(kind, parallelism, parallelism)

    def on_rescale(
        self,
        *,
        now: float,
        from_parallelism: int,
        to_parallelism: int,
        downtime_s: float | None = None,
        resumed_at: float | None = None,
    ) -> None:
        """Nothing to start or learn: recovery and downtime are read from the job itself."""
        return None

    def _downtime_s(self, kind: str, parallelism: int, current: int) -> float:
        sim = self.job.config
        if kind == "failure":
            mean = sim.failure_downtime_base_s + sim.failure_downtime_per_worker_s * parallelism
        else:
            mean = sim.rescale_downtime_base_s + sim.rescale_downtime_per_worker_s * max(parallelism, current)
        sigma = sim.downtime_jitter
        return mean * math.exp(DOWNTIME_QUANTILE_SIGMAS * sigma - sigma * sigma / 2)

    def _recovering(self) -> bool:
        """True while the job is down or has not worked off the backlog of its last stop."""
        job = self.job
        if job.state is JobState.DOWN:
            return True
        restarts = job.restarts
        while self._recovered_restarts < len(restarts):
            restart = restarts[self._recovered_restarts]
            resume = restart.start_s + restart.downtime_s
            before = job.window(restart.start_s - 1, restart.start_s).lag if restart.start_s > 0 else np.zeros(1)
            since = job.window(resume, job.recorded_seconds)
            threshold = np.maximum(max(float(before[0]) if before.size else 0.0, 1.0), since.workload)
            if not np.any(since.lag <= threshold):
                return True
            self._recovered_restarts += 1
        return False

    def analyze(self, observation: Observation, *, now: float) -> Analysis:
        """The truth at ``now`` in the shape of the real analyzer's answer."""
        settings = self.settings
        job = self.job
        start = int(now)
        trace = job.trace
        forecast = trace.per_second(start, start + settings.forecast_horizon_s)
        future = trace.per_second(start, start + RECOVERY_SEARCH_S)
        lag_now = float(job.accounting.lag)
        current = job.target_parallelism
        # Worst case of the replayed records: a stop just before the next checkpoint.
        replay_records = float(future[0]) * job.config.checkpoint_interval_s
        capacities: dict[int, float | None] = {}
        sources: dict[int, str] = {}
        recovery_times: dict[int, float] = {}
        for n in range(settings.min_parallelism, min(settings.max_parallelism, job.config.partitions) + 1):
            capacity = job.true_capacity(n)
            capacities[n], sources[n] = capacity, "true"
            kind = "failure" if n == current else "rescale"
            recovery_times[n] = true_recovery_time(
                future=future,
                capacity=capacity,
                downtime_s=self._downtime_s(kind, n, current),
                lag_now=lag_now,
                replay_records=replay_records,
            )
        cpu_means = [float(np.nanmean(c)) for c in observation.worker_cpu.values() if np.any(np.isfinite(c))]
        return Analysis(
            parallelism=observation.parallelism,
            workload_avg=observation.workload_mean,
            consumer_lag=observation.latest_lag,
            forecast=forecast,
            forecast_source="oracle",
            forecast_wape=None,
            capacities=capacities,
            capacity_sources=sources,
            recovery_times=recovery_times,
            recovering=self._recovering(),
            worker_cpu_avg=float(np.mean(cpu_means)) if cpu_means else None,
        )
