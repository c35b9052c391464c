"""The Forecaster protocol: every workload forecaster the agent or the Spark jobs can plug in.

Shaped after statsforecast: ``fit`` on a history, ``predict`` a horizon, ``update`` with fresh
samples without refitting, ``to_dict``/``from_dict`` for the knowledge store and model registry.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Forecaster(Protocol):
    """Forecasts a workload series sampled every ``step_s`` seconds."""

    name: str

    def fit(self, y: np.ndarray) -> "Forecaster":
        """Fit on the history ``y`` (oldest first, finite values); returns self."""
        ...

    def update(self, y: np.ndarray) -> None:
        """Append new observations without a full refit."""
        ...

    def predict(self, horizon: int) -> np.ndarray:
        """Mean forecast for the next ``horizon`` steps."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state of plain data (numbers, arrays, strings), validated when read back."""
        ...
