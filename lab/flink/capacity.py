"""The trace job's true capacity per scale-out, measured on the real cluster with short fixed-rate runs.

The capacity of a job at a scale-out is the largest production rate whose backlog stays bounded. It
is not the slots times the per-slot capacity: the partitions are skewed, so the reader with the
largest share saturates first (``ProductionSchedule.reader_shares``). Two measurements:

- :func:`saturated_estimate`: one run above capacity; each reader's read rate over the last window
  divided by its share of the production. A reader that keeps up reads ``share × rate``, which
  divides back to the offered rate; a saturated one reads its capacity, which divides to the rate the
  job could sustain if that reader were the limit. The minimum over readers is the job's capacity.
- :func:`max_sustainable_rate`: a binary search over fixed rates, each one run, judged by whether the
  backlog stayed bounded (:func:`is_bounded`); bracketed around the saturated estimate. The capacity is
  where the backlog stops growing, extrapolated from the probes it grew in (:func:`zero_growth_rate`).

Every run is a fresh job at the asked parallelism, cancelled afterwards, on a cluster the caller owns.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from lab.flink.harness import OPERATOR, RealFlink
from lab.flink.trace_job import TraceJob, TraceJobOptions

WARMUP_S = 12.0
"""Seconds a run settles before its window is read (the readers start, the backlog of a saturated one builds)."""
WINDOW_S = 15
"""Seconds over which rates and backlog growth are read."""
STEADY_GROWTH = 0.002
"""A backlog growing by at most this fraction of the offered rate a second is holding still (window noise)."""


@dataclass(frozen=True)
class Probe:
    """One fixed-rate run at one scale-out: its rate, the backlog's growth and whether it stayed bounded."""

    parallelism: int
    rate: float
    growth_per_s: float
    """Backlog growth over the window, records/s (the busiest reader's deficit when saturated)."""
    backlog: float
    """Backlog at the end of the window, records."""
    bounded: bool


@dataclass(frozen=True)
class Capacity:
    """The measured capacity at one scale-out: the bracket ``[sustained, failed)`` of the search."""

    parallelism: int
    saturated: float
    """The saturated estimate (min over readers of read rate / share)."""
    sustained: float
    """The largest probed rate whose backlog stayed bounded (0 if none did)."""
    failed: float
    """The smallest probed rate whose backlog grew (inf if none did)."""
    probes: tuple[Probe, ...]

    @property
    def rate(self) -> float:
        """The capacity: where the backlog stops growing (:func:`zero_growth_rate`), else the bracket's middle, else
        the saturated estimate when the search bracketed nothing."""
        zero = zero_growth_rate(self.probes)
        if zero is not None:
            return zero
        if self.sustained > 0 and math.isfinite(self.failed):
            return (self.sustained + self.failed) / 2
        return self.saturated

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Capacity:
        """Rebuild from ``dataclasses.asdict`` of one (a ``capacities.json``'s measurement)."""
        probes = tuple(
            Probe(
                int(p["parallelism"]),
                float(p["rate"]),
                float(p["growth_per_s"]),
                float(p["backlog"]),
                bool(p["bounded"]),
            )
            for p in data.get("probes", ())
        )
        return cls(
            int(data["parallelism"]),
            float(data["saturated"]),
            float(data["sustained"]),
            float(data["failed"]),  # JSON's Infinity reads back as inf
            probes,
        )

    @property
    def resolution(self) -> float:
        """Half the bracket relative to the capacity (how sharp the search got), or inf."""
        if self.sustained > 0 and math.isfinite(self.failed):
            return (self.failed - self.sustained) / 2 / self.rate
        return math.inf


def zero_growth_rate(probes: Sequence[Probe]) -> float | None:
    """The rate at which the backlog stops growing, from the probes it grew in; None with fewer than two.

    Above capacity the backlog grows by the saturated readers' deficit, their share of the offered rate less what
    they carry: a line in the rate, whose slope is that share (about a half at four of six skewed slots), so
    extrapolated to no growth it gives the capacity. A probe is bounded while its backlog grows by under 1 % of
    its rate, a tolerance the 15-s window needs against noise; read as the capacity, the bracket it leaves put a
    rate whose backlog grew 34 records/s (+2 % at a slope of a half) on the sustained side. The line is kept
    within what the probes show: above the highest rate whose backlog held still (grew by at most
    :data:`STEADY_GROWTH` of it: the probes at a steady rate read -1 to +2 records/s), below the lowest it grew in.
    """
    grew = [p for p in probes if not p.bounded]
    if len({p.rate for p in grew}) < 2:
        return None
    rates = np.array([p.rate for p in grew])
    growth = np.array([p.growth_per_s for p in grew])
    slope, intercept = np.polyfit(rates, growth, 1)
    if not slope > 0:
        return None
    steady = [p.rate for p in probes if p.growth_per_s <= STEADY_GROWTH * p.rate]
    return float(np.clip(-intercept / slope, max(steady, default=0.0), rates.min()))


