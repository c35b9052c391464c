"""The forecasts the loop chooses among, and the rolling score it chooses by.

No single model forecasts every workload best: a flat or noisy workload is forecast best by holding
its last level (naive), a ramp by its trend (linear), a daily cycle by the same hour of the previous
cycle (seasonal), autocorrelated wiggles by an ARIMA. :class:`RollingScores` keeps every candidate's
forecasts and scores each, once the workload it forecast has arrived, by its WAPE over the whole
horizon — the horizon the planner reads — and the manager uses the candidate with the lowest recent
mean.

:class:`SeasonalNaive` finds the workload's period from its own history (the strongest peak of the
autocorrelation of minute means, if it is strong) and forecasts each second from the same phase of
the last cycle, shifted by how the level moved since.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from models.forecast.metrics import wape

SEASON_STEP_S = 60
"""Resolution of the history the period is found in (minute means)."""
MIN_PERIOD_S = 10 * 60
"""Shortest period looked for."""
MAX_HISTORY_S = 2 * 86_400
"""Longest history kept: two days, so a daily cycle can be found twice."""
MIN_AUTOCORRELATION = 0.5
"""A period is used only if the history correlates with itself this well one period apart."""


def naive_forecast(recent: np.ndarray, horizon_s: int, level_s: int = 60) -> np.ndarray | None:
    """The mean of the last ``level_s`` finite seconds, held over the horizon; None without data."""
    tail = recent[-level_s:]
    finite = tail[np.isfinite(tail)]
    if finite.size == 0:
        return None
    return np.full(horizon_s, float(finite.mean()))


class SeasonalNaive:
    """The last cycle repeated, shifted by the change of level; the period found in the history.

    >>> model = SeasonalNaive()
    >>> minutes = np.arange(4 * 24)
    >>> model.history.extend(1000 + 500 * np.sin(2 * np.pi * minutes / 24))  # four 24-minute cycles
    >>> model.find_period()
    1440
    >>> forecast = model.predict(horizon_s=600)
    >>> bool(abs(forecast[0] - 1000) < 150)
    True
    """

    def __init__(self, max_history_s: int = MAX_HISTORY_S) -> None:
        self.history: deque[float] = deque(maxlen=max(2, max_history_s // SEASON_STEP_S))
        """Minute means of the workload, oldest first (NaN where a minute had no sample)."""
        self.period_s: int | None = None
        self._partial: list[float] = []

    def update(self, samples: np.ndarray) -> None:
        """Fold per-second samples into minute means (a partial minute waits for the next call)."""
        for value in samples:
            self._partial.append(float(value))
            if len(self._partial) == SEASON_STEP_S:
                minute = np.asarray(self._partial)
                finite = minute[np.isfinite(minute)]
                self.history.append(float(finite.mean()) if finite.size else math.nan)
                self._partial = []

    def find_period(self) -> int | None:
        """The period (s) at the strongest autocorrelation peak of the history, if it is strong; needs 2.5 cycles."""
        y = np.asarray(self.history, dtype=float)
        finite = np.isfinite(y)
        if finite.sum() < 3 * MIN_PERIOD_S // SEASON_STEP_S:
            self.period_s = None
            return None
        y = np.where(finite, y, np.nanmean(y))
        y = y - y.mean()
        spectrum = np.fft.rfft(y, n=2 * len(y))
        correlation = np.fft.irfft(spectrum * np.conj(spectrum))[: len(y)]
        if correlation[0] <= 0:
            self.period_s = None
            return None
        correlation /= correlation[0]
        shortest = MIN_PERIOD_S // SEASON_STEP_S
        longest = int(len(y) / 2.5)
        if longest <= shortest:
            self.period_s = None
            return None
        # The first peak after the correlation has dropped below zero: the cycle, not its harmonics.
        below = np.flatnonzero(correlation[shortest:longest] < 0)
        if below.size == 0:
            self.period_s = None
            return None
        start = shortest + int(below[0])
        lag = start + int(np.argmax(correlation[start:longest]))
        self.period_s = lag * SEASON_STEP_S if correlation[lag] >= MIN_AUTOCORRELATION else None
        return self.period_s

    def predict(self, horizon_s: int) -> np.ndarray | None:
        """Each second of the horizon from the same second one (or more) periods earlier, plus the level change.

        The level change is the last ten minutes (and the minute in progress) against the same ten
        minutes a period earlier.
        """
        period = self.period_s
        if period is None:
            return None
        y = np.asarray(self.history, dtype=float)
        steps = period // SEASON_STEP_S
        finite = np.isfinite(y)
        if len(y) < steps + 10 or finite.sum() < 2:
            return None
        filled = np.interp(np.arange(len(y)), np.flatnonzero(finite), y[finite])
        # Second k of the horizon is second len(partial) + k of the minute in progress (index len(y)).
        elapsed = np.arange(horizon_s) + len(self._partial)
        back = (elapsed // SEASON_STEP_S // steps + 1) * steps  # whole periods back, at least one
        values = filled[len(y) + elapsed // SEASON_STEP_S - back]
        # The level: the last ten minutes and the minute in progress, against the same a period earlier.
        now_part, then_part = y[-10:], y[-10 - steps : -steps]
        partial = np.asarray(self._partial, dtype=float)
        if np.isfinite(partial).any():
            now_part = np.append(now_part, np.nanmean(partial))
            then_part = np.append(then_part, filled[len(y) - steps])
        level_now = float(np.nanmean(now_part)) if np.isfinite(now_part).any() else math.nan
        level_then = float(np.nanmean(then_part)) if np.isfinite(then_part).any() else math.nan
        shift = level_now - level_then if math.isfinite(level_now) and math.isfinite(level_then) else 0.0
        return np.maximum(values + shift, 0.0)

    def to_dict(self) -> dict[str, Any]:
        """The minute means (rounded) and the period."""
        return {
            "history": [None if not math.isfinite(v) else round(v, 1) for v in self.history],
            "period_s": self.period_s,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`to_dict`'s form."""
        self.history.clear()
        self.history.extend(math.nan if v is None else float(v) for v in state.get("history", []))
        self.period_s = state.get("period_s")


