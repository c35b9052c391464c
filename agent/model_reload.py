"""Hot reload: switch the running agent to a model from the registry when its back-test beats the current one.

The loop calls :meth:`ModelReloader.check` once per round with the current forecaster's recent
WAPE. If the registry holds a committed version newer than the one in use whose back-test WAPE is
lower, ``check`` returns it as a :class:`ReloadedForecaster` (a Forecaster at the agent's 1 s step)
and logs why; otherwise it returns None. A damaged artifact is logged once and skipped for good; an
unreadable registry is logged and tried again next round. ``check`` never raises into the loop and
reads no clock: ``now`` comes from the loop.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agent.logging import get_logger
from models.forecast.seasonal import SeasonalForecaster
from models.registry import CorruptArtifact, RegistryReader


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
        """Rebuild from :meth:`to_dict`."""
        forecaster = cls(
            SeasonalForecaster.from_dict(state["model"]),
            job=str(state["job"]),
            version=str(state["version"]),
            backtest_wape=float(state["backtest_wape"]),
            agent_step_s=float(state["agent_step_s"]),
        )
        forecaster._buffer = np.array([np.nan if v is None else float(v) for v in state["buffer"]], dtype=float)
        return forecaster


class ModelReloader:
    """Watches the registry for one job; ``check`` once per loop round."""

    def __init__(
        self,
        registry: RegistryReader | str,
        job: str,
        *,
        current_version: str | None = None,
        agent_step_s: float = 1.0,
        min_improvement: float = 0.0,
    ) -> None:
        self.registry = registry if isinstance(registry, RegistryReader) else RegistryReader(registry)
        self.job = job
        self.current_version = current_version
        """Version in use, or None while the agent runs its own online model."""
        self.agent_step_s = agent_step_s
        self.min_improvement = min_improvement
        """A new model must beat the current WAPE by this much (absolute), to avoid flapping."""
        self.log = get_logger("perdix.model_reload", job=job)
        self._bad: set[str] = set()
        self._reported: set[tuple[str, str]] = set()

    def _once(self, version: str, event: str, **fields: Any) -> None:
        """Log ``event`` for ``version`` once, so a loop every minute does not repeat itself."""
        if (version, event) not in self._reported:
            self._reported.add((version, event))
            level = "warning" if event in ("model_reload.corrupt", "model_reload.unscored") else "info"
            getattr(self.log, level)(event, version=version, **fields)

    def check(self, current_wape: float | None, *, now: float | None = None) -> ReloadedForecaster | None:
        """A newer registry model whose back-test WAPE beats ``current_wape``, or None.

        ``current_wape`` None (the running model has no score yet) accepts any newer, scored model.
        ``now`` is the epoch second of the next sample the agent will feed (aligns the daily profile).
        """
        try:
            versions = self.registry.versions(self.job)
        except OSError as exc:
            self.log.warning("model_reload.registry_unreadable", registry=self.registry.uri, error=str(exc))
            return None
        candidates = [
            v for v in reversed(versions) if v not in self._bad and (self.current_version is None or v > self.current_version)
        ]
        for version in candidates:
            try:
                artifact = self.registry.load(self.job, version)
                score = artifact.metadata.get("backtest", {}).get("wape")
                if not isinstance(score, int | float) or not math.isfinite(score):
                    self._bad.add(version)
                    self._once(version, "model_reload.unscored", reason="artifact has no finite back-test WAPE")
                    continue
                if current_wape is not None and math.isfinite(current_wape) and not (
                    score < current_wape - self.min_improvement
                ):
                    # The newest usable model is not better; older candidates are not considered.
                    self._once(
                        version,
                        "model_reload.kept",
                        reason=f"back-test WAPE {score:.4f} does not beat the current model's recent WAPE {current_wape:.4f}",
                        backtest_wape=score,
                        current_wape=current_wape,
                    )
                    return None
                model = SeasonalForecaster.from_dict(artifact.model)
                forecaster = ReloadedForecaster(
                    model, job=self.job, version=version, backtest_wape=float(score), agent_step_s=self.agent_step_s
                )
            except OSError as exc:
                if not isinstance(exc, CorruptArtifact):
                    self.log.warning("model_reload.registry_unreadable", registry=self.registry.uri, error=str(exc))
                    return None
                self._bad.add(version)
                self._once(version, "model_reload.corrupt", reason=f"skipped: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - a broken model state (bad JSON shape, bad pickle) must never crash the loop
                self._bad.add(version)
                self._once(version, "model_reload.corrupt", reason=f"skipped: {exc}")
                continue
            if now is not None:
                model.align(now)
            previous = self.current_version
            self.current_version = version
            reason = (
                f"back-test WAPE {score:.4f} beats the current model's recent WAPE {current_wape:.4f}"
                if current_wape is not None and math.isfinite(current_wape)
                else f"the current model has no recent WAPE yet; back-test WAPE {score:.4f}"
            )
            self.log.info(
                "model_reload.switched",
                version=version,
                previous=previous,
                backtest_wape=score,
                current_wape=current_wape,
                data_end=artifact.metadata.get("data", {}).get("end"),
                reason=reason,
            )
            return forecaster
        return None
