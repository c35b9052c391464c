"""The workload forecaster of the loop: ARIMA with a WAPE check, a linear fallback and background retrains.

Daedalus section 3.3, once per loop (:meth:`WorkloadForecaster.step`):

1. score the model's previous forecast by WAPE against the workload that arrived since;
2. feed the new samples to the model (``update``: no order search; the default ARIMA re-estimates
   its parameters on the newest window with a few optimiser iterations, as pmdarima's update does);
3. if the model was poor (WAPE above ``wape_threshold``) for ``retrain_after`` loops in a row, or
   there is no model yet, start a fit in the background executor; the loop never waits for it and
   the new model replaces the old one in the first loop after it is done;
4. forecast ``horizon_s`` seconds at 1 s: the model's forecast, or the linear fallback (least
   squares over the last ``linear_window_s``) when the model's last WAPE was poor or there is no
   model yet, or nothing (``unknown``) with too little data.

The model sees the workload averaged over ``resolution_s`` seconds and its forecast is interpolated
back to 1 s: at 1 s an auto-ARIMA search over 900 points takes seconds and a 900-step forecast
costs more than the rest of the loop, while 10 s means keep per-loop cost to a few milliseconds on
this workload and forecast at least as well (see benchmarks/bench_forecast.py).

Background work goes to an injected :class:`concurrent.futures.Executor`; a deterministic replay
either passes an executor that runs work at once or calls :meth:`WorkloadForecaster.wait_pending`.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from models.forecast.arima import ArimaForecaster
from models.forecast.base import Forecaster
from models.forecast.candidates import RollingScores, SeasonalNaive, naive_forecast
from models.forecast.config import DEFAULT_FORECASTER, ForecasterConfig
from models.forecast.linear import LinearForecaster
from models.forecast.metrics import wape
from models.forecast.reloaded import ReloadedForecaster
from models.forecast.states import StateError
from models.forecast.statsforecast_arima import StatsForecastArima

MODEL_CLASSES: dict[str, Any] = {
    ArimaForecaster.name: ArimaForecaster,
    StatsForecastArima.name: StatsForecastArima,
    LinearForecaster.name: LinearForecaster,
    ReloadedForecaster.name: ReloadedForecaster,
}
"""Forecaster classes by ``name``, to rebuild a persisted model."""


SEASON_CHECK_ROUNDS = 10
"""Rounds between two searches for the workload's period (an FFT over up to two days of minute means)."""


@dataclass(frozen=True, eq=False)
class Forecast:
    """One loop's forecast: workload per second over the horizon, where it came from, how good it was."""

    values: np.ndarray | None
    """Records/s for each second after the last sample; None when unknown."""
    source: str
    """The model's name (``arima``), ``linear`` (fallback) or ``unknown``."""
    wape: float | None
    """WAPE of the model's previous forecast against what arrived; None before the first score."""
    poor_loops: int = 0
    """Consecutive loops with a model WAPE above the threshold."""
    retraining: bool = False
    """True while a background fit is running."""


def _fit_new(factory: Callable[[], Forecaster], y: np.ndarray) -> Forecaster:
    """Build and fit a model (module-level so a process pool can send it to a worker)."""
    return factory().fit(y)


