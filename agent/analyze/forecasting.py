"""Forecasting: what the workload will do, and how high it may rise.

Owns the workload forecaster (``models.forecast``), the registry models it may hot-reload, the last
hour of workload those are scored on, and the rise envelope (how far the workload has risen within
each lead time) that gives the upper forecast decisions plan for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from agent.json_types import JsonObject, JsonValue, member, object_at
from agent.logging import get_logger
from agent.observation import Observation
from agent.settings import ConfigError, Settings
from models.forecast import Forecast, ForecasterConfig, WorkloadForecaster
from models.forecast.conformal import ForecastErrors
from models.forecast.envelope import RiseEnvelope
from models.forecast.reloaded import ReloadedForecaster
from models.forecast.scoring import RecentWorkload, ScoringSpec
from planner import daedalus

if TYPE_CHECKING:
    from agent.model_reload import ModelReloader


UPPER_BOUND: Literal["rises", "forecast_errors"] = "rises"
"""What bounds the workload a decision plans for where a rescale is cheap: ``rises``, the workload's own rises
from its level (``models.forecast.envelope``, conditioned with ``rise_conditioned``); ``forecast_errors``, the
conformal bound over the agent's own forecast errors (``models.forecast.conformal``). The conformal bound covers
the realised peak at its stated rate (0.79-0.80 at quantile 0.8 on the held-out half, where the envelopes cover
0.74-0.79), but it is wider where the workload stands low in its range, and Daedalus planned with it spent 4 %
more worker-hours at the median trace of the dev half for one miss more (docs/research/experiments.md,
experiment 16), so the rises stand."""

UPPER_BOUND_WHERE: Literal["cheap", "dear", "always"] = "cheap"
"""Where :data:`UPPER_BOUND` applies: ``cheap`` (where a rescale is cheap), ``dear`` or ``always``; elsewhere the
rises stand. Where a rescale is dear the conformal bound, lower than the rises from a peak but wider in a trough, kept
more workers through the troughs than it saved after the peaks: the dev half at a restart's cost spent 1.6 % more
worker-hours with two avoidable misses more on its first failure seed (docs/research/experiments.md, experiment
61)."""

CONFORMAL_FROM_LEVEL = True
"""With ``UPPER_BOUND`` ``forecast_errors``: the errors are measured against the forecast's peak never below the
level it started from (False: against the forecast's peak alone, which covers at the same rate with a higher
bound)."""


ARRIVALS_DRIFT_WHERE: Literal["always", "dear", "never"] = "never"
"""Where the arrivals a recovery must outrun carry the workload's drift continued (:func:`drift_per_s`, while it
still drifts up: :func:`_drifting`): ``always``, ``dear`` (where a rescale is not cheap), or ``never`` (the point
forecast never below the level alone). A recovery of minutes at a few percent of spare capacity turns on the
workload during it, and a forecast flat at the level on a slow rise does not see it (lga_air_pressure: a scale-out
to 13 predicted to recover in 239 s recovered in 312 s while the workload rose 0.5 % a minute). With the drift where
dear that miss went, but the scale-outs it brought a loop or two earlier met the rest of the rise while they
recovered, at a scale-out whose capacity had stopped growing (us_saving_rate, nyc_flights_daily: a miss on every
failure seed): the dev half at a restart's cost went from 6 to 12 avoidable misses and 1.0 % more worker-hours
(docs/research/experiments.md, experiment 46), so the arrivals stay the point forecast."""

FORECAST_HELD_WHERE: Literal["always", "cheap", "dear", "never"] = "always"
"""Where the point forecast is held to the steepest rises the workload has shown (:meth:`Forecasting.held_to_rises`):
within each lead, never above the level times the highest rise seen within it; past the longest lead measured, that
lead's rise continued at its pace. A model fitted on a climb's first minutes may carry its momentum far past anything
the workload has done: on a real job, an ARIMA refitted after a rescale forecast 17.3k/s within 150 s of a level of
2.9k/s climbing 45/s, and the agent went 4 -> 6 where 4 carried the peak."""

DRIFT_BLOCKS = 3
"""The fewest block means (of the rate window each) a drift is fitted on: two points are a difference, not a
line."""

BAD_CASE_CONDITIONED_WHERE: Literal["always", "cheap"] = "cheap"
"""Where the bound a scale-in's bad case plans for (:attr:`WorkloadOutlook.bad_case_upper`) is the rise envelope
conditioned on where the workload stands (``rise_conditioned``): ``always``, or ``cheap``, where every bound is
(where a rescale is dear the bad case plans for the rises from every moment, as the scale-outs do). Conditioned
where dear too, the dev half at a restart's cost spent 0.02 % more worker-hours for one avoidable miss more: from
the middle of the range the rises are no lower, and where the bad case refuses a scale-in the next check does too
(docs/research/experiments.md, experiment 53)."""

NOISE_MIN_DIFFERENCES = 8
"""The fewest second differences of the kept workload's stretch means :meth:`Forecasting.noise` reads a spread from."""

