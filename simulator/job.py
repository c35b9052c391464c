"""An honest simulated Flink job in reactive mode, reading a Kafka-like topic, stepped at 1 s.

What it models, and why each part is there:

* **Source partitions** are queues with an end offset (produced), a read position (processed by
  the live job) and a committed offset (last completed checkpoint). Partition weights are skewed
  (Zipf), so some workers get more input than others.
* **Workers** (TaskManagers, one slot each) own partitions round-robin; the assignment is redone on
  every (re)scale, so the skew moves when the parallelism changes. Workers are heterogeneous: each
  worker index has its own speed factor.
* **Throughput** of a worker is limited by its capacity; a partition pinned to a saturated worker
  cannot be helped by an idle one, so the most loaded worker bounds the job.
* **CPU** is the busy fraction plus idle overhead and noise, saturating at 100 %; CPU and per-worker
  rates are reported as moving averages, as Flink's meters and ``avg_over_time`` do.
* **Checkpoints** commit the read positions periodically. A **rescale** or **failure** stops
  processing for a downtime that grows with the parallelism, discards progress since the last
  checkpoint and replays from there.
* **Exactly-once accounting**: produced = (processed − replayed) + lag holds after every step, with
  each counter kept independently so the invariant is a real check.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from simulator.config import SimulatorSettings
from simulator.trace import Trace


class JobState(str, Enum):
    """Whether the job is processing or restarting."""

    RUNNING = "running"
    DOWN = "down"


@dataclass(frozen=True)
class Restart:
    """One stop of the job: a rescale or a failure, with its measured downtime."""

    kind: str
    """``rescale`` or ``failure``."""
    start_s: int
    """Second at which processing stopped."""
    downtime_s: int
    """Seconds until processing resumed."""
    from_parallelism: int
    to_parallelism: int
    replayed_records: int
    """Records processed since the last checkpoint that had to be processed again."""


@dataclass(frozen=True)
class Accounting:
    """The job's record counters; ``lost`` must always be zero."""

    produced: int
    processed: int
    """Records processed, counting every replayed record again."""
    replayed: int
    """Records rolled back to the last checkpoint after a stop."""
    committed: int
    """Records whose results were committed by a checkpoint (exactly once)."""
    lag: int

    @property
    def effective_processed(self) -> int:
        """Records processed exactly once so far (processed − replayed)."""
        return self.processed - self.replayed

    @property
    def lost(self) -> int:
        """Records neither processed nor waiting; zero unless the simulator is wrong."""
        return self.produced - self.effective_processed - self.lag


def zipf_weights(partitions: int, exponent: float, rng: np.random.Generator) -> np.ndarray:
    """Normalised Zipf weights ``1/rank**exponent``, ranks shuffled so hot partitions are spread out."""
    weights = 1.0 / np.arange(1, partitions + 1, dtype=float) ** exponent
    rng.shuffle(weights)
    return weights / weights.sum()


def round_robin(partitions: int, parallelism: int) -> np.ndarray:
    """Worker index of every partition when ``parallelism`` readers share ``partitions`` (p mod n)."""
    return np.arange(partitions) % parallelism


def worker_id(index: int) -> str:
    """The pod-like name of worker ``index``."""
    return f"taskmanager-{index}"


class _Series:
    """Per-second recorded metrics, grown by doubling; columns are worker indices."""

    def __init__(self, workers: int, capacity: int = 4096) -> None:
        self.length = 0
        self.workers = workers
        self.workload = np.empty(capacity)
        self.lag = np.empty(capacity)
        self.parallelism = np.empty(capacity, dtype=np.int64)
        self.uptime = np.empty(capacity)
        self.throughput = np.empty((capacity, workers))
        self.cpu = np.empty((capacity, workers))

    def _grow(self) -> None:
        for name in ("workload", "lag", "parallelism", "uptime", "throughput", "cpu"):
            old = getattr(self, name)
            new = np.empty((old.shape[0] * 2, *old.shape[1:]), dtype=old.dtype)
            new[: self.length] = old[: self.length]
            setattr(self, name, new)

    def append(
        self, workload: float, lag: float, parallelism: int, uptime: float, throughput: np.ndarray, cpu: np.ndarray
    ) -> None:
        if self.length == self.workload.shape[0]:
            self._grow()
        i = self.length
        self.workload[i] = workload
        self.lag[i] = lag
        self.parallelism[i] = parallelism
        self.uptime[i] = uptime
        self.throughput[i] = throughput
        self.cpu[i] = cpu
        self.length += 1


