"""Hot reload: switch the running agent to a registry model when it would have forecast this job better.

The analyzer calls :meth:`ModelReloader.check` once per round with the recent workload and the
running model. If the registry holds a committed version newer than the one in use, it is scored
like with like against the running model (:mod:`models.forecast.scoring`): the running model on the
forecasts it issued over the last hour, the candidate replayed over the same window, both at the
same origins, horizon and step. A candidate that beats the running model's WAPE by
``min_improvement`` is returned as a :class:`ReloadedForecaster` and the switch is logged with both
scores; otherwise it is kept out and scored again later, since the running model may degrade. The
replay costs a residual fit (an AutoARIMA order search for the default residual) and a forecast per
origin, so it runs on an executor (a background thread in the daemon, never the loop's time) and a
candidate is scored at most once every ``score_every_loops`` rounds. An artifact is untrusted input: one that is
damaged, unscored or whose model state does not fit its schema is refused (logged once, counted by
:meth:`ModelReloader.take_refused`) and skipped for good, and the running model stays; an unreadable
registry is logged and tried again next round. ``check`` never raises into the loop and
reads no clock: ``now`` comes from the loop.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from agent.logging import get_logger
from models.forecast.base import Forecaster
from models.forecast.reloaded import ReloadedForecaster
from models.forecast.scoring import RecentWorkload, WindowScore
from models.registry import Artifact, CorruptArtifact, RegistryReader

__all__ = ["ModelReloader", "ReloadedForecaster"]

P = ParamSpec("P")
T = TypeVar("T")

SCORE_EVERY_LOOPS = 5
"""Rounds between two scorings of the same candidate (one new origin every 5 minutes at the defaults)."""


@dataclass(frozen=True, eq=False)
class _PendingScore:
    """A candidate's replay under way, and the running model's score it will be compared with."""

    version: str
    online: weakref.ref[Forecaster]
    running: WindowScore
    future: Future[tuple[WindowScore | None, float]]


def _timed_replay(
    recent: RecentWorkload, make: Callable[[float], Forecaster], origins: tuple[float, ...]
) -> tuple[WindowScore | None, float]:
    """The candidate's replay score and its wall time in milliseconds (for the log and the benchmark)."""
    started = time.perf_counter()
    score = recent.score_replay(make, origins)
    return score, (time.perf_counter() - started) * 1000.0


