"""Operator-DAG mode of the simulator: the small-scale testbed StreamBed runs a query on.

The single-vertex simulator (``simulator.job``) models a job as identical workers; capacity planning
needs the operators themselves. A query here is a pipeline source → map/filter → keyed window
aggregation → sink (any chain of operators after a rate-limited source), each operator with its own
parallelism, one task per task slot (StreamBed's resource model: ``sum(parallelism) == task slots``).

What it models, and why each part is there:

* **Per-operator cost per record** (CPU µs on one slot of speed 1.0); slots differ slightly in speed.
* **Keyed exchange with skew**: keys follow a Zipf law, are hashed into key groups (Flink's max
  parallelism) and key groups are split into contiguous ranges per task, as Flink's
  ``KeyGroupRangeAssignment`` does; the hottest task bounds a keyed operator.
* **Memory per slot**: a tumbling-window aggregation keeps the records of the open window as state;
  the part that does not fit in the slot's managed memory spills to disk and costs more per record
  (RocksDB cache misses). State grows within a window and is dropped when the window fires, so the
  cost follows a sawtooth; firing costs CPU per emitted result (stragglers).
* **Network**: every output record sent to another TaskManager costs serialisation; per-channel
  buffers fill less as the downstream parallelism grows, modelled as a cost per doubling of channels.
* **Bounded input buffers and backpressure**: an operator can only emit what the downstream input
  buffers can take; a full buffer of one keyed task blocks every upstream task (credit-based flow
  control), so the slowest operator throttles the source.
* **A rate-limited source** (data at rest replayed at a target rate) reads what downstream accepts;
  records behind schedule are *pending* (the paper's pending-records metric) and are caught up later.
* **Exactly-once accounting**: produced = injected + pending; per operator received = processed +
  queued; emitted by one operator = received by the next; a window's processed = in state + fired.

Everything is per-second numpy over the tasks of each operator, seeded, and fast enough that a few
simulated minutes take a fraction of a second. Busyness and backpressure per task follow Flink's
``busyTimeMsPerSecond`` / ``backPressuredTimeMsPerSecond``; true processing rates are DS2's
(records processed per second of busy time).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

MEBIBYTE = 1024 * 1024


@dataclass(frozen=True)
class OperatorSpec:
    """One operator of the query after the source."""

    name: str
    cost_us: float
    """CPU microseconds per input record on a slot of speed 1.0 (all state in memory)."""
    selectivity: float = 1.0
    """Output records per input record (for a window: results emitted per record when it fires)."""
    keyed: bool = False
    """Input partitioned by key (skewed key groups); otherwise rebalanced round-robin."""
    window_s: int = 0
    """Tumbling window length, seconds; 0 for a stateless operator."""
    state_bytes_per_record: float = 0.0
    """Bytes of window state per record in the open window."""
    fire_cost_us: float = 0.0
    """CPU microseconds per result emitted when the window fires."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("operator name must not be empty")
        if self.cost_us <= 0:
            raise ValueError(f"operator {self.name}: cost_us must be positive, got {self.cost_us}")
        if self.selectivity < 0:
            raise ValueError(f"operator {self.name}: selectivity must be >= 0, got {self.selectivity}")
        if self.window_s < 0 or self.state_bytes_per_record < 0 or self.fire_cost_us < 0:
            raise ValueError(f"operator {self.name}: window_s, state and fire cost must be >= 0")

    @property
    def windowed(self) -> bool:
        """Whether the operator buffers records in a tumbling window."""
        return self.window_s > 0


