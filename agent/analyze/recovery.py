"""The recovery tracker: watches each stop of the job (a rescale or a failure) until it has caught up.

Owns the recovery predictor (``models.recovery``) and the watch (``models.anomaly.RecoveryWatch``).
A stop starts a watch; the job's uptime, or the scaler, tells its downtime (one sample per stop);
the lag, or the workload−throughput gap without one, tells when it has caught up. A measured recovery
whose downtime nobody measured is inverted into one. While a watch is active and within the target
the planner holds; one that overruns or falls behind lets it act again.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from agent.analyze.restarts import Restart
from agent.json_types import JsonObject, JsonValue, as_object, as_str, object_at
from agent.logging import get_logger
from agent.observation import Observation
from agent.settings import Settings
from models.anomaly import RecoveryWatch
from models.recovery import RecoveryPredictor

FALLING_BEHIND_MIN_S = 10
"""Seconds of running (after the restart settled) the backlog's trend needs before it says anything."""

CAUGHT_UP_RUN_OF_TARGET = 1 / 30
"""A watched recovery ends once the job has been caught up for this part of the target recovery time in a row (10 s
of the default 300 s, at least a second); the planner holds until then. A part of the target, not a fixed 10 s: a
job whose target is a minute, or a replay whose every time constant is compressed, would otherwise hold its planner
through a sixth of its target and more after every rescale, however soon it caught up."""


