"""Capacity model: how many records/s the job sustains at each scale-out, accounting for data skew.

Daedalus section 3.1. Each worker has a throughput~CPU regression; a worker's capacity is that line
read at ``max_cpu``. Workers do not share the input equally (skewed partitions), so the job saturates
when its most loaded worker does: with ``share_i`` the fraction of the input worker ``i`` receives,

    job capacity = min_i capacity_i / share_i.

This is the paper's "expected maximum CPU of a worker is proportional to the most loaded worker",
written with throughput shares instead of CPU ratios, which stays exact when workers burn CPU at
idle (a CPU ratio would overstate the cold workers). A worker's share is the input it receives: what
it read plus what its backlog grew (its source readers' pendingRecords), which holds while workers are
saturated; without per-worker backlogs, its throughput in the seconds where no worker is saturated (a
saturated worker's throughput understates its input).

Capacities of other scale-outs come, in order of trust, from what was observed at that scale-out,
from an estimate scaled from the current one (with the skew the round-robin partition assignment
at that scale-out would have when partition weights are known, otherwise keeping the current
max/mean share ratio; at one reader, which has no skew, its worker's capacity), and from an offline
prior (the StreamBed capacity model).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from models.regression import WelfordRegression

MAX_CPU_LOAD = 1.5
"""CPU samples above this are not a 0..1 load (e.g. percent) and are skipped."""
MAX_RECORDS_PER_S = 1e12
"""Throughput samples above this are corrupt and are skipped."""

RATIO_MIN_LOAD = 0.1
"""Seconds below this load say too little about a worker's records per unit of load (a busy floor dominates):
they are summed apart (``CapacityModel.light_ratios``), and read only for a job too few of whose workers have
carried more."""
RATIO_DECAY = 0.999
"""Per second summed (loaded or light): the ratio follows a worker whose speed changes within about a quarter of an
hour."""

LINE_BLOCK_SAMPLES = 30
"""A worker's line is fitted on the means of this many consecutive samples (of one update), not on each sample.
The busy fraction is read with noise (±0.02 a second on a real job, a moving average of it in the simulator);
in the least-squares slope of throughput on load that noise is spread without signal, and at a steady load it
is all the spread there is: every steady second added to the line shrinks its slope towards zero, so the
capacity read at full load drifted down while nothing changed (on a real job from 95k to 60k records/s in two
minutes, a scale-in decided by when the stabilization window ended). A block's mean keeps the load's own
variation and averages the noise away; at a steady load the blocks pile up at one point and the line (fitted
on the earlier variation, or none without it: then the records per unit of load) holds still."""

PARTITION_READINGS = 2
"""The partition weights move on the per-partition median of the weights and this many readings (the last ones), so
one reading alone, an exporter's glitch or an offset that jumped, never moves them: a shift in the keys moves them
once two readings show it. The first reading sets them (a cold start reads the skew in its first round)."""

SOURCES = ("observed", "estimated", "prior", "unknown")
"""Where a capacity came from, most trusted first."""


def natural_key(worker_id: str) -> tuple[Any, ...]:
    """Sort key that orders ``taskmanager-10`` after ``taskmanager-9``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", worker_id))


def round_robin_shares(weights: np.ndarray, parallelism: int) -> np.ndarray:
    """Input share of each of ``parallelism`` readers when partition ``p`` goes to reader ``p mod n``."""
    weights = np.asarray(weights, dtype=float)
    assignment = np.arange(weights.size) % parallelism
    shares = np.bincount(assignment, weights=weights, minlength=parallelism)
    return shares / shares.sum()


