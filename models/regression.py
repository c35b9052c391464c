"""Online simple linear regression (Welford/Chan): the per-worker throughput~CPU model of Daedalus.

Daedalus section 3.1: throughput is linear in CPU utilisation, so a worker's capacity is the
regression ``y = intercept + slope * x`` read at the CPU it may reach. The running means, the
co-moment and the second moments are updated in one pass with Welford's algorithm and combined
with Chan et al.'s parallel formula, so no sample is kept and two partial states merge exactly
(what a Spark job folding partitions, or a vectorised batch update, needs).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class WelfordRegression:
    """Exact, numerically stable, mergeable least-squares line ``y = intercept + slope * x``.

    Parameters
    ----------
    min_samples:
        Fewer samples than this give no prediction.
    min_x_variance:
        A population variance of ``x`` below this gives no prediction (no line from a flat series).

    Examples
    --------
    >>> model = WelfordRegression()
    >>> model.update_many([0.2, 0.4, 0.6], [20.0, 40.0, 60.0])
    3
    >>> round(model.predict(1.0), 9)
    100.0
    """

    __slots__ = ("n", "mean_x", "mean_y", "m2_x", "m2_y", "c_xy", "skipped", "min_samples", "min_x_variance")

    def __init__(self, *, min_samples: int = 2, min_x_variance: float = 0.0) -> None:
        if min_samples < 2:
            raise ValueError(f"min_samples must be at least 2 (a line needs two points), got {min_samples}")
        if not min_x_variance >= 0:
            raise ValueError(f"min_x_variance must be non-negative, got {min_x_variance}")
        self.min_samples = int(min_samples)
        self.min_x_variance = float(min_x_variance)
        self.n = 0
        self.mean_x = 0.0
        self.mean_y = 0.0
        self.m2_x = 0.0
        """Sum of squared deviations of x from its mean."""
        self.m2_y = 0.0
        self.c_xy = 0.0
        """Sum of products of the deviations of x and y (the co-moment)."""
        self.skipped = 0
        """Pairs ignored because x or y was not finite."""

    # ------------------------------------------------------------------ learning

    def update(self, x: float, y: float) -> bool:
        """Add one pair (Welford's step); a non-finite pair is counted in ``skipped`` and ignored."""
        x, y = float(x), float(y)
        if not (math.isfinite(x) and math.isfinite(y)):
            self.skipped += 1
            return False
        if max(abs(x), abs(y)) > 1e150:
            # Squares of such values overflow; see update_many.
            self.skipped += 1
            return False
        self.n += 1
        dx = x - self.mean_x
        dy = y - self.mean_y
        self.mean_x += dx / self.n
        self.mean_y += dy / self.n
        # Mixing the old and new deviations keeps the update exact (Welford 1962).
        self.m2_x += dx * (x - self.mean_x)
        self.m2_y += dy * (y - self.mean_y)
        self.c_xy += dx * (y - self.mean_y)
        return True

    def update_many(self, xs: Any, ys: Any) -> int:
        """Add many pairs at once (two-pass moments of the batch, then Chan's merge); returns pairs used."""
        x = np.asarray(xs, dtype=float).ravel()
        y = np.asarray(ys, dtype=float).ravel()
        if x.shape != y.shape:
            raise ValueError(f"xs and ys differ in length ({x.size} != {y.size})")
        finite = np.isfinite(x) & np.isfinite(y)
        self.skipped += int(x.size - np.count_nonzero(finite))
        x, y = x[finite], y[finite]
        if x.size == 0:
            return 0
        with np.errstate(over="ignore", invalid="ignore"):
            batch = WelfordRegression._from_batch(x, y)
        if not all(math.isfinite(v) for v in (batch.mean_x, batch.mean_y, batch.m2_x, batch.m2_y, batch.c_xy)):
            # Values so large their moments overflow would poison the state for good: drop the batch.
            self.skipped += int(x.size)
            return 0
        self._absorb(batch)
        return int(x.size)

    @staticmethod
    def _from_batch(x: np.ndarray, y: np.ndarray) -> WelfordRegression:
        batch = WelfordRegression()
        batch.n = int(x.size)
        # sum / size is ndarray.mean's own arithmetic, without its overhead on a loop's few samples.
        batch.mean_x = float(x.sum()) / x.size
        batch.mean_y = float(y.sum()) / y.size
        dx = x - batch.mean_x
        dy = y - batch.mean_y
        batch.m2_x = float(dx @ dx)
        batch.m2_y = float(dy @ dy)
        batch.c_xy = float(dx @ dy)
        return batch

    def _absorb(self, other: WelfordRegression) -> None:
        """Chan, Golub and LeVeque's pairwise update: fold ``other``'s moments into this state."""
        if other.n == 0:
            return
        if self.n == 0:
            self.n, self.mean_x, self.mean_y = other.n, other.mean_x, other.mean_y
            self.m2_x, self.m2_y, self.c_xy = other.m2_x, other.m2_y, other.c_xy
            return
        n = self.n + other.n
        dx = other.mean_x - self.mean_x
        dy = other.mean_y - self.mean_y
        weight = self.n * other.n / n
        self.mean_x += dx * other.n / n
        self.mean_y += dy * other.n / n
        self.m2_x += other.m2_x + dx * dx * weight
        self.m2_y += other.m2_y + dy * dy * weight
        self.c_xy += other.c_xy + dx * dy * weight
        self.n = n

    def merge(self, other: WelfordRegression) -> WelfordRegression:
        """A new regression equal to one pass over both inputs (Chan's parallel formula); guards from ``self``."""
        merged = self.copy()
        merged._absorb(other)
        merged.skipped += other.skipped
        return merged

    def copy(self) -> WelfordRegression:
        """An independent copy."""
        return WelfordRegression.from_dict(self.to_dict())

    # ------------------------------------------------------------------ reading

    @property
    def variance_x(self) -> float:
        """Population variance of x (0 with fewer than one sample)."""
        return self.m2_x / self.n if self.n else 0.0

    @property
    def ready(self) -> bool:
        """True when there are enough samples and enough spread in x for a line."""
        return self.n >= self.min_samples and self.m2_x > 0 and self.variance_x >= self.min_x_variance

    @property
    def slope(self) -> float | None:
        """cov(x, y) / var(x), or None when not :attr:`ready`."""
        return self.c_xy / self.m2_x if self.ready else None

    @property
    def intercept(self) -> float | None:
        """mean(y) − slope · mean(x), or None when not :attr:`ready`."""
        slope = self.slope
        return None if slope is None else self.mean_y - slope * self.mean_x

    def predict(self, x: float) -> float | None:
        """The line at ``x`` (Daedalus: capacity at the desired CPU), or None when not :attr:`ready`."""
        slope = self.slope
        if slope is None or not math.isfinite(float(x)):
            return None
        # Centred form: exact at the mean and better conditioned than intercept + slope * x.
        return self.mean_y + slope * (float(x) - self.mean_x)

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state."""
        return {
            "n": self.n,
            "mean_x": self.mean_x,
            "mean_y": self.mean_y,
            "m2_x": self.m2_x,
            "m2_y": self.m2_y,
            "c_xy": self.c_xy,
            "skipped": self.skipped,
            "min_samples": self.min_samples,
            "min_x_variance": self.min_x_variance,
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> WelfordRegression:
        """Rebuild a regression written by :meth:`to_dict`."""
        model = cls(
            min_samples=int(state.get("min_samples", 2)), min_x_variance=float(state.get("min_x_variance", 0.0))
        )
        model.n = int(state["n"])
        model.mean_x = float(state["mean_x"])
        model.mean_y = float(state["mean_y"])
        model.m2_x = float(state["m2_x"])
        model.m2_y = float(state["m2_y"])
        model.c_xy = float(state["c_xy"])
        model.skipped = int(state.get("skipped", 0))
        return model

    def __repr__(self) -> str:
        return f"WelfordRegression(n={self.n}, slope={self.slope}, intercept={self.intercept})"
