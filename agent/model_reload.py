"""Hot reload: switch the running agent to a registry model when it would have forecast this job better.

The analyzer calls :meth:`ModelReloader.check` once per round with the recent workload and the
running model. If the registry holds a committed version newer than the one in use, it is scored
like with like against the running model (:mod:`models.forecast.scoring`): the running model on the
forecasts it issued over the last hour, the candidate replayed over the same window, both at the
same origins, horizon and step. A candidate that beats the running model's WAPE by
``min_improvement`` is returned as a :class:`ReloadedForecaster` and the switch is logged with both
scores; otherwise it is kept out and scored again later, since the running model may degrade. The
replay costs a residual fit and a forecast per origin, so a candidate is scored at most once every
``score_every_loops`` rounds. A damaged or unscored artifact is logged once and skipped for good; an
unreadable registry is logged and tried again next round. ``check`` never raises into the loop and
reads no clock: ``now`` comes from the loop.
"""

from __future__ import annotations

import math
import time
from typing import Any

from agent.logging import get_logger
from models.forecast.base import Forecaster
from models.forecast.reloaded import ReloadedForecaster
from models.forecast.scoring import RecentWorkload, WindowScore
from models.registry import Artifact, CorruptArtifact, RegistryReader

__all__ = ["ModelReloader", "ReloadedForecaster"]

SCORE_EVERY_LOOPS = 5
"""Rounds between two scorings of the same candidate (one new origin every 5 minutes at the defaults)."""


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
        score_every_loops: int = SCORE_EVERY_LOOPS,
    ) -> None:
        self.registry = registry if isinstance(registry, RegistryReader) else RegistryReader(registry)
        self.job = job
        self.current_version = current_version
        """Version in use, or None while the agent runs its own online model."""
        self.agent_step_s = agent_step_s
        self.min_improvement = min_improvement
        """A new model must beat the running model's WAPE by this much (absolute), to avoid flapping."""
        self.score_every_loops = max(1, int(score_every_loops))
        self.last_score_ms: float | None = None
        """Wall time of the newest scoring (both scores and the replay), for logs and the benchmark."""
        self.log = get_logger("perdix.model_reload", job=job)
        self._bad: set[str] = set()
        self._reported: set[tuple[str, str]] = set()
        self._loaded: dict[str, Artifact] = {}
        self._loops = 0
        self._scored_at: dict[str, int] = {}

    def _once(self, version: str, event: str, **fields: Any) -> None:
        """Log ``event`` for ``version`` once, so a loop every minute does not repeat itself."""
        if (version, event) not in self._reported:
            self._reported.add((version, event))
            level = "warning" if event in ("model_reload.corrupt", "model_reload.unscored") else "info"
            getattr(self.log, level)(event, version=version, **fields)

    def _candidate(self) -> Artifact | None:
        """The newest committed, usable version newer than the one in use (loaded once), or None."""
        try:
            versions = self.registry.versions(self.job)
        except OSError as exc:
            self.log.warning("model_reload.registry_unreadable", registry=self.registry.uri, error=str(exc))
            return None
        for version in reversed(versions):
            if version in self._bad or (self.current_version is not None and version <= self.current_version):
                continue
            if version in self._loaded:
                return self._loaded[version]
            try:
                artifact = self.registry.load(self.job, version)
                score = artifact.metadata.get("backtest", {}).get("wape")
                if not isinstance(score, int | float) or not math.isfinite(score):
                    self._bad.add(version)
                    self._once(version, "model_reload.unscored", reason="artifact has no finite back-test WAPE")
                    continue
                # A state that does not build is as damaged as a bad checksum.
                ReloadedForecaster.from_artifact(
                    artifact.model, job=self.job, version=version, backtest_wape=float(score), agent_step_s=1.0
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
            # Only the newest usable version is a candidate; an older one is never worth a switch.
            self._loaded = {version: artifact}
            return artifact
        return None

    def check(
        self, recent: RecentWorkload, *, online: Forecaster | None, now: float | None = None
    ) -> ReloadedForecaster | None:
        """The newest registry model if it beats ``online`` on the recent window, else None.

        ``online`` None (the agent has no model of its own yet) takes the newest scored version
        at once: there is nothing to compare it with. ``now`` is the epoch second of the next sample
        the agent will feed (aligns the daily profile).
        """
        self._loops += 1
        artifact = self._candidate()
        if artifact is None:
            return None
        version = artifact.version
        backtest = float(artifact.metadata["backtest"]["wape"])
        if online is None:
            return self._switch(artifact, now, reason=f"the agent has no model yet; back-test WAPE {backtest:.4f}")
        last = self._scored_at.get(version)
        if last is not None and self._loops - last < self.score_every_loops:
            return None
        started = time.perf_counter()  # the scoring's cost, for the log only
        running = recent.score_issued(online)
        if running is None:
            self._once(
                version, "model_reload.waiting",
                reason=f"the running model has fewer than {recent.spec.min_origins} scored forecasts in the window",
            )
            return None
        self._scored_at[version] = self._loops
        try:
            candidate = recent.score_replay(
                lambda next_s: ReloadedForecaster.from_artifact(
                    artifact.model, job=self.job, version=version, backtest_wape=backtest, agent_step_s=1.0, next_s=next_s
                ),
                running.origins,
            )
        except Exception as exc:  # noqa: BLE001 - a model that fails on this job's data is not adopted
            self._bad.add(version)
            self._once(version, "model_reload.corrupt", reason=f"replay failed: {type(exc).__name__}: {exc}")
            return None
        self.last_score_ms = (time.perf_counter() - started) * 1000.0
        scores = _scores(running, candidate, backtest, self.last_score_ms)
        if candidate is None or not candidate.wape < running.wape - self.min_improvement:
            self._once(
                version, "model_reload.kept",
                reason="the running model forecast the last hour at least as well" if candidate is not None
                else "the candidate could not forecast the recent window",
                **scores,
            )
            return None
        return self._switch(
            artifact, now,
            reason=f"window WAPE {candidate.wape:.4f} beats the running model's {running.wape:.4f} "
            f"({len(running.origins)} origins, {running.horizon_s} s ahead in {running.step_s} s steps)",
            **scores,
        )

    def _switch(self, artifact: Artifact, now: float | None, *, reason: str, **fields: Any) -> ReloadedForecaster:
        forecaster = ReloadedForecaster.from_artifact(
            artifact.model, job=self.job, version=artifact.version,
            backtest_wape=float(artifact.metadata["backtest"]["wape"]), agent_step_s=self.agent_step_s, next_s=now,
        )
        previous, self.current_version = self.current_version, artifact.version
        self._loaded = {}
        self.log.info(
            "model_reload.switched",
            version=artifact.version,
            previous=previous,
            data_end=artifact.metadata.get("data", {}).get("end"),
            reason=reason,
            **fields,
        )
        return forecaster


def _scores(running: WindowScore, candidate: WindowScore | None, backtest: float, score_ms: float) -> dict[str, Any]:
    """The fields every reload decision logs: both window WAPEs, what they were measured on, the cost."""
    return {
        "running_wape": round(running.wape, 4),
        "candidate_wape": None if candidate is None else round(candidate.wape, 4),
        "origins": len(running.origins),
        "horizon_s": running.horizon_s,
        "step_s": running.step_s,
        "backtest_wape": backtest,
        "score_ms": round(score_ms, 1),
    }
