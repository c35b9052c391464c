"""Recovery-time predictor: how long after a rescale or failure until the job has caught up.

Daedalus section 3.4. When processing stops, the backlog is the records since the last checkpoint
(replayed) plus what arrives during the downtime (from the forecast). After the restart the job
works at capacity while the forecast workload keeps arriving; in the paper it has recovered at the
first moment ``T`` where

    capacity · (T − downtime) ≥ replay + arrivals(0, T),

i.e. the cumulative spare capacity (capacity − forecast) since the restart covers the backlog.
Infinite if the spare capacity never covers it. Beyond the forecast horizon the last forecast
value is assumed to persist.

Three corrections make the prediction the recovery a job then measures (``benchmarks.recovery_errors``
compares them at every stop of the lab's replays):

* **The expected replay, not the worst case.** A stop falls anywhere in a checkpoint interval (a
  failure whenever it happens, a rescale whenever the loop decides), so half an interval of the
  recent workload is replayed on average. Assuming a full one made every prediction a worst case,
  biased against every measurement. (A scale-in, which is only an option, is also checked against
  the bad case: :meth:`RecoveryPredictor.predict_bad_case`.)
* **Caught up is within a second of input** (:data:`CAUGHT_UP_S`), as the SLO and the measurement
  count it, not an empty queue.
* **Every worker drains its own share.** ``capacity`` is the job's sustainable rate, set by the
  worker that saturates first; the others have spare capacity and are done with their share of
  the backlog sooner. The job is caught up when what the workers still hold *together* is within a
  second of input, which with skewed partitions comes well before the bottleneck is empty. A
  :data:`WorkerProfile` (shares and capacities) gives the spread; without one the job is one worker.

The downtime per (kind, scale-out) starts from priors and is learned from measured downtimes, or
from measured recoveries:
:meth:`RecoveryPredictor.observe_recovery` inverts the prediction (the downtime that would have
made the prediction equal the measurement, found by bisection since recovery time grows with
downtime) and folds it into the estimate for that scale-out and into a per-kind line over scale-outs.
A rescale stops every task of the old scale-out and deploys and restores every task of the new one,
so its downtime grows with the larger of the two: rescale downtimes are kept under the larger
scale-out (given as ``current``), or a scale-in from 16 workers to 8 would be predicted with the
downtime of a scale-out from 4 to 8. A failure restarts at its own scale-out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.regression import WelfordRegression

KINDS = ("rescale", "failure")
MAX_WEIGHT = 10
"""Downtime estimates average the last ~MAX_WEIGHT measurements (older ones fade), so they can drift."""


CHECKPOINT_INTERVAL_S = 10.0
"""The checkpoint interval assumed when none is given, seconds."""
DOWNTIME_RESCALE_PRIOR_S = 30.0
"""Downtime of a rescale assumed before any was measured, seconds."""
DOWNTIME_FAILURE_PRIOR_S = 15.0
"""Downtime of a failure assumed before any was measured, seconds."""

CAUGHT_UP_S = 1.0
"""A job is caught up when no more than this many seconds of input wait: a source read once a second
always has about a second of it in flight. The lab's SLO and its measured recoveries count the same."""

WorkerProfile = tuple[np.ndarray, np.ndarray]
"""Per worker: its share of the input and its capacity (records/s), as ``(shares, capacities)``."""


