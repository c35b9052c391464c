"""How far the workload rises within a given time, from its own recent history: an upper bound for planning.

A point forecast says where the workload is expected to go; a decision that must hold for a while
(a scale-in until the agent can undo it, a recovery until the backlog is gone) needs to know how far
it may go. :class:`RiseEnvelope` measures it on the workload itself: for a lead time ``L`` it keeps
the ratio of the highest level within ``L`` after each past moment to the level at that moment, and
gives the ``quantile`` of those ratios. Steps and steep ramps are its tail; a calm workload's is
near 1. The upper forecast is the point forecast or the current level times that ratio, whichever
is higher, at every lead.

>>> import numpy as np
>>> envelope = RiseEnvelope(quantile=0.9)
>>> envelope.update(np.full(3600, 1000.0))  # an hour of a flat workload
>>> float(envelope.ratio(600))
1.0
>>> ramp = np.linspace(1000, 4000, 3600)  # then an hour rising 3x
>>> envelope.update(ramp)
>>> bool(envelope.ratio(600) > 1.1)
True
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

MIN_WINDOWS = 10
"""Leads of history a rise ratio needs before it is measured at that lead."""

LEADS_S = (10, 30, 60, 120, 180, 300, 450, 600, 900)
"""Lead times the rise is measured at; in between it is interpolated (it grows with the lead)."""

POSITION_WINDOW_S = 1800
"""Where the workload stands is read against its range over this trailing window (half an hour): a level at
the top of it has risen already, one at the bottom has room to."""

CONDITIONED_MEAN_S = 10
"""The conditioned ratios (where a rescale is cheap) are rises of trailing means this long: from the mean up
to a moment to the highest such mean within the lead after it. 10: the levels themselves. On 60-s means, the
SLO's falling-behind allowance, the bursts shorter than a minute count for their share of it: 0.6-0.7 % fewer
worker-hours, but 1 -> 6 avoidable misses on the held-out half (docs/research/experiments.md, experiment 20)."""

RISE_MEAN_S = 10
"""The unconditioned ratios (the rises from every moment, what a decision plans for where a rescale is dear, and where
the conditioned ones are not asked for) are rises of trailing means this long. 10: the levels themselves at the
default 10-s resolution. The SLO lets a running job fall behind for a minute of an
episode, so a rise shorter than that need not be carried whole, but what a restart's recovery meets is the rise of the
levels: on 60-s means the dev half at a restart's cost spent 0.97 % fewer worker-hours (trump_tweets 8.4 %) for 7 ->
12 avoidable misses, on 30-s means 0.50 % fewer for 7 -> 9, most of them failures met by a scale-out sized on the lower
peak (docs/research/experiments.md, experiment 57)."""

POSITION_BINS = 3
"""The range is cut into this many equal parts (bottom, middle, top): a conditioned ratio is the quantile of
the rises from moments in the same part as now, which needs enough of them to be a quantile."""


def positions(levels: np.ndarray, window: int) -> np.ndarray:
    """Where each level stands in the range of the ``window`` levels up to it: 0 at their lowest, 1 at their
    highest (0.5 where they are flat or unknown)."""
    y = np.asarray(levels, dtype=float)
    if y.size == 0:
        return y
    padded = np.concatenate((np.full(window - 1, np.nan), y))
    windows = np.lib.stride_tricks.sliding_window_view(padded, window)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows: unknown
        low, high = np.nanmin(windows, axis=1), np.nanmax(windows, axis=1)
        span = high - low
        out = np.where(np.isfinite(y) & (span > 0), (y - low) / np.where(span > 0, span, 1.0), 0.5)
    return np.clip(out, 0.0, 1.0)


def _quantile(values: np.ndarray, q: float) -> float:
    """``np.quantile(values, q)`` (its linear interpolation) by partition, without numpy's general machinery:
    the envelope takes up to 36 of them a round."""
    n = values.size
    at = q * (n - 1)
    low = int(math.floor(at))
    high = min(low + 1, n - 1)
    part = np.partition(values, (low, high))
    return float(part[low] + (part[high] - part[low]) * (at - low))


def _trailing_mean(y: np.ndarray, steps: int) -> np.ndarray:
    """The mean of each level and the ``steps - 1`` before it (NaN until there are that many; a gap in the
    window makes it NaN)."""
    if steps <= 1 or y.size == 0:
        return y
    out = np.full(y.size, np.nan)
    if y.size >= steps:
        out[steps - 1 :] = np.lib.stride_tricks.sliding_window_view(y, steps).mean(axis=1)
    return out


def _rises(y: np.ndarray, filled: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The highest level within ``steps`` levels after each moment over the level at that moment, and where that
    ratio is usable (a known, positive level and a known level ahead); ``filled``: ``y`` with each gap at -inf, so a
    gap is never the highest level within a lead."""
    ahead = np.lib.stride_tricks.sliding_window_view(filled[1:], steps).max(axis=1)
    base = y[: len(ahead)]
    usable = np.isfinite(base) & (base > 0) & np.isfinite(ahead)
    with np.errstate(divide="ignore", invalid="ignore"):
        return ahead / base, usable


