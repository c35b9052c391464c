"""The linear fallback: least squares over the recent workload, extrapolated (Daedalus section 3.3)."""

from __future__ import annotations

from typing import Any

import numpy as np


class LinearForecaster:
    """A straight line through the last ``window`` samples, extended into the future (never below 0)."""

    name = "linear"

    def __init__(self, window: int = 600, min_samples: int = 10) -> None:
        """``window``: samples the line is fitted on; ``min_samples``: finite samples needed for a line."""
        if window < 2:
            raise ValueError(f"window must be at least 2, got {window}")
        self.window = int(window)
        self.min_samples = max(2, int(min_samples))
        self._y = np.empty(0)

    def fit(self, y: np.ndarray) -> LinearForecaster:
        """Keep the last ``window`` samples of ``y`` (NaN allowed: skipped in the fit)."""
        self._y = np.asarray(y, dtype=float).ravel()[-self.window :].copy()
        return self

    def update(self, y: np.ndarray) -> None:
        """Append new samples, keeping the last ``window``."""
        self._y = np.concatenate([self._y, np.asarray(y, dtype=float).ravel()])[-self.window :]

    @property
    def ready(self) -> bool:
        """True when there are enough finite samples for a line."""
        return int(np.count_nonzero(np.isfinite(self._y))) >= self.min_samples

    def line(self) -> tuple[float, float] | None:
        """(slope per step, value at the last sample) of the least-squares line, or None."""
        if not self.ready:
            return None
        x = np.arange(self._y.size, dtype=float)
        finite = np.isfinite(self._y)
        x, y = x[finite], self._y[finite]
        x_mean, y_mean = x.mean(), y.mean()
        dx = x - x_mean
        denominator = float(dx @ dx)
        slope = float(dx @ (y - y_mean)) / denominator if denominator > 0 else 0.0
        return slope, y_mean + slope * (self._y.size - 1 - x_mean)

    def predict(self, horizon: int) -> np.ndarray:
        """The line at the next ``horizon`` steps (NaN if not :attr:`ready`)."""
        line = self.line()
        if line is None:
            return np.full(int(horizon), np.nan)
        slope, last = line
        return np.maximum(last + slope * np.arange(1, int(horizon) + 1, dtype=float), 0.0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state."""
        return {
            "name": self.name,
            "window": self.window,
            "min_samples": self.min_samples,
            "y": [None if not np.isfinite(v) else float(v) for v in self._y],
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> LinearForecaster:
        """Rebuild from :meth:`to_dict`."""
        model = cls(window=int(state["window"]), min_samples=int(state["min_samples"]))
        model._y = np.array([np.nan if v is None else float(v) for v in state["y"]], dtype=float)
        return model
