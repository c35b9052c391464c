"""What the per-loop workload forecaster is set to: the single statement of its defaults.

The agent's settings read their forecasting defaults from :data:`DEFAULT_FORECASTER`, so a default
changed here changes the daemon's, the lab's and every benchmark's at once.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_MODEL_STEPS = 12
"""Model steps (``resolution_s`` each) the model is fitted on at least: two minutes at 10 s. The largest order the
ARIMA's search tries, ARIMA(3,1,3), estimates eight values (six coefficients, a drift and the variance); on
fewer than half again as many points the search cannot tell one order from another, and a fit on three to six points,
carried across a step down, forecast a rebound to 1,308/s under a flat 500/s on the real job. A window shorter
than this (``forecast_window_s`` under 120 s) fits no model: the line, the level held and the last cycle forecast."""


@dataclass(frozen=True)
class ForecasterConfig:
    """How far ahead and over how much history :class:`~models.forecast.WorkloadForecaster` forecasts."""

    horizon_s: int = 900
    """Seconds forecast ahead (one value a second)."""
    window_s: int = 900
    """Seconds of workload history the model fits on."""
    wape_threshold: float = 0.25
    """A model forecast with a WAPE above this is poor (the linear fallback replaces it without selection)."""
    retrain_after: int = 15
    """Consecutive poor loops after which the model is refitted in the background."""
    update_maxiter: int = 10
    """Optimiser iterations the default ARIMA spends per update re-estimating its parameters on the newest
    window (0: the parameters of the last fit, only the state is filtered)."""
    resolution_s: int = 10
    """Seconds averaged per model step (the forecast is interpolated back to 1 s)."""
    linear_window_s: int = 600
    """Seconds the linear fallback fits its line over."""
    min_fit_s: int | None = None
    """Finite seconds of history before the first fit (None: half the window); never fewer than
    :data:`MIN_MODEL_STEPS` model steps."""
    min_linear_s: int = 30
    """Finite seconds the linear fallback needs."""
    level_s: int = 60
    """Seconds of the latest workload the naive candidate holds the mean of: the agent's level (its rate window,
    ``prometheus.rate_window_s``), so that the level held follows a step as soon as the rates do."""
    select: bool = True
    """Forecast with whichever candidate (the model, linear, naive, seasonal) had the lowest recent WAPE over
    the horizon, instead of the model with the linear fallback."""

    def __post_init__(self) -> None:
        if self.horizon_s < 1 or self.window_s < 1 or self.resolution_s < 1 or self.level_s < 1:
            raise ValueError("horizon_s, window_s, resolution_s and level_s must be at least 1")
        if self.wape_threshold <= 0 or self.retrain_after < 1:
            raise ValueError("wape_threshold must be positive and retrain_after at least 1")

    @property
    def window_points(self) -> int:
        """Model steps in the window (at least three)."""
        return max(3, self.window_s // self.resolution_s)

    @property
    def fit_after_s(self) -> int:
        """Finite seconds of history before the first fit."""
        wanted = self.min_fit_s if self.min_fit_s is not None else self.window_s // 2
        return max(wanted, MIN_MODEL_STEPS * self.resolution_s)

    @property
    def fits_model(self) -> bool:
        """Whether the window holds the :data:`MIN_MODEL_STEPS` a model is fitted on."""
        return self.window_points >= MIN_MODEL_STEPS


DEFAULT_FORECASTER = ForecasterConfig()
"""The defaults, for whatever states them again (the agent's settings)."""
