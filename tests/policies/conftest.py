"""Shared builders for the policy-lab tests."""

from __future__ import annotations

import numpy as np

from planner import PlanInput, PlannerConfig
from planner.history import Recommendations

CONFIG = PlannerConfig(min_parallelism=1, max_parallelism=16, target_recovery_time_s=300, source_partitions=36)


def snapshot(
    *,
    current: int = 4,
    workload: float | None = 30_000.0,
    cpu: float | None = 0.5,
    lag: float | None = 0.0,
    now: float = 10_000.0,
    last_rescale_at: float | None = None,
    recovering: bool = False,
    history: tuple[tuple[float, int], ...] = (),
    throughput: dict[str, float] | None = None,
    worker_cpu: dict[str, float] | None = None,
    forecast: np.ndarray | None = None,
    capacities: dict[int, float | None] | None = None,
    recovery_times: dict[int, float] | None = None,
) -> PlanInput:
    """A PlanInput with sensible defaults; every field a test cares about is a keyword."""
    return PlanInput(
        now=now,
        current_parallelism=current,
        workload_avg=workload,
        forecast=forecast,
        consumer_lag=lag,
        capacities=capacities or {},
        recovery_times=recovery_times or {},
        last_rescale_at=last_rescale_at,
        recovering=recovering,
        recent_recommendations=Recommendations(history),
        worker_cpu_avg=cpu,
        worker_throughput=throughput or {},
        worker_cpu=worker_cpu or {},
    )