def recovery_time(
    *,
    capacity: float,
    forecast: np.ndarray,
    replay_records: float,
    downtime_s: float,
    profile: WorkerProfile | None = None,
    held_records: float = 0.0,
) -> float:
    """Seconds from the stop until the job is caught up (:data:`CAUGHT_UP_S`); inf if never.

    ``replay_records`` (what the stop replays, arriving everywhere alike) is spread over the workers by
    their shares; ``held_records``, a backlog already waiting before the stop, is not: it was built where
    capacity fell short, in the partitions of the workers that saturate first, and those partitions land
    on the bottleneck again, so it is the bottleneck's to work off.

    ``forecast[i]`` is the workload (records/s) during second ``i`` after the stop (at least one value;
    beyond it the last value persists). Every worker gets its share of the backlog and of the arrivals
    and works them off at its own capacity, so a worker with spare capacity is done long before the
    bottleneck; the job's lag is what they still hold together. ``profile`` gives the workers' shares and
    capacities; only how they differ is used, scaled so that the bottleneck sustains ``capacity`` (the
    job's). Without it the job is one worker of ``capacity``.
    """
    if not (math.isfinite(capacity) and capacity > 0) or forecast.size == 0:
        return math.inf
    shares, rates = _job_rates(capacity, profile)
    downtime = max(0.0, float(downtime_s))
    # Per worker, records waiting per unit of its share: the replay alike, the held backlog at the bottleneck.
    replay = max(0.0, float(replay_records))
    backlog = np.full(shares.size, replay)
    bottleneck = _bottleneck(shares, rates)
    backlog[bottleneck] += max(0.0, float(held_records)) / float(shares[bottleneck])
    with np.errstate(over="ignore"):
        arrivals = np.concatenate(([0.0], np.cumsum(forecast)))  # arrivals[k] = records in [0, k)
    waiting = _Waiting(shares, rates, replay, bottleneck, float(backlog[bottleneck]))
    # Caught up is "nothing beyond a second of input waits", up to rounding: the sums over the workers
    # differ from the exact value in the last bits, and a job that drains to exactly nothing must count.
    slack = _slack(float(np.max(backlog)), float(arrivals[-1]))
    within = _caught_up_within_forecast(waiting, forecast, arrivals, downtime, slack)
    if within is not None:
        return within
    # Not within the forecast: from its end (or from the restart, if that comes later) the last value persists.
    tail_start = float(forecast.size) if math.floor(downtime) + 1 <= forecast.size else downtime
    pending = backlog + _arrived(arrivals, forecast, tail_start)
    return _tail(tail_start, shares, rates, pending, downtime, float(forecast[-1]), slack)


def _caught_up_within_forecast(
    waiting: _Waiting, forecast: np.ndarray, arrivals: np.ndarray, downtime: float, slack: float
) -> float | None:
    """The moment the job is caught up, if that is at the restart or within the forecast's seconds; else None."""
    horizon = forecast.size

    def behind(t: np.ndarray, arrived: np.ndarray, caught_up: np.ndarray) -> np.ndarray:
        """Records still waiting at times ``t`` beyond what counts as caught up (<= 0: recovered)."""
        return waiting(np.maximum(t - downtime, 0.0), arrived) - CAUGHT_UP_S * caught_up

    k = min(int(math.floor(downtime)), horizon)
    arrived = np.array([_arrived(arrivals, forecast, downtime)])
    start_value = float(behind(np.array([downtime]), arrived, forecast[max(0, k - 1) : max(1, k)])[0])
    if start_value <= slack:
        return downtime
    first = int(math.floor(downtime)) + 1
    if first > horizon:
        return None
    grid = np.arange(first, horizon + 1)
    values = behind(grid.astype(float), arrivals[first:], forecast[grid - 1])
    hits = np.flatnonzero(values <= slack)
    if not hits.size:
        return None
    k = int(hits[0])
    end = float(grid[k])
    start, s0 = (downtime, start_value) if k == 0 else (float(grid[k - 1]), float(values[k - 1]))
    s1 = float(values[k])
    # Within a second the waiting records change (almost) linearly: interpolate the crossing.
    return start + (end - start) * _crossing(s0, s1, slack)


def _slack(backlog: float, arrived: float) -> float:
    """Records of rounding the caught-up test allows: a billionth of those in play (at least of one)."""
    in_play = backlog + (arrived if math.isfinite(arrived) else 0.0)
    return 1e-9 * max(1.0, in_play) if math.isfinite(in_play) else 0.0