class _Shares:
    """Running input shares of one set of workers: the records each received (read plus backlog growth), or
    without backlogs its throughput summed over unsaturated seconds."""

    def __init__(self, workers: Iterable[str]) -> None:
        self.workers = tuple(sorted(workers, key=natural_key))
        self.sums = dict.fromkeys(self.workers, 0.0)
        self.seconds = 0

    def add(self, throughput: Mapping[str, np.ndarray], valid: np.ndarray) -> None:
        for worker in self.workers:
            self.sums[worker] += float(np.asarray(throughput[worker], dtype=float)[valid].sum())
        self.seconds += int(np.count_nonzero(valid))

    def add_inputs(self, inputs: Mapping[str, float], seconds: int) -> None:
        """Records each worker received over ``seconds`` (read plus the growth of what waits for it)."""
        for worker in self.workers:
            self.sums[worker] += float(inputs[worker])
        self.seconds += int(seconds)

    def shares(self) -> dict[str, float] | None:
        total = sum(self.sums.values())
        if self.seconds == 0 or total <= 0:
            return None
        return {worker: value / total for worker, value in self.sums.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"workers": list(self.workers), "sums": self.sums, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> _Shares:
        shares = cls(state["workers"])
        shares.sums = {str(k): float(v) for k, v in state["sums"].items()}
        shares.seconds = int(state["seconds"])
        return shares


class CapacityModel:
    """Per-worker throughput~CPU regressions, skew-aware job capacity, and capacities per scale-out."""

    def __init__(
        self,
        max_cpu: float = 1.0,
        *,
        prior: Mapping[int, float] | None = None,
        partition_weights: Iterable[float] | None = None,
        min_samples: int = 30,
        min_cpu_std: float = 0.02,
        saturated_cpu: float = 0.95,
        min_known_fraction: float = 0.5,
        partitions: int | None = None,
    ) -> None:
        """``max_cpu``: CPU (0..1] a worker may reach; ``min_cpu_std``: CPU spread below which a worker
        has no estimate; ``saturated_cpu``: seconds where any worker is at or above it do not count
        for shares; ``min_known_fraction``: share of current workers that need an estimate before
        the others are filled with the median of the known ones."""
        if not 0 < max_cpu <= 1.5:
            raise ValueError(f"max_cpu must be in (0, 1.5], got {max_cpu}")
        self.max_cpu = float(max_cpu)
        self.min_samples = int(min_samples)
        self.min_cpu_std = float(min_cpu_std)
        self.saturated_cpu = float(saturated_cpu)
        self.min_known_fraction = float(min_known_fraction)
        self.partitions = int(partitions) if partitions else None
        """Source partitions, when known: the granularity of the input split at any scale-out."""
        self.prior: dict[int, float] = {int(n): float(c) for n, c in (prior or {}).items() if _positive(c)}
        self.partition_weights: np.ndarray | None = None
        if partition_weights is not None:
            self.set_partition_weights(partition_weights)
        self.regressions: dict[str, WelfordRegression] = {}
        self.last_seen: dict[str, float] = {}
        """When each worker with a regression was last seen (clock seconds), for :meth:`prune`."""
        self.ratios: dict[str, tuple[float, float]] = {}
        """Per worker: decayed sums of throughput and of load over loaded seconds (records per unit of load)."""
        self.light_ratios: dict[str, tuple[float, float]] = {}
        """The same over seconds below ``RATIO_MIN_LOAD`` (but above zero), summed while a worker has no loaded ratio
        and read only for a job too few of whose workers have a line or a loaded ratio (see
        :meth:`_worker_capacities`)."""
        self.observed: dict[int, float] = {}
        """Capacity recorded while the job ran at each scale-out (the most trusted source)."""
        self.skipped = 0
        """Samples ignored because CPU or throughput was missing, negative or not finite."""
        self.workers: tuple[str, ...] = ()
        """The current workers (from :meth:`set_workers`)."""
        self._shares: dict[int, _Shares] = {}
        self._partition_readings: deque[np.ndarray] = deque(maxlen=PARTITION_READINGS)
        """The last readings' shares per partition (:meth:`observe_partition_records`), held in memory only: a restart
        begins them afresh."""
        self._pending: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._last_round: dict[str, tuple[float, float] | None] = {}
        self._held: dict[str, float | None] | None = None
        """Worker capacities memoised while :meth:`held` is in force (None: compute every time)."""
        self._held_profiles: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
        """The same for the profiles from the partition weights, per scale-out."""
        self._held_current: tuple[list[float | None], float | None] | None = None
        """The same for the current workers' capacities and their median (one read for every scale-out)."""

    # ------------------------------------------------------------------ learning

    def set_partition_weights(self, weights: Iterable[float]) -> None:
        """Relative input rates of the source partitions, for the skew at scale-outs not yet seen."""
        array = np.asarray(list(weights), dtype=float)
        if array.size == 0 or not np.all(np.isfinite(array)) or np.any(array < 0) or array.sum() <= 0:
            raise ValueError("partition weights must be finite, non-negative, with a positive sum")
        self.partition_weights = array / array.sum()

    def observe_partition_records(self, records: Iterable[float], *, smoothing: float = 0.2) -> None:
        """Fold one interval's records per source partition into the partition weights: an exponential moving
        average, so a drifting key distribution is followed, of the per-partition median of the weights and the
        last :data:`PARTITION_READINGS` readings, so one reading alone moves nothing. The first reading, or the
        first after the topic was repartitioned, sets them."""
        counts = np.asarray(list(records), dtype=float)
        if counts.size == 0 or not np.all(np.isfinite(counts)) or np.any(counts < 0) or counts.sum() <= 0:
            return
        reading = counts / counts.sum()
        if self._partition_readings and self._partition_readings[-1].size != reading.size:
            self._partition_readings.clear()  # the topic was repartitioned: the readings before say nothing now
        self._partition_readings.append(reading)
        shares = reading
        if self.partition_weights is not None and self.partition_weights.size == reading.size:
            if len(self._partition_readings) < PARTITION_READINGS:
                return  # restored weights and one reading: a median of two is their mean, which one reading moves
            median = np.median(np.stack([self.partition_weights, *self._partition_readings]), axis=0)
            if median.sum() <= 0:
                return
            shares = median / median.sum()
        if self.partition_weights is None or self.partition_weights.size != shares.size:
            self.partition_weights = shares
        else:
            self.partition_weights = (1.0 - smoothing) * self.partition_weights + smoothing * shares

    def update(self, worker_id: str, cpu: Any, throughput: Any) -> int:
        """Add one worker's per-second CPU (0..1) and throughput (records/s); returns samples used.

        NaN, infinite, negative or absurd (CPU > 1.5, > 1e12 records/s) samples are skipped and
        counted, never raised.
        """
        cpu_array = np.atleast_1d(np.asarray(cpu, dtype=float))
        tp_array = np.atleast_1d(np.asarray(throughput, dtype=float))
        if cpu_array.shape != tp_array.shape:
            # A misaligned pair cannot be matched second by second; count it all as skipped.
            self.skipped += max(cpu_array.size, tp_array.size)
            return 0
        with np.errstate(invalid="ignore"):
            # CPU load is 0..1 (a little above with measurement noise); more is a unit mistake.
            valid = (
                np.isfinite(cpu_array)
                & np.isfinite(tp_array)
                & (cpu_array >= 0)
                & (tp_array >= 0)
                & (cpu_array <= MAX_CPU_LOAD)
                & (tp_array <= MAX_RECORDS_PER_S)
            )
        self.skipped += int(cpu_array.size - np.count_nonzero(valid))
        regression = self.regressions.get(worker_id)
        if regression is None:
            regression = WelfordRegression(
                min_samples=max(2, math.ceil(self.min_samples / LINE_BLOCK_SAMPLES)), min_x_variance=self.min_cpu_std**2
            )
            self.regressions[worker_id] = regression
        used = int(np.count_nonzero(valid))
        if used:
            blocks = np.array_split(np.flatnonzero(valid), max(1, used // LINE_BLOCK_SAMPLES))
            regression.update_many(
                [float(cpu_array[b].mean()) for b in blocks], [float(tp_array[b].mean()) for b in blocks]
            )
        loaded = valid & (cpu_array >= RATIO_MIN_LOAD)
        _fold_ratio(self.ratios, worker_id, cpu_array, tp_array, loaded)
        if worker_id in self.ratios:
            self.light_ratios.pop(worker_id, None)
        else:
            _fold_ratio(self.light_ratios, worker_id, cpu_array, tp_array, valid & (cpu_array > 0) & ~loaded)
        # Kept until set_workers() so shares are measured on seconds all current workers share.
        self._pending[worker_id] = (np.where(valid, cpu_array, np.nan), np.where(valid, tp_array, np.nan))
        return used

    def set_workers(
        self, workers: Iterable[str], backlog: Mapping[str, Any] | None = None, *, sample_s: float = 1.0
    ) -> None:
        """Declare the current workers (after this round's updates) and fold the round into their shares.

        ``backlog``: per worker, the records waiting for it at each of the round's samples (its source
        readers' pendingRecords). With it a worker's input over the round is what it read plus what its
        backlog grew, which holds while workers are saturated too; without it only the seconds in which no
        worker is saturated count (a saturated worker's throughput understates its input). ``sample_s``:
        seconds between two samples (the monitor's step)."""
        current = tuple(sorted(workers, key=natural_key))
        self.workers = current
        pending, self._pending = self._pending, {}
        self._last_round = {w: _means(*pending[w]) for w in current if w in pending}
        n = len(current)
        if n == 0:
            return
        shares = self._shares.get(n)
        if shares is None or shares.workers != current:
            # A new set of workers means a new partition assignment: old shares no longer apply.
            shares = self._shares[n] = _Shares(current)
        if any(w not in pending for w in current):
            return
        lengths = {pending[w][0].size for w in current}
        if len(lengths) != 1:
            return
        cpu = np.vstack([pending[w][0] for w in current])
        throughput = {w: pending[w][1] for w in current}
        received = _received(throughput, backlog, current, sample_s) if backlog else None
        if received is not None:
            shares.add_inputs(*received)
            return
        total = np.vstack([throughput[w] for w in current]).sum(axis=0)
        with np.errstate(invalid="ignore"):
            valid = np.all(np.isfinite(cpu), axis=0) & np.isfinite(total) & (total > 0)
            valid &= np.all(cpu < self.saturated_cpu, axis=0)
        if np.any(valid):
            shares.add(throughput, valid)

    def observe(
        self, cpu: Mapping[str, Any], throughput: Mapping[str, Any], backlog: Mapping[str, Any] | None = None
    ) -> None:
        """Update every worker present in both mappings and make them the current workers."""
        workers = [w for w in throughput if w in cpu]
        for worker in workers:
            self.update(worker, cpu[worker], throughput[worker])
        self.set_workers(workers, backlog)

    def record_observed(self, parallelism: int, capacity: float | None) -> None:
        """Remember the capacity measured while running at ``parallelism`` (ignored if unknown)."""
        if capacity is not None and _positive(capacity) and parallelism >= 1:
            self.observed[int(parallelism)] = float(capacity)

    def prune(
        self, *, now: float, seen: Iterable[str], retention_s: float, max_workers: int | None = None
    ) -> tuple[str, ...]:
        """Mark ``seen`` as seen at ``now``; drop the regressions of workers unseen for ``retention_s``.

        Pods of a Deployment get new random names on every restart, so regressions keyed by name
        would grow without end. A dropped worker's contribution is kept where it matters: in
        :attr:`observed`, the capacity recorded per scale-out while it ran. Beyond ``max_workers``
        the least recently seen go first. Current workers are never dropped. Returns the names dropped.
        """
        for worker in seen:
            self.last_seen[worker] = float(now)
        for worker in self.regressions:
            # A worker restored from a document without times starts its retention now.
            self.last_seen.setdefault(worker, float(now))
        keep = set(self.workers)
        by_age = sorted(self.regressions, key=lambda w: self.last_seen[w], reverse=True)
        dropped = [w for w in by_age if w not in keep and now - self.last_seen[w] > retention_s]
        if max_workers is not None:
            survivors = [w for w in by_age if w not in dropped]
            excess = len(survivors) - max(max_workers, len(keep))
            dropped += [w for w in reversed(survivors) if w not in keep][: max(0, excess)]
        for worker in dropped:
            del self.regressions[worker]
            del self.last_seen[worker]
            self.ratios.pop(worker, None)
            self.light_ratios.pop(worker, None)
        for worker in [w for w in self.last_seen if w not in self.regressions]:
            del self.last_seen[worker]
        return tuple(dropped)

    # ------------------------------------------------------------------ reading

    @contextmanager
    def held(self) -> Iterator[CapacityModel]:
        """Reads only, for a while: each worker's capacity is computed once and reused.

        A round reads the capacity at every candidate scale-out, and each of those reads every current
        worker's line; nothing learns in between, so the analyzer reads them all inside one ``held()``.
        """
        self._held, self._held_profiles, self._held_current = {}, {}, None
        try:
            yield self
        finally:
            self._held, self._held_profiles, self._held_current = None, {}, None

    def worker_capacity(self, worker_id: str) -> float | None:
        """The worker's throughput at ``max_cpu``: from its regression (never below its records per unit of load),
        else from its records per unit of load.

        The regression needs the load to have varied; a worker at a steady load (or saturated) still
        shows how much it processes per unit of load (the true processing rate of DS2 and the Flink
        autoscaler), which read at ``max_cpu`` is its capacity. None with neither.
        """
        if self._held is None:
            return self._worker_capacity(worker_id)
        if worker_id not in self._held:
            self._held[worker_id] = self._worker_capacity(worker_id)
        return self._held[worker_id]

    def _worker_capacity(self, worker_id: str) -> float | None:
        """The line of :meth:`worker_capacity`, computed.

        The line is never read below the records per unit of load: it would then process records at no load
        (a positive throughput at zero CPU), which no worker does. A line that does is the regression diluted
        by the noise of the load reading: at a steady load the load's noise is most of its spread, and the
        least-squares slope shrinks towards zero, so a job carrying 700 records/s on a worker that carries
        2,000 read a capacity of 724 and looked full (a real-Flink run; the unit test has it)."""
        line = self._line_at(worker_id, self.max_cpu)
        return line if line is not None else self._per_unit_of_load(worker_id, self.max_cpu)

    def _per_unit_of_load(self, worker_id: str, cpu: float) -> float | None:
        """The worker's records per unit of load, times ``cpu``; None before it has carried any load."""
        return _rate(self.ratios.get(worker_id), cpu)

    def _line_at(self, worker_id: str, cpu: float) -> float | None:
        """The worker's regression read at ``cpu``, never below its records per unit of load there (see
        :meth:`_worker_capacity`); None without a line whose throughput rises with the load."""
        regression = self.regressions.get(worker_id)
        slope = regression.slope if regression is not None else None
        # Throughput falling with CPU is noise, not a machine: no line.
        if regression is None or slope is None or slope <= 0:
            return None
        value = regression.predict(cpu)
        if value is None or not _positive(value):
            return None
        floor = self._per_unit_of_load(worker_id, cpu)
        return max(value, floor) if floor is not None else value

    def shares(self, parallelism: int | None = None) -> dict[str, float] | None:
        """Measured input share of each worker at ``parallelism`` (default: the current one), or None."""
        n = len(self.workers) if parallelism is None else parallelism
        stats = self._shares.get(n)
        return stats.shares() if stats is not None else None

    def _light_capacity(self, worker_id: str) -> float | None:
        """The worker's records per unit of load over its light seconds, read at ``max_cpu``; None before they add
        up to a loaded second's load (one light second's noise is most of it)."""
        ratio = self.light_ratios.get(worker_id)
        return _rate(ratio, self.max_cpu) if ratio is not None and ratio[1] >= RATIO_MIN_LOAD else None

    def _worker_capacities(self, workers: Iterable[str]) -> dict[str, float | None]:
        """Each worker's capacity (:meth:`worker_capacity`); while fewer than ``min_known_fraction`` of them have
        one, their light seconds' where they have those.

        A job whose workers have carried too little load for a line or a loaded ratio (a few percent busy, where a
        busy floor dominates) reads its light seconds: summed over every round they read low by that floor, as
        the last round's throughput over its load does, but hold still, where a round's alone at such a load
        swung the capacity by a third from round to round (a real job at 1 % busy read 1.32–1.94M records/s at
        3 slots in one steady run, ``benchmarks.bench_real_flink_steady``)."""
        capacities = {w: self.worker_capacity(w) for w in workers}
        if not self._enough_known(capacities):
            capacities = {w: c if c is not None else self._light_capacity(w) for w, c in capacities.items()}
        return capacities

    def _enough_known(self, capacities: Mapping[str, float | None]) -> bool:
        """Whether at least ``min_known_fraction`` of the workers (one at least) have a capacity."""
        known = sum(c is not None for c in capacities.values())
        return known >= max(1, math.ceil(self.min_known_fraction * len(capacities)))

    def _filled_capacities(self, workers: tuple[str, ...]) -> dict[str, float] | None:
        """Each worker's capacity (:meth:`_worker_capacities`), those without one filled with the median of the
        others'; None while fewer than ``min_known_fraction`` of them have one."""
        capacities = self._worker_capacities(workers)
        if not self._enough_known(capacities):
            return None
        known = {w: c for w, c in capacities.items() if c is not None}
        # A worker still without a line (e.g. just added) is assumed typical of the others.
        fill = float(np.median(list(known.values())))
        return {w: known.get(w, fill) for w in workers}

    def capacity_now(self) -> float | None:
        """Job capacity at the current scale-out: min over workers of capacity_i / share_i.

        Shares are measured only in seconds when no worker is saturated; a job that has been
        saturated since its last rescale has none, and "unknown" would then hold an overloaded job
        at its scale-out for good. For that case Daedalus' own rule applies (paper 001, 3.1): each
        worker's expected maximum CPU is proportional to the most loaded worker's, and the job's
        capacity is the sum of the worker capacities read there (see :meth:`capacity_by_cpu`).
        """
        by_weights = self.capacity_by_weights()
        if by_weights is not None:
            return by_weights
        by_regression = self.capacity_by_regression()
        return by_regression if by_regression is not None else self.capacity_by_cpu()

    def capacity_by_weights(self) -> float | None:
        """min_i capacity_i / share_i with the shares from the partition weights (round-robin), when known.

        Exact where the measured shares are blind: when the busiest worker is saturated its throughput
        understates its input, so shares measured from throughput (or the CPU-proportional rule) would
        overstate the job; the weights give each worker's input share whatever it processes.
        """
        n = len(self.workers)
        if self.partition_weights is None or n == 0 or n > self.partition_weights.size:
            return None
        return self._estimate_from_weights(n)

    def capacity_by_regression(self) -> float | None:
        """min_i capacity_i / share_i from sound regressions and measured shares only, else None."""
        workers = self.workers
        capacities = self._filled_capacities(workers)
        shares = self.shares(len(workers))
        if capacities is None or shares is None:
            return None
        return _bottleneck(capacities, shares)

    def capacity_by_cpu(self) -> float | None:
        """Sum over current workers of the throughput each reaches when the busiest hits ``max_cpu``.

        A worker's throughput there comes from its regression when it has one (never below its records
        per unit of load, as in :meth:`worker_capacity`), else from scaling its last-round throughput by
        ``expected_max_cpu / cpu`` (exact at saturation, where the regression has no CPU spread to learn
        from). None without a last round for every worker.
        """
        rounds = [self._last_round.get(w) for w in self.workers]
        if not self.workers or any(r is None for r in rounds):
            return None
        busiest = max(cpu for cpu, _ in rounds)  # type: ignore[misc]
        if not busiest > 0:
            return None
        total = 0.0
        for worker, (cpu, throughput) in zip(self.workers, rounds):  # type: ignore[misc]
            expected_cpu = self.max_cpu * cpu / busiest
            by_line = self._line_at(worker, expected_cpu)
            if by_line is not None:
                total += by_line
            elif cpu > 0:
                total += throughput * expected_cpu / cpu
        # A subnormal CPU reading divides to infinity: no estimate rather than an infinite capacity.
        return total if _positive(total) else None

    def estimate_at(self, parallelism: int, *, current: int | None = None) -> float | None:
        """Capacity at ``parallelism`` scaled from what is known now, or None; at one reader, the capacity of the
        worker it runs on (:meth:`_reader_capacities`)."""
        if parallelism < 1:
            return None
        current = current if current is not None else (len(self.workers) or None)
        if self.partition_weights is not None and parallelism <= self.partition_weights.size:
            return self._estimate_from_weights(parallelism)
        if parallelism == 1:
            # One reader takes every partition: no skew is left, and the job runs as fast as that worker (the
            # rules below keep today's skew beyond the partitions' granularity, which reads a worker short by it).
            alone = self._reader_capacities(1)
            if alone is not None:
                return float(alone[0])
        if current is None:
            return None
        reference = self.observed.get(current)
        if reference is None and current == len(self.workers):
            reference = self.capacity_now()
        if reference is None:
            return None
        between = self._between_observed(parallelism, {**self.observed, current: reference})
        if between is not None:
            return between
        if self.partitions is None or max(parallelism, current) <= self.partitions:
            # Only the partition count known: the skew measured today beyond its granularity is kept by scaling
            # the reference by the evenly loaded workers (:meth:`_even`). Without weights or count, today's skew
            # (max share / mean share) is kept at every scale-out.
            return reference * self._even(parallelism) / self._even(current)
        return reference * parallelism / current

    def _between_observed(self, parallelism: int, observed: Mapping[int, float]) -> float | None:
        """The capacity at ``parallelism`` read between the nearest scale-outs run below and above it, or None
        without one on each side: each one's capacity per evenly loaded worker (:meth:`_even`), interpolated.

        What one worker carries is not the same at every scale-out: workers that share a machine's cores, a
        network or a state backend each carry less as more run. Scaled from one scale-out alone, every other
        reads that one's per-worker rate (on the real job, one-slot TaskManagers on two cores, 5 slots read 3,598/s
        from 6 where they carry 4,004/s, and the scale-in to 5 was refused on it for four minutes); between two it
        was run at, it reads both."""
        below = max((n for n in observed if n < parallelism), default=None)
        above = min((n for n in observed if n > parallelism), default=None)
        if below is None or above is None:
            return None
        low, high = observed[below] / self._even(below), observed[above] / self._even(above)
        per_worker = low + (high - low) * (parallelism - below) / (above - below)
        return per_worker * self._even(parallelism)

    def _even(self, parallelism: int) -> float:
        """Evenly loaded workers ``parallelism`` readers amount to: where the partition count is known and they do
        not outnumber it, the partitions over the busiest reader's share of them (it owns ceil(P/n) of them); else
        the readers."""
        if self.partitions is not None and parallelism <= self.partitions:
            return _even_workers(self.partitions, parallelism)
        return float(parallelism)

    def _estimate_from_weights(self, parallelism: int) -> float | None:
        profile = self._profile_from_weights(parallelism)
        if profile is None:
            return None
        shares, capacities = profile
        with np.errstate(divide="ignore"):
            ratios = np.where(shares > 0, capacities / np.where(shares > 0, shares, 1.0), np.inf)
        value = float(np.min(ratios))
        return value if math.isfinite(value) else None

    def _profile_from_weights(self, parallelism: int) -> tuple[np.ndarray, np.ndarray] | None:
        if self._held is None:
            return self._compute_profile_from_weights(parallelism)
        if parallelism not in self._held_profiles:
            self._held_profiles[parallelism] = self._compute_profile_from_weights(parallelism)
        return self._held_profiles[parallelism]

    def _compute_profile_from_weights(self, parallelism: int) -> tuple[np.ndarray, np.ndarray] | None:
        assert self.partition_weights is not None
        shares = round_robin_shares(self.partition_weights, parallelism)
        capacities = self._reader_capacities(parallelism)
        return None if capacities is None else (shares, capacities)

    def _reader_capacities(self, parallelism: int) -> np.ndarray | None:
        """The capacity of the worker each of ``parallelism`` readers runs on; None while no worker's is known.

        Reader i runs on the i-th current worker in natural order (StatefulSet-style names keep their index
        across rescales); a worker without a capacity, and readers beyond today's workers, are taken as typical
        (the median). Only the current workers count: names that churned away say nothing about the pods that
        will run."""
        current, typical = self._current_capacities()
        if typical is None:
            return None
        capacities = [typical if value is None else value for value in current[:parallelism]]
        capacities += [typical] * (parallelism - len(capacities))
        return np.asarray(capacities)

    def _current_capacities(self) -> tuple[list[float | None], float | None]:
        """Each current worker's capacity and their median (None if none is known); read once while held,
        not once per candidate scale-out (at 1,000 workers that was a million reads a round)."""
        if self._held is not None and self._held_current is not None:
            return self._held_current
        current = list(self._worker_capacities(self.workers).values())
        known = [c for c in current if c is not None]
        result = current, (float(np.median(known)) if known else None)
        if self._held is not None:
            self._held_current = result
        return result

    def worker_profile(self, parallelism: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(shares, capacities)`` of the workers at ``parallelism``: how the input and the capacity are spread.

        The job's capacity is its bottleneck's; how fast a backlog drains also depends on the others
        (``models.recovery``). From the partition weights at any scale-out, else from the measured
        shares at the current one, else from the partition count (how the readers split the partitions,
        each partition alike); None when none is known. A real job without kafka_exporter's per-partition
        offsets gives no weights, so there the count is what describes a scale-out not yet run: without it
        the recovery was predicted as if the job were one worker, and a backlog waiting at the bottleneck
        drained on every worker's capacity.
        """
        if self.partition_weights is not None and 1 <= parallelism <= self.partition_weights.size:
            return self._profile_from_weights(parallelism)
        if parallelism == len(self.workers):
            capacities, shares = self._filled_capacities(self.workers), self.shares(parallelism)
            if capacities is not None and shares is not None and all(w in shares for w in self.workers):
                return np.asarray([shares[w] for w in self.workers]), np.asarray([capacities[w] for w in self.workers])
        if self.partitions is not None and 1 <= parallelism <= self.partitions:
            return self._profile_from_partition_count(parallelism)
        return None

    def _profile_from_partition_count(self, parallelism: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Only the partition count known: reader ``i`` owns the partitions ``p ≡ i (mod n)``, each taken
        as carrying as much; the capacities are the current workers' (the median beyond them)."""
        assert self.partitions is not None
        counts = np.bincount(np.arange(self.partitions) % parallelism, minlength=parallelism).astype(float)
        capacities = self._reader_capacities(parallelism)
        return None if capacities is None else (counts / counts.sum(), capacities)

    def capacity_at(self, parallelism: int, *, current: int | None = None) -> tuple[float | None, str]:
        """``(capacity, source)`` at a scale-out; source is observed > estimated > prior > unknown.

        With the partition weights known, the capacity at every scale-out is read from them and the
        workers' lines (source ``observed`` where the job has run, ``estimated`` elsewhere), not from
        :attr:`observed`: a value recorded there is that same reading as it was then or, before the
        weights were known, the CPU rule's, which sums the workers and overstates a skewed job. The
        lines and weights go on learning; a recorded value stays as it was when the job left.
        """
        if self.partition_weights is not None and 1 <= parallelism <= self.partition_weights.size:
            estimate = self._estimate_from_weights(parallelism)
            if estimate is not None:
                return estimate, "observed" if parallelism in self.observed else "estimated"
        if parallelism in self.observed:
            return self.observed[parallelism], "observed"
        estimate = self.estimate_at(parallelism, current=current)
        if estimate is not None:
            return estimate, "estimated"
        if parallelism in self.prior:
            return self.prior[parallelism], "prior"
        return None, "unknown"

    def set_prior(self, prior: Mapping[int, float]) -> None:
        """Take ``prior`` (capacity per scale-out, records/s; the positive ones) as the offline prior."""
        self.prior = {int(n): float(c) for n, c in prior.items() if _positive(c)}

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state (scale-out keys as strings)."""
        return {
            "max_cpu": self.max_cpu,
            "min_samples": self.min_samples,
            "min_cpu_std": self.min_cpu_std,
            "saturated_cpu": self.saturated_cpu,
            "min_known_fraction": self.min_known_fraction,
            "prior": {str(n): c for n, c in self.prior.items()},
            "partitions": self.partitions,
            "partition_weights": None if self.partition_weights is None else self.partition_weights.tolist(),
            "regressions": {w: r.to_dict() for w, r in self.regressions.items()},
            "last_seen": dict(self.last_seen),
            "ratios": {w: list(r) for w, r in self.ratios.items()},
            "light_ratios": {w: list(r) for w, r in self.light_ratios.items()},
            "observed": {str(n): c for n, c in self.observed.items()},
            "shares": {str(n): s.to_dict() for n, s in self._shares.items()},
            "workers": list(self.workers),
            "skipped": self.skipped,
        }

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> CapacityModel:
        """Rebuild a model written by :meth:`to_dict`."""
        model = cls(
            max_cpu=float(state.get("max_cpu", 1.0)),
            prior={int(n): float(c) for n, c in (state.get("prior") or {}).items()},
            partition_weights=state.get("partition_weights"),
            min_samples=int(state.get("min_samples", 30)),
            min_cpu_std=float(state.get("min_cpu_std", 0.02)),
            saturated_cpu=float(state.get("saturated_cpu", 0.95)),
            min_known_fraction=float(state.get("min_known_fraction", 0.5)),
            partitions=state.get("partitions"),
        )
        model.regressions = {str(w): WelfordRegression.from_dict(r) for w, r in state.get("regressions", {}).items()}
        model.last_seen = {
            str(w): float(t) for w, t in (state.get("last_seen") or {}).items() if w in model.regressions
        }
        model.ratios, model.light_ratios = _stored_sums(state, "ratios"), _stored_sums(state, "light_ratios")
        model.observed = {int(n): float(c) for n, c in state.get("observed", {}).items()}
        model._shares = {int(n): _Shares.from_dict(s) for n, s in state.get("shares", {}).items()}
        model.workers = tuple(state.get("workers", ()))
        model.skipped = int(state.get("skipped", 0))
        return model


def _stored_sums(state: Mapping[str, Any], key: str) -> dict[str, tuple[float, float]]:
    """Per-worker sums of throughput and load as :meth:`CapacityModel.to_dict` wrote them under ``key``."""
    return {str(w): (float(r[0]), float(r[1])) for w, r in (state.get(key) or {}).items()}


def _rate(ratio: tuple[float, float] | None, cpu: float) -> float | None:
    """Decayed sums of throughput and load read as records/s at ``cpu``; None without load or beyond any job's
    (a stored document is read back, and a crafted one could hold a vanishing load)."""
    if ratio is None or not ratio[1] > 0:
        return None
    value = ratio[0] / ratio[1] * cpu
    return value if _positive(value) and value <= MAX_RECORDS_PER_S else None


def _fold_ratio(
    sums: dict[str, tuple[float, float]], worker_id: str, cpu: np.ndarray, throughput: np.ndarray, used: np.ndarray
) -> None:
    """Fold the ``used`` seconds into the worker's decayed sums of throughput and load (``RATIO_DECAY`` a second)."""
    if not np.any(used):
        return
    old_rate, old_load = sums.get(worker_id, (0.0, 0.0))
    decay = RATIO_DECAY ** int(np.count_nonzero(used))
    sums[worker_id] = (old_rate * decay + float(throughput[used].sum()), old_load * decay + float(cpu[used].sum()))


def _even_workers(partitions: int, parallelism: int) -> float:
    """Evenly loaded workers equivalent to ``parallelism`` readers of ``partitions`` equal partitions."""
    return partitions / math.ceil(partitions / parallelism)


def _means(cpu: np.ndarray, throughput: np.ndarray) -> tuple[float, float] | None:
    """Mean CPU and throughput over the seconds where both are known, or None."""
    both = np.isfinite(cpu) & np.isfinite(throughput)
    if not np.any(both):
        return None
    count = int(np.count_nonzero(both))
    return float(cpu[both].sum()) / count, float(throughput[both].sum()) / count


def _received(
    throughput: Mapping[str, np.ndarray], backlog: Mapping[str, Any], workers: tuple[str, ...], sample_s: float = 1.0
) -> tuple[dict[str, float], int] | None:
    """Records each worker received over the round's last stretch in which every worker's throughput and
    backlog are known, and its seconds: read over the stretch (rates times ``sample_s``) plus the backlog's
    growth across it.

    The last unbroken stretch only: a stop in between (no samples while the job is down, or rates not yet
    settled) rolls the read positions back, and the backlog's jump then is replay, not input. None if a
    worker has no backlog, the stretch is shorter than two samples, or a worker's input comes out negative.
    """
    if any(w not in backlog for w in workers):
        return None
    reads = np.vstack([np.asarray(throughput[w], dtype=float) for w in workers])
    waiting = np.vstack([np.asarray(backlog[w], dtype=float) for w in workers])
    if reads.shape != waiting.shape or reads.shape[1] < 2 or not (math.isfinite(sample_s) and sample_s > 0):
        return None
    with np.errstate(invalid="ignore"):
        known = np.all(np.isfinite(reads) & np.isfinite(waiting) & (reads >= 0) & (waiting >= 0), axis=0)
    known_at = np.flatnonzero(known)
    if known_at.size == 0:
        return None
    last = int(known_at[-1])
    gaps = np.flatnonzero(~known[:last])
    first = int(gaps[-1]) + 1 if gaps.size else 0
    if last - first < 1:
        return None
    # The backlog at sample k is the one after the read of the interval ending at k: between samples first and
    # last the workers read the rates of samples first+1 .. last, each over one sample interval.
    inputs = reads[:, first + 1 : last + 1].sum(axis=1) * sample_s + waiting[:, last] - waiting[:, first]
    if np.any(inputs < 0) or not inputs.sum() > 0:
        return None
    return {w: float(v) for w, v in zip(workers, inputs)}, int(round((last - first) * sample_s))


def _bottleneck(capacities: Mapping[str, float], shares: Mapping[str, float]) -> float | None:
    """min_i capacity_i / share_i over workers that receive input."""
    ratios = [capacities[w] / share for w, share in shares.items() if share > 1e-12 and w in capacities]
    return min(ratios) if ratios else None


def _positive(value: Any) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and number > 0
