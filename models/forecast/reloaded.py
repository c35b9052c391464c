"""A registry model behind the Forecaster verbs at the agent's step: what hot reload hands the agent.

The Spark retraining fits :class:`~models.forecast.seasonal.SeasonalForecaster` on 1-min history;
the agent feeds its forecaster 10-s means and plans on 1-s forecasts. This adapter converts both
ways, and it is a forecaster like the others: it has a ``name`` in the manager's registry of
classes (``MODEL_CLASSES``), so the knowledge document restores it after a restart.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from models.forecast.seasonal import SeasonalForecaster
from models.forecast.states import ReloadedState, read_state


class ReloadedForecaster:
    """A registry model (fitted at ``model.step_s``) behind the Forecaster verbs at the agent's step.

    Samples arrive every ``agent_step_s``; each full model step is averaged and fed to the model, the
    partial one waits in a buffer. Forecasts are the model's steps held constant over their seconds.
    """

    name = "registry"

    def __init__(
        self, model: SeasonalForecaster, *, job: str, version: str, backtest_wape: float, agent_step_s: float = 1.0
    ) -> None:
        ratio = model.step_s / agent_step_s
        if ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
            raise ValueError(f"model step {model.step_s} s is not a multiple of the agent step {agent_step_s} s")
        self.model = model
        self.job = job
        self.version = version
        self.backtest_wape = backtest_wape
        self.agent_step_s = agent_step_s
        self.ratio = int(round(ratio))
        self._buffer = np.empty(0)

    @classmethod
    def from_artifact(
        cls,
        state: dict[str, Any],
        *,
        job: str,
        version: str,
        backtest_wape: float,
        agent_step_s: float,
        next_s: float | None = None,
    ) -> ReloadedForecaster:
        """A fresh adapter over a registry artifact's model state; ``next_s``: epoch second of the next sample."""
        forecaster = cls(
            SeasonalForecaster.from_dict(state),
            job=job,
            version=version,
            backtest_wape=backtest_wape,
            agent_step_s=agent_step_s,
        )
        if next_s is not None:
            forecaster.model.align(next_s)
        return forecaster

    def fit(self, y: np.ndarray) -> ReloadedForecaster:
        """Restart the residual model on ``y``; the daily profile learned from weeks of history is kept.

        Refitting the whole model on the agent's 15-min window would throw that profile away.
        """
        steps = self._steps(np.asarray(y, dtype=float).ravel(), keep_partial=False)
        if np.isfinite(steps).any():
            self.model.refit_residual(steps)
        return self

    def _steps(self, y: np.ndarray, *, keep_partial: bool) -> np.ndarray:
        data = np.concatenate([self._buffer, y]) if keep_partial else y
        full = data.size // self.ratio * self.ratio
        if keep_partial:
            self._buffer = data[full:].copy()
        else:
            self._buffer = np.empty(0)
        blocks = data[:full].reshape(-1, self.ratio) if full else np.empty((0, self.ratio))
        with np.errstate(invalid="ignore"):
            counts = np.isfinite(blocks).sum(axis=1)
            sums = np.where(np.isfinite(blocks), blocks, 0.0).sum(axis=1)
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)

    def update(self, y: np.ndarray) -> None:
        """Feed new samples at the agent's step (NaN gaps allowed)."""
        steps = self._steps(np.asarray(y, dtype=float).ravel(), keep_partial=True)
        if steps.size:
            self.model.update(steps)

    def predict(self, horizon: int) -> np.ndarray:
        """Forecast ``horizon`` agent steps ahead."""
        horizon = int(horizon)
        if horizon <= 0:
            return np.empty(0)
        elapsed = self._buffer.size
        model_steps = math.ceil((horizon + elapsed) / self.ratio)
        values = np.repeat(self.model.predict(model_steps), self.ratio)
        return values[elapsed : elapsed + horizon]

    def to_dict(self) -> dict[str, Any]:
        """State for the knowledge store (the model, where it came from, the partial step)."""
        return {
            "name": self.name,
            "job": self.job,
            "version": self.version,
            "backtest_wape": self.backtest_wape,
            "agent_step_s": self.agent_step_s,
            "buffer": [float(v) if math.isfinite(v) else None for v in self._buffer],
            "model": self.model.to_dict(),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> ReloadedForecaster:
        """Rebuild from :meth:`to_dict`, validated first (raises ValueError, ``StateError`` for a misfit field)."""
        checked = read_state(ReloadedState, state)
        forecaster = cls(
            SeasonalForecaster.from_dict(checked.model),
            job=checked.job,
            version=checked.version,
            backtest_wape=checked.backtest_wape,
            agent_step_s=checked.agent_step_s,
        )
        forecaster._buffer = np.array([np.nan if v is None else v for v in checked.buffer], dtype=float)
        return forecaster