NOISE_WHOLE_SPAN = True
"""Whether :meth:`Forecasting.noise` waits, as :meth:`Forecasting.usual` does, until the span it reads (the last hour
with the default horizon) is kept whole with at least half of it read. The median of a few dozen differences is
itself noisy, and in a job's first half hour a spread read from it twice what the hour gives took a real climb for
noise (docs/research/experiments.md, experiment 55)."""

NOISE_FROM: Literal["second differences", "changes"] = "second differences"
"""What :meth:`Forecasting.noise` reads the spread of a loop-to-loop change from: ``second differences`` of the
stretch means over the middle one, divided by the square root of 3 (exact where the means' noise is independent from
one stretch to the next; a trend of constant slope or of slowly turning slope has none); ``changes``, the changes from
one stretch's mean to the next about their median, each over the mean it started from: what a climb is read on,
whatever the noise's correlation from one stretch to the next (a trend of constant slope has none, a turning one
some). Where stretch means walk at random or smooth a trace of coarser points, the second differences read the
change's spread low (by the square root of 2/3 on a random walk), but the changes read a turning daily cycle as
noise too: at a restart's cost they saved 0.21 % of the dev half's worker-hours and let a real climb pass for noise on
nyc_flights_daily on every failure seed, 7 -> 11 avoidable misses (docs/research/experiments.md, experiment 56)."""

USUAL_QUANTILE: float | None = None
"""The quantile of the hour kept that :meth:`Forecasting.usual` reads: None for ``forecast_quantile``, the rise
quantile decisions plan with."""


def drift_per_s(recent: np.ndarray, block_s: int) -> float:
    """The workload's drift, records/s per second, over ``recent`` (a 1-s grid, NaN where nothing arrived): the
    least-squares slope of its means over blocks of ``block_s`` seconds (the rate window: samples within it are
    one reading, not independent ones), where it rises; 0 where it falls or is flat, and with fewer than
    :data:`DRIFT_BLOCKS` complete blocks or any block without readings."""
    block_s = max(1, int(block_s))
    means = block_means(recent, block_s)
    if means is None or means.size < DRIFT_BLOCKS:
        return 0.0
    x = np.arange(means.size, dtype=float) * block_s
    slope = float(np.polyfit(x, means, 1)[0])
    return slope if math.isfinite(slope) and slope > 0 else 0.0


def block_means(values: np.ndarray, block_s: int) -> np.ndarray | None:
    """The means of the whole blocks of ``block_s`` seconds at the end of ``values`` (a 1-s grid, NaN where nothing
    arrived), each over its readings; None where a block has none."""
    blocks = values.size // block_s
    grid = values[values.size - blocks * block_s :].reshape(blocks, block_s)
    known = np.isfinite(grid)
    if not known.any(axis=1).all():
        return None
    return np.where(known, grid, 0.0).sum(axis=1) / known.sum(axis=1)