class _Waiting:
    """The records the workers still hold together, ``sum_i share_i * max(b_i + arrived - rate_i * tau, 0)``,
    at many times at once in O((workers + times) log workers), not O(workers * times): every worker but
    the bottleneck starts from the same backlog ``b`` (the replay), so at a given time exactly those with
    ``rate_i < (b + arrived) / tau`` still hold records, a prefix of the workers sorted by rate, and their
    sum is ``(b + arrived) * S - tau * SR`` over prefix sums of shares (S) and shares times rates (SR).
    At 1,000 workers the analyzer predicts a recovery for every candidate scale-out each round; the
    product of workers and seconds made that round take seconds."""

    def __init__(
        self, shares: np.ndarray, rates: np.ndarray, backlog: float, bottleneck: int, bottleneck_backlog: float
    ) -> None:
        others = np.ones(shares.size, dtype=bool)
        others[bottleneck] = False
        order = np.argsort(rates[others], kind="stable")
        self.rates = rates[others][order]
        ordered = shares[others][order]
        self.shares = np.concatenate(([0.0], np.cumsum(ordered)))
        self.worked = np.concatenate(([0.0], np.cumsum(ordered * self.rates)))
        self.backlog = backlog
        self.bottleneck = (float(shares[bottleneck]), float(rates[bottleneck]), bottleneck_backlog)

    def __call__(self, tau: np.ndarray, arrived: np.ndarray) -> np.ndarray:
        """Records waiting after ``tau`` seconds of processing with ``arrived`` records arrived since the stop."""
        # A forecast beyond floating point (garbage in) gives inf or NaN here, which never counts as caught up.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            pending = self.backlog + arrived
            limit = np.where(tau > 0, pending / np.where(tau > 0, tau, 1.0), np.inf)
            k = np.searchsorted(self.rates, limit, side="left")
            total = np.maximum(pending * self.shares[k] - tau * self.worked[k], 0.0)
            share, rate, held = self.bottleneck
            return total + share * np.maximum(held + arrived - rate * tau, 0.0)


def _arrived(arrivals: np.ndarray, forecast: np.ndarray, t: float) -> float:
    """Records arrived in ``[0, t)`` (the last forecast value persisting beyond the horizon)."""
    horizon = forecast.size
    if t >= horizon:
        with np.errstate(over="ignore"):
            return float(arrivals[-1] + forecast[-1] * (t - horizon))
    k = int(math.floor(t))
    return float(arrivals[k] + forecast[k] * (t - k))


def _tail(
    start: float,
    shares: np.ndarray,
    rates: np.ndarray,
    pending: np.ndarray,
    downtime: float,
    rate: float,
    slack: float = 0.0,
) -> float:
    """The crossing after ``start``, with a constant workload ``rate``: each worker's waiting records then
    fall linearly until it is done, so the job's are piecewise linear between the workers' finishing times."""
    with np.errstate(over="ignore", invalid="ignore"):
        excess = pending - rates * max(start - downtime, 0.0)  # per unit share, at ``start``
    if not np.all(np.isfinite(excess)):
        return math.inf  # a backlog beyond floating point is never worked off
    drain = rates - rate
    waiting = excess > 0
    if np.any(waiting & (drain <= 0)):
        return math.inf  # a worker that cannot keep up never works its backlog off
    if not np.any(waiting):
        return start
    # The workers still holding records, by finishing time: past its own a worker holds nothing, so at any
    # moment those holding are a suffix, and their sum is linear in tau between finishing times.
    done = excess[waiting] / drain[waiting]
    order = np.argsort(done, kind="stable")
    done = done[order]
    held = (shares[waiting] * excess[waiting])[order]
    drained = (shares[waiting] * drain[waiting])[order]
    held_after = np.concatenate((np.cumsum(held[::-1])[::-1], [0.0]))  # suffix sums
    drained_after = np.concatenate((np.cumsum(drained[::-1])[::-1], [0.0]))
    threshold = CAUGHT_UP_S * rate
    v0 = float(held_after[0]) - threshold
    if v0 <= slack:
        return start
    breaks = np.unique(done)
    first = np.searchsorted(done, breaks, side="right")  # the first worker still holding after each break
    values = np.maximum(held_after[first] - breaks * drained_after[first], 0.0) - threshold
    hits = np.flatnonzero(values <= slack)
    if not hits.size:
        return math.inf
    j = int(hits[0])
    previous, before = (0.0, v0) if j == 0 else (float(breaks[j - 1]), float(values[j - 1]))
    tau, after = float(breaks[j]), float(values[j])
    return start + previous + (tau - previous) * _crossing(before, after, slack)


