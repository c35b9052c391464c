"""Anomaly detection on the workload-throughput gap, and the watch that measures a recovery.

Daedalus section 3.5: in normal operation the job's throughput follows its workload, so the gap
``workload − throughput`` has a stable mean and variance (kept online with Welford's algorithm).
After a rescale or failure the gap leaves that band (nothing is processed, then the backlog is
worked off); the job has recovered when the gap is back within ``k`` standard deviations (k = 1 in
the paper) for ``consecutive_s`` seconds. The measured recovery feeds the recovery predictor.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any


class WelfordStats:
    """Running count, mean and variance of a stream (Welford 1962), mergeable (Chan)."""

    __slots__ = ("n", "mean", "m2")

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0

    def update(self, x: float) -> None:
        """Add one value (the caller makes sure it is finite)."""
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def merge(self, other: WelfordStats) -> WelfordStats:
        """A new state equal to one pass over both streams."""
        merged = WelfordStats()
        n = self.n + other.n
        if n == 0:
            return merged
        delta = other.mean - self.mean
        merged.n = n
        merged.mean = self.mean + delta * other.n / n
        merged.m2 = self.m2 + other.m2 + delta * delta * self.n * other.n / n
        return merged

    @property
    def variance(self) -> float:
        """Sample variance (0 with fewer than two values)."""
        return self.m2 / (self.n - 1) if self.n > 1 else 0.0

    @property
    def std(self) -> float:
        """Sample standard deviation."""
        return math.sqrt(self.variance)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state."""
        return {"n": self.n, "mean": self.mean, "m2": self.m2}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> WelfordStats:
        """Rebuild from :meth:`to_dict`."""
        stats = cls()
        stats.n, stats.mean, stats.m2 = int(state["n"]), float(state["mean"]), float(state["m2"])
        return stats


