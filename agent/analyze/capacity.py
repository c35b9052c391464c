"""Capacity: what the job can process at each scale-out, measured from its workers each round.

Feeds the capacity model (``models.capacity``) every worker's load and throughput, the records each
source partition produced (their weights, hence the skew at scale-outs not yet run), the capacity the
job showed at its current scale-out, and forgets workers that left. Rounds dominated by garbage
collection teach nothing: GC time reads as load.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from agent.json_types import JsonObject, JsonValue, object_at
from agent.logging import get_logger
from agent.observation import Observation
from agent.safeguards import memory_pressure
from agent.settings import ConfigError, Settings
from models.capacity import CapacityModel
from planner.safeguards import gc_dominates

PARTITION_RATE_TOLERANCE = 1.25
"""How far the records the source partitions produced over a round (their log-end offsets) may stand from the
workload read over it, as a factor either way, before the round's offsets are refused: the two are the same records
read from two exporters, apart by the rate window's smear of a change."""

KEPT_UP_BACKLOG = 0.01
"""The readers' own offsets weigh the partitions only over a round whose backlog stayed within this fraction of the
records read over it. What a partition's reader advanced differs from what the partition received by the
difference of its backlog at the round's two ends, at most the job's backlog: so no partition's share of the
records is off by more than this fraction."""

WORKERS_KEPT_PER_SCALE_OUT = 4
"""Worker regressions kept, per unit of max_parallelism, however fast pods churn (bounds the knowledge)."""


def load_prior(path: Path) -> dict[int, float]:
    """The StreamBed capacity prior per scale-out; a bad file is a ConfigError naming the key."""
    from models.streambed.model_file import CapacityModelError, load_capacity_prior

    try:
        return load_capacity_prior(path)
    except CapacityModelError as exc:
        raise ConfigError(f"capacity_prior_path: {exc}") from None


