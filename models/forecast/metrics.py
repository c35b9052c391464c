"""Forecast accuracy: the weighted absolute percentage error Daedalus scores each forecast with."""

from __future__ import annotations

from typing import Any

import numpy as np


def wape(actual: Any, forecast: Any) -> float | None:
    """sum |actual − forecast| / sum |actual| over seconds where both are finite; None without a basis.

    Daedalus section 3.3: the error of every second is weighted by the total actual workload, so a
    quiet second does not dominate as it would in a mean of percentage errors.

    >>> wape([100.0, 100.0], [90.0, 120.0])
    0.15
    """
    a = np.asarray(actual, dtype=float).ravel()
    f = np.asarray(forecast, dtype=float).ravel()
    n = min(a.size, f.size)
    a, f = a[:n], f[:n]
    both = np.isfinite(a) & np.isfinite(f)
    if not both.any():
        return None
    total = float(np.abs(a[both]).sum())
    if total <= 0:
        return None
    return float(np.abs(a[both] - f[both]).sum() / total)