class GapAnomalyDetector:
    """Welford mean/variance of the normal gap; ``score_one`` is the distance in standard deviations."""

    def __init__(self, *, k: float = 1.0, min_samples: int = 30, smoothing_s: int = 5) -> None:
        """``k``: band half-width in standard deviations; ``smoothing_s``: the gap is averaged over this
        many seconds first, so per-second arrival noise does not break every run of normal seconds."""
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        if smoothing_s < 1:
            raise ValueError(f"smoothing_s must be at least 1, got {smoothing_s}")
        self.k = float(k)
        self.min_samples = int(min_samples)
        self.smoothing_s = int(smoothing_s)
        self.stats = WelfordStats()
        self.skipped = 0
        self.refused = 0
        """Samples refused as too far from normal to be learned."""
        self._recent: deque[float] = deque(maxlen=self.smoothing_s)

    def _smoothed(self, x: float) -> float | None:
        if not math.isfinite(x):
            self.skipped += 1
            return None
        self._recent.append(x)
        return sum(self._recent) / len(self._recent)

    learn_limit: float = 4.0
    """Once ready, samples further than this many standard deviations are not learned as normal."""

    def learn_one(self, x: float) -> None:
        """Learn one gap sample from normal operation (non-finite samples are skipped and counted).

        A backlog that builds between two watches (an overload before the planner reacts) is not
        normal operation: once the detector is ready, samples far outside the band are refused, or
        they would widen it until a job still deep in backlog looked recovered.
        """
        value = self._smoothed(float(x))
        if value is None:
            return
        if self.ready and abs(value - self.stats.mean) > self.learn_limit * self._spread():
            self.refused += 1
            return
        self.stats.update(value)

    def _spread(self) -> float:
        """The learned standard deviation, floored at rounding: a gap that is identically zero up to the
        last bits (a job whose workload is what its sources read, with no backlog to add) has a band of
        rounding error, and the same value seen again must score as normal, not as infinitely far."""
        return max(self.stats.std, 1e-9 * max(1.0, abs(self.stats.mean)))

    @property
    def ready(self) -> bool:
        """True once enough normal samples were learned to tell normal from not."""
        return self.stats.n >= self.min_samples

    def score_one(self, x: float) -> float | None:
        """|gap − mean| / std of the smoothed gap, or None before :attr:`ready` or on a bad sample."""
        value = self._smoothed(float(x))
        if value is None or not self.ready:
            return None
        return abs(value - self.stats.mean) / self._spread()

    def is_normal(self, score: float | None) -> bool | None:
        """Whether a score is within ``k`` standard deviations (None if unknown)."""
        return None if score is None else score <= self.k

    def reset_smoothing(self) -> None:
        """Forget the smoothing window (a stop breaks continuity)."""
        self._recent.clear()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state."""
        return {
            "k": self.k,
            "min_samples": self.min_samples,
            "smoothing_s": self.smoothing_s,
            "stats": self.stats.to_dict(),
            "skipped": self.skipped,
            "recent": list(self._recent),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> GapAnomalyDetector:
        """Rebuild from :meth:`to_dict`."""
        detector = cls(k=state["k"], min_samples=state["min_samples"], smoothing_s=state["smoothing_s"])
        detector.stats = WelfordStats.from_dict(state["stats"])
        detector.skipped = int(state.get("skipped", 0))
        detector._recent.extend(float(v) for v in state.get("recent", ()))
        return detector


class RecoveryWatch:
    """Learns the normal gap; once started at a stop, says when the job is back to normal.

    The watch first waits for the gap to leave the band (the stop must be seen; right after it the
    reported rates still look normal because they are moving averages), then for ``consecutive_s``
    seconds in the band in a row; the recovery ends at the first of those seconds. A watch that sees
    no anomaly within ``give_up_s`` is abandoned (nothing measurable happened).

    When the caller knows that the job runs again (:meth:`resumed`: a scaler saw every task running,
    or the job's uptime says when it restarted), the stop is over by then whether the signal showed
    it or not: an in-place rescale that replays almost nothing never leaves the band, and waiting for
    an anomaly would hold the planner for the whole target while the job is caught up.
    """

    def __init__(
        self,
        *,
        k: float = 1.0,
        consecutive_s: int = 10,
        min_samples: int = 30,
        smoothing_s: int = 5,
        give_up_s: float = 1800.0,
    ) -> None:
        """See the class docstring; ``k`` = 1 standard deviation as in Daedalus."""
        if consecutive_s < 1:
            raise ValueError(f"consecutive_s must be at least 1, got {consecutive_s}")
        self.detector = GapAnomalyDetector(k=k, min_samples=min_samples, smoothing_s=smoothing_s)
        self.consecutive_s = int(consecutive_s)
        self.give_up_s = float(give_up_s)
        self.active = False
        self.started_at: float | None = None
        self.abandoned = 0
        """Watches given up without a measurement."""
        self._seen_anomaly = False
        self._resumed_at: float | None = None
        self._run_start: float | None = None
        self._run_length = 0

    def learn_one(self, x: float) -> None:
        """Learn one normal gap sample (call only while not :attr:`active`)."""
        self.detector.learn_one(x)

    def score_one(self, x: float) -> float | None:
        """Distance of a gap sample from normal in standard deviations, or None."""
        return self.detector.score_one(x)

    def start(self, now: float) -> None:
        """Begin watching a recovery that started (processing stopped) at ``now``."""
        self.active = True
        self.started_at = float(now)
        self._seen_anomaly = False
        self._resumed_at = None
        self._run_start = None
        self._run_length = 0
        self.detector.reset_smoothing()

    def abandon(self) -> None:
        """Stop watching without a measurement (counted in :attr:`abandoned`)."""
        if self.active:
            self.active = False
            self.abandoned += 1

    def resumed(self, at: float) -> None:
        """The job of the watched stop runs again since ``at``: samples from then on are after the stop. The first
        report of a watch stands (a scaler's, read off the job's tasks, before one from its uptime)."""
        if self.active and self._resumed_at is None:
            self._resumed_at = float(at)

    def update(self, t: float, x: float, *, caught_up: bool | None = None) -> float | None:
        """Feed one gap sample at time ``t`` while active; returns the recovery end time once, else None.

        ``caught_up``: whether the job is within one second of its input at ``t`` (lag ≤ the input of a
        second, the SLO's own test), when the caller knows. It overrides the learned band: the normal
        lag of a job scales with its rate per reader, so after a rescale that changes that rate a job
        that has caught up may sit outside the band learned before the stop (and one still behind
        inside it). Behind counts as the stop seen; caught up, once the stop was seen, as recovered.
        """
        if not self.active or self.started_at is None:
            return None
        if t - self.started_at > self.give_up_s and not self._seen_anomaly:
            self.abandon()
            return None
        score = self.detector.score_one(x)
        normal = self.detector.is_normal(score) if caught_up is None else caught_up
        if normal is None or t < self.started_at:
            return None
        if not normal:
            self._seen_anomaly = True
            self._run_start, self._run_length = None, 0
            return None
        if not self._seen_anomaly and (self._resumed_at is None or t < self._resumed_at):
            return None
        if self._run_start is None:
            self._run_start = t
        self._run_length += 1
        if self._run_length >= self.consecutive_s:
            self.active = False
            return self._run_start
        return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state."""
        return {
            "detector": self.detector.to_dict(),
            "consecutive_s": self.consecutive_s,
            "give_up_s": self.give_up_s,
            "active": self.active,
            "started_at": self.started_at,
            "abandoned": self.abandoned,
            "seen_anomaly": self._seen_anomaly,
            "resumed_at": self._resumed_at,
            "run_start": self._run_start,
            "run_length": self._run_length,
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> RecoveryWatch:
        """Rebuild from :meth:`to_dict`."""
        watch = cls(consecutive_s=int(state["consecutive_s"]), give_up_s=float(state["give_up_s"]))
        watch.detector = GapAnomalyDetector.from_dict(state["detector"])
        watch.active = bool(state["active"])
        watch.started_at = state["started_at"]
        watch.abandoned = int(state.get("abandoned", 0))
        watch._seen_anomaly = bool(state["seen_anomaly"])
        resumed_at = state.get("resumed_at")
        watch._resumed_at = float(resumed_at) if resumed_at is not None else None
        watch._run_start = state["run_start"]
        watch._run_length = int(state["run_length"])
        return watch