class CapacityTracker:
    """Owns the job's capacity model and everything that feeds it from one observation."""

    def __init__(self, settings: Settings, prior: Mapping[int, float] | None) -> None:
        self.settings = settings
        self.log = get_logger("perdix.analyze")
        self.model = CapacityModel(max_cpu=settings.max_cpu, prior=prior, partitions=settings.source_partitions)
        self._last_ends: tuple[float, np.ndarray] | None = None
        """Time and log-end offsets of the source partitions at the last round (for their rates)."""

    def learn(self, observation: Observation, now: float) -> None:
        """Fold one observation into the model: partition count and weights, worker regressions, the observed
        capacity."""
        self._learn_partition_count(observation)
        self._learn_partition_weights(observation, now)
        learns = self._learns_from(observation)
        self._learn_workers(observation, learns=learns)
        self._forget_departed(observation, now)

    def observed_scale_outs(self) -> list[int]:
        """Scale-outs whose capacity was observed (not estimated)."""
        return sorted(self.model.observed)

    def _learns_from(self, observation: Observation) -> bool:
        """False when GC dominated the round: its load says nothing of the capacity (logged)."""
        # GC time reads as load: a round a TaskManager spent mostly collecting garbage says nothing of the
        # capacity (safeguards.memory.gc_pressure_threshold), so neither its regressions nor its scale-out learn.
        threshold = self.settings.safeguards.memory.gc_pressure_threshold
        learns = not gc_dominates(memory_pressure(observation), threshold)
        if not learns:
            self.log.info("capacity.not_learned", why="GC time above safeguards.memory.gc_pressure_threshold")
        return learns

    def _learn_workers(self, observation: Observation, *, learns: bool) -> None:
        """Each worker's load against its throughput; with every worker seen, the job's capacity now."""
        load = observation.worker_load(self.settings.utilization)
        for worker, throughput in observation.worker_throughput.items():
            utilization = load.get(worker)
            if utilization is not None and learns:
                self.model.update(worker, observation.settled(utilization), observation.settled(throughput))
        workers = sorted(observation.worker_throughput)
        parallelism = observation.parallelism
        if parallelism is not None and len(workers) == parallelism:
            self.model.set_workers(workers, observation.worker_backlog, sample_s=observation.step_s)
            current_capacity = self.model.capacity_now()
            if current_capacity is not None and learns:
                self.model.record_observed(parallelism, current_capacity)

    def _forget_departed(self, observation: Observation, now: float) -> None:
        """Drop workers gone longer than the retention, and the oldest beyond the bound."""
        forgotten = self.model.prune(
            now=now,
            seen=observation.worker_throughput,
            retention_s=self.settings.worker_retention_s,
            max_workers=WORKERS_KEPT_PER_SCALE_OUT * self.settings.max_parallelism,
        )
        if forgotten:
            self.log.info("capacity.workers_forgotten", count=len(forgotten), kept=len(self.model.regressions))

    def _learn_partition_count(self, observation: Observation) -> None:
        """The partitions the sources report reading (their per-partition offset gauges), where source_partitions
        is not set: the granularity of the input's split at every scale-out the job has not run.

        The count only grows: a topic's partitions are never taken away, and a lower reading is a window in which
        some readers went unscraped (a lower count would cap the readers the planner gives a source)."""
        count = observation.source_partitions
        known = self.model.partitions
        if self.settings.source_partitions is not None or count is None or (known is not None and count <= known):
            return
        self.log.info("capacity.partitions_read", partitions=count, was=known)
        self.model.partitions = count

    def _learn_partition_weights(self, observation: Observation, now: float) -> None:
        """What each source partition received over the window gives the partition weights, and with them the skew
        at scale-outs the job has not run (round-robin assignment): from the log-end offsets where the monitor
        reads them, else from how far each partition's reader advanced while the job kept up."""
        received = self._received(observation, now)
        if received is None:
            received = self._read_while_keeping_up(observation)
        if received is None:
            return
        records, seconds = received
        workload = observation.workload_mean
        if workload is None or seconds <= 0:
            return  # nothing to check the offsets against: they wait for a round that has it
        rate = float(np.sum(records)) / seconds
        if not workload / PARTITION_RATE_TOLERANCE <= rate <= workload * PARTITION_RATE_TOLERANCE:
            # The offsets and the workload read the same records from two exporters; where they disagree one
            # of them is wrong, and the weights (every scale-out's skew) are not moved on it.
            self.log.info(
                "capacity.partition_offsets_refused", offsets_rate=round(rate, 1), workload=round(workload, 1)
            )
            return
        self.model.observe_partition_records(records)

    def _received(self, observation: Observation, now: float) -> tuple[np.ndarray, float] | None:
        """Records each partition received and over how many seconds, from the log-end offsets: at the window's
        start where the monitor gives them, else at the last round; None without either."""
        offsets = observation.partition_offsets
        if not offsets:
            return None
        ends = np.asarray([end for end, _ in offsets], dtype=float)
        last, self._last_ends = self._last_ends, (now, ends)
        since = observation.partition_ends_since
        if since is not None and len(since) == ends.size:
            return ends - np.asarray(since, dtype=float), _span(observation.partition_ends_span_s, observation)
        if last is not None and last[1].shape == ends.shape and now > last[0]:
            return ends - last[1], now - last[0]
        return None

    def _read_while_keeping_up(self, observation: Observation) -> tuple[np.ndarray, float] | None:
        """Records each partition's reader advanced over the window, where that is what the partition received:
        the job ran throughout (no restart replayed part of it), no read went back, every partition the readers
        count has its own series (one topic), and the backlog stayed within :data:`KEPT_UP_BACKLOG` of the
        records read at every second. None otherwise."""
        reads = observation.partition_reads
        if not reads or observation.times.size == 0:
            return None
        partitions = self.model.partitions
        if partitions is not None and len(reads) < partitions:
            return None
        start, end = np.asarray(reads, dtype=float).T
        records = end - start
        if np.any(start < 0) or np.any(records < 0) or not records.sum() > 0:
            return None
        if observation.restarted_since(float(observation.times[0])) is not None:
            return None
        lag = np.asarray(observation.consumer_lag, dtype=float)
        if lag.size == 0 or not np.all(np.isfinite(lag)) or lag.max() > KEPT_UP_BACKLOG * records.sum():
            return None
        return records, _span(observation.partition_reads_span_s, observation)

    def to_dict(self) -> JsonObject:
        """This part's field of the analyzer's knowledge document."""
        return {"capacity": self.model.to_dict()}

    def restore(self, state: Mapping[str, JsonValue]) -> None:
        """Read :meth:`to_dict`'s field; a prior given at start outlives a document stored without one."""
        prior = self.model.prior
        self.model = CapacityModel.from_dict(object_at(state, "capacity"))
        if prior and not self.model.prior:
            self.model.set_prior(prior)
        if self.settings.source_partitions is not None:  # the setting wins over a count stored or read
            self.model.partitions = self.settings.source_partitions


def _span(seconds: float | None, observation: Observation) -> float:
    """The seconds offsets read at two points of the window lie apart: as the monitor gives them, else the
    window's (the simulator reads them at its two ends)."""
    return float(seconds) if seconds is not None else float(observation.times.size)
