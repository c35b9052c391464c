"""ARIMA workload forecaster on pmdarima (the default; Daedalus section 3.3).

``fit`` runs ``auto_arima`` (stepwise order search); ``update`` moves the fitted model onto the
newest ``window`` samples: by default with its parameters fixed (a Kalman-filter pass, a few
milliseconds), or, with ``update_maxiter`` > 0, re-estimating them for that many optimiser
iterations from the current values (what pmdarima's own ``update`` does, but on a bounded window,
so the cost does not grow with the job's age).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from models.forecast._blas import single_threaded_blas
from models.forecast.states import ArimaState, read_state


class ArimaForecaster:
    """pmdarima auto-ARIMA over a bounded window of a (gap-free) workload series."""

    name = "arima"

    def __init__(
        self,
        window: int | None = None,
        *,
        max_p: int = 3,
        max_q: int = 3,
        max_d: int = 1,
        update_maxiter: int = 0,
    ) -> None:
        """``window``: samples the model keeps (None: all); ``max_d`` 1 keeps 15-min forecasts from
        extrapolating curvature; ``update_maxiter``: optimiser iterations per update (0: filter only)."""
        self.window = None if window is None else int(window)
        self.max_p, self.max_q, self.max_d = int(max_p), int(max_q), int(max_d)
        self.update_maxiter = int(update_maxiter)
        self.model: Any = None
        self._y = np.empty(0)

    def _bounded(self, y: np.ndarray) -> np.ndarray:
        return y if self.window is None else y[-self.window :]

    def fit(self, y: np.ndarray) -> ArimaForecaster:
        """Search the order with ``auto_arima`` and fit it on the last ``window`` samples of ``y``."""
        import pmdarima as pm

        series = self._bounded(_finite_series(y))
        with warnings.catch_warnings(), single_threaded_blas():
            warnings.simplefilter("ignore")
            self.model = pm.auto_arima(
                series,
                seasonal=False,
                stepwise=True,
                max_p=self.max_p,
                max_q=self.max_q,
                max_d=self.max_d,
                suppress_warnings=True,
                error_action="ignore",
            )
        self._y = series.copy()
        return self

    @property
    def fitted(self) -> bool:
        """True once :meth:`fit` succeeded."""
        return self.model is not None

    @property
    def order(self) -> tuple[int, int, int] | None:
        """The (p, d, q) order found by the search."""
        return None if self.model is None else tuple(self.model.order)

    def update(self, y: np.ndarray) -> None:
        """Append samples and move the model onto the newest window (see the module docstring)."""
        new = _finite_series(y)
        if new.size == 0:
            return
        self._y = self._bounded(np.concatenate([self._y, new]))
        if self.model is None:
            return
        if self.update_maxiter > 0:
            with single_threaded_blas():
                self.model = _refit(
                    self._y,
                    order=self.model.order,
                    with_intercept=self.model.with_intercept,
                    start_params=self.model.params(),
                    maxiter=self.update_maxiter,
                )
        else:
            # Same parameters, new data: the state is re-filtered on the window (statsmodels apply).
            with single_threaded_blas():
                self.model.arima_res_ = self.model.arima_res_.apply(self._y, refit=False)

    def predict(self, horizon: int) -> np.ndarray:
        """Mean forecast of the next ``horizon`` steps (NaN before :meth:`fit`)."""
        if self.model is None:
            return np.full(int(horizon), np.nan)
        with single_threaded_blas():
            return np.asarray(self.model.predict(n_periods=int(horizon)), dtype=float)

    def to_dict(self) -> dict[str, Any]:
        """Order, parameters and window: enough to rebuild the model without a new order search."""
        state: dict[str, Any] = {
            "name": self.name,
            "window": self.window,
            "max_p": self.max_p,
            "max_q": self.max_q,
            "max_d": self.max_d,
            "update_maxiter": self.update_maxiter,
            "y": self._y.tolist(),
        }
        if self.model is not None:
            state["order"] = list(self.model.order)
            state["with_intercept"] = bool(self.model.with_intercept)
            state["params"] = np.asarray(self.model.params(), dtype=float).tolist()
        return state

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> ArimaForecaster:
        """Rebuild from :meth:`to_dict`, validated first (parameters re-applied to the stored window, no order
        search); raises ``StateError`` on a misfit field."""
        checked = read_state(ArimaState, state)
        model = cls(
            checked.window,
            max_p=checked.max_p,
            max_q=checked.max_q,
            max_d=checked.max_d,
            update_maxiter=checked.update_maxiter,
        )
        model._y = np.asarray(checked.y, dtype=float)
        if checked.order is not None and checked.params is not None and model._y.size:
            fitted = _refit(
                model._y,
                order=checked.order,
                with_intercept=bool(checked.with_intercept),
                start_params=checked.params,
                maxiter=1,
            )
            # One optimiser step moved the parameters a little; put the stored ones back exactly.
            fitted.arima_res_ = fitted.arima_res_.model.filter(np.asarray(checked.params, dtype=float))
            model.model = fitted
        return model


def _refit(y: np.ndarray, *, order: Any, with_intercept: bool, start_params: Any, maxiter: int) -> Any:
    """A pmdarima ARIMA of a known order fitted on ``y`` starting from ``start_params``."""
    import pmdarima as pm

    model = pm.ARIMA(
        order=tuple(order),
        seasonal_order=(0, 0, 0, 0),
        with_intercept=with_intercept,
        start_params=np.asarray(start_params, dtype=float),
        maxiter=max(1, maxiter),
        suppress_warnings=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(y)
    return model


def _finite_series(y: Any) -> np.ndarray:
    """``y`` with gaps filled by linear interpolation (ARIMA needs an unbroken series)."""
    series = np.asarray(y, dtype=float).ravel()
    finite = np.isfinite(series)
    if finite.all() or not finite.any():
        return series[finite] if not finite.all() else series
    index = np.arange(series.size)
    return np.interp(index, index[finite], series[finite])
