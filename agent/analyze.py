"""The analyze step: feeds each observation to the online models and says what they now believe.

Owns the model instances (capacity, forecast, recovery, anomaly) and the recovery watcher, and turns
an Observation into an Analysis: capacities per scale-out, the forecast, predicted recovery times,
whether the job is recovering, and whether it restarted outside Perdix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from agent.logging import get_logger
from agent.observation import Observation
from agent.safeguards import memory_pressure
from agent.settings import ConfigError, Settings
from models.anomaly import RecoveryWatch
from models.capacity import CapacityModel
from models.forecast import Forecast, WorkloadForecaster
from models.forecast.envelope import RiseEnvelope
from models.forecast.reloaded import ReloadedForecaster
from models.forecast.scoring import RecentWorkload, ScoringSpec
from models.recovery import RecoveryPredictor
from planner.safeguards import gc_dominates
from planner.daedalus import cheap_rescale

UPTIME_SLACK_S = 5.0
"""Uptime may lag the wall clock by a scrape or two; a bigger shortfall is a restart."""
WORKERS_KEPT_PER_SCALE_OUT = 4
"""Worker regressions kept, per unit of max_parallelism, however fast pods churn (bounds the knowledge)."""


@dataclass(frozen=True)
class WatchedRecovery:
    """A stop of the job (a rescale or a failure) whose recovery is being watched."""

    kind: str
    """``rescale`` or ``failure``."""
    started_at: float
    """When processing stopped (the rescale request, or the restart the uptime reveals)."""
    parallelism: int
    """The scale-out the job restarts at."""
    predicted_s: float | None
    """The recovery time predicted for it when it started, if there was one."""
    downtime_s: float | None = None
    """The downtime measured for this stop (at most one sample per stop)."""
    downtime_source: str | None = None
    """Where the downtime came from: ``scaler`` or ``uptime``."""
    overdue: bool = False
    """True once it has outlasted the target recovery time (logged once)."""
    falling_behind: bool = False
    """True once the job ran again but its backlog grew (logged once)."""
    from_parallelism: int | None = None
    """The scale-out the job stopped at, for a rescale (its downtime depends on both)."""

    def to_dict(self) -> dict[str, Any]:
        """The knowledge document's form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> WatchedRecovery:
        """Read :meth:`to_dict`'s form."""
        return cls(**{name: state.get(name) for name in cls.__dataclass_fields__ if name in state})  # type: ignore[arg-type]


@dataclass(frozen=True)
class MeasuredRecovery:
    """A watched recovery that ended: the job caught up ``measured_s`` after it stopped."""

    watched: WatchedRecovery
    measured_s: float

    @property
    def kind(self) -> str:
        """``rescale`` or ``failure``."""
        return self.watched.kind

    @property
    def predicted_s(self) -> float | None:
        """The recovery time predicted when it started."""
        return self.watched.predicted_s


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
    replay_records: float | None = None
    """Records a stop now replays, expected (the recovery predictor's), or None."""

    def summary(self) -> dict[str, Any]:
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
            "forecast_source": self.forecast_source,
            "forecast_wape": None if self.forecast_wape is None else round(self.forecast_wape, 4),
            "predicted_recovery_s": None if recovery is None or math.isinf(recovery) else round(recovery, 1),
            "recovering": self.recovering,
        }


FALLING_BEHIND_MIN_S = 10
"""Seconds of running (after the restart settled) the backlog's trend needs before it says anything."""


def _falling_behind(observation: Observation) -> bool:
    """The job runs (its uptime covers the samples) and its backlog grew over them by more than a second of input.

    Only seconds after the restart plus a few to settle count: while down, every job's backlog grows.
    """
    uptime = observation.uptime_s
    times, lag = observation.times, observation.consumer_lag
    if uptime is None or uptime <= 0 or times.size == 0:
        return False
    running = times >= times[-1] - uptime + 5
    finite = running & np.isfinite(lag)
    if int(finite.sum()) < FALLING_BEHIND_MIN_S:
        return False
    seconds, backlog = times[finite], lag[finite]
    slope = float(np.polyfit(seconds - seconds[0], backlog, 1)[0])
    rate = observation.workload_mean or 0.0
    return slope * (seconds[-1] - seconds[0]) > max(rate, 1.0)


