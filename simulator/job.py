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
* **Fair randomness**: whatever is not the policy's doing (the per-second arrivals, each worker's
  per-second capacity, the downtime of a stop, the failure instants) comes from its own random
  stream keyed by (seed, second) through :class:`JobEnvironment`, so two policies replaying one trace
  with one seed face the same arrivals, capacities and downtimes whatever they did before. Only the
  CPU noise, which changes no dynamics, stays on the job's own stream.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Literal

import numpy as np

from simulator.config import SimulatorSettings
from simulator.drain import moving_averages, run_job
from simulator.trace import Trace

StopKind = Literal["rescale", "failure"]
"""Why the job stopped processing."""


class JobState(str, Enum):
    """Whether the job is processing or restarting."""

    RUNNING = "running"
    DOWN = "down"


@dataclass(frozen=True)
class Restart:
    """One stop of the job: a rescale or a failure, with its measured downtime."""

    kind: StopKind
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


_BLOCK_S = 3600
"""Seconds of arrivals and capacity noise drawn at once (a block is a function of the seed and its index)."""
_STREAM_ARRIVALS = 1
_STREAM_CAPACITY = 2
_STREAM_DOWNTIME = 3
_STREAM_CPU = 4
_STOP_KIND_CODE = {"rescale": 0, "failure": 1}
_FAILURE_STREAM_OFFSET = 7919


def _stream(seed: int, *key: int) -> np.random.Generator:
    """A random stream that depends on ``seed`` and ``key`` only (never on draws made elsewhere)."""
    return np.random.default_rng(np.random.SeedSequence([seed, *key]))


def failure_schedule(duration_s: int, failures_per_hour: float, seed: int) -> list[int]:
    """Seconds in ``[0, duration_s)`` at which a TaskManager fails: a Poisson process of rate ``failures_per_hour``.

    Inter-failure gaps are exponential with mean ``3600 / failures_per_hour`` seconds, drawn from a
    stream of their own (``seed + 7919``), so the schedule is the same for every policy. The replay
    injects a failure at each of these seconds (it does nothing if the job is already down).
    """
    if failures_per_hour <= 0:
        return []
    rng = np.random.default_rng(seed + _FAILURE_STREAM_OFFSET)
    times: list[int] = []
    t = 0.0
    while True:
        t += rng.exponential(3600.0 / failures_per_hour)
        if t >= duration_s:
            return times
        times.append(int(t))


def worker_id(index: int) -> str:
    """The pod-like name of worker ``index``."""
    return f"taskmanager-{index}"