@dataclass(frozen=True, eq=False)
class WorkloadOutlook:
    """The round's view of the workload ahead: what every candidate scale-out is evaluated against."""

    forecast: Forecast
    recent_rate: float | None
    """Mean workload over the last checkpoint interval (what a stop replays), or the level (`Forecasting.level`)."""
    previous: float | None
    """Mean workload over the stretch as long as this round's observation just before it, or None."""
    upper: np.ndarray | None
    """The workload as high as it may rise (the rise envelope over the forecast), or the forecast itself."""
    arrivals: np.ndarray | None
    """What a recovery must outrun: the point forecast, never below the level."""
    usual: float | None = None
    """The workload the job stood at or under for the rise quantile of the hour kept (:meth:`Forecasting.usual`)."""
    noise: float | None = None
    """How far the workload moves from one stretch as long as this round's observation to the next by noise alone,
    relative to its level (:meth:`Forecasting.noise`); None until enough of it is kept."""
    climb_from: float | None = None
    """The mean workload :data:`planner.daedalus.SUSTAINED_CLIMB_LOOPS` stretches as long as this round's observation
    before it, where each stretch since ran above the one before (a sustained climb); None otherwise or when off."""
    bad_case_upper: np.ndarray | None = None
    """The workload as high as it may rise in a scale-in's bad case (:data:`BAD_CASE_CONDITIONED_WHERE`); None:
    :attr:`upper`."""

    @property
    def scale_in_upper(self) -> np.ndarray | None:
        """The bound a scale-in's bad case plans for."""
        return self.upper if self.bad_case_upper is None else self.bad_case_upper


def forecaster_config(settings: Settings) -> ForecasterConfig:
    """The forecaster as the settings set it."""
    return ForecasterConfig(
        horizon_s=settings.forecast_horizon_s,
        window_s=settings.forecast_window_s,
        wape_threshold=settings.wape_threshold,
        retrain_after=settings.retrain_after_poor_loops,
        update_maxiter=settings.forecast_update_maxiter,
        select=settings.forecast_selection,
        level_s=settings.prometheus.rate_window_s,
    )


