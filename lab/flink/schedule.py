"""The trace job's production schedule in Python: how many records each partition holds at a wall time.

A mirror of ``jobs/trace-source/.../ProductionSchedule.java``, operation by operation in IEEE double,
so the lab knows the job's ground truth (records produced, per partition and in all) without asking
the job: the benchmark's accounting, the expected totals at the end of a run, the skew each reader
sees. ``tests/flink/test_trace_job.py`` checks it bit for bit against the Java class.

With ``s = clamp((now_ms - epoch_ms) / 1000.0, 0, end_s)`` wall seconds since the epoch, the log
holds ``total(s) = rate * s`` records in fixed-rate mode, or ``I(s * compress) / compress`` in trace
mode, ``I`` being the integral over trace time of ``scale`` times the trace's rate (linear between
points, held before the first and after the last). Partition ``p`` holds ``floor(weight[p] * total)``.

>>> schedule = ProductionSchedule.fixed_rate(1000.0, partitions=4, skew=1.0, seed=7, epoch_ms=0)
>>> [schedule.produced(p, 2500) for p in range(4)], schedule.produced_all(2500)
([600, 400, 1200, 300], 2500)
"""

from __future__ import annotations

import bisect
import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from simulator.trace import TraceError, read_text_lines

_MASK64 = (1 << 64) - 1


def _splitmix64(seed: int) -> _SplitMix64:
    return _SplitMix64(seed & _MASK64)


class _SplitMix64:
    """SplitMix64 (Steele, Lea, Flood 2014) on unsigned 64-bit ints, as Java runs it on signed longs."""

    def __init__(self, state: int) -> None:
        self.state = state

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)


def partition_weights(partitions: int, skew: float, seed: int) -> tuple[float, ...]:
    """Zipf weights with exponent ``skew`` over ranks, ranks dealt to partitions by a seeded shuffle.

    ``raw[k] = (k + 1) ** -skew``, normalised by their sum (in rank order); partition ``p`` gets the
    weight of rank ``perm[p]``, ``perm`` being the identity shuffled by Fisher-Yates from the top with
    SplitMix64(seed): for i = n-1 down to 1, j = next() mod (i + 1), swap perm[i] and perm[j].
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    by_rank = [math.pow(k + 1, -skew) for k in range(partitions)]
    total = 0.0
    for value in by_rank:
        total += value
    by_rank = [value / total for value in by_rank]
    perm = list(range(partitions))
    random = _splitmix64(seed)
    for i in range(partitions - 1, 0, -1):
        j = random.next() % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return tuple(by_rank[perm[p]] for p in range(partitions))


def read_trace(path: Path) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(times, rates) of a ``time_s,rate`` CSV; ValueError naming the file and line of a bad row."""
    times: list[float] = []
    rates: list[float] = []
    try:
        lines = read_text_lines(path, what="trace")
    except TraceError as exc:
        raise ValueError(str(exc)) from None
    try:
        rows = csv.reader(lines)
        header = next(rows, None)
        if header is None or [cell.strip() for cell in header] != ["time_s", "rate"]:
            raise ValueError(f"{path}:1: the header must be time_s,rate")
        for line, row in enumerate(rows, start=2):
            if not row or not "".join(row).strip():
                continue
            try:
                time_s, rate = float(row[0]), float(row[1])
            except (ValueError, IndexError):
                raise ValueError(f"{path}:{line}: not two numbers: {','.join(row)}") from None
            if not time_s >= 0.0 or (times and not time_s > times[-1]):
                raise ValueError(f"{path}:{line}: time_s must be >= 0 and increasing, got {row[0]}")
            if not rate >= 0.0 or math.isinf(rate):
                raise ValueError(f"{path}:{line}: negative or infinite rate {row[1]}")
            times.append(time_s)
            rates.append(rate)
    except csv.Error as exc:
        raise ValueError(f"{path}:{rows.line_num}: not CSV: {exc}") from None
    if not times:
        raise ValueError(f"{path}: no points")
    return tuple(times), tuple(rates)