class WorkloadForecaster:
    """Per-loop forecast manager around a pluggable :class:`Forecaster` (pmdarima ARIMA by default), set by a
    :class:`~models.forecast.config.ForecasterConfig`."""

    def __init__(
        self,
        config: ForecasterConfig = DEFAULT_FORECASTER,
        *,
        executor: Executor | None = None,
        model_factory: Callable[[], Forecaster] | None = None,
    ) -> None:
        """``executor`` runs the background fits (default: a thread of its own); ``model_factory`` builds an
        unfitted model (picklable for process pools; default pmdarima ARIMA over the window)."""
        self.config = config
        self._smear_s = 0
        """The window the workload's rates were taken over (given with each step; 0: exact per-second rates):
        the linear fallback holds a ramp younger than it where a step would be complete."""
        self.model_factory: Callable[[], Forecaster] = model_factory or functools.partial(
            ArimaForecaster, config.window_points, update_maxiter=config.update_maxiter
        )
        self._executor = executor
        self._own_executor: ThreadPoolExecutor | None = None
        self._raw: deque[float] = deque(maxlen=max(config.window_s, config.linear_window_s))
        self.seasonal = SeasonalNaive()
        self.scores = RollingScores(config.horizon_s)
        self.chosen: str | None = None
        """The candidate the last forecast came from (with ``select``)."""
        self._rounds = 0
        self._buckets: deque[float] = deque(maxlen=config.window_points)
        self._bucket_count = 0
        """Buckets completed since the start (the index of the next one)."""
        self._partial: list[float] = []
        self.model: Forecaster | None = None
        self._pending: Future[Forecaster] | None = None
        self._pending_from = 0
        self._last_model_forecast: np.ndarray | None = None
        self.last_wape: float | None = None
        self.poor_loops = 0
        self.fits_started = 0
        self.fits_failed = 0
        self.last_fit_error: str | None = None
        self.update_errors = 0
        self.skipped = 0
        """Samples that were NaN, infinite or negative."""

    @property
    def horizon_s(self) -> int:
        """Seconds forecast ahead."""
        return self.config.horizon_s

    @property
    def resolution_s(self) -> int:
        """Seconds averaged per model step."""
        return self.config.resolution_s

    # ------------------------------------------------------------------ the loop step

    def step(self, samples: Any, *, smear_s: int = 0) -> Forecast:
        """Score, update, maybe retrain, and forecast; ``samples`` are the seconds since the last step, their
        rates taken over ``smear_s`` seconds (0: exact per-second rates)."""
        self._smear_s = int(smear_s)
        values = np.asarray(samples, dtype=float).ravel()
        bad = ~np.isfinite(values) | (values < 0)
        self.skipped += int(np.count_nonzero(bad))
        values = np.where(bad, np.nan, values)

        self._score(values)
        self.scores.observe(values)
        self.seasonal.update(values)
        new_buckets = self._ingest(values)
        self._collect()
        if self.model is not None and new_buckets:
            self._update_model(new_buckets)
        self._maybe_fit()
        if not self.config.select:
            return self._forecast()
        return self._select()

    def _score(self, actual: np.ndarray) -> None:
        previous = self._last_model_forecast
        if previous is None or actual.size == 0:
            return
        score = wape(actual, previous)
        if score is None:
            return
        self.last_wape = score
        self.poor_loops = self.poor_loops + 1 if score > self.config.wape_threshold else 0

    def _ingest(self, values: np.ndarray) -> list[float]:
        """Append samples to the 1 s history and return the model-resolution buckets they completed."""
        completed: list[float] = []
        for value in values:
            self._raw.append(float(value))
            self._partial.append(float(value))
            if len(self._partial) == self.config.resolution_s:
                completed.append(self._close_bucket())
        return completed

    def _close_bucket(self) -> float:
        bucket = np.asarray(self._partial)
        self._partial = []
        finite = bucket[np.isfinite(bucket)]
        value = float(finite.mean()) if finite.size else math.nan
        self._buckets.append(value)
        self._bucket_count += 1
        return value

    def _update_model(self, buckets: list[float]) -> None:
        assert self.model is not None
        try:
            self.model.update(np.asarray(buckets, dtype=float))
        except Exception as exc:  # noqa: BLE001 - a library failure must not stop the loop
            self.update_errors += 1
            self.last_fit_error = f"update: {exc}"
            self.model = None
            self._last_model_forecast = None

    def _history(self) -> np.ndarray:
        return np.asarray(self._buckets, dtype=float)

    def _maybe_fit(self) -> None:
        if self._pending is not None or not self.config.fits_model:
            return
        history = self._history()
        finite_seconds = int(np.count_nonzero(np.isfinite(history))) * self.config.resolution_s
        if finite_seconds < self.config.fit_after_s:
            return
        if self.model is None or self.poor_loops >= self.config.retrain_after:
            self._submit(history)
            # An executor that runs work at once (a replay) delivers the model this very loop.
            self._collect()

    def adopt(self, model: Forecaster) -> None:
        """Replace the model with one trained elsewhere (a registry artifact), warmed on the recent window.

        A fit still running in the background would overwrite it, so its result is dropped; the
        WAPE streak starts over, the new model is scored from its first forecast on.
        """
        history = self._history()
        if np.isfinite(history).any():
            model.fit(history)
        self.model = model
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self.poor_loops = 0
        self.last_wape = None
        self._last_model_forecast = None

    def _submit(self, history: np.ndarray) -> None:
        executor = self._executor
        if executor is None:
            if self._own_executor is None:
                self._own_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="perdix-forecast-fit")
            executor = self._own_executor
        self.fits_started += 1
        self._pending_from = self._bucket_count
        # The streak starts over: the next retrain needs another run of poor loops.
        self.poor_loops = 0
        try:
            self._pending = executor.submit(_fit_new, self.model_factory, history.copy())
        except Exception as exc:  # noqa: BLE001 - e.g. a pool shut down at exit: no fit, no crash
            self.fits_failed += 1
            self.last_fit_error = f"submit: {exc}"

    def _collect(self) -> None:
        """Install a finished background fit and catch it up with the buckets that arrived since."""
        future = self._pending
        if future is None or not future.done():
            return
        self._pending = None
        try:
            model = future.result()
        except Exception as exc:  # noqa: BLE001 - keep the old model, try again later
            self.fits_failed += 1
            self.last_fit_error = f"fit: {exc}"
            return
        missed = self._bucket_count - self._pending_from
        if missed > 0:
            try:
                model.update(self._history()[-missed:])
            except Exception as exc:  # noqa: BLE001
                self.fits_failed += 1
                self.last_fit_error = f"catch-up update: {exc}"
                return
        self.model = model
        # A fresh model is trusted until its own forecasts have been scored.
        self.last_wape = None
        self._last_model_forecast = None

    def wait_pending(self, timeout: float | None = None) -> bool:
        """Block until a running background fit is done and install it; True if none is left running."""
        future = self._pending
        if future is not None:
            wait_futures([future], timeout=timeout)
            self._collect()
        return self._pending is None

    @property
    def model_forecast(self) -> np.ndarray | None:
        """The model's own forecast of the last step (before any fallback), 1 s ahead to ``horizon_s``."""
        return self._last_model_forecast

    @property
    def retraining(self) -> bool:
        """True while a background fit is running."""
        return self._pending is not None

    # ------------------------------------------------------------------ forecasting

    def _select(self) -> Forecast:
        """Every candidate's forecast now; the one with the lowest recent WAPE over the horizon is used.

        Until candidates have been scored the model is preferred (as without selection), then the line,
        then the level held.
        """
        self._rounds += 1
        if self._rounds % SEASON_CHECK_ROUNDS == 1:
            self.seasonal.find_period()
        candidates = self.candidate_forecasts()
        self._last_model_forecast = candidates["model"]
        for name, values in candidates.items():
            self.scores.record(name, values)
        available = {n: v for n, v in candidates.items() if v is not None and np.all(np.isfinite(v))}
        if not available:
            return self._result(None, "unknown")
        scored = {n: score for n in available if (score := self.scores.score(n)) is not None}
        if scored:
            name = min(scored, key=scored.__getitem__)
        else:
            name = next(n for n in ("model", "linear", "naive", "seasonal") if n in available)
        self.chosen = name
        source = self.model.name if name == "model" and self.model is not None else name
        return self._result(available[name], source)

    def candidate_forecasts(self) -> dict[str, np.ndarray | None]:
        """Every candidate's forecast from the history now, unscored: the model's, the line's, the level held (the
        mean of the last ``level_s`` seconds) and the last cycle repeated; None where one has too little data."""
        model_values = self._model_forecast() if self.model is not None else None
        return {
            "model": model_values,
            "linear": self.linear_forecast(),
            "naive": naive_forecast(np.asarray(self._raw, dtype=float), self.horizon_s, self.config.level_s),
            "seasonal": self.seasonal.predict(self.horizon_s),
        }

    def _forecast(self) -> Forecast:
        model_values = self._model_forecast() if self.model is not None else None
        self._last_model_forecast = model_values
        use_model = model_values is not None and (
            self.last_wape is None or self.last_wape <= self.config.wape_threshold
        )
        if use_model:
            assert self.model is not None
            return self._result(model_values, self.model.name)
        fallback = self.linear_forecast()
        if fallback is not None:
            return self._result(fallback, "linear")
        return self._result(None, "unknown")

    def _result(self, values: np.ndarray | None, source: str) -> Forecast:
        if values is not None and not np.all(np.isfinite(values)):
            # An extrapolation that overflowed is no forecast: say unknown rather than plan on inf.
            values, source = None, "unknown"
        return Forecast(
            values=values, source=source, wape=self.last_wape, poor_loops=self.poor_loops, retraining=self.retraining
        )

    def _model_forecast(self) -> np.ndarray | None:
        """The model's forecast interpolated from bucket means to the next ``horizon_s`` seconds."""
        assert self.model is not None
        r = self.resolution_s
        done = len(self._partial)  # seconds of the current bucket already observed
        steps = math.ceil((done + self.horizon_s) / r) + 1
        try:
            buckets = np.asarray(self.model.predict(steps), dtype=float)
        except Exception as exc:  # noqa: BLE001
            self.update_errors += 1
            self.last_fit_error = f"predict: {exc}"
            return None
        if buckets.size < steps or not np.all(np.isfinite(buckets)):
            return None
        history = self._history()
        last = history[np.isfinite(history)][-1] if np.isfinite(history).any() else buckets[0]
        # Bucket j (0 = the current one) is the mean of seconds [j*r, (j+1)*r): placed at its centre,
        # with the last completed bucket anchoring the start so the forecast joins the history.
        centres = np.concatenate(([-(r + 1) / 2], np.arange(steps) * r + (r - 1) / 2))
        seconds = done + np.arange(self.horizon_s, dtype=float)
        values = np.interp(seconds, centres, np.concatenate(([last], buckets)))
        return np.maximum(values, 0.0)

    def linear_forecast(self) -> np.ndarray | None:
        """Least squares over the last ``linear_window_s`` seconds, extrapolated; None with too little data."""
        config = self.config
        recent = np.asarray(self._raw, dtype=float)[-config.linear_window_s :]
        if int(np.count_nonzero(np.isfinite(recent))) < config.min_linear_s:
            return None
        line = LinearForecaster(
            window=config.linear_window_s, min_samples=config.min_linear_s, level_shifts=True, smear_s=self._smear_s
        ).fit(recent)
        return line.predict(self.horizon_s)

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """History, counters and the model's own state (a running fit is not kept)."""
        model_state = None
        if self.model is not None and hasattr(self.model, "to_dict"):
            model_state = self.model.to_dict()
        return {
            "horizon_s": self.config.horizon_s,
            "window_s": self.config.window_s,
            "resolution_s": self.config.resolution_s,
            "raw": [_json_float(v) for v in self._raw],
            "buckets": [_json_float(v) for v in self._buckets],
            "bucket_count": self._bucket_count,
            "partial": [_json_float(v) for v in self._partial],
            "last_wape": self.last_wape,
            "poor_loops": self.poor_loops,
            "fits_started": self.fits_started,
            "fits_failed": self.fits_failed,
            "skipped": self.skipped,
            "model": model_state,
            "seasonal": self.seasonal.to_dict(),
            "scores": self.scores.to_dict(),
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Load a state written by :meth:`to_dict` (history is dropped if the resolution changed)."""
        if not state:
            return
        self.last_wape = state.get("last_wape")
        self.poor_loops = int(state.get("poor_loops", 0))
        self.fits_started = int(state.get("fits_started", 0))
        self.fits_failed = int(state.get("fits_failed", 0))
        self.skipped = int(state.get("skipped", 0))
        self._raw.clear()
        self._raw.extend(_from_json(state.get("raw", [])))
        self.seasonal.restore(state.get("seasonal") or {})
        self.scores.restore(state.get("scores") or {})
        if int(state.get("resolution_s", -1)) != self.config.resolution_s:
            return
        self._buckets.clear()
        self._buckets.extend(_from_json(state.get("buckets", [])))
        self._bucket_count = int(state.get("bucket_count", len(self._buckets)))
        self._partial = list(_from_json(state.get("partial", [])))
        model_state = state.get("model")
        if model_state is not None:
            # A stored model is untrusted input: one that does not fit its schema is refused (StateError),
            # and the whole document with it, never half-loaded. A kind no class here builds (a model a
            # benchmark plugged in) is not read at all: the forecaster fits afresh.
            if not isinstance(model_state, Mapping):
                raise StateError(f"forecaster model: expected a JSON object, found {type(model_state).__name__}")
            cls = MODEL_CLASSES.get(str(model_state.get("name")))
            self.model = cls.from_dict(dict(model_state)) if cls is not None else None
            if isinstance(self.model, ArimaForecaster):
                # How to update is this process's setting, not the stored model's.
                self.model.update_maxiter = self.config.update_maxiter

    @classmethod
    def from_dict(
        cls,
        state: Mapping[str, Any],
        config: ForecasterConfig = DEFAULT_FORECASTER,
        *,
        executor: Executor | None = None,
        model_factory: Callable[[], Forecaster] | None = None,
    ) -> WorkloadForecaster:
        """A forecaster set as ``config`` but with the stored horizon, window and resolution, restored from
        ``state``."""
        stored = replace(
            config,
            horizon_s=int(state.get("horizon_s", config.horizon_s)),
            window_s=int(state.get("window_s", config.window_s)),
            resolution_s=int(state.get("resolution_s", config.resolution_s)),
        )
        forecaster = cls(stored, executor=executor, model_factory=model_factory)
        forecaster.restore(state)
        return forecaster

    def close(self) -> None:
        """Stop the forecaster's own background thread, if it made one (an injected executor is left alone)."""
        if self._own_executor is not None:
            self._own_executor.shutdown(wait=False, cancel_futures=True)
            self._own_executor = None


def _json_float(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _from_json(values: Any) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]