class RollingScores:
    """Every candidate's forecasts, scored by WAPE over the horizon once the workload has arrived.

    Samples are counted from the first one (``t``); a forecast made after sample ``t`` covers
    samples ``t .. t + horizon - 1`` and is scored when the last of them has arrived. A candidate's
    score is the mean WAPE of its last ``keep`` scored forecasts.
    """

    def __init__(self, horizon_s: int, keep: int = 10, resolution_s: int = 10) -> None:
        self.horizon_s = int(horizon_s)
        self.keep = int(keep)
        self.resolution_s = int(resolution_s)
        self.actual: deque[float] = deque(maxlen=self.horizon_s + 3600)
        self.count = 0
        """Samples seen so far."""
        self.pending: dict[str, deque[tuple[int, np.ndarray]]] = {}
        self.scores: dict[str, deque[float]] = {}

    def observe(self, samples: np.ndarray) -> None:
        """Append arrived samples and score every forecast whose horizon has now arrived."""
        for value in samples:
            self.actual.append(float(value))
        self.count += len(samples)
        for name, queue in self.pending.items():
            while queue and queue[0][0] + self.horizon_s <= self.count:
                origin, values = queue.popleft()
                score = self._wape(origin, values)
                if score is not None:
                    self.scores.setdefault(name, deque(maxlen=self.keep)).append(score)

    def _wape(self, origin: int, values: np.ndarray) -> float | None:
        first = self.count - len(self.actual)
        if origin < first:
            return None
        actual = np.asarray(self.actual, dtype=float)[origin - first : origin - first + self.horizon_s]
        n = min(len(actual), len(values)) // self.resolution_s * self.resolution_s
        if n == 0:
            return None
        # Scored on means of ``resolution_s`` seconds, as the forecasts are meant: noise is no error.
        a = np.nanmean(actual[:n].reshape(-1, self.resolution_s), axis=1)
        f = values[:n].reshape(-1, self.resolution_s).mean(axis=1)
        return wape(a, f)

    def record(self, name: str, values: np.ndarray | None) -> None:
        """Keep a candidate's forecast made now (after ``count`` samples)."""
        if values is None or len(values) < self.horizon_s:
            return
        queue = self.pending.setdefault(name, deque(maxlen=self.horizon_s // 10 + 10))
        queue.append((self.count, np.asarray(values[: self.horizon_s], dtype=float)))

    def score(self, name: str, *, least: int = 3) -> float | None:
        """Mean WAPE of the candidate's last scored forecasts; None before ``least`` of them."""
        scores = self.scores.get(name)
        if not scores or len(scores) < least:
            return None
        return float(np.mean(scores))

    def to_dict(self) -> dict[str, Any]:
        """The scores (forecasts in flight are not kept: a restart scores afresh)."""
        return {"scores": {name: list(values) for name, values in self.scores.items()}}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`to_dict`'s form."""
        for name, values in (state.get("scores") or {}).items():
            self.scores[name] = deque((float(v) for v in values), maxlen=self.keep)