@dataclass(frozen=True)
class DagJobSpec:
    """A query: a rate-limited source followed by a chain of operators, the last one the sink."""

    name: str
    operators: tuple[OperatorSpec, ...]
    key_count: int = 1_000_000
    """Distinct keys of the keyed exchange."""
    key_skew: float = 0.4
    """Zipf exponent of key frequencies (0: uniform)."""
    max_parallelism: int = 4096
    """Key groups (Flink's max parallelism): the upper bound of a keyed operator's parallelism."""

    def __post_init__(self) -> None:
        if not self.operators:
            raise ValueError(f"job {self.name}: needs at least one operator after the source")
        names = [op.name for op in self.operators]
        if len(set(names)) != len(names):
            raise ValueError(f"job {self.name}: operator names must be unique, got {names}")
        if self.key_count < 1 or self.max_parallelism < 1 or self.key_skew < 0:
            raise ValueError(f"job {self.name}: key_count and max_parallelism must be >= 1, key_skew >= 0")

    @property
    def operator_names(self) -> tuple[str, ...]:
        """Operator names in pipeline order."""
        return tuple(op.name for op in self.operators)

    @property
    def input_ratios(self) -> np.ndarray:
        """Records each operator receives per source record (product of upstream selectivities)."""
        ratios = np.ones(len(self.operators))
        for i in range(1, len(self.operators)):
            ratios[i] = ratios[i - 1] * self.operators[i - 1].selectivity
        return ratios


def windowed_aggregation_job() -> DagJobSpec:
    """The default query (Nexmark q11-like): parse/filter → keyed 10 s tumbling aggregation → sink.

    Costs are chosen so one task slot carries roughly 14 000 records/s, the per-worker capacity of the
    single-vertex simulator, so a capacity model planned here is of the same order as that job.
    """
    return DagJobSpec(
        name="windowed-aggregation",
        operators=(
            OperatorSpec("map-filter", cost_us=12.0, selectivity=0.8),
            OperatorSpec(
                "window-aggregate",
                cost_us=68.0,
                selectivity=0.05,
                keyed=True,
                window_s=10,
                state_bytes_per_record=4096.0,
                fire_cost_us=4.0,
            ),
            OperatorSpec("sink", cost_us=2.0, selectivity=0.0),
        ),
    )


@dataclass(frozen=True)
class DagTestbedSettings:
    """The testbed cluster: task slots per TaskManager, network and state costs, noise."""

    slots_per_taskmanager: int = 4
    managed_memory_fraction: float = 0.4
    """Share of a slot's memory the state backend may use as cache."""
    spill_penalty: float = 1.5
    """Extra cost per record, relative to ``cost_us``, when all window state is on disk."""
    remote_cost_us: float = 1.0
    """Serialisation cost per output record sent to another TaskManager, µs."""
    channel_cost_us: float = 0.25
    """Per output record and per doubling of downstream channels (emptier buffers), µs."""
    buffer_s: float = 2.0
    """Input buffer of a task, in seconds of its nominal capacity (per-second stepping needs > 1 s)."""
    capacity_noise: float = 0.02
    """Relative standard deviation of a task's per-second capacity."""
    rate_noise: float = 0.01
    """Relative standard deviation of the source's per-second arrivals around the target."""
    slot_speed_spread: float = 0.02
    """Standard deviation of the speed factor of each task slot (same hardware, small spread)."""
    seed: int = 7

    def __post_init__(self) -> None:
        if self.slots_per_taskmanager < 1:
            raise ValueError("slots_per_taskmanager must be >= 1")
        if not 0 < self.managed_memory_fraction <= 1:
            raise ValueError("managed_memory_fraction must be in (0, 1]")
        if self.buffer_s < 1:
            raise ValueError("buffer_s must be >= 1: a task must buffer one second of input")
        if min(self.spill_penalty, self.remote_cost_us, self.channel_cost_us) < 0:
            raise ValueError("costs must be >= 0")
        if min(self.capacity_noise, self.rate_noise, self.slot_speed_spread) < 0:
            raise ValueError("noise levels must be >= 0")


@dataclass(frozen=True)
class OperatorWindowMetrics:
    """One operator over a measurement window (DS2-style rates, Flink-style busyness)."""

    name: str
    parallelism: int
    input_rate: float
    """Records processed per second by all tasks."""
    output_rate: float
    """Records emitted per second by all tasks."""
    busyness: float
    """Mean busy fraction of the tasks (0..1)."""
    max_busyness: float
    """Busy fraction of the busiest task (0..1)."""
    backpressure: float
    """Mean fraction of time the tasks were blocked by downstream (0..1)."""
    true_rate_per_task: float
    """Records one task processes per second of busy time (DS2's true processing rate)."""


