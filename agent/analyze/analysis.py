"""What the analyze stage hands the planner each round: the models' beliefs after one observation."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from agent.analyze.recovery import MeasuredRecovery


@dataclass(frozen=True, eq=False)
class Analysis:
    """What the models believe after one observation."""

    parallelism: int | None
    workload_avg: float | None
    consumer_lag: float | None
    forecast: np.ndarray | None
    forecast_source: str
    forecast_wape: float | None
    capacities: Mapping[int, float | None]
    capacity_sources: Mapping[int, str]
    recovery_times: Mapping[int, float]
    recovering: bool
    worker_cpu_avg: float | None = None
    forecast_upper: np.ndarray | None = None
    """The workload as high as it may rise (``models.forecast.envelope``): what decisions plan for."""
    workload_previous: float | None = None
    """Mean workload over the stretch as long as this round's observation just before it (the loop before), or None."""
    workload_usual: float | None = None
    """The workload the job stood at or under for the rise quantile of the last hour it keeps (None until it is kept
    whole)."""
    workload_noise: float | None = None
    """How far the workload's mean moves from one loop to the next by noise alone, relative to its level (None until
    enough of it is kept)."""
    workload_climb_from: float | None = None
    """The mean workload a few loops before, where it ran above the loop before at each since (a sustained climb:
    ``planner.daedalus.SUSTAINED_CLIMB_LOOPS``), or None."""
    recovering_since: float | None = None
    """When the recovery the planner holds for started (processing first stopped, through every stop inside it), s;
    None while it holds for none."""
    backlog_drain: float | None = None
    """Records/s the backlog fell by over the loop while the planner holds for a recovery (``backlog_drain``); None
    otherwise."""
    restart_detected: str | None = None
    """Why the job is believed to have restarted outside Perdix this round, or None."""
    rescaled_outside: bool = False
    """True when that restart changed the parallelism (an operator's rescale): the loop adopts it."""
    recoveries: tuple[MeasuredRecovery, ...] = field(default=())
    """Recoveries measured to completion this round."""
    refused_artifacts: tuple[str, ...] = field(default=())
    """Kinds of the registry artifacts refused this round (``corrupt``, ``unscored``, ``replay``)."""
    rescale_downtimes: Mapping[int, float] = field(default_factory=dict)
    """Expected downtime of a rescale from the current scale-out to each candidate, s (the recovery predictor's)."""
    failure_ready: Mapping[int, float] = field(default_factory=dict)
    """The highest steady workload at which a failure at each candidate recovers within the target."""
    rescale_recoveries: Mapping[int, float] = field(default_factory=dict)
    """The expected recovery of a rescale to each candidate, s (at the current scale-out: of a failure there)."""
    replay_records: float | None = None
    """Records a rescale now replays, expected (the recovery predictor's: none where rescales are aligned with a
    checkpoint), or None."""
    source_partitions: int | None = None
    """Partitions the sources read: source_partitions where set, else as the sources report them; None: unknown."""

    def summary(self) -> dict[str, object]:
        """The fields of the ``loop`` log event."""
        current = self.parallelism
        capacity = self.capacities.get(current) if current is not None else None
        recovery = self.recovery_times.get(current) if current is not None else None
        return {
            "parallelism": current,
            "workload_avg": _round(self.workload_avg),
            "lag": _round(self.consumer_lag),
            "capacity": _round(capacity),
            "forecast_peak": _round(float(np.max(self.forecast)) if self.forecast is not None else None),
            "forecast_upper_peak": _round(
                float(np.max(self.forecast_upper))
                if self.forecast_upper is not None and len(self.forecast_upper)
                else None
            ),
            "forecast_source": self.forecast_source,
            "forecast_wape": None if self.forecast_wape is None else round(self.forecast_wape, 4),
            "predicted_recovery_s": None if recovery is None or math.isinf(recovery) else round(recovery, 1),
            "recovering": self.recovering,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
