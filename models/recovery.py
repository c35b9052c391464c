"""Recovery-time predictor: how long after a rescale or failure until the job has caught up.

Daedalus section 3.4. When processing stops, the backlog is the records since the last checkpoint
(replayed; the worst case, one full checkpoint interval of the recent workload, is assumed) plus
what arrives during the downtime (from the forecast). After the restart the job works at capacity
while the forecast workload keeps arriving; it has recovered at the first moment ``T`` where

    capacity · (T − downtime) ≥ replay + arrivals(0, T),

i.e. the cumulative spare capacity (capacity − forecast) since the restart covers the backlog.
Infinite if the spare capacity never covers it. Beyond the forecast horizon the last forecast
value is assumed to persist.

The downtime per (kind, scale-out) starts from priors and is learned from measured recoveries:
:meth:`RecoveryPredictor.observe_recovery` inverts the prediction (the downtime that would have
made the prediction equal the measurement, found by bisection since recovery time grows with
downtime) and folds it into the estimate for that scale-out and into a per-kind line over scale-outs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from models.regression import WelfordRegression

KINDS = ("rescale", "failure")
MAX_WEIGHT = 10
"""Downtime estimates average the last ~MAX_WEIGHT measurements (older ones fade), so they can drift."""


def recovery_time(
    *,
    capacity: float,
    forecast: np.ndarray,
    replay_records: float,
    downtime_s: float,
) -> float:
    """Seconds from the stop until ``capacity`` has worked off replay + arrivals; inf if never.

    ``forecast[i]`` is the workload (records/s) during second ``i`` after the stop (at least one value).
    """
    if not (math.isfinite(capacity) and capacity > 0) or forecast.size == 0:
        return math.inf
    downtime = max(0.0, float(downtime_s))
    replay = max(0.0, float(replay_records))
    horizon = forecast.size
    arrivals = np.concatenate(([0.0], np.cumsum(forecast)))  # arrivals[k] = records in [0, k)

    def arrived(t: float) -> float:
        if t >= horizon:
            return float(arrivals[-1] + forecast[-1] * (t - horizon))
        k = int(math.floor(t))
        return float(arrivals[k] + forecast[k] * (t - k))

    def surplus(t: float) -> float:
        return capacity * (t - downtime) - replay - arrived(t)

    if surplus(downtime) >= 0:
        return downtime
    first = int(math.floor(downtime)) + 1
    if first <= horizon:
        grid = np.arange(first, horizon + 1, dtype=float)
        values = capacity * (grid - downtime) - replay - arrivals[first:]
        hits = np.flatnonzero(values >= 0)
        if hits.size:
            k = int(hits[0])
            end = float(grid[k])
            start = downtime if k == 0 else float(grid[k - 1])
            # Surplus is linear within a second: interpolate the crossing.
            s0, s1 = surplus(start), float(values[k])
            return start + (end - start) * (-s0) / (s1 - s0) if s1 > s0 else end
        tail_start = float(horizon)
    else:
        tail_start = downtime
    slope = capacity - float(forecast[-1])
    if slope <= 0:
        return math.inf
    return tail_start + (-surplus(tail_start)) / slope


class _Estimate:
    """A fading mean of measured downtimes."""

    def __init__(self, value: float = 0.0, count: int = 0) -> None:
        self.value = value
        self.count = count

    def add(self, x: float) -> None:
        self.count += 1
        self.value += (x - self.value) / min(self.count, MAX_WEIGHT)


class RecoveryPredictor:
    """Predicts recovery time per candidate scale-out and learns downtimes from measured recoveries."""

    def __init__(
        self,
        checkpoint_interval_s: float = 10.0,
        downtime_rescale_prior_s: float = 30.0,
        downtime_failure_prior_s: float = 15.0,
    ) -> None:
        """Priors are the downtimes assumed before any recovery of that kind was measured."""
        if checkpoint_interval_s <= 0:
            raise ValueError(f"checkpoint_interval_s must be positive, got {checkpoint_interval_s}")
        self.checkpoint_interval_s = float(checkpoint_interval_s)
        self.priors = {"rescale": float(downtime_rescale_prior_s), "failure": float(downtime_failure_prior_s)}
        self._per_scale_out: dict[tuple[str, int], _Estimate] = {}
        self._per_kind: dict[str, _Estimate] = {}
        self._lines: dict[str, WelfordRegression] = {}
        self._context: dict[tuple[str, int], tuple[float, np.ndarray, float, float]] = {}
        self.unexplained = 0
        """Measured recoveries that no downtime could explain (e.g. capacity below the forecast)."""

    # ------------------------------------------------------------------ downtime

    def downtime(self, kind: str, parallelism: int) -> float:
        """Expected downtime: learned at this scale-out > line over scale-outs > mean of kind > prior."""
        return self.downtime_with_source(kind, parallelism)[0]

    def downtime_with_source(self, kind: str, parallelism: int) -> tuple[float, str]:
        """``(seconds, source)`` with source ``measured``, ``interpolated``, ``kind-mean`` or ``prior``."""
        _check_kind(kind)
        estimate = self._per_scale_out.get((kind, int(parallelism)))
        if estimate is not None and estimate.count:
            return estimate.value, "measured"
        line = self._lines.get(kind)
        if line is not None:
            value = line.predict(float(parallelism))
            if value is not None and value > 0:
                return value, "interpolated"
        mean = self._per_kind.get(kind)
        if mean is not None and mean.count:
            return mean.value, "kind-mean"
        return self.priors[kind], "prior"

    # ------------------------------------------------------------------ prediction

    def predict(
        self,
        capacity: float | None,
        forecast: Any,
        recent_workload_rate: float | None,
        *,
        kind: str = "rescale",
        parallelism: int,
        current_lag: float = 0.0,
        downtime_s: float | None = None,
    ) -> float:
        """Predicted seconds from the stop until caught up at ``parallelism`` (inf if never or unknown capacity).

        ``forecast``: workload per second from now (records/s); ``recent_workload_rate``: mean workload
        of the last checkpoint interval (the worst-case replay); ``current_lag``: records already waiting.
        """
        _check_kind(kind)
        if capacity is None or not math.isfinite(capacity) or capacity <= 0:
            return math.inf
        series = _clean_forecast(forecast, recent_workload_rate)
        if series is None:
            return math.inf
        rate = recent_workload_rate
        if rate is None or not math.isfinite(rate) or rate < 0:
            rate = float(series[0])
        lag = current_lag if current_lag is not None and math.isfinite(current_lag) and current_lag > 0 else 0.0
        self._context[(kind, int(parallelism))] = (float(capacity), series, float(rate), float(lag))
        downtime = self.downtime(kind, parallelism) if downtime_s is None else float(downtime_s)
        return recovery_time(
            capacity=float(capacity),
            forecast=series,
            replay_records=self.replay_records(rate, lag),
            downtime_s=downtime,
        )

    def replay_records(self, recent_workload_rate: float, current_lag: float = 0.0) -> float:
        """Records waiting when processing stops: those since the last checkpoint, replayed, and the lag."""
        return recent_workload_rate * self.checkpoint_interval_s + current_lag

    # ------------------------------------------------------------------ learning

    def observe_recovery(
        self,
        *,
        kind: str,
        parallelism: int,
        measured_s: float,
        capacity: float | None = None,
        forecast: Any = None,
        recent_workload_rate: float | None = None,
        current_lag: float = 0.0,
    ) -> float | None:
        """Fold a measured recovery into the downtime estimate; returns the downtime it implies, or None.

        The context (capacity, forecast, recent rate) defaults to the one of the last :meth:`predict`
        for this kind and scale-out, i.e. what was believed when the stop happened.
        """
        _check_kind(kind)
        if not (math.isfinite(measured_s) and measured_s >= 0):
            self.unexplained += 1
            return None
        context = self._context.get((kind, int(parallelism)))
        if capacity is not None:
            series = _clean_forecast(forecast, recent_workload_rate)
            rate = recent_workload_rate if recent_workload_rate is not None else (series[0] if series is not None else None)
            context = None if series is None or rate is None else (float(capacity), series, float(rate), float(current_lag or 0.0))
        if context is None:
            self.unexplained += 1
            return None
        cap, series, rate, lag = context
        replay = self.replay_records(rate, lag)

        def predicted(downtime: float) -> float:
            return recovery_time(capacity=cap, forecast=series, replay_records=replay, downtime_s=downtime)

        if not math.isfinite(predicted(0.0)):
            self.unexplained += 1
            return None
        if predicted(0.0) >= measured_s:
            # Faster than even a zero downtime explains (a checkpoint had just completed): the
            # downtime was at most zero.
            downtime = 0.0
        else:
            low, high = 0.0, float(measured_s)
            for _ in range(50):
                mid = (low + high) / 2
                if predicted(mid) < measured_s:
                    low = mid
                else:
                    high = mid
            downtime = (low + high) / 2
        self._fold(kind, int(parallelism), downtime)
        return downtime

    def observe_downtime(self, *, kind: str, parallelism: int, downtime_s: float) -> None:
        """Fold a directly measured downtime (e.g. from job uptime) into the estimates."""
        _check_kind(kind)
        if math.isfinite(downtime_s) and downtime_s >= 0:
            self._fold(kind, int(parallelism), float(downtime_s))

    def _fold(self, kind: str, parallelism: int, downtime: float) -> None:
        self._per_scale_out.setdefault((kind, parallelism), _Estimate()).add(downtime)
        self._per_kind.setdefault(kind, _Estimate()).add(downtime)
        self._lines.setdefault(kind, WelfordRegression(min_samples=2, min_x_variance=0.1)).update(parallelism, downtime)

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state (the last prediction contexts are not kept)."""
        return {
            "checkpoint_interval_s": self.checkpoint_interval_s,
            "priors": dict(self.priors),
            "per_scale_out": [
                {"kind": kind, "parallelism": n, "value": e.value, "count": e.count}
                for (kind, n), e in sorted(self._per_scale_out.items())
            ],
            "per_kind": {kind: {"value": e.value, "count": e.count} for kind, e in self._per_kind.items()},
            "lines": {kind: line.to_dict() for kind, line in self._lines.items()},
            "unexplained": self.unexplained,
        }

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> RecoveryPredictor:
        """Rebuild a predictor written by :meth:`to_dict`."""
        priors = state.get("priors", {})
        predictor = cls(
            checkpoint_interval_s=float(state.get("checkpoint_interval_s", 10.0)),
            downtime_rescale_prior_s=float(priors.get("rescale", 30.0)),
            downtime_failure_prior_s=float(priors.get("failure", 15.0)),
        )
        for row in state.get("per_scale_out", []):
            predictor._per_scale_out[(row["kind"], int(row["parallelism"]))] = _Estimate(
                float(row["value"]), int(row["count"])
            )
        for kind, row in state.get("per_kind", {}).items():
            predictor._per_kind[kind] = _Estimate(float(row["value"]), int(row["count"]))
        predictor._lines = {kind: WelfordRegression.from_dict(line) for kind, line in state.get("lines", {}).items()}
        predictor.unexplained = int(state.get("unexplained", 0))
        return predictor


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _clean_forecast(forecast: Any, fallback_rate: float | None) -> np.ndarray | None:
    """The forecast as finite non-negative floats (gaps filled with the mean), or a constant fallback."""
    if forecast is not None:
        series = np.asarray(forecast, dtype=float).ravel()
        finite = np.isfinite(series)
        if finite.any():
            series = np.where(finite, series, float(series[finite].mean()))
            return np.maximum(series, 0.0)
    if fallback_rate is not None and math.isfinite(fallback_rate) and fallback_rate >= 0:
        return np.array([float(fallback_rate)])
    return None
