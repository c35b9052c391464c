"""AutoARIMA from statsforecast: the faster alternative the benchmark compares with pmdarima.

``update`` keeps the newest ``window`` samples; ``predict`` applies the fitted parameters to them
(statsforecast's ``forward``) without a new search. Because ``forward`` reads nothing of the fitted
model but its order, coefficients and innovation variance (and, for a drift term, the length of the
series it was fitted on), those are what the state stores: plain numbers, rebuilt into the library's
fitted dictionary on load, so a restored model forecasts exactly as the one that was saved.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models.forecast._blas import single_threaded_blas
from models.forecast.arima import _finite_series
from models.forecast.states import StatsForecastFit, StatsForecastState, read_state


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
        """State with the fitted model as its order, coefficients and variance (see the module docstring)."""
        return {
            "name": self.name,
            "window": self.window,
            "max_d": self.max_d,
            "y": self._y.tolist(),
            "fitted": None if self.model is None else _fit_state(self.model.model_),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> StatsForecastArima:
        """Rebuild from :meth:`to_dict`'s form, validated first (raises ``StateError`` on a misfit field)."""
        checked = read_state(StatsForecastState, state)
        model = cls(checked.window, max_d=checked.max_d)
        model._y = np.asarray(checked.y, dtype=float)
        if checked.fitted is not None:
            model.model = _from_fit_state(checked.fitted, max_d=checked.max_d)
        return model


def _fit_state(fitted: dict[str, Any]) -> dict[str, Any]:
    """The plain-data part of statsforecast's fitted dictionary that ``forward`` reads."""
    if fitted.get("lambda") is not None:
        raise ValueError("a Box-Cox transformed model has no stored form (this forecaster never fits one)")
    xreg = fitted.get("xreg")
    return {
        "arma": [int(v) for v in fitted["arma"]],
        "coef": [[str(name), float(value)] for name, value in fitted["coef"].items()],
        "sigma2": float(fitted["sigma2"]),
        "x": np.asarray(fitted["x"], dtype=float).tolist(),
        "xreg": None if xreg is None else np.asarray(xreg, dtype=float).reshape(len(fitted["x"]), -1).tolist(),
    }


def _from_fit_state(fit: StatsForecastFit, *, max_d: int) -> Any:
    """A fitted AutoARIMA whose ``forward`` applies the stored coefficients (no search, nothing unpickled)."""
    from statsforecast.models import AutoARIMA

    model = AutoARIMA(season_length=1, max_d=max_d)
    model.model_ = {
        "arma": tuple(fit.arma),
        "coef": {name: value for name, value in fit.coef},
        "sigma2": fit.sigma2,
        "x": np.asarray(fit.x, dtype=float),
        "xreg": None if fit.xreg is None else np.asarray(fit.xreg, dtype=float),
        "lambda": None,
    }
    return model