def _submit(executor: Executor | None, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
    """``executor.submit``, or run at once into a finished future without an executor."""
    if executor is not None:
        return executor.submit(fn, *args, **kwargs)
    future: Future[T] = Future()
    try:
        future.set_result(fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - handed to whoever reads the future, as an executor would
        future.set_exception(exc)
    return future


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
        executor: Executor | None = None,
    ) -> None:
        self.registry = registry if isinstance(registry, RegistryReader) else RegistryReader(registry)
        self.job = job
        self.current_version = current_version
        """Version in use, or None while the agent runs its own online model."""
        self.agent_step_s = agent_step_s
        self.min_improvement = min_improvement
        """A new model must beat the running model's WAPE by this much (absolute), to avoid flapping."""
        self.score_every_loops = max(1, int(score_every_loops))
        self.executor = executor
        """Where the candidate's replay runs (a background thread in the daemon); None: in the caller."""
        self.last_score_ms: float | None = None
        """Wall time of the newest candidate replay, for logs and the benchmark."""
        self.log = get_logger("perdix.model_reload", job=job)
        self._bad: set[str] = set()
        self._refused: list[str] = []
        """Why each version refused since the last :meth:`take_refused` was (``corrupt``, ``unscored``, ``replay``)."""
        self._reported: set[tuple[str, str]] = set()
        self._loaded: dict[str, Artifact] = {}
        self._loops = 0
        self._scored_at: dict[str, int] = {}
        self._pending: _PendingScore | None = None

    def _once(self, version: str, event: str, **fields: object) -> None:
        """Log ``event`` for ``version`` once, so a loop every minute does not repeat itself."""
        if (version, event) not in self._reported:
            self._reported.add((version, event))
            level = "warning" if event in ("model_reload.corrupt", "model_reload.unscored") else "info"
            getattr(self.log, level)(event, version=version, **fields)

    def _refuse(self, version: str, kind: str, reason: str) -> None:
        """Skip ``version`` for good: logged once as a warning, counted once."""
        self._bad.add(version)
        self._refused.append(kind)
        event = "model_reload.unscored" if kind == "unscored" else "model_reload.corrupt"
        self._once(version, event, reason=reason)

    def set_current_version(self, version: str) -> None:
        """The forecaster runs registry model ``version`` (restored with the knowledge): only a newer one replaces
        it."""
        self.current_version = version

    def take_refused(self) -> tuple[str, ...]:
        """The kinds of the artifacts refused since the last call (for the telemetry), oldest first."""
        refused, self._refused = tuple(self._refused), []
        return refused

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
                    self._refuse(version, "unscored", "artifact has no finite back-test WAPE")
                    continue
                # A state that does not build is as damaged as a bad checksum.
                ReloadedForecaster.from_artifact(
                    artifact.model, job=self.job, version=version, backtest_wape=float(score), agent_step_s=1.0
                )
            except OSError as exc:
                if not isinstance(exc, CorruptArtifact):
                    self.log.warning("model_reload.registry_unreadable", registry=self.registry.uri, error=str(exc))
                    return None
                self._refuse(version, "corrupt", f"skipped: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - a state that does not build must never crash the loop
                self._refuse(version, "corrupt", f"skipped: {type(exc).__name__}: {exc}")
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
        the agent will feed (aligns the daily profile). The candidate's replay runs on the executor;
        its verdict is taken in the first check after it is done.
        """
        self._loops += 1
        artifact = self._candidate()
        if artifact is None:
            return None
        if online is None:
            self._pending = None
            backtest = float(artifact.metadata["backtest"]["wape"])
            return self._switch(artifact, now, reason=f"the agent has no model yet; back-test WAPE {backtest:.4f}")
        finished = self._finished_replay(artifact, recent, online)
        if finished is None:
            return None
        running, candidate, score_ms = finished
        return self._judge(artifact, now, running, candidate, score_ms)

    def _finished_replay(
        self, artifact: Artifact, recent: RecentWorkload, online: Forecaster
    ) -> tuple[WindowScore, WindowScore | None, float] | None:
        """The running model's score, the candidate's and the replay's wall time once the replay of this
        candidate against this running model is done; None while it is not (started here when due)."""
        version = artifact.version
        if self._pending is None:
            if not self._start_scoring(artifact, recent, online):
                return None
        pending = self._pending
        assert pending is not None
        if pending.version != version or pending.online() is not online:
            # A newer version appeared, or the running model changed: that verdict would compare the wrong pair.
            self._pending = None
            return None
        if not pending.future.done():
            return None
        self._pending = None
        try:
            candidate, score_ms = pending.future.result()
        except Exception as exc:  # noqa: BLE001 - a model that fails on this job's data is not adopted
            self._refuse(version, "replay", f"replay failed: {type(exc).__name__}: {exc}")
            return None
        return pending.running, candidate, score_ms

    def _judge(
        self,
        artifact: Artifact,
        now: float | None,
        running: WindowScore,
        candidate: WindowScore | None,
        score_ms: float,
    ) -> ReloadedForecaster | None:
        """Switch to the candidate when its window WAPE beats the running model's by ``min_improvement``;
        otherwise keep the running model (logged once per version)."""
        version = artifact.version
        backtest = float(artifact.metadata["backtest"]["wape"])
        self.last_score_ms = score_ms
        scores = _scores(running, candidate, backtest, score_ms)
        if candidate is None or not candidate.wape < running.wape - self.min_improvement:
            self._once(
                version,
                "model_reload.kept",
                reason="the running model forecast the last hour at least as well"
                if candidate is not None
                else "the candidate could not forecast the recent window",
                **scores,
            )
            return None
        return self._switch(
            artifact,
            now,
            reason=f"window WAPE {candidate.wape:.4f} beats the running model's {running.wape:.4f} "
            f"({len(running.origins)} origins, {running.horizon_s} s ahead in {running.step_s} s steps)",
            **scores,
        )

    def _start_scoring(self, artifact: Artifact, recent: RecentWorkload, online: Forecaster) -> bool:
        """Score the running model now (cheap) and start the candidate's replay; False when not due or not scorable."""
        version = artifact.version
        last = self._scored_at.get(version)
        if last is not None and self._loops - last < self.score_every_loops:
            return False
        running = recent.score_issued(online)
        if running is None:
            self._once(
                version,
                "model_reload.waiting",
                reason=f"the running model has fewer than {recent.spec.min_origins} scored forecasts in the window",
            )
            return False
        self._scored_at[version] = self._loops
        backtest = float(artifact.metadata["backtest"]["wape"])

        def make(next_s: float) -> ReloadedForecaster:
            return ReloadedForecaster.from_artifact(
                artifact.model, job=self.job, version=version, backtest_wape=backtest, agent_step_s=1.0, next_s=next_s
            )

        # The replay reads a copy: the loop keeps extending the window while it runs.
        future = _submit(self.executor, _timed_replay, recent.snapshot(), make, running.origins)
        self._pending = _PendingScore(version=version, online=weakref.ref(online), running=running, future=future)
        return True

    def _switch(self, artifact: Artifact, now: float | None, *, reason: str, **fields: object) -> ReloadedForecaster:
        forecaster = ReloadedForecaster.from_artifact(
            artifact.model,
            job=self.job,
            version=artifact.version,
            backtest_wape=float(artifact.metadata["backtest"]["wape"]),
            agent_step_s=self.agent_step_s,
            next_s=now,
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


def _scores(running: WindowScore, candidate: WindowScore | None, backtest: float, score_ms: float) -> dict[str, object]:
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