class JobEnvironment:
    """Everything the simulated job faces that no policy can change: arrivals, capacities, downtimes.

    Each is a function of the trace, the settings and the seed only, drawn from a random stream of
    its own, and read by the job at every step; an offline planner reads the same numbers here.

    * **Arrivals**: the rate at second ``t`` is the trace's, times ``1 + workload_noise · z_t`` with
      ``z_t`` standard normal (clipped at 0); partition ``p`` receives
      ``a_p(t) = ⌊C_p(t)⌋ − ⌊C_p(t−1)⌋`` records, where ``C_p(t) = Σ_{τ≤t} rate_τ · weight_p``, so the
      fractional records carry over and none is lost.
    * **Capacity**: worker slot ``i`` processes at most ``c_i(t) = capacity_rps · speed_i ·
      (1 + capacity_noise · z_{t,i})`` records in second ``t``; noise is drawn for all
      ``partitions``-many slots every second, and a job at scale-out ``n`` uses the first ``n``.
    * **Downtime** of a stop of ``kind`` at second ``s`` from scale-out ``a`` to ``b``:
      ``max(1, round(m · exp(σ·z − σ²/2)))`` with mean ``m = base + per_worker · max(a, b)``
      (rescale) or ``base + per_worker · a`` (failure), ``σ = downtime_jitter`` and ``z`` drawn from a
      stream keyed by (seed, kind, s).

    Examples
    --------
    >>> import numpy as np
    >>> from simulator import SimulatorSettings, Trace
    >>> env = JobEnvironment(Trace("flat", np.array([0.0, 600.0]), np.array([1000.0, 1000.0])), SimulatorSettings())
    >>> int(env.arrivals(0, 10).sum(axis=1).mean()) in range(950, 1050)
    True
    >>> env.downtime_s("rescale", 120, 4, 8) == env.downtime_s("rescale", 120, 4, 8)
    True
    """

    def __init__(self, trace: Trace, config: SimulatorSettings) -> None:
        self.trace = trace
        self.config = config
        layout = np.random.default_rng(config.seed)
        partitions = config.partitions
        if config.partition_weights is not None:
            weights = np.asarray(config.partition_weights, dtype=float)
            self.partition_weights: np.ndarray = weights / weights.sum()
        else:
            self.partition_weights = zipf_weights(partitions, config.partition_skew, layout)
        # A worker index keeps its speed across rescales (the same pod spec on the same node pool).
        if config.worker_speeds is not None:
            speeds = np.resize(np.asarray(config.worker_speeds, dtype=float), partitions)
        else:
            speeds = np.clip(1.0 + config.worker_speed_spread * layout.standard_normal(partitions), 0.5, 1.5)
        self.worker_speeds: np.ndarray = speeds
        self.worker_capacity: np.ndarray = config.worker_capacity_rps * speeds
        """Mean records/s of every worker slot (index ``i`` is the ``i``-th worker at any scale-out)."""
        self._arrival_blocks: list[np.ndarray] = []
        self._arrival_sum = np.zeros(partitions)
        self._arrival_floor = np.zeros(partitions)
        self._capacity_blocks: dict[int, np.ndarray] = {}
        self._true_capacity: dict[int, float] = {}
        self._downtime_factors: dict[tuple[str, int], float] = {}

    # ------------------------------------------------------------------ arrivals

    def _arrival_block(self, block: int) -> np.ndarray:
        config = self.config
        while len(self._arrival_blocks) <= block:
            index = len(self._arrival_blocks)
            seconds = np.arange(index * _BLOCK_S, (index + 1) * _BLOCK_S, dtype=float)
            rate = np.asarray(self.trace.rate_at(seconds), dtype=float)
            noise = _stream(self.config.seed, _STREAM_ARRIVALS, index).standard_normal(_BLOCK_S)
            if config.workload_noise:
                rate = np.maximum(0.0, rate * (1.0 + config.workload_noise * noise))
            running = self._arrival_sum + np.cumsum(rate[:, None] * self.partition_weights[None, :], axis=0)
            floors = np.floor(running)
            counts = np.diff(floors, axis=0, prepend=self._arrival_floor[None, :]).astype(np.int64)
            self._arrival_sum, self._arrival_floor = running[-1], floors[-1]
            self._arrival_blocks.append(counts)
        return self._arrival_blocks[block]

    def arrivals(self, start_s: int, end_s: int) -> np.ndarray:
        """Records arriving per second and partition in ``[start_s, end_s)``: shape (seconds, partitions), int64."""
        if end_s <= start_s:
            return np.zeros((0, self.config.partitions), dtype=np.int64)
        return _span(self._arrival_block, start_s, end_s)

    def workload(self, start_s: int, end_s: int) -> np.ndarray:
        """Records arriving per second in ``[start_s, end_s)`` over all partitions (the recorded workload)."""
        return self.arrivals(start_s, end_s).sum(axis=1).astype(float)

    # ------------------------------------------------------------------ capacity

    def _capacity_block(self, block: int) -> np.ndarray:
        cached = self._capacity_blocks.get(block)
        if cached is None:
            noise = _stream(self.config.seed, _STREAM_CAPACITY, block).standard_normal(
                (_BLOCK_S, self.config.partitions)
            )
            cached = self.worker_capacity[None, :] * (1.0 + self.config.capacity_noise * noise)
            self._capacity_blocks[block] = cached
        return cached

    def capacities(self, start_s: int, end_s: int) -> np.ndarray:
        """Per-second capacity of every worker slot in ``[start_s, end_s)``: shape (seconds, partitions)."""
        if end_s <= start_s:
            return np.zeros((0, self.config.partitions))
        return _span(self._capacity_block, start_s, end_s)

    def shares(self, parallelism: int) -> np.ndarray:
        """Fraction of the input each of ``parallelism`` workers receives (round-robin partitions)."""
        n = parallelism
        return np.bincount(round_robin(self.config.partitions, n), weights=self.partition_weights, minlength=n)

    def worker_capacities(self, parallelism: int) -> np.ndarray:
        """Mean records/s of each of ``parallelism`` workers (without the per-second noise)."""
        return self.worker_capacity[:parallelism].copy()

    def true_capacity(self, parallelism: int) -> float:
        """Highest sustainable job rate at ``parallelism``: ``min_i c_i / share_i`` (the first worker to saturate)."""
        cached = self._true_capacity.get(parallelism)
        if cached is None:
            shares = self.shares(parallelism)
            with np.errstate(divide="ignore"):
                cached = float(np.min(np.where(shares > 0, self.worker_capacity[:parallelism] / shares, np.inf)))
            self._true_capacity[parallelism] = cached
        return cached

    # ------------------------------------------------------------------ stops

    def mean_downtime_s(self, kind: StopKind, from_parallelism: int, to_parallelism: int) -> float:
        """Mean downtime of a stop: ``base + per_worker · max(a, b)`` (rescale) or ``base + per_worker · a``
        (failure)."""
        config = self.config
        if kind == "failure":
            return config.failure_downtime_base_s + config.failure_downtime_per_worker_s * from_parallelism
        return config.rescale_downtime_base_s + config.rescale_downtime_per_worker_s * max(
            from_parallelism, to_parallelism
        )

    def downtime_s(self, kind: StopKind, stop_s: int, from_parallelism: int, to_parallelism: int) -> int:
        """Seconds a stop of ``kind`` at second ``stop_s`` from ``from_parallelism`` to ``to_parallelism`` lasts.

        ``max(1, round(m · exp(σ·z − σ²/2)))``: log-normal around the mean ``m`` (the median is
        corrected so the mean stays ``m``), ``z`` from the stream of (seed, kind, ``stop_s``).
        """
        mean = self.mean_downtime_s(kind, from_parallelism, to_parallelism)
        return max(1, round(mean * self.downtime_factor(kind, stop_s)))

    def downtime_factor(self, kind: StopKind, stop_s: int) -> float:
        """The log-normal factor ``exp(σ·z − σ²/2)`` of a stop of ``kind`` at ``stop_s`` (1 without jitter)."""
        key = (kind, int(stop_s))
        factor = self._downtime_factors.get(key)
        if factor is None:
            jitter = self.config.downtime_jitter
            factor = 1.0
            if jitter:
                z = float(_stream(self.config.seed, _STREAM_DOWNTIME, _STOP_KIND_CODE[kind], key[1]).standard_normal())
                factor = math.exp(jitter * z - jitter * jitter / 2)
            self._downtime_factors[key] = factor
        return factor

    def failures(self, duration_s: int, failures_per_hour: float) -> list[int]:
        """The failure instants a replay of ``duration_s`` injects (see :func:`failure_schedule`)."""
        return failure_schedule(duration_s, failures_per_hour, self.config.failure_schedule_seed)