@dataclass(frozen=True)
class DagMeasurement:
    """Source and operator metrics over the last ``seconds`` of a run."""

    seconds: int
    target_rate: float
    """Mean scheduled arrival rate of the source (records/s); the achieved rate when saturating."""
    achieved_rate: float
    """Records the source injected per second."""
    pending_start: int
    pending_end: int
    backlog_start: float
    """Records behind at the window's start: pending plus queued input, in source records."""
    backlog_end: float
    backpressure: float
    """Mean fraction of each second the source was throttled by backpressure (0..1)."""
    lag_growth: float
    """Records piling up per second, in source records (> 0: the job falls behind).

    The least-squares slope of the source's pending records plus, per operator, the steepest slope
    of a task's input queue scaled to source records (queue / (input ratio * task share)). Queues
    count because input buffers absorb an overload for a while before the source notices, and the
    hottest task is the one that fills first: on a keyed operator only its share of the overload
    would show in the sum of the queues.
    """
    operators: tuple[OperatorWindowMetrics, ...]


@dataclass(frozen=True)
class DagAccounting:
    """Record counters of a run; ``lost`` is zero unless the simulator is wrong."""

    produced: int
    injected: int
    pending: int
    received: tuple[int, ...]
    processed: tuple[int, ...]
    queued: tuple[int, ...]
    emitted: tuple[int, ...]
    outbox: tuple[int, ...]
    """Records an operator produced but downstream has not accepted yet."""
    generated: tuple[int, ...]
    """Output records an operator created (emitted + outbox)."""
    in_state: tuple[int, ...]
    fired: tuple[int, ...]
    windowed: tuple[bool, ...]

    @property
    def lost(self) -> int:
        """Sum of absolute violations of every conservation law (0 for an honest run)."""
        lost = abs(self.produced - self.injected - self.pending)
        lost += abs(self.injected - self.received[0])
        for i in range(len(self.received)):
            lost += abs(self.received[i] - self.processed[i] - self.queued[i])
            lost += abs(self.generated[i] - self.emitted[i] - self.outbox[i])
            if i + 1 < len(self.received):
                lost += abs(self.emitted[i] - self.received[i + 1])
            if self.windowed[i]:
                lost += abs(self.processed[i] - self.in_state[i] - self.fired[i])
        return lost


@lru_cache(maxsize=16)
def _key_group_weights(key_count: int, key_skew: float, key_groups: int, seed: int) -> np.ndarray:
    """Share of the keyed input in each key group: Zipf key frequencies hashed into groups."""
    rng = np.random.default_rng(seed)
    frequency = 1.0 / np.arange(1, key_count + 1, dtype=float) ** key_skew
    groups = rng.integers(0, key_groups, size=key_count)
    weights = np.bincount(groups, weights=frequency, minlength=key_groups)
    weights = weights / weights.sum()
    weights.setflags(write=False)
    return weights


def _key_group_shares(weights: np.ndarray, parallelism: int) -> np.ndarray:
    """Input share of each task: contiguous key-group ranges as in Flink's KeyGroupRangeAssignment."""
    groups = weights.shape[0]
    starts = (np.arange(parallelism) * groups + parallelism - 1) // parallelism
    return np.add.reduceat(weights, starts)