STOPPED_GROWTH = 0.9
"""A second in which the lag grew by at least this fraction of its input is a second nothing was processed."""


def _stopped_at(observation: Observation, restarted_at: float | None) -> float | None:
    """When processing stopped before a restart nobody here announced (a failure), from the lag; None if unseen.

    The job's uptime says when it restarted, not when it stopped: a failure is noticed at the next
    round, up to a loop interval later, and by then the job may run again. Taking the round or the
    restart as the stop made every measured failure downtime (and recovery) short by that delay, and
    the downtime learned from them drifted towards zero. While the job is down nothing is processed,
    so the lag grows by all the input of each second (and by the replayed records at the stop itself):
    the stop is the first second of the last such stretch before the restart (or before the last
    sample, while the job is still down). Only seconds with input say anything.
    """
    times, lag, workload = observation.times, observation.consumer_lag, observation.workload
    if times.size < 2 or lag.shape != times.shape or workload.shape != times.shape:
        return None
    end = int(np.searchsorted(times, restarted_at, side="left")) - 1 if restarted_at is not None else times.size - 1
    first = None
    for i in range(min(end, times.size - 1), 0, -1):
        growth, arrived = lag[i] - lag[i - 1], workload[i]
        if not (np.isfinite(growth) and np.isfinite(arrived) and arrived > 0 and growth >= STOPPED_GROWTH * arrived):
            break
        first = i
    return None if first is None else float(times[first])


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _finite_mean(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite.sum()) / finite.size if finite.size else None


def load_prior(path: Path) -> dict[int, float]:
    """The StreamBed capacity prior per scale-out; a bad file is a ConfigError naming the key."""
    from models.streambed.model_file import CapacityModelError, load_capacity_prior

    try:
        return load_capacity_prior(path)
    except CapacityModelError as exc:
        raise ConfigError(f"capacity_prior_path: {exc}") from None


