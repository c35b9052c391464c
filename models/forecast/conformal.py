"""How far above its own forecasts the workload has gone, per lead time: a conformal upper bound.

The rise envelope (``models.forecast.envelope``) bounds the workload by how far it has risen from past
levels, whatever the forecast said. :class:`ForecastErrors` bounds it by how far the agent's own forecasts
have been exceeded: for every forecast made it waits until each lead ``L`` has passed, then scores the ratio
of the highest 10-s mean the workload reached within ``L`` to the forecast's own peak within ``L``. The upper
bound at lead ``L`` is the forecast's peak within ``L`` times the ``quantile`` of those ratios — split
conformal prediction over the forecasts' past errors, so the bound covers the realised peak at the stated
rate wherever the errors of the next forecast are like those of the last two hours. A forecaster that
follows the workload closely gives a bound close to its forecast (a descent is planned as a descent); one
that lags a rise has its lag measured and added.

Conditioned on where the workload stands (the part of its last half hour's range its level is in, as the
envelope reads it), each part's errors give its quantile once it has enough of them; the pooled errors stand
in before.

>>> import numpy as np
>>> errors = ForecastErrors(quantile=0.8)
>>> flat = np.full(900, 1000.0)
>>> for minute in range(60):  # an hour of a flat workload, forecast 10 % too low each minute
...     errors.record(60.0 * minute, flat * 0.9, part=1)
...     errors.update(np.arange(60.0 * minute, 60.0 * minute + 60), np.full(60, 1000.0))
>>> bound = errors.upper(flat * 0.9, part=1)
>>> round(float(bound[59]))
1000
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.forecast.scoring import place_on_grid

LEADS_S = (10, 30, 60, 120, 180, 300, 450, 600, 900)
"""Lead times the errors are scored at; in between, the ratio is interpolated."""

MIN_SCORES = 20
"""Scored forecasts a lead needs before its quantile is read (pooled, or within one part of the range)."""

RESOLUTION_S = 10
"""The workload's peak within a lead is the highest mean of this many seconds (a second's noise is no rise)."""


@dataclass
class _Pending:
    """A forecast waiting for its leads to pass."""

    origin_s: float
    """The second the forecast starts at."""
    peaks: np.ndarray
    """The forecast's peak within each lead of :data:`LEADS_S` (NaN beyond the forecast)."""
    part: int
    scored: int = 0
    """Leads scored so far (they pass in order)."""


