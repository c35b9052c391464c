"""The Observation: what the monitor saw since the last loop, the only input of the analyze step.

All series sit on one 1 s grid (``times``). A missing sample is NaN, never zero: a gap must not look
like an idle job. A series that could not be read at all is named in ``gaps`` with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np


@dataclass(frozen=True, eq=False)
class Observation:
    """Metrics of one loop round on a common per-second grid; NaN marks a gap."""

    now: float
    """Time the round started (seconds, from the injected clock)."""
    times: np.ndarray
    """Sample times, ascending, one per ``step_s``."""
    workload: np.ndarray
    """Records/s arriving at the source."""
    worker_throughput: Mapping[str, np.ndarray]
    """Records/s leaving the source, per worker id."""
    worker_cpu: Mapping[str, np.ndarray]
    """CPU load 0..1 per worker id (a moving average)."""
    consumer_lag: np.ndarray
    """Records available at the source but not yet processed."""
    parallelism: int | None
    """Registered workers (the scale-out) at the end of the window; None if unknown."""
    uptime_s: float | None
    """Job uptime at the end of the window, seconds; None if unknown."""
    gaps: Mapping[str, str] = field(default_factory=dict)
    """Series name -> why it is missing or incomplete."""
    worker_busy: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Busy fraction 0..1 per worker (Flink's busyTimeMsPerSecond / 1000); empty if not read."""
    worker_backlog: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Records waiting at the source per worker (its readers' FLIP-33 pendingRecords, a gauge); empty if not
    read. With the throughput it gives each worker's input even while the job is saturated."""
    partition_offsets: tuple[tuple[int, int | None], ...] | None = None
    """Per source partition at the end of the window: (log-end offset, offset committed by the last
    completed checkpoint); None if not read."""
    partition_ends_since: tuple[int, ...] | None = None
    """Per source partition, the log-end offset at the start of the window, where the monitor has it (a range
    read of the offsets): the records each partition received over the window, so the partition weights are
    known from the first round instead of the second. None: the analyzer differences consecutive rounds."""
    partition_ends_span_s: float | None = None
    """Seconds between :attr:`partition_ends_since` and :attr:`partition_offsets` (the first and the last point at
    which every partition has an offset); None: the window's length."""
    partition_reads: tuple[tuple[int, int], ...] | None = None
    """Per source partition, the offset its reader had read up to at the start and at the end of a stretch of the
    window (the readers' own per-partition gauges, over the same stretch for all); None if not read. While the job
    keeps up, what each partition was read is what it received."""
    partition_reads_span_s: float | None = None
    """Seconds the stretch of :attr:`partition_reads` lasted; None: the window's length."""
    source_partitions: int | None = None
    """Partitions the sources read, as their per-partition offset gauges count them (the most over the window);
    None where the job reports none."""
    rate_window_s: float = 0.0
    """The window the rates (workload, throughput, busy) were taken over, seconds: a step shows as a ramp that
    long (Prometheus' ``rate()`` over ``prometheus.rate_window_s``). 0: exact per-second rates (the simulator)."""
    taskmanager_heap_usage: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Heap used over heap max (0..1) per TaskManager (``tm_id``); empty if not read (the memory guard's)."""
    taskmanager_gc_pressure: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Fraction of time (0..1) in garbage collection per TaskManager; empty if not read (the memory guard's)."""
    uptime: np.ndarray | None = None
    """Job uptime per sample, seconds (NaN: a gap; 0 while the job is down); None where the monitor gives only
    its last value (:attr:`uptime_s`). Dates each (re)start the window saw, not only the last one."""
    rates_settled: np.ndarray | None = None
    """Per sample: False where the rates (workload, throughput, busy) were taken over a window that reaches
    back before the job's last restart (replayed records, new series); the models skip those samples.
    None: every sample is settled (e.g. the simulator's rates are per second)."""

    def settled(self, series: np.ndarray) -> np.ndarray:
        """``series`` with the unsettled samples (see :attr:`rates_settled`) as NaN."""
        if self.rates_settled is None or self.rates_settled.all():
            return series
        return np.where(self.rates_settled, series, np.nan)

    @property
    def step_s(self) -> float:
        """Seconds between two samples (the monitor's step: the median spacing; 1 with fewer than two)."""
        steps = np.diff(np.asarray(self.times, dtype=float))
        steps = steps[np.isfinite(steps) & (steps > 0)]
        return float(np.median(steps)) if steps.size else 1.0

    @property
    def latest_lag(self) -> float | None:
        """The newest finite consumer-lag sample, or None."""
        finite = self.consumer_lag[np.isfinite(self.consumer_lag)]
        return float(finite[-1]) if finite.size else None

    @property
    def workload_mean(self) -> float | None:
        """Mean workload over the window (NaN skipped), or None if there is none."""
        finite = self.workload[np.isfinite(self.workload)]
        return float(finite.mean()) if finite.size else None

    @property
    def usable(self) -> bool:
        """True when the round has enough data to act on: workload, workers (with a load) and parallelism."""
        return (
            self.parallelism is not None
            and self.workload_mean is not None
            and bool(self.worker_throughput)
            and bool(self.worker_cpu or self.worker_busy)
        )

    def restarted_since(self, t: float) -> float | None:
        """When the job first (re)started at or after ``t``, as its uptime dates it (a sample's time less its
        uptime, over the samples of a running job), or None if it has not.

        The earliest date counts: a second stop within the window (a failure right after a rescale) restarts the
        job again, and the last uptime alone would date that restart; a sample held between scrapes dates its
        restart late, never early."""
        if self.uptime is not None and self.uptime.shape == self.times.shape:
            with np.errstate(invalid="ignore"):
                running = np.isfinite(self.uptime) & (self.uptime > 0)
            dates = self.times[running] - self.uptime[running]
            dates = dates[dates >= t]
            return float(dates.min()) if dates.size else None
        if not self.uptime_s or self.times.size == 0:
            return None
        restarted = float(self.times[-1]) - self.uptime_s
        return restarted if restarted >= t else None

    def per_second(self, step_s: float, since: float, until: float) -> Observation:
        """The same observation on the 1-s grid the analyzer reads, each sample held until the next.

        A monitor that reads at a coarser step (``prometheus.step_s: 15``, to query less) would
        otherwise hand the forecaster, the envelope and the watch one sample per step where they count
        seconds: a 900-s horizon read as 900 samples would be 3 h 45 min. The seconds of
        ``[since, until)`` are covered (a second before the first sample is a gap, NaN); a finer step
        keeps the sample at each second. ``step_s`` 1: the observation as it is.
        """
        times = np.asarray(self.times, dtype=float)
        if times.size == 0 or step_s == 1.0:
            return self
        seconds = np.arange(math.ceil(since - 1e-9), until - 1e-9, 1.0)
        index = np.searchsorted(times, seconds + 1e-9, side="right") - 1
        before = index < 0

        def held(series: np.ndarray) -> np.ndarray:
            values = np.asarray(series)[index.clip(min=0)]
            if values.dtype == bool:
                return np.where(before, True, values)  # no rate there to call unsettled
            return np.where(before, np.nan, values)

        def each(series: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {name: held(values) for name, values in series.items()}

        return replace(
            self,
            times=seconds,
            workload=held(self.workload),
            worker_throughput=each(self.worker_throughput),
            worker_cpu=each(self.worker_cpu),
            consumer_lag=held(self.consumer_lag),
            worker_busy=each(self.worker_busy),
            worker_backlog=each(self.worker_backlog),
            taskmanager_heap_usage=each(self.taskmanager_heap_usage),
            taskmanager_gc_pressure=each(self.taskmanager_gc_pressure),
            uptime=None if self.uptime is None else held(self.uptime),
            rates_settled=None if self.rates_settled is None else held(self.rates_settled),
        )

    def worker_load(self, utilization: str) -> Mapping[str, np.ndarray]:
        """Each worker's load series: busy time or CPU as asked, the other when that one was not read."""
        preferred, other = (
            (self.worker_busy, self.worker_cpu) if utilization == "busy" else (self.worker_cpu, self.worker_busy)
        )
        return preferred or other


FLINK_MAX_PARALLELISM = 32_768
"""The highest parallelism any Flink operator can have (Flink's upper bound on max parallelism, 2^15)."""
MAX_RATE = 1e12
"""Records per second no job reads or writes (a thousand times the largest Kafka clusters' total)."""
MAX_RECORDS = 1e18
"""Records no backlog holds (Kafka offsets are 63-bit: about 9.2e18 per partition at most)."""
MAX_FRACTION = 1.05
"""Highest busy or CPU fraction taken as a reading (1 is fully busy; counters sampled a few ms apart may
overshoot a little). Flink's busyTimeMsPerSecond above 1050 ms per second is no measurement."""
MAX_UPTIME_S = 100 * 365 * 86_400.0
"""Uptime no job has (a century)."""
SPIKE_FACTOR = 100.0
"""A rate or backlog sample more than this many times its round's reference is a glitch, not a reading: a rate's
reference is the median of its series over the round (a worker's throughput, its own), a backlog's (the job's or a
worker's) that median plus the records the workload could add over the round. Prometheus' ``rate()`` spreads a
change over its window, and a backlog grows no faster than the input arrives, so no real change makes one sample a
hundred times its round; a counter that reset or an exporter that misread does (one workload sample of 5e11/s, or a
lag of 5e17 records, scaled a job of 1e5/s to its maximum; one worker's throughput sample of 5e11/s, read as its
capacity, scaled it in to one worker). A step from near idle past a few hundred times its level, in a round's
second half, is seen a round later."""


@dataclass(frozen=True)
class ReadingBounds:
    """What a job can report: a reading outside is no reading (a gap), never an input to the models or the planner.

    Each bound keeps one class of absurd value from the planner: a negative or fractional parallelism would be
    "moved into range" by a rescale; an overflowing one breaks the knowledge document's JSON; negative or
    non-finite rates, lags and fractions poison every mean the models keep.
    """

    max_parallelism: int = FLINK_MAX_PARALLELISM
    max_rate: float = MAX_RATE
    max_records: float = MAX_RECORDS
    max_fraction: float = MAX_FRACTION
    max_uptime_s: float = MAX_UPTIME_S


def _out_of(series: np.ndarray, low: float, high: float) -> np.ndarray:
    """True where a sample is present (not NaN) but infinite or outside ``[low, high]``."""
    values = np.asarray(series, dtype=float)
    with np.errstate(invalid="ignore"):
        return ~np.isnan(values) & ~((values >= low) & (values <= high))


class _Screen:
    """The gaps of an observation being screened, and the screening of one series or of one series per worker."""

    def __init__(self, gaps: Mapping[str, str]) -> None:
        self.gaps = dict(gaps)

    def note(self, name: str, count: int, what: str) -> None:
        """Name ``count`` absurd samples of ``name`` in its gap."""
        if count:
            reason = f"absurd: {count} sample(s) {what}"
            self.gaps[name] = f"{self.gaps[name]}; {reason}" if name in self.gaps else reason

    def series(self, name: str, values: np.ndarray, high: float, what: str) -> np.ndarray:
        """``values`` without the samples outside ``[0, high]`` (the same array when it has none)."""
        bad = _out_of(values, 0.0, high)
        if not bad.any():
            return values
        self.note(name, int(bad.sum()), what)
        return np.where(bad, np.nan, values)

    def spikes(self, name: str, values: np.ndarray, reference: float | None) -> np.ndarray:
        """``values`` without the samples above :data:`SPIKE_FACTOR` times ``reference`` (none without one)."""
        if reference is None or not reference > 0:
            return values
        high = SPIKE_FACTOR * reference
        return self.series(name, values, high, f"above {SPIKE_FACTOR:g}x the round's {_fmt(reference)}")

    def worker_spikes(
        self, name: str, values: Mapping[str, np.ndarray], extra: float = 0.0
    ) -> Mapping[str, np.ndarray]:
        """Each worker's series without the samples above :data:`SPIKE_FACTOR` times its own round's median plus
        ``extra`` (a worker with no positive reference keeps its samples; the same mapping when none has one)."""
        bad: dict[str, np.ndarray] = {}
        for worker, series in values.items():
            reference = (_median(series) or 0.0) + extra
            if reference > 0:
                bad[worker] = _out_of(series, 0.0, SPIKE_FACTOR * reference)
        return self._dropped(name, values, bad, f"above {SPIKE_FACTOR:g}x their worker's round")

    def per_worker(
        self, name: str, values: Mapping[str, np.ndarray], high: float, what: str
    ) -> Mapping[str, np.ndarray]:
        """Each worker's series without the samples outside ``[0, high]`` (the same mapping when none has)."""
        return self._dropped(name, values, {worker: _out_of(s, 0.0, high) for worker, s in values.items()}, what)

    def _dropped(
        self, name: str, values: Mapping[str, np.ndarray], bad: Mapping[str, np.ndarray], what: str
    ) -> Mapping[str, np.ndarray]:
        """Each worker's series without the samples ``bad`` marks (workers it leaves out keep theirs), named in the
        gap; the same mapping when it marks none."""
        count = sum(int(b.sum()) for b in bad.values())
        if not count:
            return values
        self.note(name, count, what)
        return {worker: np.where(bad[worker], np.nan, s) if worker in bad else s for worker, s in values.items()}


def screened(observation: Observation, bounds: ReadingBounds = ReadingBounds()) -> Observation:
    """``observation`` with every reading a job cannot have turned into a gap (NaN or None), named in ``gaps``.

    The one validation between every metric source and the analyze step: parallelism (a whole number in
    0..``max_parallelism``), rates (workload, throughput, 0..``max_rate``), lag and backlog
    (0..``max_records``), busy and CPU fractions (0..``max_fraction``) and uptime (0..``max_uptime_s``, each sample
    and the last). A series with an absurd sample loses that sample; an absurd parallelism or uptime is unknown.
    """
    screen = _Screen(observation.gaps)
    changes = _screened_series(observation, bounds, screen)
    changes.update(_screened_scalars(observation, bounds, screen.gaps))
    if not changes:
        return observation
    return replace(observation, gaps=screen.gaps, **changes)  # type: ignore[arg-type]


def _screened_series(observation: Observation, bounds: ReadingBounds, screen: _Screen) -> dict[str, object]:
    """The observation's series that lost an absurd sample, by field."""
    rate = f"negative, non-finite or above {bounds.max_rate:.0e} records/s"
    records = f"negative, non-finite or above {bounds.max_records:.0e} records"
    fraction = (
        f"negative, non-finite or above {bounds.max_fraction:g} (busy above {bounds.max_fraction * 1000:.0f} ms/s)"
    )
    workload = screen.series("workload", observation.workload, bounds.max_rate, rate)
    workload = screen.spikes("workload", workload, _median(workload))
    lag = screen.series("consumer_lag", observation.consumer_lag, bounds.max_records, records)
    backlog = screen.per_worker("worker_backlog", observation.worker_backlog, bounds.max_records, records)
    peak = _max(workload)
    if peak is not None:
        arrived = peak * max(workload.size, 60)  # the most a backlog grows by over the round (a minute at least)
        lag = screen.spikes("consumer_lag", lag, (_median(lag) or 0.0) + arrived)
        backlog = screen.worker_spikes("worker_backlog", backlog, arrived)
    throughput = screen.per_worker("throughput", observation.worker_throughput, bounds.max_rate, rate)
    checked = {
        "workload": workload,
        "consumer_lag": lag,
        "worker_throughput": screen.worker_spikes("throughput", throughput),
        "worker_cpu": screen.per_worker("cpu", observation.worker_cpu, bounds.max_fraction, fraction),
        "worker_busy": screen.per_worker("busy", observation.worker_busy, bounds.max_fraction, fraction),
        "worker_backlog": backlog,
    }
    if observation.uptime is not None:
        uptime = f"negative, non-finite or above {bounds.max_uptime_s:.0f} s"
        checked["uptime"] = screen.series("uptime", observation.uptime, bounds.max_uptime_s, uptime)
    return {name: value for name, value in checked.items() if value is not getattr(observation, name)}


def _median(values: np.ndarray) -> float | None:
    """The median of the known samples, or None."""
    known = values[np.isfinite(values)]
    return float(np.median(known)) if known.size else None


def _max(values: np.ndarray) -> float | None:
    """The largest known sample, or None."""
    known = values[np.isfinite(values)]
    return float(known.max()) if known.size else None


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def _screened_scalars(observation: Observation, bounds: ReadingBounds, gaps: dict[str, str]) -> dict[str, object]:
    """An absurd parallelism or uptime as unknown (None), by field, with its gap."""
    changes: dict[str, object] = {}
    parallelism = observation.parallelism
    if parallelism is not None and not 0 <= parallelism <= bounds.max_parallelism:
        gaps["parallelism"] = f"absurd: {parallelism} (a job runs at 0..{bounds.max_parallelism})"
        changes["parallelism"] = None
    uptime = observation.uptime_s
    if uptime is not None and not (math.isfinite(uptime) and 0.0 <= uptime <= bounds.max_uptime_s):
        gaps["uptime"] = f"absurd: {uptime} s (negative, non-finite or above {bounds.max_uptime_s:.0f} s)"
        changes["uptime_s"] = None
    return changes