def _spill_fraction(state_bytes: np.ndarray | float, cache_bytes: float) -> np.ndarray:
    """Fraction of window state that does not fit in the cache (0 when it fits)."""
    state = np.asarray(state_bytes, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(state > cache_bytes, 1.0 - cache_bytes / state, 0.0)


def _allocate(total: int, shares: np.ndarray, carry: np.ndarray) -> np.ndarray:
    """Split ``total`` records over tasks by ``shares`` exactly (largest remainder, carry kept fair)."""
    expected = total * shares + carry
    counts = np.floor(expected).astype(np.int64)
    deficit = total - int(counts.sum())
    if deficit > 0:
        counts[np.argsort(-(expected - counts), kind="stable")[:deficit]] += 1
    elif deficit < 0:
        order = np.argsort(expected - counts, kind="stable")
        order = order[counts[order] > 0][:-deficit]
        counts[order] -= 1
    carry[:] = expected - counts
    return counts


def _slope(values: np.ndarray, period: int = 1) -> np.ndarray | float:
    """Least-squares slope per second of ``values`` along axis 0, over means of ``period``-second blocks.

    Averaging over whole window periods first keeps the periodic burst of a firing window from
    biasing the slope by where in the measurement the bursts happen to fall.
    """
    blocks = values.shape[0] // period
    if blocks < 2:
        period, blocks = 1, values.shape[0]
    if blocks < 2:
        return np.zeros(values.shape[1:]) if values.ndim > 1 else 0.0
    recent = values[values.shape[0] - blocks * period :]
    means = recent.reshape(blocks, period, *values.shape[1:]).mean(axis=1)
    t = (np.arange(blocks, dtype=float) - (blocks - 1) / 2) * period
    centred = means - means.mean(axis=0)
    result = np.tensordot(t, centred, axes=(0, 0)) / float(t @ t)
    return result if values.ndim > 1 else float(result)


class DagTestbed:
    """A small cluster that deploys one query at a chosen per-operator parallelism and memory per slot."""

    def __init__(self, job: DagJobSpec | None = None, settings: DagTestbedSettings | None = None) -> None:
        self.job = job or windowed_aggregation_job()
        self.settings = settings or DagTestbedSettings()
        self._weights = _key_group_weights(
            self.job.key_count, self.job.key_skew, self.job.max_parallelism, self.settings.seed
        )

    @property
    def operator_names(self) -> tuple[str, ...]:
        """Operator names in pipeline order (the source excluded: it takes no task slot)."""
        return self.job.operator_names

    def check(self, parallelism: Sequence[int], memory_mb: float) -> tuple[int, ...]:
        """Validate a deployment; returns the parallelism as a tuple of ints."""
        ops = self.job.operators
        if len(parallelism) != len(ops):
            raise ValueError(f"parallelism has {len(parallelism)} entries, the job has {len(ops)} operators")
        values = tuple(int(p) for p in parallelism)
        for op, p in zip(ops, values):
            if p < 1:
                raise ValueError(f"operator {op.name}: parallelism must be >= 1, got {p}")
            if op.keyed and p > self.job.max_parallelism:
                raise ValueError(f"operator {op.name}: parallelism {p} > max_parallelism {self.job.max_parallelism}")
        if memory_mb <= 0:
            raise ValueError(f"memory per slot must be positive, got {memory_mb} MB")
        return values

    def shares(self, index: int, parallelism: int) -> np.ndarray:
        """Input share of each task of operator ``index`` at ``parallelism``."""
        if self.job.operators[index].keyed:
            return _key_group_shares(self._weights, parallelism)
        return np.full(parallelism, 1.0 / parallelism)

    def slot_speeds(self, task_slots: int) -> np.ndarray:
        """Speed factor of slots ``0..task_slots-1`` (the same slot keeps its speed across deployments)."""
        rng = np.random.default_rng([self.settings.seed, 1])
        return np.clip(1.0 + self.settings.slot_speed_spread * rng.standard_normal(task_slots), 0.5, 1.5)

    def network_cost_us(self, parallelism: Sequence[int], index: int) -> float:
        """Sender-side cost per output record of operator ``index``, µs (0 for the sink)."""
        if index + 1 >= len(parallelism):
            return 0.0
        settings = self.settings
        taskmanagers = math.ceil(sum(parallelism) / settings.slots_per_taskmanager)
        remote_fraction = 1.0 - 1.0 / taskmanagers
        return settings.remote_cost_us * remote_fraction + settings.channel_cost_us * math.log2(parallelism[index + 1])

    def deploy(self, parallelism: Sequence[int], memory_mb: float, *, seed: int | None = None) -> DagRun:
        """Start the query with ``parallelism`` tasks per operator and ``memory_mb`` per slot."""
        values = self.check(parallelism, memory_mb)
        return DagRun(self, values, float(memory_mb), seed=self.settings.seed if seed is None else seed)

    def true_capacity(self, parallelism: Sequence[int], memory_mb: float) -> float:
        """Highest source rate the deployment sustains on average, noise-free (the MST ground truth).

        Per task, the work per second at input ``x`` records/s is ``x`` times the cost averaged over
        the seconds of a window (state grows by ``x`` records a second) plus the firing work; the
        rate where the first task needs one full second of CPU per second bounds the job.
        """
        values = self.check(parallelism, memory_mb)
        ops = self.job.operators
        ratios = self.job.input_ratios
        speeds = self.slot_speeds(sum(values))
        cache = memory_mb * MEBIBYTE * self.settings.managed_memory_fraction
        best = math.inf
        offset = 0
        for i, (op, p) in enumerate(zip(ops, values)):
            shares = self.shares(i, p)
            speed = speeds[offset : offset + p]
            offset += p
            network = self.network_cost_us(values, i)
            if ratios[i] == 0:
                continue
            positive = shares > 0
            task_max = self._task_max_rates(op, network, cache, speed[positive])
            best = min(best, float(np.min(task_max / (ratios[i] * shares[positive]))))
        return float(best)

    def _task_max_rates(
        self, op: OperatorSpec, network_us: float, cache_bytes: float, speeds: np.ndarray
    ) -> np.ndarray:
        """Largest input rate (records/s) of each task: work per second equals its speed (bisection)."""

        def work(rates: np.ndarray) -> np.ndarray:
            seconds = np.full(rates.shape, op.cost_us * 1e-6)
            if op.windowed:
                seconds_in_window = np.arange(op.window_s, dtype=float)
                state = rates[:, None] * seconds_in_window[None, :] * op.state_bytes_per_record
                spill = _spill_fraction(state, cache_bytes).mean(axis=1)
                seconds = seconds * (1.0 + self.settings.spill_penalty * spill)
                seconds += op.selectivity * (op.fire_cost_us + network_us) * 1e-6
            else:
                seconds += op.selectivity * network_us * 1e-6
            return rates * seconds

        low = np.zeros(speeds.shape)
        high = speeds / (op.cost_us * 1e-6)
        for _ in range(60):
            mid = (low + high) / 2
            fits = work(mid) <= speeds
            low = np.where(fits, mid, low)
            high = np.where(fits, high, mid)
        return low


@dataclass
class _OperatorState:
    """Mutable per-operator state of a run."""

    spec: OperatorSpec
    parallelism: int
    shares: np.ndarray
    speeds: np.ndarray
    cost_s: float
    """Cost per input record in seconds before spill and speed."""
    emit_cost_s: float
    """Cost per output record (network; plus firing for a window) in seconds."""
    buffer: np.ndarray
    queue: np.ndarray
    carry_in: np.ndarray
    state: np.ndarray
    fire_carry: np.ndarray
    debt: np.ndarray
    received: int = 0
    processed: int = 0
    emitted: int = 0
    generated: int = 0
    outbox: int = 0
    fired: int = 0
    output_carry: float = 0.0


@dataclass
class _Series:
    """Per-second records of a run (plain lists: a run lasts minutes, not days)."""

    target: list[float] = field(default_factory=list)
    injected: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    backlog: list[float] = field(default_factory=list)
    backpressure: list[float] = field(default_factory=list)
    processed: list[np.ndarray] = field(default_factory=list)
    emitted: list[np.ndarray] = field(default_factory=list)
    busy: list[np.ndarray] = field(default_factory=list)
    max_busy: list[np.ndarray] = field(default_factory=list)
    blocked: list[np.ndarray] = field(default_factory=list)


class DagRun:
    """One deployment of the query on the testbed, advanced one simulated second per step."""

    HISTORY_S = 900
    """Seconds of per-task queue history kept for measurements."""

    def __init__(self, testbed: DagTestbed, parallelism: tuple[int, ...], memory_mb: float, *, seed: int) -> None:
        self.testbed = testbed
        self.parallelism = parallelism
        self.memory_mb = memory_mb
        settings = testbed.settings
        self._settings = settings
        self._rng = np.random.default_rng([seed, 2])
        self._cache_bytes = memory_mb * MEBIBYTE * settings.managed_memory_fraction
        speeds = testbed.slot_speeds(sum(parallelism))
        self._ops: list[_OperatorState] = []
        offset = 0
        for i, (op, p) in enumerate(zip(testbed.job.operators, parallelism)):
            network_s = testbed.network_cost_us(parallelism, i) * 1e-6
            emit_cost_s = network_s + (op.fire_cost_us * 1e-6 if op.windowed else 0.0)
            nominal = 1.0 / (op.cost_us * 1e-6 + op.selectivity * emit_cost_s)
            self._ops.append(
                _OperatorState(
                    spec=op,
                    parallelism=p,
                    shares=testbed.shares(i, p),
                    speeds=speeds[offset : offset + p],
                    cost_s=op.cost_us * 1e-6,
                    emit_cost_s=emit_cost_s,
                    buffer=np.full(p, max(1.0, settings.buffer_s * nominal)),
                    queue=np.zeros(p, dtype=np.int64),
                    carry_in=np.zeros(p),
                    state=np.zeros(p, dtype=np.int64),
                    fire_carry=np.zeros(p),
                    debt=np.zeros(p),
                )
            )
            offset += p
        self._ratios = testbed.job.input_ratios
        scale = []
        for state, ratio in zip(self._ops, self._ratios):
            with np.errstate(divide="ignore"):
                scale.append(np.where((state.shares > 0) & (ratio > 0), 1.0 / (ratio * state.shares), 0.0))
        self._queue_scale = np.concatenate(scale)
        bounds = np.cumsum([0, *parallelism])
        self._op_columns = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
        self._queue_history: deque[np.ndarray] = deque(maxlen=self.HISTORY_S)
        self._period = math.lcm(*(op.window_s for op in testbed.job.operators if op.windowed)) or 1
        self.now_s = 0
        self._rate: float | None = 0.0
        self._arrival_carry = 0.0
        self._produced = 0
        self._injected = 0
        self._pending = 0
        self._series = _Series()

    # ------------------------------------------------------------------ control

    def set_rate(self, rate: float | None) -> None:
        """Schedule ``rate`` records/s at the source; ``None`` injects as fast as the job accepts."""
        if rate is not None and (not math.isfinite(rate) or rate < 0):
            raise ValueError(f"source rate must be a finite non-negative number or None, got {rate}")
        self._rate = rate

    def carry_backlog(self, records: int) -> None:
        """Start behind by ``records`` source records: what a restart replays and what arrived while it was down.

        They count as produced and pending, so the accounting stays exact; the source sends them as the
        first operator's buffers accept them, before the new arrivals it falls behind on.
        """
        if records < 0:
            raise ValueError(f"a backlog cannot be negative, got {records}")
        self._pending += int(records)
        self._produced += int(records)

    def advance(self, seconds: int) -> None:
        """Step ``seconds`` simulated seconds."""
        for _ in range(int(seconds)):
            self.step()

    @property
    def pending(self) -> int:
        """Records behind the source's schedule (backpressure made it fall behind)."""
        return self._pending

    @property
    def backlog(self) -> float:
        """Pending records plus every operator's queued input, counted in source records."""
        total = float(self._pending)
        for op, ratio in zip(self._ops, self._ratios):
            if ratio > 0:
                total += float(op.queue.sum()) / ratio
        return total

    def _allowed_output(self, index: int) -> int:
        """Records operator ``index`` may emit now: the downstream buffer of the fullest share decides."""
        if index + 1 >= len(self._ops):
            return 2**62
        down = self._ops[index + 1]
        free = np.maximum(down.buffer - down.queue, 0.0)
        positive = down.shares > 0
        return int(np.floor(np.min(free[positive] / down.shares[positive])))

    def _route(self, index: int, count: int) -> None:
        """Hand ``count`` records from operator ``index - 1`` (or the source) to operator ``index``."""
        if count <= 0:
            return
        op = self._ops[index]
        op.queue += _allocate(count, op.shares, op.carry_in)
        op.received += count

    def _flush(self, index: int) -> None:
        """Send as much of operator ``index``'s outbox as the downstream buffers accept."""
        op = self._ops[index]
        if op.outbox == 0:
            return
        if index + 1 >= len(self._ops):
            # The sink's results leave the job (blackhole sink): nothing downstream to fill.
            op.emitted += op.outbox
            op.outbox = 0
            return
        sent = min(op.outbox, self._allowed_output(index))
        self._route(index + 1, sent)
        op.emitted += sent
        op.outbox -= sent

    def step(self) -> None:
        """Advance one second: every operator from the sink back to the source, then the source."""
        settings = self._settings
        rng = self._rng
        n_ops = len(self._ops)
        processed_now = np.zeros(n_ops)
        emitted_before = np.array([op.emitted for op in self._ops], dtype=float)
        busy_now = np.zeros(n_ops)
        max_busy_now = np.zeros(n_ops)
        blocked_now = np.zeros(n_ops)
        fire = [op.spec.windowed and (self.now_s + 1) % op.spec.window_s == 0 for op in self._ops]

        for i in reversed(range(n_ops)):
            op = self._ops[i]
            spec = op.spec
            self._flush(i)
            cost = np.full(op.parallelism, op.cost_s)
            if spec.windowed:
                spill = _spill_fraction(op.state * spec.state_bytes_per_record, self._cache_bytes)
                cost = cost * (1.0 + settings.spill_penalty * spill)
            else:
                cost = cost + spec.selectivity * op.emit_cost_s
            noise = 1.0 + settings.capacity_noise * rng.standard_normal(op.parallelism)
            budget = np.clip(1.0 - op.debt, 0.0, 1.0)
            debt_paid = 1.0 - budget
            op.debt = np.maximum(op.debt - 1.0, 0.0)
            per_record = cost / (op.speeds * np.maximum(noise, 0.1))
            capacity = np.floor(budget / per_record).astype(np.int64)
            want = np.minimum(op.queue, capacity)
            take = want
            if op.outbox > 0:
                # A task whose output is stuck cannot process (credit-based flow control).
                take = np.zeros_like(want)
            elif not spec.windowed and spec.selectivity > 0 and want.sum() > 0:
                allowed = self._allowed_output(i)
                needed = spec.selectivity * float(want.sum())
                if needed > allowed:
                    take = np.floor(want * (allowed / needed)).astype(np.int64)
            op.queue -= take
            taken = int(take.sum())
            op.processed += taken
            busy = take * per_record + debt_paid
            blocked = (want - take) * per_record
            if spec.windowed:
                op.state += take
                if fire[i]:
                    expected = op.state * spec.selectivity + op.fire_carry
                    results = np.floor(expected).astype(np.int64)
                    op.fire_carry = expected - results
                    op.fired += int(op.state.sum())
                    op.state[:] = 0
                    # Firing runs after the window closes: it delays the next second (stragglers).
                    op.debt += results * op.emit_cost_s / op.speeds
                    out = int(results.sum())
                    op.generated += out
                    op.outbox += out
            else:
                expected = spec.selectivity * taken + op.output_carry
                out = int(math.floor(expected))
                op.output_carry = expected - out
                op.generated += out
                op.outbox += out
            self._flush(i)
            processed_now[i] = taken
            busy_fraction = np.minimum(busy, 1.0)
            busy_now[i] = float(busy_fraction.mean())
            max_busy_now[i] = float(busy_fraction.max())
            blocked_now[i] = float(np.minimum(blocked, 1.0).mean())

        # The source: the schedule adds arrivals; it sends what the first operator's buffers accept.
        allowed = self._allowed_output(-1) if n_ops else 0
        if self._rate is None:
            arrivals = allowed
            target = float(arrivals)
        else:
            rate = self._rate
            if settings.rate_noise and rate > 0:
                rate = max(0.0, rate * (1.0 + settings.rate_noise * rng.standard_normal()))
            expected = rate + self._arrival_carry
            arrivals = int(math.floor(expected))
            self._arrival_carry = expected - arrivals
            target = float(self._rate)
        self._produced += arrivals
        wanted = self._pending + arrivals
        sent = min(wanted, allowed)
        self._pending = wanted - sent
        self._injected += sent
        self._route(0, sent)
        backpressure = 0.0 if wanted == 0 else (wanted - sent) / wanted

        series = self._series
        series.target.append(target)
        series.injected.append(sent)
        series.pending.append(self._pending)
        series.backlog.append(self.backlog)
        self._queue_history.append(np.concatenate([op.queue for op in self._ops]) * self._queue_scale)
        series.backpressure.append(backpressure)
        series.processed.append(processed_now)
        series.emitted.append(np.array([op.emitted for op in self._ops], dtype=float) - emitted_before)
        series.busy.append(busy_now)
        series.max_busy.append(max_busy_now)
        series.blocked.append(blocked_now)
        self.now_s += 1

    # ------------------------------------------------------------------ reading

    def measure(self, seconds: int) -> DagMeasurement:
        """Metrics over the last ``seconds`` simulated seconds."""
        s = self._series
        n = min(int(seconds), len(s.injected))
        if n < 1:
            raise ValueError("nothing simulated yet: advance the run before measuring")
        lo = len(s.injected) - n
        processed = np.asarray(s.processed[lo:])
        emitted = np.asarray(s.emitted[lo:])
        busy = np.asarray(s.busy[lo:])
        max_busy = np.asarray(s.max_busy[lo:])
        blocked = np.asarray(s.blocked[lo:])
        pending_start = s.pending[lo - 1] if lo > 0 else 0
        period = self._period
        lag_growth = _slope(np.asarray(s.pending[lo:], dtype=float), period)
        if n >= 2:
            history = list(self._queue_history)[-n:]
            slopes = np.asarray(_slope(np.asarray(history), period))
            lag_growth += sum(max(0.0, float(np.max(slopes[cols]))) for cols in self._op_columns)
        backlog_start = s.backlog[lo - 1] if lo > 0 else 0.0
        operators = []
        for i, op in enumerate(self._ops):
            busy_seconds = float(busy[:, i].sum()) * op.parallelism
            total = float(processed[:, i].sum())
            operators.append(
                OperatorWindowMetrics(
                    name=op.spec.name,
                    parallelism=op.parallelism,
                    input_rate=total / n,
                    output_rate=float(emitted[:, i].sum()) / n,
                    busyness=float(busy[:, i].mean()),
                    max_busyness=float(max_busy[:, i].mean()),
                    backpressure=float(blocked[:, i].mean()),
                    true_rate_per_task=total / busy_seconds if busy_seconds > 0 else 0.0,
                )
            )
        return DagMeasurement(
            seconds=n,
            target_rate=float(np.mean(s.target[lo:])),
            achieved_rate=float(np.sum(s.injected[lo:])) / n,
            pending_start=int(pending_start),
            pending_end=int(s.pending[-1]),
            backlog_start=float(backlog_start),
            backlog_end=float(s.backlog[-1]),
            backpressure=float(np.mean(s.backpressure[lo:])),
            lag_growth=float(lag_growth),
            operators=tuple(operators),
        )

    @property
    def accounting(self) -> DagAccounting:
        """The record counters now."""
        ops = self._ops
        return DagAccounting(
            produced=self._produced,
            injected=self._injected,
            pending=self._pending,
            received=tuple(op.received for op in ops),
            processed=tuple(op.processed for op in ops),
            queued=tuple(int(op.queue.sum()) for op in ops),
            emitted=tuple(op.emitted for op in ops),
            outbox=tuple(op.outbox for op in ops),
            generated=tuple(op.generated for op in ops),
            in_state=tuple(int(op.state.sum()) for op in ops),
            fired=tuple(op.fired for op in ops),
            windowed=tuple(op.spec.windowed for op in ops),
        )