def _crossing(before: float, after: float, slack: float) -> float:
    """Where between two points (0..1) a line from ``before`` (above ``slack``) to ``after`` (at or below it)
    reaches ``slack``."""
    return min(1.0, max(0.0, (before - slack) / (before - after))) if before > after else 1.0


def ready_workload(
    *, capacity: float, downtime_s: float, replay_s: float, target_s: float, profile: WorkerProfile | None = None
) -> float:
    """The highest steady workload ``W`` at which a stop of ``downtime_s`` that replays ``replay_s`` seconds of
    input is caught up (:data:`CAUGHT_UP_S`) within ``target_s``, as :func:`recovery_time` predicts it: the inverse
    of that prediction for a constant forecast, solved exactly, below ``capacity``.

    By then each worker has processed for ``tau = target_s - downtime_s`` and, per unit of its share, held
    ``W * a - r_i * tau`` (``a = target_s + replay_s``: what arrived since the stop and the replay) at its saturation
    rate ``r_i``; summed over the workers by their shares this is convex and piecewise linear in ``W``, at most
    ``CAUGHT_UP_S * W`` from zero up to the answer. Below the capacity every worker drains, so caught up by then is
    caught up within the target."""
    tau = float(target_s) - max(float(downtime_s), 0.0)
    if tau <= 0 or not (math.isfinite(capacity) and capacity > 0):
        return 0.0
    shares, rates = _job_rates(capacity, profile)
    order = np.argsort(rates, kind="stable")
    rates, shares = rates[order], shares[order]
    a = float(target_s) + max(float(replay_s), 0.0)
    held_shares = np.cumsum(shares)  # with the k+1 slowest workers still holding records
    held_worked = np.cumsum(shares * rates)
    slope = a * held_shares - CAUGHT_UP_S
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = np.where(slope > 0, tau * held_worked / slope, np.inf)
    low = rates * tau / a  # where each worker starts holding records at ``tau``
    high = np.append(low[1:], np.inf)
    inside = (crossing >= low) & (crossing <= high)
    ready = float(crossing[np.flatnonzero(inside)[0]]) if np.any(inside) else math.inf
    return min(ready, float(capacity))


def _inputs(
    capacity: float | None, forecast: Any, recent_workload_rate: float | None, current_lag: float | None
) -> tuple[float, np.ndarray, float, float] | None:
    """A prediction's cleaned inputs ``(capacity, forecast, replayed rate, lag waiting)``, or None when it is "never"
    (no usable capacity or forecast). The replayed rate falls back to the forecast's first second."""
    if capacity is None or not math.isfinite(capacity) or capacity <= 0:
        return None
    series = _clean_forecast(forecast, recent_workload_rate)
    if series is None:
        return None
    rate = recent_workload_rate
    if rate is None or not math.isfinite(rate) or rate < 0:
        rate = float(series[0])
    lag = current_lag if current_lag is not None and math.isfinite(current_lag) and current_lag > 0 else 0.0
    return float(capacity), series, float(rate), float(lag)


def _bottleneck(shares: np.ndarray, rates: np.ndarray) -> int:
    """The worker that saturates first; among those within rounding of the slowest rate, the one of the smallest
    share, whose partitions a held backlog takes the longest to work off (a tie is the slower recovery, and the
    same one however the rates were rounded)."""
    tied = np.flatnonzero(rates <= float(np.min(rates)) * (1.0 + 1e-9))
    return int(tied[np.argmin(shares[tied])])


def _job_rates(capacity: float, profile: WorkerProfile | None) -> tuple[np.ndarray, np.ndarray]:
    """Shares and the job rate at which each worker saturates (capacity_i / share_i), the slowest at ``capacity``."""
    if profile is not None:
        shares, capacities = (np.asarray(a, dtype=float).ravel() for a in profile)
        usable = (shares > 0) & np.isfinite(shares) & (capacities > 0) & np.isfinite(capacities)
        if shares.shape == capacities.shape and np.any(usable):
            shares, rates = shares[usable], capacities[usable] / shares[usable]
            return shares / shares.sum(), rates * (capacity / float(rates.min()))
    return np.ones(1), np.array([float(capacity)])