def _span(block: Callable[[int], np.ndarray], start_s: int, end_s: int) -> np.ndarray:
    """Rows ``[start_s, end_s)`` (``end_s > start_s``) of a per-second table kept in blocks of
    ``_BLOCK_S`` seconds (``block(b)`` is block ``b``), as a new array; one block is sliced, not joined."""
    first, last = start_s // _BLOCK_S, (end_s - 1) // _BLOCK_S
    stacked = block(first) if first == last else np.concatenate([block(b) for b in range(first, last + 1)])
    offset = first * _BLOCK_S
    return stacked[start_s - offset : end_s - offset].copy()


class _Series:
    """Per-second recorded metrics, grown by doubling; columns are worker indices.

    Throughput, CPU and busy time are kept raw (one value per second and worker slot); the moving
    averages the job reports are computed when a window is read (:func:`_moving_averages`), so a
    step costs a few array writes however long the averaging window is.
    """

    _COLUMNS = ("workload", "lag", "committed_lag", "parallelism", "uptime", "throughput", "cpu", "busy", "backlog")

    def __init__(self, workers: int, capacity: int = 4096) -> None:
        self.length = 0
        self.workers = workers
        self.workload = np.empty(capacity)
        self.lag = np.empty(capacity)
        self.committed_lag = np.empty(capacity)
        self.parallelism = np.empty(capacity, dtype=np.int64)
        self.uptime = np.empty(capacity)
        self.throughput = np.empty((capacity, workers))
        self.cpu = np.empty((capacity, workers))
        self.busy = np.empty((capacity, workers))
        self.backlog = np.empty((capacity, workers))

    def _grow(self) -> None:
        for name in self._COLUMNS:
            old = getattr(self, name)
            new = np.empty((old.shape[0] * 2, *old.shape[1:]), dtype=old.dtype)
            new[: self.length] = old[: self.length]
            setattr(self, name, new)

    def reserve(self, seconds: int) -> tuple[np.ndarray, ...]:
        """The columns' rows for the next ``seconds`` seconds (views, in ``_COLUMNS`` order), counted as recorded."""
        while self.length + seconds > self.workload.shape[0]:
            self._grow()
        rows = slice(self.length, self.length + seconds)
        self.length += seconds
        return tuple(getattr(self, name)[rows] for name in self._COLUMNS)


