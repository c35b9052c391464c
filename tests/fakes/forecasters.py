"""Forecasters with a known error, and the analyzer's way of feeding a window, for the reload-scoring tests.

Lives in tests/ only: the product's forecasters are in models/forecast.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models.forecast.scoring import RecentWorkload
from models.forecast.seasonal import NaiveForecaster


class ScaledPersistence:
    """Persistence times ``factor``: forecasts ``factor`` x the last value (a model with a known bias)."""

    name = "scaled"

    def __init__(self, factor: float) -> None:
        self.factor = factor
        self.inner = NaiveForecaster()

    def fit(self, y: np.ndarray) -> ScaledPersistence:
        """Remember the last finite value of ``y``."""
        self.inner.fit(y)
        return self

    def update(self, y: np.ndarray) -> None:
        """Move to the last finite value of ``y``."""
        self.inner.update(y)

    def predict(self, horizon: int) -> np.ndarray:
        """``factor`` x the last value, ``horizon`` times."""
        return self.inner.predict(horizon) * self.factor

    def to_dict(self) -> dict[str, Any]:
        """The factor (nothing else is learned that matters here)."""
        return {"factor": self.factor, "last": self.inner.last}


def feed(recent: RecentWorkload, model: Any, series: np.ndarray, *, start_s: float, loop_s: int = 60) -> None:
    """Feed a 1-s ``series`` from ``start_s`` loop by loop as the analyzer does, recording ``model``'s forecasts."""
    for first in range(0, series.size, loop_s):
        chunk = series[first : first + loop_s]
        times = start_s + first + np.arange(chunk.size)
        recent.extend(times, chunk)
        model.update(chunk)
        recent.record(times[-1] + 1, model, model.predict(recent.spec.horizon_s))