class Forecasting:
    """The workload's forecast, its hot-reloaded registry models and its rise envelope."""

    def __init__(self, settings: Settings, *, executor: Executor | None, enabled: bool) -> None:
        """``enabled``: False when the policy does not look ahead: it reads no forecast, so none is made."""
        self.settings = settings
        self.enabled = enabled
        self.log = get_logger("perdix.analyze")
        self.forecaster = WorkloadForecaster(forecaster_config(settings), executor=executor)
        self.reloader: ModelReloader | None = None
        if settings.model_registry:
            from agent.model_reload import ModelReloader
            from models.registry import RegistryError

            # A candidate's replay is an order search plus a forecast per origin (a quarter of a second
            # or more): it runs beside the loop, on the injected executor or a thread of its own.
            try:
                self.reloader = ModelReloader(
                    settings.model_registry,
                    settings.job_name,
                    agent_step_s=float(self.forecaster.resolution_s),
                    executor=executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="perdix-reload-score"),
                )
            except RegistryError as exc:  # a location no filesystem opens: a setting's error, named as one
                raise ConfigError(f"model_registry: {exc}") from None
        self.recent = RecentWorkload(ScoringSpec.for_horizon(settings.forecast_horizon_s))
        """The last hour of workload and the running model's forecasts over it (rates, hot reload)."""
        self.envelope = RiseEnvelope(quantile=settings.forecast_quantile or 0.5, conditioned=settings.rise_conditioned)
        """How far the workload has risen within each lead time (the upper forecast decisions plan for)."""
        self.errors = ForecastErrors(quantile=settings.forecast_quantile or 0.5)
        """How far the workload has gone above the forecasts made, per lead (kept with ``UPPER_BOUND``
        ``forecast_errors`` only)."""

    def set_enabled(self, enabled: bool) -> None:
        """Forecast from the next round on, or not (a policy that does not look ahead)."""
        self.enabled = enabled

    def step(self, observation: Observation, now: float) -> Forecast:
        """Record the observation's workload and, when enabled, forecast it (a newer registry model may take over)."""
        workload = observation.settled(observation.workload)
        self.recent.extend(observation.times, workload)
        self.envelope.update(workload)
        if not self.enabled:
            return Forecast(None, "off", None)
        conformal = UPPER_BOUND == "forecast_errors"
        if conformal:
            self.errors.update(observation.times, workload)
        forecast = self.forecaster.step(workload, smear_s=int(round(observation.rate_window_s)))
        if observation.times.size:
            # The forecast covers the seconds after the last sample.
            origin = float(observation.times[-1]) + 1.0
            self.recent.record(origin, self.forecaster.model, self.forecaster.model_forecast)
            if conformal and forecast.values is not None:
                level = self.level() if CONFORMAL_FROM_LEVEL else None
                self.errors.record(origin, forecast.values, part=self.envelope.part(level), level=level)
        self._hot_reload(now)
        return forecast

    def take_refused(self) -> tuple[str, ...]:
        """Kinds of the registry artifacts refused since the last call."""
        return self.reloader.take_refused() if self.reloader is not None else ()

    def level(self) -> float | None:
        """Where the workload stands now: the mean of its last rate window of readings (``prometheus.rate_window_s``,
        a minute by default), the span every rate read is already averaged over. A span of the agent's own time
        scale, not a fixed minute: with a rate window of 5 s (a short target, or a replay whose time constants are
        all compressed) a minute's mean still stood at the top of a descent 40 loops after it began, and no
        scale-in carried it. The readings of the window after a restart are dropped (their rates reach back
        before it), so the latest window of known readings within two windows stands in; None without any."""
        window = max(1, self.settings.prometheus.rate_window_s)
        recent = self.recent.last(2 * window)
        known = recent[np.isfinite(recent)][-window:]
        return float(known.mean()) if known.size else None

    def outlook(self, forecast: Forecast, *, span: int, cheap_rescale: bool) -> WorkloadOutlook:
        """The workload ahead from the forecast and the recent workload; ``span``: seconds this round observed.

        ``cheap_rescale``: a wrong decision is cheap to undo, so the envelope may be conditioned on where the
        workload stands.
        """
        # At least one second: a sub-second checkpoint interval (a time-compressed job) must not leave the
        # replay estimate, and with it every recovery prediction, without data.
        recent_rate = finite_mean(self.recent.last(max(1, math.ceil(self.settings.checkpoint_interval_s))))
        level = self.level()
        previous = finite_mean(self.recent.last(2 * span)[:span]) if span else None
        if recent_rate is None:
            # The last checkpoint interval's samples are a gap (rates restart with the tasks): the
            # level stands in, or every recovery would read "never" and undo the rescale.
            recent_rate = level
        if forecast.values is not None and level is not None and _applies(FORECAST_HELD_WHERE, cheap_rescale):
            forecast = replace(forecast, values=self.held_to_rises(forecast.values, level))
        values = forecast.values
        upper = (
            self._upper(values, level, cheap_rescale=cheap_rescale)
            if values is not None and level is not None and self.settings.forecast_quantile is not None
            else values
        )
        # The arrivals a recovery must outrun: the point forecast, but never below the level.
        # Right after a step the forecast still follows the old level for a few loops; a recovery planned
        # on it drains at the old rate's spare capacity, which the new rate does not leave.
        arrivals = np.maximum(values, level) if values is not None and level is not None else values
        if arrivals is not None and level is not None and _applies(ARRIVALS_DRIFT_WHERE, cheap_rescale) and span:
            last = finite_mean(self.recent.last(span))
            if _drifting(last, previous):
                arrivals = self._drifted(arrivals, level, upper)
        bad_case = None
        if BAD_CASE_CONDITIONED_WHERE == "always" and not cheap_rescale and values is not None and level is not None:
            if self.settings.forecast_quantile is not None:
                bad_case = self.envelope.upper(values, level, conditioned=True)
        noise = self.noise(span) if span else None
        climb_from = self.climb_from(span, daedalus.SUSTAINED_CLIMB_LOOPS) if span else None
        return WorkloadOutlook(
            forecast,
            recent_rate,
            previous,
            upper,
            arrivals,
            usual=self.usual(),
            noise=noise,
            climb_from=climb_from,
            bad_case_upper=bad_case,
        )

    def held_to_rises(self, values: np.ndarray, level: float) -> np.ndarray:
        """``values`` (a forecast, one a second ahead) held to the highest rises the workload has shown from ``level``
        (:meth:`RiseEnvelope.held`). The level stands half a rate window back (:meth:`level`), so a lead is counted
        from there."""
        held = self.envelope.held(values, level, since_s=0.5 * max(1, self.settings.prometheus.rate_window_s))
        if np.any(held < values):
            self.log.info(
                "forecast.held_to_rises", peak=round(float(values.max()), 1), held_peak=round(float(held.max()), 1)
            )
        return held

    def climb_from(self, span: int, loops: int | None) -> float | None:
        """The mean workload ``loops`` stretches of ``span`` seconds before the last one, where each stretch since ran
        above the one before it; None where one did not, where a stretch has no readings, with fewer kept, or without
        ``loops``."""
        if not loops or span <= 0:
            return None
        kept = self.recent.last((loops + 1) * span)
        means = block_means(kept, span) if kept.size == (loops + 1) * span else None
        return float(means[0]) if means is not None and bool(np.all(np.diff(means) > 0)) else None

    def noise(self, span: int) -> float | None:
        """The spread of a change of the workload's mean from one stretch of ``span`` seconds to the next that noise
        alone explains, relative to its level: the means of the kept workload's stretches, their second differences
        over the middle mean (a trend of constant slope has none, a step a few, which the median passes over), as a
        standard deviation (their median absolute value times 1.4826) divided by the square root of 3, since the
        second difference of independent noise varies three times as much as a first one. None with fewer than
        :data:`NOISE_MIN_DIFFERENCES` second differences of stretches known whole, or (:data:`NOISE_WHOLE_SPAN`) until
        the span kept is whole with at least half of it read. With :data:`NOISE_FROM` ``changes``: the changes from one
        stretch's mean to the next about their median, each over the mean it started from, as a standard deviation."""
        span = int(span)
        kept, whole = self._kept_span()
        if NOISE_WHOLE_SPAN and not whole:
            return None
        count = kept.size // span if span > 0 else 0
        if count < NOISE_MIN_DIFFERENCES + 2:
            return None
        means = kept[kept.size - count * span :].reshape(count, span).mean(axis=1)
        if NOISE_FROM == "changes":
            changes = np.diff(means)
            finite = np.isfinite(changes)
            if int(finite.sum()) < NOISE_MIN_DIFFERENCES:
                return None
            relative = (changes - np.median(changes[finite])) / np.where(means[:-1] > 0, means[:-1], np.nan)
            known = relative[np.isfinite(relative)]
            if known.size < NOISE_MIN_DIFFERENCES:
                return None
            return float(1.4826 * np.median(np.abs(known)))
        middle = means[1:-1]
        second = (means[2:] - 2.0 * middle + means[:-2]) / np.where(middle > 0, middle, np.nan)
        known = second[np.isfinite(second)]
        if known.size < NOISE_MIN_DIFFERENCES:
            return None
        return float(1.4826 * np.median(np.abs(known)) / math.sqrt(3.0))

    def usual(self) -> float | None:
        """The workload the job stood at or under for ``forecast_quantile`` of the workload kept (the last hour with
        the default horizon; the span of the forecasts' scoring, so it follows the agent's time scale). None until
        that span is kept whole with at least half of it read, or without a quantile."""
        quantile = self.settings.forecast_quantile if USUAL_QUANTILE is None else USUAL_QUANTILE
        kept, whole = self._kept_span()
        if quantile is None or not whole:
            return None
        return float(np.quantile(kept[np.isfinite(kept)], quantile))

    def _kept_span(self) -> tuple[np.ndarray, bool]:
        """The workload kept over the span the forecasts are scored on (the last hour with the default horizon), and
        whether that span is kept whole with at least half of it read: what :meth:`usual` and :meth:`noise` wait
        for."""
        span = self.recent.spec.window_s
        kept = self.recent.last(span)
        return kept, kept.size >= span and 2 * int(np.isfinite(kept).sum()) >= span

    def _drifted(self, arrivals: np.ndarray, level: float, upper: np.ndarray | None) -> np.ndarray:
        """The arrivals never below the workload's drift (:func:`drift_per_s`, over the target recovery time, the
        span a recovery is judged on) continued from the level, which stands half a rate window back, for as long
        as it was measured over and level beyond; at most the upper bound, the highest the workload is expected
        to go."""
        window = max(1, self.settings.prometheus.rate_window_s)
        span = max(DRIFT_BLOCKS * window, math.ceil(self.settings.target_recovery_time_s))
        slope = drift_per_s(self.recent.last(span), window)
        if slope <= 0.0:
            return arrivals
        ramp = level + slope * np.minimum(np.arange(arrivals.size, dtype=float) + 0.5 * window, span)
        if upper is not None and upper.size == arrivals.size:
            ramp = np.minimum(ramp, upper)
        return np.maximum(arrivals, ramp)

    def _upper(self, values: np.ndarray, level: float, *, cheap_rescale: bool) -> np.ndarray:
        """The workload as high as it may rise: the forecast's own errors where a rescale is cheap and they are
        scored (:data:`UPPER_BOUND`), else the rise envelope, at ``forecast_quantile_cheap`` where a rescale is
        cheap."""
        if UPPER_BOUND == "forecast_errors" and _applies(UPPER_BOUND_WHERE, cheap_rescale):
            floor = level if CONFORMAL_FROM_LEVEL else None
            bound = self.errors.upper(values, part=self.envelope.part(level), level=floor)
            if bound is not None:
                return bound
        quantile = self.settings.forecast_quantile_cheap if cheap_rescale else None
        return self.envelope.upper(values, level, conditioned=cheap_rescale, quantile=quantile)

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

    def to_dict(self) -> JsonObject:
        """This part's fields of the analyzer's knowledge document."""
        return {"forecaster": self.forecaster.to_dict(), "envelope": self.envelope.to_dict()}

    def restore(self, state: Mapping[str, JsonValue]) -> None:
        """Read :meth:`to_dict`'s fields from the analyzer's document."""
        self.forecaster.restore(object_at(state, "forecaster"))
        if self.reloader is not None and isinstance(self.forecaster.model, ReloadedForecaster):
            # The registry model survived the restart: only a newer version may replace it.
            self.reloader.set_current_version(self.forecaster.model.version)
        self.envelope.restore(member(state, "envelope"))

    def close(self) -> None:
        """Stop the forecaster's own background thread, if it made one."""
        self.forecaster.close()


def _drifting(last: float | None, previous: float | None) -> bool:
    """Whether the workload still drifts up: this round's mean above the one before it, by no more than the planner's
    climb margin (:data:`planner.daedalus.CLIMB_MARGIN`; a climb is the climb rules', and a drift fitted over a
    burst's climb would carry the climb on after its top)."""
    return last is not None and previous is not None and previous < last <= (1.0 + daedalus.CLIMB_MARGIN) * previous


def _applies(where: str, cheap_rescale: bool) -> bool:
    """Whether a rule switched on ``where`` (``always``, ``cheap``, ``dear`` or ``never``: :data:`FORECAST_HELD_WHERE`,
    :data:`ARRIVALS_DRIFT_WHERE`, :data:`UPPER_BOUND_WHERE`) applies this round."""
    return where == "always" or where == ("cheap" if cheap_rescale else "dear")


def finite_mean(values: np.ndarray) -> float | None:
    """The mean of the finite values, None when there are none."""
    finite = values[np.isfinite(values)]
    return float(finite.sum()) / finite.size if finite.size else None