class ForecastErrors:
    """The ``quantile`` of the workload's peak over the forecast's peak, per lead, over the last ``history_s``."""

    def __init__(self, *, quantile: float = 0.8, history_s: int = 7200) -> None:
        if not 0.5 <= quantile < 1:
            raise ValueError(f"quantile must be in [0.5, 1), got {quantile}")
        self.quantile = float(quantile)
        self.history_s = int(history_s)
        self._start_s: float | None = None
        self._values = np.empty(0)
        """The workload on a 1-s grid from ``_start_s``, as long as the longest lead (NaN for a gap)."""
        self._pending: deque[_Pending] = deque()
        keep = max(MIN_SCORES, self.history_s // 60)
        self._scores: dict[int, deque[tuple[int, float]]] = {lead: deque(maxlen=keep) for lead in LEADS_S}
        """(part, ratio) per lead, oldest first: a forecast is made once a loop, two hours of them."""

    def record(self, origin_s: float, forecast: np.ndarray, *, part: int, level: float | None = None) -> None:
        """A forecast of the seconds from ``origin_s`` on, made where the workload stands in ``part`` of its range;
        with ``level``, its base never below it (:func:`base`)."""
        values = np.asarray(forecast, dtype=float)
        if values.size == 0 or not np.all(np.isfinite(values)) or not math.isfinite(origin_s):
            return
        running = base(values, level)
        peaks = np.asarray([running[lead - 1] if lead <= values.size else math.nan for lead in LEADS_S])
        self._pending.append(_Pending(math.floor(origin_s), peaks, int(part)))
        while len(self._pending) > self.history_s:  # never scored (no workload fed): bounded all the same
            self._pending.popleft()

    def update(self, times: np.ndarray, samples: np.ndarray) -> None:
        """Place per-second workload samples on the grid by their times (NaN for a gap; a resent second
        overwrites) and score every lead that has passed."""
        times = np.asarray(times, dtype=float)
        samples = np.asarray(samples, dtype=float)
        if times.size == 0:
            return
        keep = max(LEADS_S) + RESOLUTION_S
        self._start_s, self._values, _ = place_on_grid(self._start_s, self._values, times, samples, keep)
        for pending in self._pending:
            self._score(pending)
        while self._pending and self._pending[0].scored == len(LEADS_S):
            self._pending.popleft()
        excess = self._values.size - keep
        if excess > 0:
            self._values = self._values[excess:]
            self._start_s += excess

    def _score(self, pending: _Pending) -> None:
        """Score the leads of ``pending`` that have passed (a lead whose seconds left the grid is skipped)."""
        assert self._start_s is not None
        end = self._start_s + self._values.size
        while pending.scored < len(LEADS_S):
            lead = LEADS_S[pending.scored]
            if pending.origin_s + lead > end:
                return
            pending.scored += 1
            forecast_peak = pending.peaks[pending.scored - 1]
            start = int(pending.origin_s - self._start_s)
            if start < 0 or not math.isfinite(forecast_peak) or forecast_peak <= 0:
                continue
            peak = peak_mean(self._values[start : start + lead])
            if peak is not None:
                self._scores[lead].append((pending.part, peak / forecast_peak))

    def ratios(self, part: int | None = None) -> dict[int, float]:
        """The conformal ratio at every lead with enough scores: within ``part`` when it has enough, else pooled."""
        out: dict[int, float] = {}
        for lead, scores in self._scores.items():
            if len(scores) < MIN_SCORES:
                continue
            values = np.asarray([ratio for _, ratio in scores])
            if part is not None:
                mine = np.asarray([ratio for p, ratio in scores if p == part])
                if mine.size >= MIN_SCORES:
                    values = mine
            out[lead] = conformal_quantile(values, self.quantile)
        return out

    def upper(self, forecast: np.ndarray, *, part: int | None = None, level: float | None = None) -> np.ndarray | None:
        """The bound at every second of ``forecast``: its peak so far times the ratio at that lead (interpolated
        between scored leads; beyond the longest, its ratio). None before the shortest lead has enough scores."""
        table = self.ratios(part)
        if LEADS_S[0] not in table or len(forecast) == 0:
            return None
        leads = np.asarray(sorted(table), dtype=float)
        values = np.asarray([table[int(lead)] for lead in leads])
        at = np.arange(1, len(forecast) + 1, dtype=float)
        ratio = np.interp(at, leads, values)
        return base(np.asarray(forecast, dtype=float), level) * ratio

    def to_dict(self) -> dict[str, Any]:
        """The scores by lead (the workload and the pending forecasts are not kept: they refill in minutes)."""
        return {
            "scores": {
                str(lead): [[part, round(ratio, 4)] for part, ratio in scores] for lead, scores in self._scores.items()
            }
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`to_dict`'s form; a lead or score that does not fit is left out."""
        scores = state.get("scores")
        for deque_ in self._scores.values():
            deque_.clear()
        if not isinstance(scores, dict):
            return
        for key, rows in scores.items():
            lead = int(key) if isinstance(key, str) and key.isdigit() else None
            if lead not in self._scores or not isinstance(rows, list):
                continue
            for row in rows:
                if (
                    isinstance(row, list)
                    and len(row) == 2
                    and isinstance(row[0], int)
                    and isinstance(row[1], (int, float))
                    and math.isfinite(row[1])
                    and row[1] >= 0
                ):
                    self._scores[lead].append((row[0], float(row[1])))


def base(forecast: np.ndarray, level: float | None) -> np.ndarray:
    """What the errors are measured against at every lead: the forecast's peak so far, never below ``level``
    (the workload's last level) when it is given."""
    running = np.maximum.accumulate(forecast)
    return running if level is None or not math.isfinite(level) else np.maximum(running, level)


def peak_mean(seconds: np.ndarray) -> float | None:
    """The highest mean of :data:`RESOLUTION_S` consecutive seconds from the first (a shorter stretch: its
    mean); None when every second is a gap."""
    usable = seconds.size // RESOLUTION_S * RESOLUTION_S
    blocks = seconds[:usable].reshape(-1, RESOLUTION_S) if usable else seconds.reshape(1, -1)
    known = np.isfinite(blocks)
    counts = known.sum(axis=1)
    if not counts.any():
        return None
    means = np.where(known, blocks, 0.0).sum(axis=1)[counts > 0] / counts[counts > 0]
    return float(means.max())


def conformal_quantile(values: np.ndarray, quantile: float) -> float:
    """The split-conformal quantile of ``values``: the ``ceil((n + 1) q)``-th smallest of n (the largest when
    that is beyond n), which covers a new value of the same kind with probability at least ``q``."""
    ordered = np.sort(values)
    rank = min(len(ordered), math.ceil((len(ordered) + 1) * quantile))
    return float(ordered[rank - 1])