def caught_up_run_s(settings: Settings) -> int:
    """Seconds a recovery must stay caught up in a row before the watch ends it (:data:`CAUGHT_UP_RUN_OF_TARGET`)."""
    return max(1, round(CAUGHT_UP_RUN_OF_TARGET * settings.target_recovery_time_s))


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
    """Where the downtime came from: ``scaler`` or ``uptime``; ``down`` when the job was already down at the
    request (a failure's restart under way), so this stop's downtime and recovery say nothing of a rescale's."""
    overdue: bool = False
    """True once it has outlasted the target recovery time (logged once)."""
    falling_behind: bool = False
    """True once the job ran again but its backlog grew (logged once)."""
    from_parallelism: int | None = None
    """The scale-out the job stopped at, for a rescale (its downtime depends on both)."""
    episode_started_at: float | None = None
    """When the recovery this stop carries on began, where it stopped inside a watched one (a failure, or a rescale
    taken because the job could not catch up in time); None where it began one of its own."""

    @property
    def episode_start(self) -> float:
        """When processing first stopped in the recovery this stop belongs to: the target counts from it."""
        return self.started_at if self.episode_started_at is None else self.episode_started_at

    def to_dict(self) -> JsonObject:
        """The knowledge document's form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, state: Mapping[str, JsonValue]) -> WatchedRecovery:
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


def falling_behind(observation: Observation) -> bool:
    """The job runs (its uptime covers the samples) and its backlog grew over them by more than a second of input.

    Only seconds after the restart plus a few to settle count: while down, every job's backlog grows.
    """
    running = _running_backlog(observation)
    if running is None:
        return False
    seconds, backlog = running
    slope = float(np.polyfit(seconds - seconds[0], backlog, 1)[0])
    rate = observation.workload_mean or 0.0
    return slope * (seconds[-1] - seconds[0]) > max(rate, 1.0)


def backlog_drain(observation: Observation) -> float | None:
    """Records per second the backlog fell by over the seconds the job ran (a line through them; negative where it
    grew), or None with fewer than :data:`FALLING_BEHIND_MIN_S` of them: how fast a recovery works its backlog off,
    as measured, where the capacity's spare says how fast it should. On a skewed job the last of a backlog sits on
    the busiest worker, which works it off with its own spare alone."""
    running = _running_backlog(observation)
    if running is None:
        return None
    seconds, backlog = running
    return -float(np.polyfit(seconds - seconds[0], backlog, 1)[0])


def _running_backlog(observation: Observation) -> tuple[np.ndarray, np.ndarray] | None:
    """``(seconds, backlog)`` of the known readings since the job last ran again plus a few seconds to settle, or
    None with fewer than :data:`FALLING_BEHIND_MIN_S` of them (or the uptime unknown, or the job down)."""
    uptime = observation.uptime_s
    times, lag = observation.times, observation.consumer_lag
    if uptime is None or uptime <= 0 or times.size == 0:
        return None
    running = (times >= times[-1] - uptime + 5) & np.isfinite(lag)
    if int(running.sum()) < FALLING_BEHIND_MIN_S:
        return None
    return times[running], lag[running]


class RecoveryTracker:
    """The recovery watch, the downtime feedback and the recovery predictor they teach."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.log = get_logger("perdix.analyze")
        self.predictor = RecoveryPredictor(**self._predictor_settings())
        self.watch = RecoveryWatch(consecutive_s=caught_up_run_s(settings))
        self._watched: WatchedRecovery | None = None
        self._signal: str | None = None
        """What the watch follows: ``lag``, or ``gap`` (workload − throughput) without one."""
        self._evaluated: Collection[int] = ()
        """The scale-outs evaluated at the last round."""
        self._stop_predictions: Mapping[int, float] = {}
        self._down = False
        """Whether the last observation ended with the job down (uptime 0)."""

    @property
    def watching(self) -> bool:
        """True while a recovery is being watched."""
        return self.watch.active

    @property
    def recovering_since(self) -> float | None:
        """When processing first stopped in the recovery being watched (through every stop inside it), or None."""
        if not self.watch.active:
            return None
        return self._watched.episode_start if self._watched is not None else self.watch.started_at

    @property
    def stop_predictions(self) -> Mapping[int, float]:
        """The last round's expected recovery of the stop that would start at each scale-out next."""
        return self._stop_predictions

    def remember(self, evaluated: Collection[int], stop_predictions: Mapping[int, float]) -> None:
        """The round's predictions: a stop that starts before the next round is compared with them."""
        self._evaluated, self._stop_predictions = evaluated, stop_predictions

    # -------------------------------------------------------------- stops

    def on_rescale(
        self,
        *,
        now: float,
        from_parallelism: int,
        to_parallelism: int,
        downtime_s: float | None,
        resumed_at: float | None,
    ) -> None:
        """A rescale was applied: watch its recovery (see ``Analyzer.on_rescale``). One requested while the job
        was down (a failure's restart under way) is watched, but neither its downtime nor its recovery is learned:
        the job comes back when that restart completes, and a 1-s rescale learned as 12 s priced the next ones as
        restarts."""
        self._start_watch(now, "rescale", to_parallelism, from_parallelism)
        if self._down and self._watched is not None:
            self._watched = replace(self._watched, downtime_source="down")
        if downtime_s is not None:
            self._record_downtime(downtime_s, source="scaler")
        if resumed_at is not None:
            self.watch.resumed(resumed_at)

    def on_restart(self, restart: Restart) -> None:
        """A restart nobody here announced: watch it as a failure from when processing stopped."""
        self._start_watch(restart.stopped_at, "failure", restart.parallelism)
        if restart.restarted_at is not None:
            self.watch.resumed(restart.restarted_at)

    def _start_watch(self, now: float, kind: str, parallelism: int, from_parallelism: int | None = None) -> None:
        episode: float | None = None
        if self.watch.active and self._watched is not None:
            # A stop inside a watched recovery (a rescale the planner took because the job could not catch up in
            # time, or a failure) carries that recovery on: the earlier one has no end of its own to measure.
            self.log.info("recovery.superseded", **self._watched.to_dict(), by=kind, at=now)
            episode = self._watched.episode_start
        predicted = self._stop_predictions.get(parallelism) if parallelism in self._evaluated else None
        self.watch.start(now)
        self._watched = WatchedRecovery(
            kind=kind,
            started_at=now,
            parallelism=parallelism,
            predicted_s=predicted if predicted is not None and math.isfinite(predicted) else None,
            from_parallelism=from_parallelism,
            episode_started_at=episode,
        )

    # -------------------------------------------------------------- downtime feedback

    def _record_downtime(self, downtime_s: float, *, source: str) -> None:
        watched = self._watched
        if watched is None or watched.downtime_s is not None or watched.downtime_source is not None:
            return
        self._watched = replace(watched, downtime_s=downtime_s, downtime_source=source)
        self.predictor.observe_downtime(
            kind=watched.kind, parallelism=watched.parallelism, downtime_s=downtime_s, current=watched.from_parallelism
        )

    def _resumed_from_uptime(self, observation: Observation) -> None:
        """Once the job runs again after the watched stop, its uptime says when it restarted: the watch is told
        (a stop that replays next to nothing may never leave the caught-up band, and without it would hold the
        planner for the whole target), and the downtime is learned unless the scaler measured it."""
        watched = self._watched
        if watched is None:
            return
        # The first restart since the stop: uptime from before it says nothing, and a second stop inside the
        # watch (a failure right after a rescale) dates a later one, which taken as this stop's end made a
        # rescale of 27 s a stop of 73 s.
        restarted_at = observation.restarted_since(watched.started_at)
        if restarted_at is None:
            return
        self.watch.resumed(restarted_at)
        if watched.downtime_s is None:
            self._record_downtime(restarted_at - watched.started_at, source="uptime")

    # -------------------------------------------------------------- the watch

    def feed(self, observation: Observation) -> list[MeasuredRecovery]:
        """Learn the normal signal, or follow an active recovery to its end; the recoveries that ended."""
        self._down = observation.uptime_s == 0
        self._resumed_from_uptime(observation)
        values = self._watch_signal(observation)
        if values is None:
            return []
        if self.watch.active and self._signal == "gap" and not self.watch.detector.ready:
            self._let_go_unmeasured()
        # With the lag as the signal, "recovered" is the SLO's test: within one second of the input.
        caught_up: np.ndarray | None = (
            observation.consumer_lag <= np.maximum(observation.workload, 1.0) if self._signal == "lag" else None
        )
        done: list[MeasuredRecovery] = []
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
                done.append(self._measured(self._watched, recovered_at))
        return done

    def _let_go_unmeasured(self) -> None:
        """Abandon a stop the gap cannot measure: its normal band is not learned yet.

        Without a lag there is no caught-up test, and the gap's normal band is learned only between
        watches: a stop right after the start (the job's own, or a rescale in the first minutes) could
        never be seen to end, and would hold the planner for the whole target and keep the band from
        being learned. The stop is let go unmeasured; the grace period still follows a rescale.
        """
        self.log.info(
            "recovery.unmeasured",
            started_at=self.watch.started_at,
            why="no consumer lag, and the normal workload-throughput gap is not learned yet",
        )
        self.watch.abandon()
        self._watched = None

    def _measured(self, watched: WatchedRecovery, recovered_at: float) -> MeasuredRecovery:
        """The watched stop ended: learn its downtime from it unless one was measured, and close it."""
        measured = recovered_at - watched.started_at
        if watched.downtime_s is None and watched.downtime_source is None:
            self.predictor.observe_recovery(
                kind=watched.kind,
                parallelism=watched.parallelism,
                measured_s=measured,
                current=watched.from_parallelism,
            )
        self.log.info("recovery.measured", **watched.to_dict(), measured_s=round(measured, 1))
        self._watched = None
        return MeasuredRecovery(watched, measured)

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
                self.watch = RecoveryWatch(consecutive_s=caught_up_run_s(self.settings))
                self._watched = None
            self._signal = signal
        return values

    def holding(self, now: float, observation: Observation) -> bool:
        """True while a recovery is being watched, is working its backlog off, and has not outlasted the target.

        A job that has not caught up within the target recovery time, or that runs again but whose
        backlog grows, was under-provisioned by the last decision: holding it would only let the
        backlog grow, so the planner may act again (the watch keeps measuring for the record).
        """
        if not self.watch.active or self.watch.started_at is None:
            return False
        if falling_behind(observation):
            if self._watched is not None and not self._watched.falling_behind:
                self._watched = replace(self._watched, falling_behind=True)
                self.log.warning(
                    "recovery.falling_behind", started_at=self.watch.started_at, parallelism=self._watched.parallelism
                )
            return False
        target = self.settings.target_recovery_time_s
        overdue = now - self.watch.started_at > target
        if overdue and self._watched is not None and not self._watched.overdue:
            self._watched = replace(self._watched, overdue=True)
            self.log.warning(
                "recovery.overdue",
                started_at=self.watch.started_at,
                target_s=target,
                parallelism=self._watched.parallelism,
            )
        return not overdue

    # -------------------------------------------------------------- knowledge

    def to_dict(self) -> JsonObject:
        """This part's fields of the analyzer's knowledge document."""
        return {
            "recovery": self.predictor.to_dict(),
            "watch": self.watch.to_dict(),
            "watch_meta": self._watched.to_dict() if self._watched is not None else None,
            "watch_signal": self._signal,
        }

    def _predictor_settings(self) -> dict[str, Any]:
        """The predictor's configuration from the settings: checkpoint interval, downtime priors, alignment."""
        return {
            "checkpoint_interval_s": self.settings.checkpoint_interval_s,
            "downtime_rescale_prior_s": self.settings.downtime_rescale_prior_s,
            "downtime_failure_prior_s": self.settings.downtime_failure_prior_s,
            "aligned_rescales": self.settings.rescales_aligned,
        }

    def restore(self, state: Mapping[str, JsonValue]) -> None:
        """Read :meth:`to_dict`'s fields from the analyzer's document. The measurements are the saved ones; the
        checkpoint interval, the downtime priors and whether rescales are aligned follow the settings as set now
        (saved, an aligned target's restart would price every rescale's replay)."""
        saved = RecoveryPredictor.from_dict(object_at(state, "recovery"))
        self.predictor = saved.reconfigured(**self._predictor_settings())
        self.watch = RecoveryWatch.from_dict(object_at(state, "watch"))
        # The run a recovery must stay caught up follows the target as set now, not as it was when saved.
        self.watch.consecutive_s = caught_up_run_s(self.settings)
        watched = state.get("watch_meta")
        self._watched = WatchedRecovery.from_dict(as_object(watched)) if watched else None
        self._signal = as_str(state.get("watch_signal"))