@dataclass(frozen=True)
class ProductionSchedule:
    """Records per partition as a function of the wall time (see the module doc)."""

    epoch_ms: int
    weights: tuple[float, ...]
    rate: float | None
    """Fixed rate over all partitions, records per wall second; None in trace mode."""
    times: tuple[float, ...] = ()
    rates: tuple[float, ...] = ()
    """Trace points (trace seconds, records/s already multiplied by the scale)."""
    compress: float = 1.0
    end_s: float = math.inf
    _cumulative: tuple[float, ...] = field(init=False, repr=False, compare=False)
    """Integral of the rate over trace time [0, times[i]] (trapezoids), as the Java class sums it."""

    def __post_init__(self) -> None:
        cumulative: list[float] = []
        if self.times:
            cumulative.append(self.rates[0] * self.times[0])
            for i in range(1, len(self.times)):
                step = (self.times[i] - self.times[i - 1]) * (self.rates[i - 1] + self.rates[i]) / 2.0
                cumulative.append(cumulative[i - 1] + step)
        object.__setattr__(self, "_cumulative", tuple(cumulative))

    @classmethod
    def fixed_rate(
        cls, rate: float, *, partitions: int, skew: float, seed: int, epoch_ms: int, end_s: float = math.inf
    ) -> ProductionSchedule:
        """``rate`` records per second over all partitions from ``epoch_ms`` on."""
        return cls(epoch_ms, partition_weights(partitions, skew, seed), float(rate), end_s=end_s)

    @classmethod
    def from_trace(
        cls,
        trace: Path,
        *,
        partitions: int,
        skew: float,
        seed: int,
        epoch_ms: int,
        compress: float = 1.0,
        scale: float = 1.0,
        end_s: float = math.inf,
    ) -> ProductionSchedule:
        """The trace's rates times ``scale``, ``compress`` trace seconds per wall second, from ``epoch_ms`` on."""
        times, rates = read_trace(trace)
        return cls(
            epoch_ms,
            partition_weights(partitions, skew, seed),
            None,
            times,
            tuple(scale * r for r in rates),
            compress,
            end_s,
        )

    @property
    def partitions(self) -> int:
        """Number of partitions."""
        return len(self.weights)

    def total(self, now_ms: int) -> float:
        """Records produced over all partitions by ``now_ms``, before the per-partition rounding."""
        s = (now_ms - self.epoch_ms) / 1000.0
        if not s > 0.0:
            return 0.0
        s = min(s, self.end_s)
        if self.rate is not None:
            return self.rate * s
        return self._integral(s * self.compress) / self.compress

    def produced(self, partition: int, now_ms: int) -> int:
        """Records partition ``partition`` holds at ``now_ms``."""
        return math.floor(self.weights[partition] * self.total(now_ms))

    def produced_all(self, now_ms: int) -> int:
        """Records all partitions hold at ``now_ms`` (what the job's producedRecords gauges add up to)."""
        total = self.total(now_ms)
        return sum(math.floor(weight * total) for weight in self.weights)

    def rate_at(self, now_ms: int) -> float:
        """Production rate at ``now_ms``, records per wall second over all partitions."""
        s = (now_ms - self.epoch_ms) / 1000.0
        if s < 0.0 or s >= self.end_s:
            return 0.0
        if self.rate is not None:
            return self.rate
        tau = s * self.compress
        if tau <= self.times[0]:
            return self.rates[0]
        if tau >= self.times[-1]:
            return self.rates[-1]
        i = bisect.bisect_right(self.times, tau) - 1
        return self.rates[i] + (self.rates[i + 1] - self.rates[i]) * (tau - self.times[i]) / (
            self.times[i + 1] - self.times[i]
        )

    def owned(self, parallelism: int) -> list[list[int]]:
        """The partitions of each reader at ``parallelism``: partition p is read by subtask p % parallelism (at the
        first start; after a restore on Flink 2.x too, on 1.20 not: see jobs/trace-source/README.md)."""
        return [list(range(index, self.partitions, parallelism)) for index in range(parallelism)]

    def reader_shares(self, parallelism: int) -> list[float]:
        """Each reader's share of the production at ``parallelism`` (the skew a subtask sees)."""
        return [sum(self.weights[p] for p in partitions) for partitions in self.owned(parallelism)]

    def _integral(self, tau: float) -> float:
        times, rates, cumulative = self.times, self.rates, self._cumulative
        last = len(times) - 1
        if tau < times[0]:
            return rates[0] * tau
        if tau >= times[last]:
            return cumulative[last] + (tau - times[last]) * rates[last]
        i = bisect.bisect_right(times, tau) - 1
        d = tau - times[i]
        at = rates[i] + (rates[i + 1] - rates[i]) * d / (times[i + 1] - times[i])
        return cumulative[i] + d * (rates[i] + at) / 2.0