@dataclass(frozen=True, eq=False)
class Window:
    """Recorded metrics of the seconds ``[start_s, end_s)``; worker columns absent at a second are NaN."""

    times: np.ndarray
    workload: np.ndarray
    """Records that arrived in each second."""
    lag: np.ndarray
    """Records produced but not yet read by the live job (end offsets − read positions), after each second."""
    parallelism: np.ndarray
    uptime_s: np.ndarray
    throughput: dict[str, np.ndarray]
    """Records/s of each worker, moving average over ``metric_window_s``."""
    cpu: dict[str, np.ndarray]
    """CPU of each worker, 0..1, moving average over ``metric_window_s``."""
    busy: dict[str, np.ndarray]
    """Busy fraction of each worker (records processed / what it could process), 0..1, moving average over
    ``metric_window_s``: what Flink's ``busyTimeMsPerSecond`` reports, read by the Flink autoscaler and DS2."""
    committed_lag: np.ndarray
    """Records produced but not covered by the last completed checkpoint (end offsets − committed offsets):
    the consumer-group lag a Kafka scaler such as KEDA's sees."""
    backlog: dict[str, np.ndarray]
    """Records waiting in each worker's partitions after each second (its source readers' FLIP-33
    ``pendingRecords``, a gauge); NaN while the job is down or the worker did not exist."""