class Analyzer:
    """The models of one job and the bookkeeping that feeds them."""

    def __init__(
        self, settings: Settings, *, prior: Mapping[int, float] | None = None, executor: Executor | None = None
    ) -> None:
        self.settings = settings
        self.log = get_logger("perdix.analyze")
        if prior is None and settings.capacity_prior_path is not None:
            prior = load_prior(settings.capacity_prior_path)
        self.capacity = CapacityModel(max_cpu=settings.max_cpu, prior=prior, partitions=settings.source_partitions)
        self.forecaster = WorkloadForecaster(
            horizon_s=settings.forecast_horizon_s,
            window_s=settings.forecast_window_s,
            wape_threshold=settings.wape_threshold,
            retrain_after=settings.retrain_after_poor_loops,
            update_maxiter=settings.forecast_update_maxiter,
            select=settings.forecast_selection,
            executor=executor,
        )
        self.recovery = RecoveryPredictor(
            checkpoint_interval_s=settings.checkpoint_interval_s,
            downtime_rescale_prior_s=settings.downtime_rescale_prior_s,
            downtime_failure_prior_s=settings.downtime_failure_prior_s,
        )
        self.reloader = None
        if settings.model_registry:
            from agent.model_reload import ModelReloader

            # A candidate's replay is an order search plus a forecast per origin (a quarter of a second
            # or more): it runs beside the loop, on the injected executor or a thread of its own.
            self.reloader = ModelReloader(
                settings.model_registry,
                settings.job_name,
                agent_step_s=float(self.forecaster.resolution_s),
                executor=executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="perdix-reload-score"),
            )
        self.forecasting = True
        """False when the policy does not look ahead (the peers, static): it reads no forecast, and of the
        capacities only the current scale-out's, so the forecaster and the other scale-outs cost nothing."""
        self.watch = RecoveryWatch()
        self._watched: WatchedRecovery | None = None
        self._last_ends: tuple[float, np.ndarray] | None = None
        """Time and log-end offsets of the source partitions at the last round (for their rates)."""
        self._last_capacities: Mapping[int, float | None] = {}
        self._last_recovery: Mapping[int, float] = {}
        self._last_uptime: tuple[float, float] | None = None  # (time, uptime_s)
        self._expected_parallelism: int | None = None
        self.recent = RecentWorkload(ScoringSpec(horizon_s=settings.forecast_horizon_s))
        """The last hour of workload and the running model's forecasts over it (rates, hot reload)."""
        self.envelope = RiseEnvelope(quantile=settings.forecast_quantile or 0.5, conditioned=settings.rise_conditioned)
        """How far the workload has risen within each lead time (the upper forecast decisions plan for)."""
        self._signal: str | None = None

    # -------------------------------------------------------------- persistence

    def to_dict(self) -> dict[str, Any]:
        """Model states for the knowledge document."""
        return {
            "capacity": self.capacity.to_dict(),
            "forecaster": self.forecaster.to_dict(),
            "recovery": self.recovery.to_dict(),
            "watch": self.watch.to_dict(),
            "watch_meta": self._watched.to_dict() if self._watched is not None else None,
            "last_uptime": list(self._last_uptime) if self._last_uptime else None,
            "expected_parallelism": self._expected_parallelism,
            "watch_signal": self._signal,
            "envelope": self.envelope.to_dict(),
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Load model states written by :meth:`to_dict`."""
        if not state:
            return
        prior = self.capacity.prior
        self.capacity = CapacityModel.from_dict(state["capacity"])
        if prior and not self.capacity.prior:
            self.capacity.prior = dict(prior)
        self.forecaster.restore(state["forecaster"])
        if self.reloader is not None and isinstance(self.forecaster.model, ReloadedForecaster):
            # The registry model survived the restart: only a newer version may replace it.
            self.reloader.current_version = self.forecaster.model.version
        self.recovery = RecoveryPredictor.from_dict(state["recovery"])
        self.watch = RecoveryWatch.from_dict(state["watch"])
        watched = state.get("watch_meta")
        self._watched = WatchedRecovery.from_dict(watched) if watched else None
        last = state.get("last_uptime")
        self._last_uptime = (float(last[0]), float(last[1])) if last else None
        self._expected_parallelism = state.get("expected_parallelism")
        self._signal = state.get("watch_signal")
        self.envelope.restore(state.get("envelope") or {})

    def observed_scale_outs(self) -> list[int]:
        """Scale-outs whose capacity was observed (not estimated)."""
        return sorted(self.capacity.observed)

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
        self._expected_parallelism = to_parallelism
        self._start_watch(now, "rescale", to_parallelism, from_parallelism)
        if downtime_s is not None:
            self._record_downtime(downtime_s, source="scaler")
        if resumed_at is not None:
            self.watch.resumed(resumed_at)

    def _record_downtime(self, downtime_s: float, *, source: str) -> None:
        watched = self._watched
        if watched is None or watched.downtime_s is not None:
            return
        self._watched = replace(watched, downtime_s=downtime_s, downtime_source=source)
        self.recovery.observe_downtime(
            kind=watched.kind, parallelism=watched.parallelism, downtime_s=downtime_s, current=watched.from_parallelism
        )

    def _downtime_from_uptime(self, observation: Observation) -> None:
        """Once the job runs again after the watched stop, its uptime says when it restarted."""
        watched = self._watched
        uptime = observation.uptime_s
        if watched is None or watched.downtime_s is not None or not uptime or observation.times.size == 0:
            return
        restarted_at = float(observation.times[-1]) - uptime
        # Uptime from before the stop (the job has not restarted yet) says nothing.
        if restarted_at >= watched.started_at:
            self._record_downtime(restarted_at - watched.started_at, source="uptime")

    def _start_watch(self, now: float, kind: str, parallelism: int, from_parallelism: int | None = None) -> None:
        predicted = None
        if self._last_capacities and parallelism in self._last_capacities:
            predicted = self._last_recovery.get(parallelism)
        self.watch.start(now)
        self._watched = WatchedRecovery(
            kind=kind,
            started_at=now,
            parallelism=parallelism,
            predicted_s=predicted if predicted is not None and math.isfinite(predicted) else None,
            from_parallelism=from_parallelism,
        )

    # -------------------------------------------------------------- the step

    def analyze(self, observation: Observation, *, now: float) -> Analysis:
        """Update every model with the observation and return what they now say."""
        parallelism = observation.parallelism
        restart, rescaled_outside = self._detect_restart(observation, now)

        self._learn_partition_weights(observation, now)
        # GC time reads as load: a round a TaskManager spent mostly collecting garbage says nothing of the
        # capacity (safeguards.memory.gc_pressure_threshold), so neither its regressions nor its scale-out learn.
        learns = not gc_dominates(memory_pressure(observation), self.settings.safeguards.memory.gc_pressure_threshold)
        if not learns:
            self.log.info("capacity.not_learned", why="GC time above safeguards.memory.gc_pressure_threshold")
        load = observation.worker_load(self.settings.utilization)
        for worker, throughput in observation.worker_throughput.items():
            utilization = load.get(worker)
            if utilization is not None and learns:
                self.capacity.update(worker, observation.settled(utilization), observation.settled(throughput))
        workers = sorted(observation.worker_throughput)
        if parallelism is not None and len(workers) == parallelism:
            self.capacity.set_workers(workers, observation.worker_backlog, sample_s=observation.step_s)
            current_capacity = self.capacity.capacity_now()
            if current_capacity is not None and learns:
                self.capacity.record_observed(parallelism, current_capacity)
        forgotten = self.capacity.prune(
            now=now,
            seen=observation.worker_throughput,
            retention_s=self.settings.worker_retention_s,
            max_workers=WORKERS_KEPT_PER_SCALE_OUT * self.settings.max_parallelism,
        )
        if forgotten:
            self.log.info("capacity.workers_forgotten", count=len(forgotten), kept=len(self.capacity.regressions))

        workload = observation.settled(observation.workload)
        self.recent.extend(observation.times, workload)
        if self.forecasting:
            self.forecaster.smear_s = int(round(observation.rate_window_s))
            forecast = self.forecaster.step(workload)
            if observation.times.size:
                # The forecast covers the seconds after the last sample.
                origin = float(observation.times[-1]) + 1.0
                self.recent.record(origin, self.forecaster.model, self.forecaster.model_forecast)
            self._hot_reload(now)
        else:
            forecast = Forecast(None, "off", None)
        refused = self.reloader.take_refused() if self.reloader is not None else ()

        recoveries = self._feed_watch(observation)

        capacities: dict[int, float | None] = {}
        sources: dict[int, str] = {}
        recovery_times: dict[int, float] = {}
        """What the planner checks: the slower of a rescale to ``n`` and a failure once there, and for a
        scale-in also its bad case (see below)."""
        stop_recovery: dict[int, float] = {}
        """The prediction for the stop that would start at ``n`` next: what the recovery watch is compared with."""
        # At least one second: a sub-second checkpoint interval (a time-compressed job) must not leave the
        # replay estimate, and with it every recovery prediction, without data.
        recent_rate = _finite_mean(self.recent.last(max(1, math.ceil(self.settings.checkpoint_interval_s))))
        self.envelope.update(workload)
        level = _finite_mean(self.recent.last(60))
        span = int(observation.times.size)
        previous = _finite_mean(self.recent.last(2 * span)[:span]) if span else None
        if recent_rate is None:
            # The last checkpoint interval's samples are a gap (rates restart with the tasks): the last
            # minute's level stands in, or every recovery would read "never" and undo the rescale.
            recent_rate = level
        # The envelope conditioned on where the workload stands only where a wrong decision is cheap to undo.
        cheap = parallelism is not None and cheap_rescale(
            self.recovery.downtime("rescale", parallelism, parallelism), self.settings.loop_interval_s
        )
        upper = (
            self.envelope.upper(forecast.values, level, conditioned=cheap)
            if forecast.values is not None and level is not None and self.settings.forecast_quantile is not None
            else forecast.values
        )
        # Records already waiting are worked off too: a job rescaled while behind starts with them.
        lag = observation.latest_lag if observation.latest_lag is not None else 0.0
        # The arrivals a recovery must outrun: the point forecast, but never below the last minute's level.
        # Right after a step the forecast still follows the old level for a few loops; a recovery planned
        # on it drains at the old rate's spare capacity, which the new rate does not leave.
        arrivals = (
            np.maximum(forecast.values, level) if forecast.values is not None and level is not None else forecast.values
        )
        downtimes: dict[int, float] = {}
        with self.capacity.held():  # the round's reads: each worker's line once, not once per candidate
            if self.forecasting:
                candidates: Sequence[int] = range(self.settings.min_parallelism, self.settings.max_parallelism + 1)
            else:
                candidates = [parallelism] if parallelism is not None else []
            for n in candidates:
                value, source = self.capacity.capacity_at(n, current=parallelism)
                capacities[n], sources[n] = value, source
                if parallelism is not None:
                    downtimes[n] = self.recovery.downtime("rescale", n, parallelism)
                if value is None or forecast.values is None or recent_rate is None:
                    continue
                kind = "failure" if n == parallelism else "rescale"
                # The records a recovery must work off are those expected to arrive (the point forecast).
                # The rise envelope is no bound on them: it is the steepest rise of the last hours, wherever
                # in its cycle the workload is, held as if it lasted; integrated as arrivals it made
                # recoveries of a minute look endless on cyclic workloads. The planner still checks the
                # capacity against the envelope's peak over the recovery.
                profile = self.capacity.worker_profile(n)
                stop_recovery[n] = self.recovery.predict(
                    capacity=value,
                    forecast=arrivals,
                    recent_workload_rate=recent_rate,
                    kind=kind,
                    parallelism=n,
                    profile=profile,
                    current=parallelism,
                    current_lag=lag,
                )
                recovery_times[n] = stop_recovery[n]
                if kind == "rescale":
                    # A scale-out is chosen to run at: a failure there must recover in time too, or the next round
                    # finds the current scale-out failing its own check and rescales back (a flap). The failure comes
                    # once the rescale has caught up, so without the records waiting now.
                    recovery_times[n] = max(
                        stop_recovery[n],
                        self.recovery.predict(
                            capacity=value,
                            forecast=arrivals,
                            recent_workload_rate=recent_rate,
                            kind="failure",
                            parallelism=n,
                            profile=profile,
                            current=n,
                        ),
                    )
                if parallelism is not None and n < parallelism and upper is not None:
                    # A scale-in saves workers, it is never needed: it must recover in time even when the stop
                    # replays a whole checkpoint interval and the workload rises as it has before. Planned on
                    # the expected case, scale-ins near the capacity edge (a few percent of spare capacity)
                    # recovered in several times their prediction and missed (docs/research/experiments.md, experiment 3).
                    recovery_times[n] = max(
                        recovery_times[n],
                        self.recovery.predict_bad_case(
                            value,
                            upper,
                            recent_rate,
                            parallelism=n,
                            current=parallelism,
                            current_lag=lag,
                            profile=profile,
                        ),
                    )
        self._last_capacities, self._last_recovery = capacities, stop_recovery

        cpu_means = [m for m in (_finite_mean(c) for c in observation.worker_cpu.values()) if m is not None]
        return Analysis(
            parallelism=parallelism,
            workload_avg=observation.workload_mean,
            consumer_lag=observation.latest_lag,
            forecast=forecast.values,
            forecast_upper=upper,
            workload_previous=previous,
            forecast_source=forecast.source,
            forecast_wape=forecast.wape,
            capacities=capacities,
            capacity_sources=sources,
            recovery_times=recovery_times,
            recovering=self._holding(now, observation),
            worker_cpu_avg=float(np.mean(cpu_means)) if cpu_means else None,
            restart_detected=restart,
            rescaled_outside=rescaled_outside,
            recoveries=tuple(recoveries),
            refused_artifacts=refused,
            rescale_downtimes=downtimes,
            replay_records=None if recent_rate is None else self.recovery.replay_records(recent_rate),
        )

    def _learn_partition_weights(self, observation: Observation, now: float) -> None:
        """Records produced per partition over the window (log-end offsets at its start, where the monitor gives
        them, else at the last round) give the partition weights, and with them the skew at scale-outs the job
        has not run (round-robin assignment)."""
        offsets = observation.partition_offsets
        if not offsets:
            return
        ends = np.asarray([end for end, _ in offsets], dtype=float)
        last, self._last_ends = self._last_ends, (now, ends)
        since = observation.partition_ends_since
        if since is not None and len(since) == ends.size:
            before = np.asarray(since, dtype=float)
        elif last is not None and last[1].shape == ends.shape and now > last[0]:
            before = last[1]
        else:
            return
        self.capacity.observe_partition_records(ends - before)

    def _hot_reload(self, now: float) -> None:
        """Switch to a newer registry model that forecast the recent window better (never raises)."""
        if self.reloader is None:
            return
        try:
            model = self.reloader.check(self.recent, online=self.forecaster.model, now=now)
        except Exception as exc:  # a broken registry is a log line, not a failed round
            self.log.warning("model_reload.failed", error=f"{type(exc).__name__}: {exc}")
            return
        if model is not None:
            self.forecaster.adopt(model)

    def _holding(self, now: float, observation: Observation) -> bool:
        """True while a recovery is being watched, is working its backlog off, and has not outlasted the target.

        A job that has not caught up within the target recovery time, or that runs again but whose
        backlog grows, was under-provisioned by the last decision: holding it would only let the
        backlog grow, so the planner may act again (the watch keeps measuring for the record).
        """
        if not self.watch.active or self.watch.started_at is None:
            return False
        if _falling_behind(observation):
            if self._watched is not None and not self._watched.falling_behind:
                self._watched = replace(self._watched, falling_behind=True)
                self.log.warning(
                    "recovery.falling_behind", started_at=self.watch.started_at, parallelism=self._watched.parallelism
                )
            return False
        overdue = now - self.watch.started_at > self.settings.target_recovery_time_s
        if overdue and self._watched is not None and not self._watched.overdue:
            self._watched = replace(self._watched, overdue=True)
            self.log.warning(
                "recovery.overdue",
                started_at=self.watch.started_at,
                target_s=self.settings.target_recovery_time_s,
                parallelism=self._watched.parallelism,
            )
        return not overdue

    def _detect_restart(self, observation: Observation, now: float) -> tuple[str | None, bool]:
        """A restart we did not cause: uptime reset, or a parallelism nobody here asked for (the flag)."""
        reason = None
        rescaled = False
        uptime = observation.uptime_s
        if uptime is not None and self._last_uptime is not None:
            last_at, last_uptime = self._last_uptime
            if uptime + UPTIME_SLACK_S < last_uptime + (now - last_at) - UPTIME_SLACK_S and not self.watch.active:
                reason = f"job uptime reset ({last_uptime:.0f} s -> {uptime:.0f} s)"
        if uptime is not None:
            self._last_uptime = (now, uptime)
        parallelism = observation.parallelism
        if parallelism is not None:
            if (
                self._expected_parallelism is not None
                and parallelism != self._expected_parallelism
                and not self.watch.active
            ):
                reason = f"parallelism changed outside Perdix ({self._expected_parallelism} -> {parallelism})"
                rescaled = True
            self._expected_parallelism = parallelism
        if reason is not None:
            self.log.warning("job.restart_detected", reason=reason)
            restarted_at = float(observation.times[-1]) - uptime if uptime and observation.times.size else None
            stopped_at = _stopped_at(observation, restarted_at)
            if stopped_at is None:
                stopped_at = now - (uptime or 0.0) if uptime is not None else now
            self._start_watch(stopped_at, "failure", parallelism or 0)
            if restarted_at is not None:
                self.watch.resumed(restarted_at)
        return reason, rescaled

    def _watch_signal(self, observation: Observation) -> np.ndarray | None:
        """What the recovery watch follows: the consumer lag, or workload − throughput without one.

        Lag is the backlog itself and returns to normal the second the job has caught up; the gap
        of two moving averages settles tens of seconds later and made measured recoveries (and the
        downtimes learned from them) too long. A change of signal starts the detector afresh.
        """
        if np.isfinite(observation.consumer_lag).any():
            signal, values = "lag", observation.consumer_lag
        elif observation.worker_throughput:
            signal = "gap"
            values = observation.workload - np.sum(list(observation.worker_throughput.values()), axis=0)
        else:
            return None
        if signal != self._signal:
            if self._signal is not None:
                self.log.info("recovery.signal_changed", old=self._signal, new=signal)
                self.watch = RecoveryWatch()
                self._watched = None
            self._signal = signal
        return values

    def _feed_watch(self, observation: Observation) -> list[MeasuredRecovery]:
        """Learn the normal signal, or follow an active recovery to its end."""
        self._downtime_from_uptime(observation)
        values = self._watch_signal(observation)
        if values is None:
            return []
        if self.watch.active and self._signal == "gap" and not self.watch.detector.ready:
            # Without a lag there is no caught-up test, and the gap's normal band is learned only between
            # watches: a stop right after the start (the job's own, or a rescale in the first minutes) could
            # never be seen to end, and would hold the planner for the whole target and keep the band from
            # being learned. The stop is let go unmeasured; the grace period still follows a rescale.
            self.log.info(
                "recovery.unmeasured",
                started_at=self.watch.started_at,
                why="no consumer lag, and the normal workload-throughput gap is not learned yet",
            )
            self.watch.abandon()
            self._watched = None
        done: list[MeasuredRecovery] = []
        # With the lag as the signal, "recovered" is the SLO's test: within one second of the input.
        caught_up: np.ndarray | None = (
            observation.consumer_lag <= np.maximum(observation.workload, 1.0) if self._signal == "lag" else None
        )
        for i, (t, x) in enumerate(zip(observation.times, values)):
            if not math.isfinite(x):
                continue
            if not self.watch.active:
                self.watch.learn_one(float(x))
                continue
            known = caught_up is not None and math.isfinite(observation.workload[i])
            recovered_at = self.watch.update(
                float(t), float(x), caught_up=bool(caught_up[i]) if caught_up is not None and known else None
            )
            if recovered_at is not None and self._watched is not None:
                watched = self._watched
                measured = recovered_at - watched.started_at
                if watched.downtime_s is None:
                    self.recovery.observe_recovery(
                        kind=watched.kind,
                        parallelism=watched.parallelism,
                        measured_s=measured,
                        current=watched.from_parallelism,
                    )
                done.append(MeasuredRecovery(watched, measured))
                self.log.info("recovery.measured", **watched.to_dict(), measured_s=round(measured, 1))
                self._watched = None
        return done