@dataclass(frozen=True, eq=False)
class Window:
    """Recorded metrics of the seconds ``[start_s, end_s)``; worker columns absent at a second are NaN."""

    times: np.ndarray
    workload: np.ndarray
    lag: np.ndarray
    parallelism: np.ndarray
    uptime_s: np.ndarray
    throughput: dict[str, np.ndarray]
    cpu: dict[str, np.ndarray]


class SimulatedFlinkJob:
    """A Flink job in reactive mode on a skewed Kafka-like source, advanced one simulated second per step."""

    def __init__(self, trace: Trace, config: SimulatorSettings, *, parallelism: int | None = None) -> None:
        self.trace = trace
        self.config = config
        self._rng = np.random.default_rng(config.seed)
        partitions = config.partitions
        if config.partition_weights is not None:
            weights = np.asarray(config.partition_weights, dtype=float)
            self.partition_weights = weights / weights.sum()
        else:
            self.partition_weights = zipf_weights(partitions, config.partition_skew, self._rng)
        # A worker index keeps its speed across rescales (the same pod spec on the same node pool).
        if config.worker_speeds is not None:
            speeds = np.resize(np.asarray(config.worker_speeds, dtype=float), partitions)
        else:
            speeds = np.clip(1.0 + config.worker_speed_spread * self._rng.standard_normal(partitions), 0.5, 1.5)
        self.worker_speeds = speeds
        self.worker_capacity = config.worker_capacity_rps * speeds

        self.parallelism = self._checked_parallelism(parallelism or config.initial_parallelism)
        self._assignment = round_robin(partitions, self.parallelism)

        self.now_s = 0
        self.state = JobState.RUNNING
        self._uptime_start = 0
        self._down_until = 0
        self._pending_parallelism = self.parallelism
        self._pending_restart: tuple[str, int, int, int] | None = None
        self.restarts: list[Restart] = []

        self._end = np.zeros(partitions, dtype=np.int64)
        self._position = np.zeros(partitions, dtype=np.int64)
        self._committed = np.zeros(partitions, dtype=np.int64)
        self._carry = np.zeros(partitions)
        self._produced = 0
        self._processed = 0
        self._replayed = 0
        self._committed_total = 0

        window = config.metric_window_s
        self._tp_ring = np.zeros((partitions, window))
        self._cpu_ring = np.full((partitions, window), config.cpu_idle)
        self._ring_pos = 0
        self._ring_fill = np.zeros(partitions, dtype=np.int64)
        self._series = _Series(partitions)

    # ------------------------------------------------------------------ control

    def _checked_parallelism(self, parallelism: int) -> int:
        if not 1 <= parallelism <= self.config.partitions:
            raise ValueError(
                f"parallelism {parallelism} outside [1, partitions={self.config.partitions}]: "
                "a worker would have no partition"
            )
        return parallelism

    def rescale(self, parallelism: int) -> bool:
        """Start a rescale to ``parallelism`` workers; returns False if nothing changes."""
        parallelism = self._checked_parallelism(parallelism)
        if self.state is JobState.DOWN:
            if parallelism == self._pending_parallelism:
                return False
            self._pending_parallelism = parallelism
            return True
        if parallelism == self.parallelism:
            return False
        mean = self.config.rescale_downtime_base_s + self.config.rescale_downtime_per_worker_s * max(
            parallelism, self.parallelism
        )
        self._stop("rescale", parallelism, mean)
        return True

    def fail(self) -> bool:
        """Inject a TaskManager failure: the job restarts at the same parallelism. False if already down."""
        if self.state is JobState.DOWN:
            return False
        mean = self.config.failure_downtime_base_s + self.config.failure_downtime_per_worker_s * self.parallelism
        self._stop("failure", self.parallelism, mean)
        return True

    def _stop(self, kind: str, next_parallelism: int, mean_downtime: float) -> None:
        jitter = self.config.downtime_jitter
        # Log-normal around the mean (median corrected so the mean stays ``mean_downtime``).
        factor = float(np.exp(jitter * self._rng.standard_normal() - jitter * jitter / 2)) if jitter else 1.0
        downtime = max(1, int(round(mean_downtime * factor)))
        # Progress since the last completed checkpoint is lost and will be replayed.
        replayed = int((self._position - self._committed).sum())
        self._replayed += replayed
        self._position[:] = self._committed
        self.state = JobState.DOWN
        self._down_until = self.now_s + downtime
        self._pending_parallelism = next_parallelism
        self._pending_restart = (kind, self.now_s, self.parallelism, replayed)

    def _restart(self) -> None:
        kind, start, from_parallelism, replayed = self._pending_restart or ("rescale", self.now_s, 0, 0)
        self.parallelism = self._pending_parallelism
        self._assignment = round_robin(self.config.partitions, self.parallelism)
        self.state = JobState.RUNNING
        self._uptime_start = self.now_s
        self.restarts.append(
            Restart(kind, start, self.now_s - start, from_parallelism, self.parallelism, replayed)
        )
        self._pending_restart = None

    # ------------------------------------------------------------------ stepping

    def step(self) -> None:
        """Advance one simulated second: produce, (re)start, process, checkpoint, record metrics."""
        config = self.config
        rng = self._rng
        t = self.now_s
        rate = float(self.trace.rate_at(t))
        if config.workload_noise:
            rate = max(0.0, rate * (1.0 + config.workload_noise * rng.standard_normal()))
        expected = rate * self.partition_weights + self._carry
        produced = np.floor(expected)
        self._carry = expected - produced
        produced_int = produced.astype(np.int64)
        self._end += produced_int
        produced_now = int(produced_int.sum())
        self._produced += produced_now

        if self.state is JobState.DOWN and t >= self._down_until:
            self._restart()

        workers = self.config.partitions
        throughput = np.zeros(workers)
        busy = np.zeros(workers)
        if self.state is JobState.RUNNING:
            n = self.parallelism
            assignment = self._assignment
            backlog = self._end - self._position
            worker_backlog = np.bincount(assignment, weights=backlog, minlength=n)
            capacity = self.worker_capacity[:n] * (1.0 + 0.005 * rng.standard_normal(n))
            target = np.minimum(capacity, worker_backlog)
            with np.errstate(divide="ignore", invalid="ignore"):
                fraction = np.where(worker_backlog > 0, target / worker_backlog, 0.0)
            take = np.floor(backlog * fraction[assignment]).astype(np.int64)
            self._position += take
            taken = int(take.sum())
            self._processed += taken
            per_worker = np.bincount(assignment, weights=take, minlength=n)
            throughput[:n] = per_worker
            busy[:n] = np.minimum(per_worker / capacity, 1.0)
            uptime = t - self._uptime_start
            if uptime > 0 and uptime % config.checkpoint_interval_s == 0:
                self._committed_total += int((self._position - self._committed).sum())
                self._committed[:] = self._position
            active = n
        else:
            uptime = 0
            active = self.parallelism

        cpu = config.cpu_idle + (1.0 - config.cpu_idle) * busy
        cpu += config.cpu_noise * rng.standard_normal(workers)
        np.clip(cpu, 0.0, 1.0, out=cpu)
        self._record(t, produced_now, throughput, cpu, active, uptime)
        self.now_s = t + 1

    def _record(
        self, t: int, produced_now: int, throughput: np.ndarray, cpu: np.ndarray, active: int, uptime: float
    ) -> None:
        pos = self._ring_pos
        self._tp_ring[:, pos] = throughput
        self._cpu_ring[:, pos] = cpu
        self._ring_pos = (pos + 1) % self._tp_ring.shape[1]
        # Workers that just joined average over the seconds they have existed, not over zeros.
        self._ring_fill[:active] = np.minimum(self._ring_fill[:active] + 1, self._tp_ring.shape[1])
        self._ring_fill[active:] = 0
        fill = np.maximum(self._ring_fill, 1)
        window = self._tp_ring.shape[1]
        if np.all(self._ring_fill[:active] == window):
            tp_avg = self._tp_ring.mean(axis=1)
            cpu_avg = self._cpu_ring.mean(axis=1)
        else:
            # Mean over the newest ``fill`` slots of each row.
            order = (self._ring_pos - 1 - np.arange(window)) % window
            recent = np.arange(window)[None, :] < fill[:, None]
            tp_avg = (self._tp_ring[:, order] * recent).sum(axis=1) / fill
            cpu_avg = (self._cpu_ring[:, order] * recent).sum(axis=1) / fill
        tp_avg[active:] = np.nan
        cpu_avg[active:] = np.nan
        lag = float((self._end - self._position).sum())
        self._series.append(float(produced_now), lag, active, float(uptime), tp_avg, cpu_avg)

    def run_until(self, t_s: int) -> None:
        """Step until simulated second ``t_s`` (exclusive)."""
        while self.now_s < t_s:
            self.step()

    # ------------------------------------------------------------------ reading

    @property
    def accounting(self) -> Accounting:
        """The record counters now."""
        return Accounting(
            produced=self._produced,
            processed=self._processed,
            replayed=self._replayed,
            committed=self._committed_total,
            lag=int((self._end - self._position).sum()),
        )

    @property
    def committed_offsets(self) -> np.ndarray:
        """Per-partition offsets of the last completed checkpoint (a copy)."""
        return self._committed.copy()

    @property
    def target_parallelism(self) -> int:
        """The scale-out the job is set to: the pending one while it restarts."""
        return self._pending_parallelism if self.state is JobState.DOWN else self.parallelism

    @property
    def uptime_s(self) -> int:
        """Seconds since the job last (re)started processing; 0 while down."""
        return self.now_s - self._uptime_start if self.state is JobState.RUNNING else 0

    def shares(self, parallelism: int | None = None) -> np.ndarray:
        """Fraction of the input each worker receives at ``parallelism`` (default: the current one)."""
        n = parallelism or self.parallelism
        return np.bincount(round_robin(self.config.partitions, n), weights=self.partition_weights, minlength=n)

    def true_capacity(self, parallelism: int | None = None) -> float:
        """Highest sustainable job rate at ``parallelism``: the worker that saturates first bounds it."""
        n = parallelism or self.parallelism
        shares = self.shares(n)
        with np.errstate(divide="ignore"):
            return float(np.min(np.where(shares > 0, self.worker_capacity[:n] / shares, np.inf)))

    def window(self, start_s: int, end_s: int) -> Window:
        """Recorded metrics of seconds ``[start_s, end_s)`` clipped to what has been simulated."""
        start = max(0, int(start_s))
        end = min(self._series.length, int(end_s))
        end = max(start, end)
        s = self._series
        columns = s.throughput[start:end]
        present = np.flatnonzero(np.any(np.isfinite(columns), axis=0)) if end > start else np.array([], int)
        return Window(
            times=np.arange(start, end, dtype=float),
            workload=s.workload[start:end].copy(),
            lag=s.lag[start:end].copy(),
            parallelism=s.parallelism[start:end].copy(),
            uptime_s=s.uptime[start:end].copy(),
            throughput={worker_id(i): s.throughput[start:end, i].copy() for i in present},
            cpu={worker_id(i): s.cpu[start:end, i].copy() for i in present},
        )

    @property
    def recorded_seconds(self) -> int:
        """Seconds of metrics recorded so far."""
        return self._series.length
