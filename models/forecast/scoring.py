"""Scoring two forecasters like with like: the same recent workload, the same origins, horizon and step.

Hot reload must decide whether a registry model would forecast this job better than the model the
agent runs. A registry back-test (weeks of 1-min history, 15 min ahead) and the agent's per-loop
WAPE (the next 60 s at 1 s) measure different things, so neither is compared with the other.
Instead :class:`RecentWorkload` keeps the last hour of workload the agent has seen (1-s grid) and
the forecasts its running model issued at each loop (the rolling origins the loop makes anyway).
The running model is scored on its own issued forecasts; a candidate is replayed over the same
window: fitted on the ``warmup_s`` before the first origin, as adoption fits it, then at each
origin updated with what arrived since and asked for the same horizon. Both are scored by WAPE on
``step_s`` means of the same actuals: ``sum |actual - forecast| / sum |actual|`` pooled over every
(origin, step) whose actual is known.

Replaying the running model too would cost a fresh fit per check (seconds for an ARIMA order
search); its issued forecasts are exactly what a replay would produce, at no cost.
"""

from __future__ import annotations

import math
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.forecast.base import Forecaster


@dataclass(frozen=True)
class ScoringSpec:
    """Where and how a running model and a candidate are compared."""

    horizon_s: int = 900
    """How far ahead each forecast is scored (the agent's forecast horizon), seconds."""
    step_s: int = 60
    """Actuals and forecasts are compared as means over steps of this length, seconds."""
    origin_every_s: int = 300
    """Scored origins are at least this far apart (bounds the replay's cost), seconds."""
    warmup_s: int = 900
    """Workload before the first origin the candidate is fitted on (the agent's forecast window), seconds."""
    span_s: int = 1800
    """Seconds between the first and the last origin the window can hold."""
    min_origins: int = 3
    """Fewer scored origins than this is no score."""

    def __post_init__(self) -> None:
        if (
            min(self.horizon_s, self.step_s, self.origin_every_s, self.span_s, self.min_origins) < 1
            or self.warmup_s < 0
        ):
            raise ValueError("horizon_s, step_s, origin_every_s, span_s and min_origins must be positive")
        if self.horizon_s % self.step_s or self.warmup_s % self.step_s:
            raise ValueError("horizon_s and warmup_s must be multiples of step_s")

    @classmethod
    def for_horizon(cls, horizon_s: int) -> ScoringSpec:
        """The spec that scores forecasts of ``horizon_s`` (any whole number of seconds): the default step, or where
        it does not divide the horizon and the warm-up, the longest step under it that divides both (a 150-s
        horizon is scored in 50-s steps, 61 s in 1-s steps)."""
        common = math.gcd(int(horizon_s), cls.warmup_s)
        step = max(d for d in range(1, min(cls.step_s, common) + 1) if common % d == 0)
        return cls(horizon_s=int(horizon_s), step_s=step)

    @property
    def window_s(self) -> int:
        """Workload kept: the warm-up, the span of the origins and the horizon of the last one (an hour by default)."""
        return self.warmup_s + self.span_s + self.horizon_s

    @property
    def steps(self) -> int:
        """Scored steps per origin."""
        return self.horizon_s // self.step_s


@dataclass(frozen=True)
class WindowScore:
    """A pooled WAPE over rolling origins of the recent window."""

    wape: float
    origins: tuple[float, ...]
    """Epoch second of the first forecast second at each scored origin."""
    horizon_s: int
    step_s: int


@dataclass(frozen=True, eq=False)
class _Issued:
    """A forecast the running model issued at ``origin_s``, kept as ``step_s`` means."""

    origin_s: float
    model: weakref.ref[Any]
    steps: np.ndarray


