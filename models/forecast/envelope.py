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
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

MIN_WINDOWS = 10
"""Leads of history a rise ratio needs before it is measured at that lead."""

LEADS_S = (10, 30, 60, 120, 180, 300, 450, 600, 900)
"""Lead times the rise is measured at; in between it is interpolated (it grows with the lead)."""


class RiseEnvelope:
    """The ``quantile`` of the workload's rise within each lead time, over the last ``history_s`` seconds."""

    def __init__(self, *, quantile: float = 0.8, history_s: int = 7200, resolution_s: int = 10) -> None:
        if not 0.5 <= quantile < 1:
            raise ValueError(f"quantile must be in [0.5, 1), got {quantile}")
        self.quantile = float(quantile)
        self.resolution_s = int(resolution_s)
        self.levels: deque[float] = deque(maxlen=max(2, history_s // self.resolution_s))
        """Workload means of ``resolution_s`` seconds, oldest first."""
        self._partial: list[float] = []
        self._ratios: dict[int, float] | None = None

    def update(self, samples: np.ndarray) -> None:
        """Fold per-second samples into the history (NaN skipped); the ratios are recomputed when read."""
        for value in np.asarray(samples, dtype=float):
            self._partial.append(float(value))
            if len(self._partial) == self.resolution_s:
                bucket = np.asarray(self._partial)
                finite = bucket[np.isfinite(bucket)]
                self.levels.append(float(finite.mean()) if finite.size else math.nan)
                self._partial = []
                self._ratios = None

    def _compute(self) -> dict[int, float]:
        y = np.asarray(self.levels, dtype=float)
        ratios: dict[int, float] = {}
        previous = 1.0
        for lead in LEADS_S:
            steps = max(1, lead // self.resolution_s)
            value = previous
            if len(y) > steps:
                # Highest level within the lead after each moment, over the level at that moment.
                windows = np.lib.stride_tricks.sliding_window_view(y[1:], steps)
                ahead = np.nanmax(np.where(np.isfinite(windows), windows, -np.inf), axis=1)
                base = y[: len(ahead)]
                usable = np.isfinite(base) & (base > 0) & np.isfinite(ahead)
                # A quantile of rises needs many windows of the lead, not one event seen from every
                # moment before it: with less than MIN_WINDOWS leads of history the shorter lead's
                # ratio stands (none at all: 1, the point forecast alone).
                if usable.sum() >= max(10, MIN_WINDOWS * steps):
                    value = max(previous, float(np.quantile(ahead[usable] / base[usable], self.quantile)))
            ratios[lead] = max(1.0, value)
            previous = ratios[lead]
        return ratios

    def ratio(self, lead_s: float) -> float:
        """The rise ratio within ``lead_s`` (1 with too little history), interpolated between measured leads."""
        if self._ratios is None:
            self._ratios = self._compute()
        leads = np.asarray(LEADS_S, dtype=float)
        values = np.asarray([self._ratios[lead] for lead in LEADS_S])
        return float(np.interp(lead_s, np.concatenate(([0.0], leads)), np.concatenate(([1.0], values))))

    def upper(self, forecast: np.ndarray, level: float) -> np.ndarray:
        """``max(forecast, level × ratio(lead))`` at every lead (second) of the forecast."""
        leads = np.arange(1, len(forecast) + 1, dtype=float)
        table = np.asarray([1.0, *(self.ratio(lead) for lead in LEADS_S)])
        ratios = np.interp(leads, np.concatenate(([0.0], np.asarray(LEADS_S, dtype=float))), table)
        return np.maximum(forecast, level * ratios)

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
        self._ratios = None