def _run(harness: RealFlink, options: TraceJobOptions, seconds: float) -> tuple[TraceJob, float]:
    """Submit a fixed-rate job, let it run ``seconds`` of production; the job and the end of its window."""
    options = replace(options, epoch_ms=int(time.time() * 1000) + 2000, end_s=None)
    job = harness.submit(options)
    epoch = (options.epoch_ms or 0) / 1000
    harness.wait_until(job, epoch + seconds + 2)  # 2 s: the last scrape lands in Prometheus
    return job, epoch + seconds


def saturated_estimate(harness: RealFlink, base: TraceJobOptions, parallelism: int, rate: float) -> float:
    """min over readers of (read rate over the window / share of production), from one run at ``rate``."""
    options = replace(base, rate_per_s=rate, trace=None, parallelism=parallelism)
    job, end = _run(harness, options, WARMUP_S + WINDOW_S)
    try:
        shares = job.schedule().reader_shares(parallelism)
        promql = (
            f'sum by (subtask_index) (rate({OPERATOR}_numRecordsOut{{job_id="{job.job_id}",'
            f'operator_name=~"Source:.*"}}[{WINDOW_S}s]))'
        )
        reads = {
            int(s["metric"]["subtask_index"]): float(s["value"][1]) for s in harness.prometheus.query_at(promql, end)
        }
    finally:
        harness.cancel(job)
    if len(reads) != parallelism:
        raise RuntimeError(
            f"saturated run at {parallelism}: read rates of {sorted(reads)} subtasks, expected {parallelism}"
        )
    return min(reads[index] / shares[index] for index in range(parallelism) if shares[index] > 0)


def is_bounded(harness: RealFlink, base: TraceJobOptions, parallelism: int, rate: float) -> Probe:
    """One run at ``rate``: bounded when the backlog grew by less than 1 % of the rate per second over the
    window and ends under a second of production (a saturated reader's backlog grows by its deficit)."""
    options = replace(base, rate_per_s=rate, trace=None, parallelism=parallelism)
    job, end = _run(harness, options, WARMUP_S + WINDOW_S)
    try:
        backlog = f'sum({OPERATOR}_pendingRecords{{job_id="{job.job_id}",operator_name=~"Source:.*"}})'
        at_end = float(harness.prometheus.query_at(backlog, end)[0]["value"][1])
        at_start = float(harness.prometheus.query_at(backlog, end - WINDOW_S)[0]["value"][1])
    finally:
        harness.cancel(job)
    growth = (at_end - at_start) / WINDOW_S
    return Probe(parallelism, rate, growth, at_end, bounded=growth < 0.01 * rate and at_end < rate)


def max_sustainable_rate(
    harness: RealFlink,
    base: TraceJobOptions,
    parallelism: int,
    *,
    per_slot: float,
    probes: int = 3,
    bracket: float = 0.08,
    log: Callable[[str], None] = print,
) -> Capacity:
    """The capacity at ``parallelism``: the saturated estimate, then ``probes`` runs that bracket and bisect it.

    ``per_slot`` is the configured per-slot capacity; the saturating run offers 1.3 × slots × per_slot.
    The first probe is ``bracket`` below the estimate, the next ``bracket`` above the highest bounded rate
    (or below the lowest unbounded one) until both ends are known, then the bracket is halved.
    """
    saturated = saturated_estimate(harness, base, parallelism, 1.3 * parallelism * per_slot)
    log(f"  {parallelism} slots: saturated estimate {saturated:,.0f}/s")
    sustained, failed = 0.0, math.inf
    done: list[Probe] = []
    for _ in range(probes):
        if sustained == 0 and not math.isfinite(failed):
            rate = saturated * (1 - bracket)
        elif sustained == 0:
            rate = failed * (1 - bracket)  # even the bracket's low end grew: look further down
        elif not math.isfinite(failed):
            rate = sustained * (1 + bracket)  # bounded so far: look further up
        else:
            rate = (sustained + failed) / 2
        probe = is_bounded(harness, base, parallelism, rate)
        done.append(probe)
        log(
            f"  {parallelism} slots at {rate:,.0f}/s: backlog {'bounded' if probe.bounded else 'grows'} "
            f"({probe.growth_per_s:+,.0f}/s, {probe.backlog:,.0f} at the end)"
        )
        if probe.bounded:
            sustained = max(sustained, rate)
        else:
            failed = min(failed, rate)
    return Capacity(parallelism, saturated, sustained, failed, tuple(done))