class SimulatedFlinkJob:
    """A Flink job in reactive mode on a skewed Kafka-like source, advanced one simulated second per step."""

    def __init__(self, trace: Trace, config: SimulatorSettings, *, parallelism: int | None = None) -> None:
        self.trace = trace
        self.config = config
        self.environment = JobEnvironment(trace, config)
        """Arrivals, capacities and downtimes: the same for every policy (see :class:`JobEnvironment`)."""
        # CPU noise changes no dynamics, so one stream of the job's own is fair enough for it.
        self._rng = _stream(config.seed, _STREAM_CPU)
        partitions = config.partitions
        self.partition_weights = self.environment.partition_weights
        self.worker_speeds = self.environment.worker_speeds
        self.worker_capacity = self.environment.worker_capacity

        self.parallelism = self._checked_parallelism(parallelism or config.initial_parallelism)
        self._assignment = round_robin(partitions, self.parallelism)

        self.now_s = 0
        self.state = JobState.RUNNING
        self._uptime_start = 0
        self._down_until = 0
        self._pending_parallelism = self.parallelism
        self._pending_restart: tuple[StopKind, int, int, int] | None = None
        self.restarts: list[Restart] = []

        self._end = np.zeros(partitions, dtype=np.int64)
        self._position = np.zeros(partitions, dtype=np.int64)
        self._committed = np.zeros(partitions, dtype=np.int64)
        self._produced = 0
        self._processed = 0
        self._replayed = 0
        self._committed_total = 0

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
        downtime = self.environment.downtime_s("rescale", self.now_s, self.parallelism, parallelism)
        self._stop("rescale", parallelism, downtime)
        return True

    def fail(self) -> bool:
        """Inject a TaskManager failure: the job restarts at the same parallelism. False if already down."""
        if self.state is JobState.DOWN:
            return False
        downtime = self.environment.downtime_s("failure", self.now_s, self.parallelism, self.parallelism)
        self._stop("failure", self.parallelism, downtime)
        return True

    def _stop(self, kind: StopKind, next_parallelism: int, downtime: int) -> None:
        if kind == "rescale" and self.config.rescale_aligned:
            # A checkpoint triggered for the rescale completes as the job stops: it commits every record read.
            self._committed_total += int((self._position - self._committed).sum())
            self._committed[:] = self._position
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
        self.restarts.append(Restart(kind, start, self.now_s - start, from_parallelism, self.parallelism, replayed))
        self._pending_restart = None

    # ------------------------------------------------------------------ stepping

    def step(self) -> None:
        """Advance one simulated second: produce, (re)start, process, checkpoint, record metrics."""
        self.run_until(self.now_s + 1)

    def run_until(self, t_s: int) -> None:
        """Step until simulated second ``t_s`` (exclusive), each second as :meth:`step` defines it.

        A second produces its arrivals, restarts a stopped job whose downtime is over, lets a running
        one read (:mod:`simulator.drain`) and checkpoint every ``checkpoint_interval_s`` of uptime, and
        records the metrics (idle CPU plus noise while down). The seconds between two restarts run
        compiled, all at once (:func:`simulator.drain.run_job`).
        """
        while self.now_s < t_s:
            t = self.now_s
            if self.state is JobState.DOWN and t >= self._down_until:
                self._restart()
            running = self.state is JobState.RUNNING
            stop = t_s if running else min(t_s, self._down_until)
            self._run(t, stop, running)

    def _run(self, start: int, stop: int, running: bool) -> None:
        config = self.config
        environment = self.environment
        seconds = stop - start
        series = self._series.reserve(seconds)
        produced, processed, checkpointed = run_job(
            start,
            environment.arrivals(start, stop),
            environment.capacities(start, stop),
            self._rng.standard_normal((seconds, config.partitions)),
            running,
            self.parallelism,
            self._uptime_start,
            config.checkpoint_interval_s,
            config.cpu_idle,
            config.cpu_noise,
            self._end,
            self._position,
            self._committed,
            *series,
        )
        self._produced += int(produced)
        self._processed += int(processed)
        self._committed_total += int(checkpointed)
        self.now_s = stop

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

    def attempt_totals(self) -> tuple[np.ndarray, np.ndarray]:
        """Records each current worker read, and seconds it was busy, since the job last (re)started.

        What Flink's counters (numRecordsOut, accumulateBusyTimeMs) hold: they start at zero with every
        task attempt. Empty while the job is down (no task runs).
        """
        if self.state is JobState.DOWN:
            return np.zeros(0), np.zeros(0)
        series, n = self._series, self.parallelism
        start = min(self._uptime_start, series.length)
        return series.throughput[start : series.length, :n].sum(axis=0), series.busy[start : series.length, :n].sum(
            axis=0
        )

    def worker_backlogs(self) -> np.ndarray:
        """Records waiting in each current worker's partitions (its readers' pendingRecords); empty while down."""
        if self.state is JobState.DOWN:
            return np.zeros(0)
        return np.bincount(self._assignment, weights=(self._end - self._position), minlength=self.parallelism)

    @property
    def end_offsets(self) -> np.ndarray:
        """Per-partition log-end offsets: records produced so far (a copy)."""
        return self._end.copy()

    @property
    def restart_in_progress(self) -> Restart | None:
        """The stop the job is in now, with its planned downtime; None while running.

        ``restarts`` lists a stop only once the job has resumed; a replay that ends while the job
        is down needs this one too to judge it.
        """
        if self.state is not JobState.DOWN or self._pending_restart is None:
            return None
        kind, start, from_parallelism, replayed = self._pending_restart
        return Restart(kind, start, self._down_until - start, from_parallelism, self._pending_parallelism, replayed)

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
        return self.environment.shares(parallelism or self.parallelism)

    def true_capacity(self, parallelism: int | None = None) -> float:
        """Highest sustainable job rate at ``parallelism``: the worker that saturates first bounds it."""
        return self.environment.true_capacity(parallelism or self.parallelism)

    def window(self, start_s: int, end_s: int) -> Window:
        """Recorded metrics of seconds ``[start_s, end_s)`` clipped to what has been simulated."""
        start = max(0, int(start_s))
        end = min(self._series.length, int(end_s))
        end = max(start, end)
        s = self._series
        throughput, cpu, busy = _moving_averages(s, start, end, self.config.metric_window_s)
        present = np.flatnonzero(np.any(np.isfinite(throughput), axis=0)) if end > start else np.array([], int)
        return Window(
            times=np.arange(start, end, dtype=float),
            workload=s.workload[start:end].copy(),
            lag=s.lag[start:end].copy(),
            parallelism=s.parallelism[start:end].copy(),
            uptime_s=s.uptime[start:end].copy(),
            throughput={worker_id(i): throughput[:, i] for i in present},
            cpu={worker_id(i): cpu[:, i] for i in present},
            busy={worker_id(i): busy[:, i] for i in present},
            committed_lag=s.committed_lag[start:end].copy(),
            backlog={worker_id(i): s.backlog[start:end, i].copy() for i in present},
        )

    @property
    def recorded_seconds(self) -> int:
        """Seconds of metrics recorded so far."""
        return self._series.length


def _moving_averages(series: _Series, start: int, end: int, window_s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Throughput, CPU and busy time of seconds ``[start, end)`` as the job reports them.

    Each is the mean of the worker's raw values over the last ``window_s`` seconds, or over the
    seconds it has existed if it joined more recently (a new worker does not average over zeros);
    NaN at seconds the worker did not exist (worker ``i`` exists while the parallelism exceeds ``i``).
    """
    workers = series.workers
    if end <= start:
        empty = np.empty((0, workers))
        return empty, empty.copy(), empty.copy()
    first = max(0, start - window_s)
    parallelism = series.parallelism[first:end]
    out = []
    for raw in (series.throughput, series.cpu, series.busy):
        average = np.empty((end - start, workers))
        moving_averages(parallelism, raw[first:end], first, start, window_s, average)
        out.append(average)
    return out[0], out[1], out[2]
