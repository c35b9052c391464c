"""The analyzer: one job's analyze stage, composed of the parts that each own their state.

Each round :meth:`Analyzer.analyze` runs the chain: restarts (``restarts``), capacity (``capacity``),
forecast (``forecasting``), the recovery watch (``recovery``), then the evaluation of every candidate
scale-out (``candidates``), and returns an :class:`~agent.analyze.analysis.Analysis`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING

import numpy as np

from agent.analyze.analysis import Analysis
from agent.analyze.candidates import ScaleOuts, evaluate_scale_outs
from agent.analyze.capacity import CapacityTracker, load_prior
from agent.analyze.forecasting import Forecasting, WorkloadOutlook, finite_mean
from agent.analyze.recovery import MeasuredRecovery, RecoveryTracker, backlog_drain
from agent.analyze.restarts import Restart, RestartDetector
from agent.json_types import JsonObject, JsonValue
from agent.observation import Observation
from agent.settings import Settings
from models.anomaly import RecoveryWatch
from models.forecast import WorkloadForecaster
from models.recovery import RecoveryPredictor
from planner.daedalus import cheap_rescale

if TYPE_CHECKING:
    from agent.model_reload import ModelReloader


class Analyzer:
    """The models of one job and the bookkeeping that feeds them, as four parts run in a chain."""

    restarts: RestartDetector
    """Tells a restart nobody here caused."""
    capacity: CapacityTracker
    """Measures what the job can process at each scale-out."""
    forecasting: Forecasting
    """Forecasts the workload and how high it may rise."""
    tracker: RecoveryTracker
    """Watches each stop until the job caught up, and learns downtimes from it."""

    def __init__(
        self,
        settings: Settings,
        *,
        prior: Mapping[int, float] | None = None,
        executor: Executor | None = None,
        forecasting: bool = True,
    ) -> None:
        """``prior``: the capacity per scale-out assumed before any is observed (default: the settings' file);
        ``executor``: runs the background fits and registry replays; ``forecasting``: see :meth:`set_forecasting`."""
        self.settings = settings
        if prior is None and settings.capacity_prior_path is not None:
            prior = load_prior(settings.capacity_prior_path)
        self._prior = prior
        self._executor = executor
        self._build(forecasting=forecasting)

    def _build(self, *, forecasting: bool) -> None:
        """Fresh parts, nothing learned."""
        self.restarts = RestartDetector()
        self.capacity = CapacityTracker(self.settings, self._prior)
        self.forecasting = Forecasting(self.settings, executor=self._executor, enabled=forecasting)
        self.tracker = RecoveryTracker(self.settings)

    def set_forecasting(self, enabled: bool) -> None:
        """False when the policy does not look ahead (the peers, static): it reads no forecast, and of the
        capacities only the current scale-out's, so the forecaster and the other scale-outs cost nothing."""
        self.forecasting.set_enabled(enabled)

    def reset(self) -> None:
        """Forget everything learned (a knowledge document that could not be restored): fresh models, with the
        same settings, prior, executor and forecasting switch."""
        self.forecasting.close()
        self._build(forecasting=self.forecasting.enabled)

    # -------------------------------------------------------------- the models, for reading

    @property
    def recovery(self) -> RecoveryPredictor:
        """The recovery predictor (downtimes learned per scale-out)."""
        return self.tracker.predictor

    @property
    def watch(self) -> RecoveryWatch:
        """The recovery watch."""
        return self.tracker.watch

    @property
    def forecaster(self) -> WorkloadForecaster:
        """The workload forecaster."""
        return self.forecasting.forecaster

    @property
    def reloader(self) -> ModelReloader | None:
        """What hot-reloads registry models, when a registry is set."""
        return self.forecasting.reloader

    def downtime(self, kind: str, parallelism: int) -> float:
        """Expected downtime of a stop (``rescale`` to ``parallelism``, or ``failure`` at it), s: the recovery
        predictor's, learned per scale-out."""
        return self.recovery.downtime(kind, parallelism)

    def observed_scale_outs(self) -> list[int]:
        """Scale-outs whose capacity was observed (not estimated)."""
        return self.capacity.observed_scale_outs()

    # -------------------------------------------------------------- persistence

    def to_dict(self) -> JsonObject:
        """Model states for the knowledge document: each part's fields, in one object."""
        return {
            **self.capacity.to_dict(),
            **self.forecasting.to_dict(),
            **self.tracker.to_dict(),
            **self.restarts.to_dict(),
        }

    def restore(self, state: Mapping[str, JsonValue]) -> None:
        """Load model states written by :meth:`to_dict`."""
        if not state:
            return
        self.capacity.restore(state)
        self.forecasting.restore(state)
        self.tracker.restore(state)
        self.restarts.restore(state)

    # -------------------------------------------------------------- events from the loop

    def on_rescale(
        self,
        *,
        now: float,
        from_parallelism: int,
        to_parallelism: int,
        downtime_s: float | None = None,
        resumed_at: float | None = None,
    ) -> None:
        """A rescale was applied: expect the new parallelism and watch the recovery.

        ``downtime_s`` is the downtime a scaler measured itself (flink-rest); otherwise the job's
        uptime tells it once the job runs again, and only failing both is it backed out of the
        measured recovery. One stop gives one downtime sample, never more. ``resumed_at``: when the
        scaler saw every task running again; the job caught up from then on has recovered, even if the
        stop never showed in the lag.
        """
        self.restarts.expect(to_parallelism)
        self.tracker.on_rescale(
            now=now,
            from_parallelism=from_parallelism,
            to_parallelism=to_parallelism,
            downtime_s=downtime_s,
            resumed_at=resumed_at,
        )

    # -------------------------------------------------------------- the step

    def analyze(self, observation: Observation, *, now: float) -> Analysis:
        """Update every model with the observation and return what they now say."""
        restart = self.restarts.detect(observation, now, watching=self.tracker.watching)
        if restart is not None:
            self.tracker.on_restart(restart)
        self.capacity.learn(observation, now)
        forecast = self.forecasting.step(observation, now)
        refused = self.forecasting.take_refused()
        recoveries = self.tracker.feed(observation)
        current = observation.parallelism
        cheap = self._rescale_is_cheap(current)
        outlook = self.forecasting.outlook(forecast, span=int(observation.times.size), cheap_rescale=cheap)
        scale_outs = evaluate_scale_outs(
            self._candidates(current),
            current=current,
            backlog=observation.latest_lag if observation.latest_lag is not None else 0.0,
            capacity=self.capacity.model,
            predictor=self.recovery,
            outlook=outlook,
            target_s=self.settings.target_recovery_time_s,
            cheap_rescale=cheap,
        )
        self.tracker.remember(scale_outs.capacities.keys(), scale_outs.stop_predictions)
        recovering = self.tracker.holding(now, observation)
        return self._analysis(observation, outlook, scale_outs, restart, recoveries, refused, recovering)

    def _rescale_is_cheap(self, current: int | None) -> bool:
        """A rescale stops the job for a small part of the recovery target (in place): the envelope may be
        conditioned on the level."""
        return current is not None and cheap_rescale(
            self.recovery.downtime("rescale", current, current), self.settings.target_recovery_time_s
        )

    def _candidates(self, current: int | None) -> Sequence[int]:
        """Every scale-out when the policy looks ahead; else only the current one."""
        if self.forecasting.enabled:
            return range(self.settings.min_parallelism, self.settings.max_parallelism + 1)
        return [current] if current is not None else []

    def _analysis(
        self,
        observation: Observation,
        outlook: WorkloadOutlook,
        scale_outs: ScaleOuts,
        restart: Restart | None,
        recoveries: list[MeasuredRecovery],
        refused: tuple[str, ...],
        recovering: bool,
    ) -> Analysis:
        """The round's answer from its parts' results."""
        forecast, rate = outlook.forecast, outlook.recent_rate
        return Analysis(
            parallelism=observation.parallelism,
            workload_avg=observation.workload_mean,
            consumer_lag=observation.latest_lag,
            forecast=forecast.values,
            forecast_upper=outlook.upper,
            workload_previous=outlook.previous,
            workload_usual=outlook.usual,
            workload_noise=outlook.noise,
            workload_climb_from=outlook.climb_from,
            forecast_source=forecast.source,
            forecast_wape=forecast.wape,
            capacities=scale_outs.capacities,
            capacity_sources=scale_outs.sources,
            recovery_times=scale_outs.recovery_times,
            recovering=recovering,
            recovering_since=self.tracker.recovering_since if recovering else None,
            backlog_drain=backlog_drain(observation) if recovering else None,
            worker_cpu_avg=_mean_worker_cpu(observation),
            restart_detected=restart.reason if restart is not None else None,
            rescaled_outside=restart is not None and restart.rescaled_outside,
            recoveries=tuple(recoveries),
            refused_artifacts=refused,
            rescale_downtimes=scale_outs.downtimes,
            failure_ready=scale_outs.failure_ready,
            rescale_recoveries=scale_outs.stop_predictions,
            replay_records=None if rate is None else self.recovery.replay_records(rate, "rescale"),
            source_partitions=self.capacity.model.partitions,
        )


def _mean_worker_cpu(observation: Observation) -> float | None:
    """The mean over the workers of each one's mean CPU load, or None without a reading."""
    cpu_means = [m for m in (finite_mean(c) for c in observation.worker_cpu.values()) if m is not None]
    return float(np.mean(cpu_means)) if cpu_means else None