def _interpolated(seconds: np.ndarray | float, table: Mapping[int, float]) -> np.ndarray:
    """The ratios of ``table`` (by lead) at ``seconds`` ahead, interpolated from 1 at none."""
    leads = np.asarray([0.0, *table], dtype=float)
    return np.interp(seconds, leads, np.asarray([1.0, *table.values()], dtype=float))


def _enough(windows: int, steps: int) -> bool:
    """Whether ``windows`` rises of a lead ``steps`` levels long are a distribution: many windows of the lead, not one
    event seen from every moment before it (:data:`MIN_WINDOWS`)."""
    return windows >= max(10, MIN_WINDOWS * steps)


def _checked(quantile: float) -> float:
    """A rise quantile, in [0.5, 1) (ValueError otherwise)."""
    if not 0.5 <= quantile < 1:
        raise ValueError(f"quantile must be in [0.5, 1), got {quantile}")
    return float(quantile)


def position_bin(position: float) -> int:
    """The part of the range (0 .. POSITION_BINS - 1) a position in [0, 1] falls in."""
    return min(POSITION_BINS - 1, max(0, int(position * POSITION_BINS)))


class RiseEnvelope:
    """The ``quantile`` of the workload's rise within each lead time, over the last ``history_s`` seconds."""

    def __init__(
        self, *, quantile: float = 0.8, history_s: int = 7200, resolution_s: int = 10, conditioned: bool = False
    ) -> None:
        self.quantile = _checked(quantile)
        """The quantile of the rises a ratio gives unless a call names another."""
        self.resolution_s = int(resolution_s)
        self.conditioned = bool(conditioned)
        """True: the rises measured from moments where the workload stood in the same part of its recent range
        as now (:data:`POSITION_BINS`); from the top of a peak, the rises seen from other tops, not from every
        trough. False: from every moment."""
        self.levels: deque[float] = deque(maxlen=max(2, history_s // self.resolution_s))
        """Workload means of ``resolution_s`` seconds, oldest first."""
        self._partial: list[float] = []
        self._ratios: dict[float, dict[int, float]] = {}
        """The unconditioned ratios by quantile."""
        self._binned: dict[float, tuple[dict[int, float], dict[int, dict[int, float]]]] = {}
        """The conditioned ratios by quantile: from every moment, and by the part of the range the moment stood
        in."""
        self._highest: dict[int, float] | None = None
        """:meth:`highest`'s ratios, until the history changes."""

    def update(self, samples: np.ndarray) -> None:
        """Fold per-second samples into the history (NaN skipped); the ratios are recomputed when read."""
        for value in np.asarray(samples, dtype=float):
            self._partial.append(float(value))
            if len(self._partial) == self.resolution_s:
                bucket = np.asarray(self._partial)
                finite = bucket[np.isfinite(bucket)]
                self.levels.append(float(finite.mean()) if finite.size else math.nan)
                self._partial = []
                self._ratios.clear()
                self._binned.clear()
                self._highest = None

    def highest(self) -> dict[int, float]:
        """The highest rise ratio the history shows within each lead of :data:`LEADS_S` it holds enough windows of
        (as a quantile's: :data:`MIN_WINDOWS` leads), never lower than a shorter lead's; a lead without enough history
        is absent. The steepest the workload has been seen to rise, which a point forecast is held to."""
        if self._highest is None:
            y = _trailing_mean(np.asarray(self.levels, dtype=float), max(1, RISE_MEAN_S // self.resolution_s))
            filled = np.where(np.isfinite(y), y, -np.inf)
            table: dict[int, float] = {}
            previous = 1.0
            for lead in LEADS_S:
                steps = max(1, lead // self.resolution_s)
                if len(y) <= steps:
                    break
                rises, usable = _rises(y, filled, steps)
                if not _enough(int(usable.sum()), steps):
                    break
                table[lead] = previous = max(previous, float(rises[usable].max()))
            self._highest = table
        return self._highest

    def _compute(
        self, quantile: float, groups: np.ndarray | None = None, mean_steps: int = 1
    ) -> dict[int, dict[int, float]]:
        """The ``quantile`` ratio at every lead from every moment (under key -1), and with ``groups`` (a group
        number per level) from the moments of each group alone, NaN at a lead without history enough from them.
        The rises are measured once per lead and shared by every group; ``mean_steps``: on trailing means of that
        many levels."""
        y = _trailing_mean(np.asarray(self.levels, dtype=float), mean_steps)
        filled = np.where(np.isfinite(y), y, -np.inf)  # a gap is never the highest level within a lead
        keys = [-1] + (list(range(POSITION_BINS)) if groups is not None else [])
        ratios: dict[int, dict[int, float]] = {key: {} for key in keys}
        previous = dict.fromkeys(keys, 1.0)
        for lead in LEADS_S:
            steps = max(1, lead // self.resolution_s)
            values = {key: previous[key] if key == -1 else math.nan for key in keys}
            if len(y) > steps:
                rises, usable = _rises(y, filled, steps)
                for key in keys:
                    mask = usable if key == -1 else usable & (groups[: len(rises)] == key)  # type: ignore[index]
                    # A quantile of rises needs many windows of the lead, not one event seen from every
                    # moment before it: with less than MIN_WINDOWS leads of history the shorter lead's
                    # ratio stands (none at all: 1, the point forecast alone).
                    if _enough(int(mask.sum()), steps):
                        values[key] = max(previous[key], _quantile(rises[mask], quantile))
            for key in keys:
                value = values[key]
                ratios[key][lead] = max(1.0, value) if math.isfinite(value) else math.nan
                if math.isfinite(value):
                    previous[key] = ratios[key][lead]
        return ratios

    def _table(
        self, level: float | None, conditioned: bool | None = None, quantile: float | None = None
    ) -> dict[int, float]:
        """The ratios by lead that apply to a workload at ``level`` now, at ``quantile`` (:attr:`quantile` unless
        given): conditioned on where it stands in its recent range when :attr:`conditioned` and that part of the
        range has history enough at a lead (a lead without it takes the unconditional ratio)."""
        conditioned = self.conditioned if conditioned is None else conditioned and self.conditioned
        q = self.quantile if quantile is None else _checked(quantile)
        if not conditioned or level is None or not math.isfinite(level) or not self.levels:
            if q not in self._ratios:
                self._ratios[q] = self._compute(q, mean_steps=max(1, RISE_MEAN_S // self.resolution_s))[-1]
            return self._ratios[q]
        y = np.asarray(self.levels, dtype=float)
        window = max(2, POSITION_WINDOW_S // self.resolution_s)
        if q not in self._binned:
            bins = np.minimum(POSITION_BINS - 1, (positions(y, window) * POSITION_BINS).astype(int))
            steps = max(1, CONDITIONED_MEAN_S // self.resolution_s)
            computed = self._compute(q, bins, steps)
            every = computed.pop(-1)
            self._binned[q] = (every, computed)
            if steps == max(1, RISE_MEAN_S // self.resolution_s):
                self._ratios[q] = every
        every, by_part = self._binned[q]
        binned = by_part[self.part(level)]
        # A lead that part of the range has too little history for takes the unconditional ratio; the rise
        # still grows with the lead.
        table: dict[int, float] = {}
        previous = 1.0
        for lead in LEADS_S:
            value = binned[lead] if math.isfinite(binned[lead]) else every[lead]
            table[lead] = previous = max(previous, value)
        return table

    def part(self, level: float | None) -> int:
        """The part of its last half hour's range (0 .. POSITION_BINS - 1) the workload stands in at ``level``
        (the middle without a level or history)."""
        if level is None or not math.isfinite(level) or not self.levels:
            return POSITION_BINS // 2
        y = np.asarray(self.levels, dtype=float)
        window = max(2, POSITION_WINDOW_S // self.resolution_s)
        return position_bin(float(positions(np.concatenate((y[-(window - 1) :], [level])), window)[-1]))

    def ratio(self, lead_s: float, level: float | None = None) -> float:
        """The rise ratio within ``lead_s`` (1 with too little history), interpolated between measured leads;
        with ``level``, conditioned on where that level stands (:meth:`_table`)."""
        return float(_interpolated(lead_s, self._table(level)))

    def upper(
        self, forecast: np.ndarray, level: float, *, conditioned: bool | None = None, quantile: float | None = None
    ) -> np.ndarray:
        """``max(forecast, level × ratio(lead))`` at every lead (second) of the forecast, the ratios conditioned
        on where ``level`` stands when :attr:`conditioned` (and ``conditioned``, when given, allows it), at
        ``quantile`` (:attr:`quantile` unless given)."""
        ratios = _interpolated(np.arange(1, len(forecast) + 1, dtype=float), self._table(level, conditioned, quantile))
        return np.maximum(forecast, level * ratios)

    def held(self, forecast: np.ndarray, level: float, *, since_s: float = 0.0) -> np.ndarray:
        """``forecast`` (one a second ahead) never above ``level`` times the highest rise within each lead
        (:meth:`highest`), each lead counted from ``since_s`` before the forecast's first second; past the longest
        lead measured, that lead's rise continued at its pace; ``forecast`` as it is before any lead is measured."""
        highest = self.highest()
        if not highest or forecast.size == 0:
            return forecast
        ahead = np.arange(1, forecast.size + 1, dtype=float) + since_s
        longest = max(highest)
        bound = np.where(
            ahead <= longest, _interpolated(ahead, highest), 1.0 + (highest[longest] - 1.0) * ahead / longest
        )
        return np.minimum(forecast, level * bound)

    def to_dict(self) -> dict[str, Any]:
        """The level history, in whole records per second (null for a gap).

        Saved every round, so it is kept cheap: integers encode several times faster than floats, and
        half a record per second is nothing next to a rise ratio.
        """
        levels = np.asarray(self.levels, dtype=float)
        finite = np.isfinite(levels)
        whole = np.rint(np.where(finite, levels, 0.0)).astype(np.int64).tolist()
        return {"levels": [value if known else None for value, known in zip(whole, finite.tolist())]}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`to_dict`'s form."""
        self.levels.clear()
        self.levels.extend(math.nan if v is None else float(v) for v in state.get("levels", []))
        self._ratios.clear()
        self._binned.clear()
        self._highest = None