def step_means(values: np.ndarray, step: int, steps: int) -> np.ndarray:
    """Means of ``steps`` consecutive blocks of ``step`` values (NaN skipped; an all-NaN block is NaN)."""
    blocks = np.asarray(values, dtype=float)[: step * steps].reshape(steps, step)
    finite = np.isfinite(blocks)
    counts = finite.sum(axis=1)
    sums = np.where(finite, blocks, 0.0).sum(axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


class RecentWorkload:
    """The last ``spec.window_s`` seconds of workload and the running model's forecasts issued over them."""

    def __init__(self, spec: ScoringSpec | None = None) -> None:
        self.spec = spec or ScoringSpec()
        self._start_s: float | None = None
        """Epoch second of ``_values[0]``."""
        self._values = np.empty(0)
        self._issued: deque[_Issued] = deque()

    # ------------------------------------------------------------------ feeding

    def extend(self, times: np.ndarray, values: np.ndarray) -> None:
        """Place samples on the 1-s grid by their times (a resent second overwrites), keep the window."""
        times = np.asarray(times, dtype=float)
        values = np.asarray(values, dtype=float)
        if times.size == 0:
            return
        self._start_s, grown, fresh = place_on_grid(self._start_s, self._values, times, values, self.spec.window_s)
        if fresh:  # first samples, or a gap longer than the window: nothing kept is recent any more
            self._issued.clear()
        excess = grown.size - self.spec.window_s
        if excess > 0:
            grown = grown[excess:]
            self._start_s += excess
        self._values = grown
        while self._issued and self._issued[0].origin_s < self._start_s + self.spec.warmup_s:
            self._issued.popleft()

    def record(self, origin_s: float, model: Any, forecast: np.ndarray | None) -> None:
        """Keep the forecast ``model`` issued for the seconds from ``origin_s`` on (None: nothing issued)."""
        if forecast is None or model is None or np.asarray(forecast).size < self.spec.horizon_s:
            return
        steps = step_means(np.asarray(forecast, dtype=float), self.spec.step_s, self.spec.steps)
        if np.all(np.isfinite(steps)):
            self._issued.append(_Issued(float(origin_s), weakref.ref(model), steps))

    def snapshot(self) -> RecentWorkload:
        """A copy of the workload (not the issued forecasts) to replay on while this one keeps growing."""
        copy = RecentWorkload(self.spec)
        copy._start_s, copy._values = self._start_s, self._values.copy()
        return copy

    def last(self, seconds: int) -> np.ndarray:
        """The newest ``seconds`` of the grid (NaN where nothing arrived)."""
        return self._values[-seconds:] if seconds > 0 else np.empty(0)

    # ------------------------------------------------------------------ scoring

    @property
    def end_s(self) -> float | None:
        """Epoch second just after the newest sample."""
        return None if self._start_s is None else self._start_s + self._values.size

    def _fit_end(self, origin_s: float) -> float:
        """Where a candidate's warm-up ends for a first origin at ``origin_s``: the last whole step before it."""
        return float(math.floor(origin_s / self.spec.step_s) * self.spec.step_s)

    def _actuals(self, origin_s: float) -> np.ndarray | None:
        assert self._start_s is not None
        first = int(round(origin_s - self._start_s))
        last = first + self.spec.horizon_s
        if first < 0 or last > self._values.size:
            return None
        return step_means(self._values[first:last], self.spec.step_s, self.spec.steps)

    def score_issued(self, model: Any) -> WindowScore | None:
        """``model``'s WAPE over the forecasts it issued in the window, or None with too few origins.

        Origins are taken newest first, at least ``origin_every_s`` apart, each with its whole
        horizon arrived and ``warmup_s`` of window before it (so a candidate can be replayed there).
        """
        if model is None or self._start_s is None:
            return None
        chosen: list[tuple[_Issued, np.ndarray]] = []
        for issued in reversed(self._issued):
            if issued.model() is not model:
                continue
            if chosen and chosen[-1][0].origin_s - issued.origin_s < self.spec.origin_every_s:
                continue
            actual = self._actuals(issued.origin_s)
            if actual is None or self._fit_end(issued.origin_s) - self.spec.warmup_s < self._start_s:
                continue
            chosen.append((issued, actual))
        if len(chosen) < self.spec.min_origins:
            return None
        chosen.reverse()
        return self._score(
            [issued.origin_s for issued, _ in chosen], [i.steps for i, _ in chosen], [a for _, a in chosen]
        )

    def score_replay(self, make: Callable[[float], Forecaster], origins: tuple[float, ...]) -> WindowScore | None:
        """A candidate's WAPE at ``origins`` (ascending), replayed on the window.

        ``make(next_s)`` returns a fresh forecaster fed 1-s samples whose next sample is at epoch
        second ``next_s``. It is fitted on the ``warmup_s`` of whole steps before the first origin,
        then, at each origin, updated with what arrived since and asked for ``horizon_s`` seconds.
        """
        if self._start_s is None or not origins:
            return None
        spec = self.spec
        fit_end = self._fit_end(origins[0])
        first = int(round(fit_end - spec.warmup_s - self._start_s))
        if first < 0:
            return None
        model = make(fit_end)
        model.fit(self._values[first : first + spec.warmup_s])
        seen = first + spec.warmup_s
        forecasts, actuals = [], []
        for origin in origins:
            actual = self._actuals(origin)
            if actual is None:
                return None
            position = int(round(origin - self._start_s))
            model.update(self._values[seen:position])
            seen = position
            forecasts.append(
                step_means(np.asarray(model.predict(spec.horizon_s), dtype=float), spec.step_s, spec.steps)
            )
            actuals.append(actual)
        return self._score(list(origins), forecasts, actuals)

    def _score(
        self, origins: list[float], forecasts: list[np.ndarray], actuals: list[np.ndarray]
    ) -> WindowScore | None:
        forecast = np.concatenate(forecasts)
        actual = np.concatenate(actuals)
        # The actuals alone choose the steps scored, so two models are scored on the same ones; a
        # model that cannot forecast a step has no score.
        known = np.isfinite(actual)
        if not np.all(np.isfinite(forecast[known])):
            return None
        total = float(np.abs(actual[known]).sum())
        if total <= 0:
            return None
        wape = float(np.abs(actual[known] - forecast[known]).sum() / total)
        return WindowScore(wape=wape, origins=tuple(origins), horizon_s=self.spec.horizon_s, step_s=self.spec.step_s)


def place_on_grid(
    start_s: float | None, grid: np.ndarray, times: np.ndarray, samples: np.ndarray, window_s: int
) -> tuple[float, np.ndarray, bool]:
    """``(start_s, grid, fresh)``: ``samples`` placed by their ``times`` on the 1-s ``grid`` that starts at
    ``start_s`` (a resent second overwrites; the grid grows to the last sample, NaN in between). A grid the new
    samples lie ``window_s`` or more beyond, or none yet, starts afresh at them (``fresh``). Not trimmed.
    ``times`` must not be empty."""
    seconds = np.floor(times)
    fresh = start_s is None or seconds[-1] - window_s >= start_s + grid.size
    if start_s is None or fresh:
        start_s, grid = float(seconds[0]), np.empty(0)
    end = max(start_s + grid.size, float(seconds[-1]) + 1)
    grown = np.full(int(end - start_s), np.nan)
    grown[: grid.size] = grid
    index = (seconds - start_s).astype(np.int64)
    inside = index >= 0
    grown[index[inside]] = samples[inside]
    return start_s, grown, fresh