@dataclass(frozen=True, eq=False)
class PredictionContext:
    """What a recovery prediction was made of: a measured recovery is explained against it."""

    capacity: float
    """The job's sustainable rate at the scale-out, records/s."""
    forecast: np.ndarray
    """The workload per second after the stop, records/s (cleaned: finite, non-negative)."""
    rate: float
    """The recent workload rate the replay was taken from, records/s."""
    lag: float
    """Records already waiting before the stop."""
    profile: WorkerProfile | None
    """The workers' shares and capacities, when known."""

    @classmethod
    def given(
        cls,
        capacity: float,
        forecast: Any,
        recent_workload_rate: float | None,
        current_lag: float | None,
        profile: WorkerProfile | None,
    ) -> PredictionContext | None:
        """A context stated by the caller; None when neither the forecast nor the rate says what arrives."""
        series = _clean_forecast(forecast, recent_workload_rate)
        if series is None:
            return None
        rate = recent_workload_rate if recent_workload_rate is not None else series[0]
        return cls(float(capacity), series, float(rate), float(current_lag or 0.0), profile)


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
        checkpoint_interval_s: float = CHECKPOINT_INTERVAL_S,
        downtime_rescale_prior_s: float = DOWNTIME_RESCALE_PRIOR_S,
        downtime_failure_prior_s: float = DOWNTIME_FAILURE_PRIOR_S,
        *,
        aligned_rescales: bool = False,
    ) -> None:
        """Priors are the downtimes assumed before any recovery of that kind was measured; ``aligned_rescales``:
        the scale target aligns each rescale with a checkpoint triggered for it, so a rescale replays next to
        nothing (a failure still replays what came since the last checkpoint)."""
        if checkpoint_interval_s <= 0:
            raise ValueError(f"checkpoint_interval_s must be positive, got {checkpoint_interval_s}")
        self.checkpoint_interval_s = float(checkpoint_interval_s)
        self.aligned_rescales = aligned_rescales
        self.priors = {"rescale": float(downtime_rescale_prior_s), "failure": float(downtime_failure_prior_s)}
        self._per_scale_out: dict[tuple[str, int], _Estimate] = {}
        self._per_kind: dict[str, _Estimate] = {}
        self._lines: dict[str, WelfordRegression] = {}
        self._context: dict[tuple[str, int], PredictionContext] = {}
        self.unexplained = 0
        """Measured recoveries that no downtime could explain (e.g. capacity below the forecast)."""

    # ------------------------------------------------------------------ downtime

    def downtime(self, kind: str, parallelism: int, current: int | None = None) -> float:
        """Expected downtime of a stop to ``parallelism`` from ``current`` (see the module docstring):
        learned at this scale-out > line over scale-outs > mean of kind > prior."""
        return self.downtime_with_source(kind, parallelism, current)[0]

    def downtime_with_source(self, kind: str, parallelism: int, current: int | None = None) -> tuple[float, str]:
        """``(seconds, source)`` with source ``measured``, ``interpolated``, ``kind-mean`` or ``prior``."""
        _check_kind(kind)
        parallelism = _key(kind, parallelism, current)
        estimate = self._per_scale_out.get((kind, parallelism))
        if estimate is not None and estimate.count:
            return estimate.value, "measured"
        line = self._lines.get(kind)
        measured = [n for (k, n), e in self._per_scale_out.items() if k == kind and e.count]
        if line is not None and measured:
            # Read between the scale-outs measured: beyond them, at the nearest one. Two neighbours 23 s apart
            # (one stop's downtime taken with a failure inside its watch) extrapolated a restart of 27 s to
            # 4 s one scale-out down, and the planner priced its waits as for an in-place rescale.
            value = line.predict(float(min(max(parallelism, min(measured)), max(measured))))
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
        profile: WorkerProfile | None = None,
        current: int | None = None,
    ) -> float:
        """Predicted seconds from the stop until caught up at ``parallelism`` (inf if never or unknown capacity).

        ``forecast``: workload per second from now (records/s); ``recent_workload_rate``: mean workload
        of the last checkpoint interval (what is replayed); ``current_lag``: records already waiting;
        ``profile``: the workers' shares and capacities at ``parallelism``, when known (see :func:`recovery_time`);
        ``current``: the scale-out the job runs at now (a rescale's downtime depends on it too).
        """
        _check_kind(kind)
        inputs = _inputs(capacity, forecast, recent_workload_rate, current_lag)
        if inputs is None:
            return math.inf
        capacity, series, rate, lag = inputs
        self._context[(kind, int(parallelism))] = PredictionContext(capacity, series, rate, lag, profile)
        downtime = self.downtime(kind, parallelism, current) if downtime_s is None else float(downtime_s)
        return recovery_time(
            capacity=capacity,
            forecast=series,
            replay_records=self.replay_records(rate, kind),
            downtime_s=downtime,
            profile=profile,
            held_records=lag,
        )

    def predict_bad_case(
        self,
        capacity: float | None,
        upper: Any,
        recent_workload_rate: float | None,
        *,
        parallelism: int,
        current: int,
        current_lag: float = 0.0,
        profile: WorkerProfile | None = None,
        whole_interval: bool = True,
    ) -> float:
        """The recovery of a rescale from ``current`` to ``parallelism`` in the bad case: the stop falls just
        before a checkpoint completes (a whole interval replayed) and the workload rises as ``upper`` says
        (the rise envelope) while the job catches up. What a rescale that is only an option, a scale-in, must
        recover within; the expected case (:meth:`predict`) is what the watch compares with, and this one is
        not recorded for learning. An aligned rescale's bad case is the same: its checkpoint may fail or miss
        its bound, and the rescale then goes ahead from the last one. ``whole_interval`` False: the stop replays what
        one at a random moment does (:meth:`replay_records`), the workload alone as ``upper`` says."""
        inputs = _inputs(capacity, upper, recent_workload_rate, current_lag)
        if inputs is None:
            return math.inf
        capacity, series, rate, lag = inputs
        return recovery_time(
            capacity=capacity,
            forecast=series,
            replay_records=(2 if whole_interval else 1) * self.replay_records(rate),
            downtime_s=self.downtime("rescale", parallelism, current),
            profile=profile,
            held_records=lag,
        )

    def failure_ready_rate(
        self,
        capacity: float | None,
        parallelism: int,
        target_s: float,
        profile: WorkerProfile | None = None,
        *,
        after_rescale_from: int | None = None,
    ) -> float | None:
        """The highest steady workload at which a failure at ``parallelism`` (of ``capacity``, its workers as
        ``profile`` says) still recovers within ``target_s`` as :meth:`predict` predicts it (:func:`ready_workload`);
        None when the capacity is unknown. ``after_rescale_from``: the failure strikes as a rescale from that
        scale-out ends, and the one recovery works off both stops (their downtimes and replays added up)."""
        if capacity is None or not math.isfinite(capacity) or capacity <= 0:
            return None
        downtime_s, replay_s = self.downtime("failure", parallelism, parallelism), self.replay_s("failure")
        if after_rescale_from is not None:
            downtime_s += self.downtime("rescale", parallelism, after_rescale_from)
            replay_s += self.replay_s("rescale")
        return ready_workload(
            capacity=float(capacity),
            downtime_s=downtime_s,
            replay_s=replay_s,
            target_s=target_s,
            profile=profile,
        )

    def replay_records(self, recent_workload_rate: float, kind: str = "failure") -> float:
        """Records a stop of ``kind`` replays: :meth:`replay_s` seconds of the recent workload. The lag already
        waiting comes on top."""
        return recent_workload_rate * self.replay_s(kind)

    def replay_s(self, kind: str = "failure") -> float:
        """Seconds of input a stop of ``kind`` replays: those since the last checkpoint (half an interval, the
        expected replay of a stop at a random moment), none for a rescale aligned with a checkpoint."""
        if kind == "rescale" and self.aligned_rescales:
            return 0.0
        return self.checkpoint_interval_s / 2

    def last_context(self, kind: str, parallelism: int) -> PredictionContext | None:
        """What the last :meth:`predict` for this kind and scale-out was made of, if there was one."""
        return self._context.get((kind, int(parallelism)))

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
        profile: WorkerProfile | None = None,
        current: int | None = None,
    ) -> float | None:
        """Fold a measured recovery into the downtime estimate; returns the downtime it implies, or None.

        The context (capacity, forecast, recent rate, profile) defaults to the one of the last :meth:`predict`
        for this kind and scale-out, i.e. what was believed when the stop happened; ``current`` is the
        scale-out the job stopped at.
        """
        _check_kind(kind)
        context = self._context.get((kind, int(parallelism)))
        if capacity is not None:
            context = PredictionContext.given(capacity, forecast, recent_workload_rate, current_lag, profile)
        downtime = None
        if math.isfinite(measured_s) and measured_s >= 0 and context is not None:
            downtime = self._implied_downtime(context, measured_s, kind)
        if downtime is None:
            self.unexplained += 1
            return None
        self._fold(kind, _key(kind, parallelism, current), downtime)
        return downtime

    def _implied_downtime(self, context: PredictionContext, measured_s: float, kind: str) -> float | None:
        """The downtime that makes the prediction in ``context`` equal ``measured_s`` (bisection: recovery time
        grows with downtime); 0 when even none predicts longer; None when no downtime predicts a recovery."""
        replay = self.replay_records(context.rate, kind)

        def predicted(downtime: float) -> float:
            return recovery_time(
                capacity=context.capacity,
                forecast=context.forecast,
                replay_records=replay,
                downtime_s=downtime,
                profile=context.profile,
                held_records=context.lag,
            )

        if not math.isfinite(predicted(0.0)):
            return None
        if predicted(0.0) >= measured_s:
            # Faster than even a zero downtime explains (a checkpoint had just completed): the
            # downtime was at most zero.
            return 0.0
        low, high = 0.0, float(measured_s)
        for _ in range(50):
            mid = (low + high) / 2
            if predicted(mid) < measured_s:
                low = mid
            else:
                high = mid
        return (low + high) / 2

    def observe_downtime(self, *, kind: str, parallelism: int, downtime_s: float, current: int | None = None) -> None:
        """Fold a directly measured downtime (e.g. from job uptime) of a stop from ``current`` into the estimates."""
        _check_kind(kind)
        if math.isfinite(downtime_s) and downtime_s >= 0:
            self._fold(kind, _key(kind, parallelism, current), float(downtime_s))

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

    def reconfigured(
        self,
        checkpoint_interval_s: float,
        downtime_rescale_prior_s: float,
        downtime_failure_prior_s: float,
        *,
        aligned_rescales: bool,
    ) -> RecoveryPredictor:
        """A predictor with this one's measurements under the given configuration: the settings an agent runs
        with now, not those the measurements were saved under."""
        predictor = RecoveryPredictor(
            checkpoint_interval_s, downtime_rescale_prior_s, downtime_failure_prior_s, aligned_rescales=aligned_rescales
        )
        predictor._per_scale_out = dict(self._per_scale_out)
        predictor._per_kind = dict(self._per_kind)
        predictor._lines = {kind: line.copy() for kind, line in self._lines.items()}
        predictor.unexplained = self.unexplained
        return predictor

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> RecoveryPredictor:
        """Rebuild a predictor written by :meth:`to_dict`."""
        priors = state.get("priors", {})
        predictor = cls(
            checkpoint_interval_s=float(state.get("checkpoint_interval_s", CHECKPOINT_INTERVAL_S)),
            downtime_rescale_prior_s=float(priors.get("rescale", DOWNTIME_RESCALE_PRIOR_S)),
            downtime_failure_prior_s=float(priors.get("failure", DOWNTIME_FAILURE_PRIOR_S)),
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


def _key(kind: str, parallelism: int, current: int | None) -> int:
    """The scale-out a downtime is kept under: the larger of a rescale's two, a failure's own."""
    return max(int(parallelism), int(current)) if kind == "rescale" and current is not None else int(parallelism)


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
