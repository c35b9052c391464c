"""AutoARIMA from statsforecast: the faster alternative the benchmark compares with pmdarima.

``update`` keeps the newest ``window`` samples; ``predict`` applies the fitted parameters to them
(statsforecast's ``forward``) without a new search.
"""

from __future__ import annotations

import base64
import pickle
from typing import Any

import numpy as np

from models.forecast._blas import single_threaded_blas
from models.forecast.arima import _finite_series


class StatsForecastArima:
    """statsforecast AutoARIMA (non-seasonal) over a bounded window."""

    name = "statsforecast-arima"

    def __init__(self, window: int | None = None, *, max_d: int = 1) -> None:
        """``window``: samples kept (None: all); ``max_d``: highest differencing order searched."""
        self.window = None if window is None else int(window)
        self.max_d = int(max_d)
        self.model: Any = None
        self._y = np.empty(0)

    def _bounded(self, y: np.ndarray) -> np.ndarray:
        return y if self.window is None else y[-self.window :]

    def fit(self, y: np.ndarray) -> StatsForecastArima:
        """Search and fit AutoARIMA on the last ``window`` samples."""
        from statsforecast.models import AutoARIMA

        self._y = self._bounded(_finite_series(y)).copy()
        self.model = AutoARIMA(season_length=1, max_d=self.max_d)
        with single_threaded_blas():
            self.model.fit(self._y)
        return self

    def update(self, y: np.ndarray) -> None:
        """Append samples, keeping the newest ``window``."""
        new = _finite_series(y)
        if new.size:
            self._y = self._bounded(np.concatenate([self._y, new]))

    def predict(self, horizon: int) -> np.ndarray:
        """Mean forecast of the next ``horizon`` steps from the newest window (NaN before :meth:`fit`)."""
        if self.model is None:
            return np.full(int(horizon), np.nan)
        with single_threaded_blas():
            return np.asarray(self.model.forward(self._y, int(horizon))["mean"], dtype=float)

    def to_dict(self) -> dict[str, Any]:
        """State with the fitted library model as a base64 pickle."""
        return {
            "name": self.name,
            "window": self.window,
            "max_d": self.max_d,
            "y": self._y.tolist(),
            "model": None if self.model is None else base64.b64encode(pickle.dumps(self.model)).decode(),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> StatsForecastArima:
        """Rebuild from :meth:`to_dict` (the pickle is trusted: it is our own knowledge file)."""
        model = cls(state.get("window"), max_d=int(state.get("max_d", 1)))
        model._y = np.asarray(state.get("y", []), dtype=float)
        if state.get("model"):
            model.model = pickle.loads(base64.b64decode(state["model"]))
        return model
