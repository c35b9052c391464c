"""A daily-profile forecaster for weeks of resampled history, with any Forecaster on the residuals.

Why this shape: a workload's strongest pattern is the time of day, and weeks of history pin that
pattern down; an ARIMA with a daily season at a 1-min step (period 1440) is far too slow to fit per
job, and an ARIMA without a season cannot see tomorrow morning's ramp in a 15-min window. So the
model is additive: ``y(t) = profile(time of day of t) + r(t)``, where the profile is the mean of the
history in each ``profile_bin_s`` slot of the day and ``r`` is forecast by one of the agent's
forecasters (``models/forecast``) fitted on the most recent residuals only.

It keeps the Forecaster verbs (``fit``/``update``/``predict``/``to_dict``) and adds time: ``fit``
takes the epoch second of the first sample, the model then counts samples to know the time of day
of every later one, and :meth:`SeasonalForecaster.align` moves it to a new ``now`` (after a reload).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from models.forecast.base import Forecaster
from models.forecast.states import NaiveState, SeasonalState, read_state

DAY_S = 86_400


class NaiveForecaster:
    """Persistence: the last value, repeated (the residual baseline; needs no fitting)."""

    name = "naive"

    def __init__(self) -> None:
        self.last = 0.0

    def fit(self, y: np.ndarray) -> NaiveForecaster:
        """Remember the last finite value of ``y``."""
        self.last = 0.0
        self.update(y)
        return self

    def update(self, y: np.ndarray) -> None:
        """Move to the last finite value of ``y`` (a gap keeps the previous one)."""
        finite = np.asarray(y, dtype=float)
        finite = finite[np.isfinite(finite)]
        if finite.size:
            self.last = float(finite[-1])

    def predict(self, horizon: int) -> np.ndarray:
        """``horizon`` copies of the last value."""
        return np.full(int(horizon), self.last)

    def to_dict(self) -> dict[str, Any]:
        """The last value."""
        return {"last": self.last}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> NaiveForecaster:
        """Rebuild from :meth:`to_dict`, validated first."""
        model = cls()
        model.last = read_state(NaiveState, state).last
        return model


ResidualFactory = Callable[[int], Forecaster]
"""Builds an unfitted residual model that keeps ``window`` samples."""
ResidualLoader = Callable[[dict[str, Any]], Forecaster]


def _arima(window: int) -> Forecaster:
    from models.forecast.arima import ArimaForecaster

    return ArimaForecaster(window)


def _load_arima(state: dict[str, Any]) -> Forecaster:
    from models.forecast.arima import ArimaForecaster

    return ArimaForecaster.from_dict(state)


def _statsforecast(window: int) -> Forecaster:
    from models.forecast.statsforecast_arima import StatsForecastArima

    return StatsForecastArima(window)


def _load_statsforecast(state: dict[str, Any]) -> Forecaster:
    from models.forecast.statsforecast_arima import StatsForecastArima

    return StatsForecastArima.from_dict(state)


def _linear(window: int) -> Forecaster:
    from models.forecast.linear import LinearForecaster

    # The agent's fallback fits its line on 10 minutes; on 1-min residuals that is 10 samples.
    return LinearForecaster(window=min(window, 10), min_samples=3)


def _load_linear(state: dict[str, Any]) -> Forecaster:
    from models.forecast.linear import LinearForecaster

    return LinearForecaster.from_dict(state)


def residual_models() -> dict[str, tuple[ResidualFactory, ResidualLoader]]:
    """Residual forecasters by name: (make a fresh one keeping ``window`` samples, rebuild one from ``to_dict``).

    The library models are imported on first use, so reading a naive model needs neither
    pmdarima nor statsforecast.
    """
    return {
        "naive": (lambda window: NaiveForecaster(), NaiveForecaster.from_dict),
        "arima": (_arima, _load_arima),
        "statsforecast-arima": (_statsforecast, _load_statsforecast),
        "linear": (_linear, _load_linear),
    }


def residual_model(name: str) -> tuple[ResidualFactory, ResidualLoader]:
    """The (factory, loader) pair of a residual forecaster; raises ValueError naming the choices."""
    table = residual_models()
    if name not in table:
        raise ValueError(f"unknown residual model {name!r}; choose one of {', '.join(sorted(table))}")
    return table[name]


class SeasonalForecaster:
    """Daily profile (mean per slot of the day) plus a residual forecaster on the recent residuals."""

    name = "seasonal"

    def __init__(
        self,
        *,
        residual: str = "naive",
        step_s: int = 60,
        profile_bin_s: int = 900,
        residual_window_s: int = DAY_S,
    ) -> None:
        if step_s <= 0 or DAY_S % step_s:
            raise ValueError(f"step_s must divide a day, got {step_s}")
        if profile_bin_s < step_s or DAY_S % profile_bin_s or profile_bin_s % step_s:
            raise ValueError(f"profile_bin_s must be a multiple of step_s dividing a day, got {profile_bin_s}")
        residual_model(residual)
        self.residual_name = residual
        self.step_s = int(step_s)
        self.profile_bin_s = int(profile_bin_s)
        self.residual_window_s = int(residual_window_s)
        self.window = max(1, self.residual_window_s // self.step_s)
        """Residual samples the residual model keeps."""
        self.profile = np.zeros(DAY_S // self.profile_bin_s)
        self.offset = 0.0
        """Added to every residual before the residual model sees it (the profile's peak)."""
        self.next_s = 0.0
        """Epoch second of the next sample the model expects."""
        self.residual: Forecaster = residual_model(residual)[0](self.window)

    # ------------------------------------------------------------------ time of day

    def slots(self, times_s: np.ndarray) -> np.ndarray:
        """Profile slot index of each epoch second (UTC time of day)."""
        return (np.floor(np.mod(times_s, DAY_S) / self.profile_bin_s)).astype(np.int64)

    def seasonal(self, times_s: np.ndarray) -> np.ndarray:
        """The profile's value at each epoch second."""
        return self.profile[self.slots(np.asarray(times_s, dtype=float))]

    def _times(self, start_s: float, count: int) -> np.ndarray:
        return start_s + self.step_s * np.arange(count, dtype=float)

    # ------------------------------------------------------------------ verbs

    def fit(self, y: np.ndarray, *, start_s: float = 0.0) -> SeasonalForecaster:
        """Fit on ``y`` sampled every ``step_s`` from epoch second ``start_s`` (finite values)."""
        y = np.asarray(y, dtype=float)
        if y.size == 0 or not np.all(np.isfinite(y)):
            raise ValueError("fit needs a non-empty history of finite values")
        slots = self.slots(self._times(start_s, y.size))
        sums = np.bincount(slots, weights=y, minlength=self.profile.size)
        counts = np.bincount(slots, minlength=self.profile.size)
        # A slot the history never covered falls back to the overall mean, not to zero.
        self.profile = np.where(counts > 0, sums / np.maximum(counts, 1), float(y.mean()))
        # Residuals are shifted by the profile's peak so they stay non-negative: the agent's
        # forecasters clip their forecasts at zero, which would bias a residual that can go negative.
        self.offset = float(self.profile.max())
        self.next_s = float(start_s + self.step_s * y.size)
        self.refit_residual(y)
        return self

    def refit_residual(self, y: np.ndarray) -> None:
        """Fit a fresh residual model on the newest samples ``y`` (the last one just before ``next_s``)."""
        y = np.asarray(y, dtype=float)
        y = y[-self.window :]
        residuals = y - self.seasonal(self._times(self.next_s - self.step_s * y.size, y.size)) + self.offset
        self.residual = residual_model(self.residual_name)[0](self.window)
        self.residual.fit(residuals[np.isfinite(residuals)])

    def update(self, y: np.ndarray) -> None:
        """Feed the next samples (one per ``step_s``, gaps as NaN) without refitting the profile."""
        y = np.asarray(y, dtype=float)
        if y.size == 0:
            return
        residuals = y - self.seasonal(self._times(self.next_s, y.size)) + self.offset
        finite = residuals[np.isfinite(residuals)]
        if finite.size:
            self.residual.update(finite)
        self.next_s += self.step_s * y.size

    def align(self, next_s: float) -> None:
        """Declare that the next sample is at epoch second ``next_s`` (e.g. after loading a stored model)."""
        self.next_s = float(math.floor(next_s / self.step_s) * self.step_s)

    def predict(self, horizon: int) -> np.ndarray:
        """Forecast ``horizon`` steps: the profile ahead plus the residual forecast (never below 0)."""
        horizon = int(horizon)
        if horizon <= 0:
            return np.empty(0)
        ahead = self.seasonal(self._times(self.next_s, horizon))
        residual = np.asarray(self.residual.predict(horizon), dtype=float) - self.offset
        return np.maximum(ahead + residual, 0.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state, the residual model's ``to_dict`` nested."""
        return {
            "kind": self.name,
            "step_s": self.step_s,
            "profile_bin_s": self.profile_bin_s,
            "residual_window_s": self.residual_window_s,
            "profile": [float(v) for v in self.profile],
            "offset": self.offset,
            "next_s": self.next_s,
            "residual": {"name": self.residual_name, "state": self.residual.to_dict()},
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> SeasonalForecaster:
        """Rebuild from :meth:`to_dict`, validated first (the residual by its own schema); raises ValueError
        (``StateError`` for a misfit field) on a malformed state."""
        checked = read_state(SeasonalState, state)
        model = cls(
            residual=checked.residual.name,
            step_s=checked.step_s,
            profile_bin_s=checked.profile_bin_s,
            residual_window_s=checked.residual_window_s,
        )
        profile = np.asarray(checked.profile, dtype=float)
        if profile.shape != model.profile.shape:
            raise ValueError(f"profile must hold {model.profile.size} finite values")
        model.profile = profile
        model.offset = checked.offset
        model.next_s = checked.next_s
        model.residual = residual_model(checked.residual.name)[1](checked.residual.state)
        return model
