"""What the per-operator policies are given and what they return: one parallelism per job vertex.

A Flink job is a DAG of vertices (chains of operators); a per-operator policy sizes each vertex on
its own, so a cheap vertex is not scaled with the costly one. The input is a snapshot of the job
graph (vertices in topological order, each with its upstream vertices and its metrics over the
last policy interval) plus the whole-job signals the single-vertex policies read (workload, its
forecast, the backlog); the output is a target parallelism per vertex, applied in one request, and
what the policy recommends but a target cannot apply in place (TaskManager memory, a resource
profile).

Pure: frozen dataclasses and small functions, no I/O. The rates follow DS2 (paper 002, section 3.2):
a vertex's aggregated true processing rate is the sum over its subtasks of records processed per
second of useful (busy) time, ``o_i[lambda_p] = sum_k R_prc,k / W_u,k`` (eq. 1 and 5).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.history import Recommendations
from planner.safeguards import MemoryPressure, gc_dominates
from planner.types import (
    Decision,
    PlanInput,
    PlannerConfig,
    PlanningPolicy,
    ReasonCode,
)

MIN_BUSY_FRACTION = 0.01
"""Below this busy fraction a subtask's true rate is undefined (DS2 eq. 1 with W_u -> 0)."""


@dataclass(frozen=True)
class VertexMetrics:
    """One vertex over a policy interval, from Flink's own metrics (means over the interval)."""

    records_in_rate: float
    """Records/s the vertex's subtasks took in, summed (a source: records it read)."""
    records_out_rate: float
    """Records/s the vertex emitted, summed."""
    busy_mean: float | None
    """Mean busy fraction (0..1) over the subtasks."""
    busy_max: float | None
    """Busy fraction of the busiest subtask: the one that saturates first under skew."""
    backpressure_mean: float | None = None
    """Mean back-pressured fraction (0..1) over the subtasks."""
    true_processing_rate: float | None = None
    """``o_i[lambda_p]``: sum over subtasks of records in per second of busy time; None if undefined."""
    true_output_rate: float | None = None
    """``o_i[lambda_o]``: the same for records out."""
    state_size_bytes: float | None = None
    """Live keyed state of the vertex (RocksDB's estimate, summed over subtasks); None: stateless or unread."""
    managed_memory_used_bytes: float | None = None
    """Managed memory the state backend uses (block cache with memtables), summed over subtasks."""
    cache_hit_rate: float | None = None
    """Share of block-cache lookups that hit (Justin's theta); None when the vertex reports none."""
    state_latency_ms: float | None = None
    """Median latency of a keyed-state access (Justin's tau), ms; None when not tracked."""
    rated_subtasks: int = 0
    """Subtasks whose true rate is defined (busy above :data:`MIN_BUSY_FRACTION`); the true rates sum over them."""

    @property
    def true_rate_per_subtask(self) -> float | None:
        """DS2's average true processing rate per instance, over the subtasks where it is defined."""
        if self.true_processing_rate is None or self.rated_subtasks < 1 or self.true_processing_rate <= 0:
            return None
        return self.true_processing_rate / self.rated_subtasks

    @property
    def stateful(self) -> bool:
        """The vertex keeps keyed state in the state backend (it reports its metrics)."""
        return any(v is not None for v in (self.state_size_bytes, self.cache_hit_rate, self.state_latency_ms))

    @property
    def selectivity(self) -> float | None:
        """Records out per record in: true rates where defined, observed rates otherwise; None if nothing came in."""
        if self.true_processing_rate and self.true_output_rate is not None:
            return self.true_output_rate / self.true_processing_rate
        if self.records_in_rate > 0:
            return self.records_out_rate / self.records_in_rate
        return None


@dataclass(frozen=True)
class VertexInput:
    """One job vertex: where it sits in the graph, how it runs now, what it did over the interval."""

    id: str
    name: str
    parallelism: int
    upstream: tuple[str, ...] = ()
    """Ids of the vertices that feed it; empty for a source."""
    max_parallelism: int = 0
    """Flink's max parallelism of the vertex (key groups); 0: unknown, no bound."""
    metrics: VertexMetrics | None = None

    @property
    def is_source(self) -> bool:
        """The vertex reads from outside the job."""
        return not self.upstream


@dataclass(frozen=True)
class MemoryProfile:
    """What each task slot of the TaskManagers gets now."""

    managed_memory_per_slot_mb: float
    """Managed memory (the state backend's cache) per slot, MB; 0 for none."""
    cpu_per_slot: float = 1.0
    """CPU cores per slot."""


@dataclass(frozen=True, eq=False)
class OperatorPlanInput:
    """A snapshot of the job graph and the whole-job signals, taken once per round."""

    now: float
    vertices: tuple[VertexInput, ...]
    """Every vertex, in topological order (each after all its upstream vertices)."""
    workload_avg: float | None
    """Mean records/s arriving at the sources since the last round; None if unknown."""
    forecast: np.ndarray | None = None
    """Forecast workload per second over the horizon, records/s."""
    consumer_lag: float | None = None
    """Records waiting at the sources now."""
    recent_workload: float | None = None
    """Mean workload over the last checkpoint interval: what a restart replays per second of it."""
    downtimes_s: Mapping[int, float] = field(default_factory=dict)
    """Expected downtime of a rescale to a job that needs ``n`` task slots, s (the recovery predictor's)."""
    failure_downtime_s: float | None = None
    """Expected downtime of a failure at the current plan, s."""
    uptime_s: float | None = None
    """Seconds since the job last (re)started; None if unknown."""
    job_running: bool = True
    last_rescale_at: float | None = None
    recovering: bool = False
    recent_recommendations: Recommendations = field(default_factory=Recommendations)
    """Desired costs (task slots of the desired plan) of earlier rounds, for scale-down stabilization."""
    memory: MemoryProfile | None = None
    """The TaskManagers' profile now; None if unknown."""
    memory_applies: bool = False
    """True when the scale target can change the TaskManagers' memory (a FlinkDeployment); otherwise memory
    decisions are recommendations only."""
    memory_pressure: MemoryPressure = field(default_factory=MemoryPressure)
    """The fullest TaskManager's heap usage and the busiest one's GC time this round (the memory guard's)."""
    policy_state: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        check_topological(self.vertices)

    @property
    def current(self) -> dict[str, int]:
        """Parallelism of every vertex now, by id."""
        return {v.id: v.parallelism for v in self.vertices}

    def whole_job_view(self, config: PlannerConfig) -> PlanInput:
        """The snapshot as the single-vertex guards read it (scale-out: the task slots the job needs now)."""
        return PlanInput(
            now=self.now,
            current_parallelism=slots(self.current),
            workload_avg=self.workload_avg,
            forecast=self.forecast,
            consumer_lag=self.consumer_lag,
            capacities={},
            recovery_times={},
            last_rescale_at=self.last_rescale_at,
            recovering=self.recovering,
            recent_recommendations=self.recent_recommendations,
            uptime_s=self.uptime_s,
            job_running=self.job_running,
            policy_state=self.policy_state,
        )


@dataclass(frozen=True)
class OperatorConfig:
    """The settings a per-operator policy reads (a projection of the agent's settings)."""

    planner: PlannerConfig
    """Bounds (min/max parallelism per vertex), target recovery time, grace and stabilization windows."""
    checkpoint_interval_s: float = 10.0
    warm_up_s: float = 30.0
    """Rounds this soon after a (re)start only watch: rates still mix the old attempt (DS2's warm-up)."""
    slot_sharing: bool = True
    """True: the vertices share slots (Flink's default group), a job needs its largest parallelism in slots;
    False: every subtask has a slot of its own (the operator-DAG testbed), a job needs their sum."""
    memory_min_mb: float = 128.0
    """Justin's memory level 0: managed memory per slot of a stateful vertex, MB."""
    memory_max_level: int = 3
    """Justin's maxLevel: levels 0 .. max_level - 1 double the memory."""
    cache_hit_threshold: float = 0.8
    """Justin's Delta_theta: below this cache hit rate a stateful vertex is memory-bound."""
    latency_threshold_ms: float = 1.0
    """Justin's Delta_tau: above this state access latency a stateful vertex is memory-bound."""
    memory_cost_per_gb: float = 0.125
    """QEScalor's price of 1 GB of slot memory relative to one CPU core per epoch."""
    startup_cost: float = 0.5
    """QEScalor's p_u: cost of starting one subtask, in slot-epochs."""
    shutdown_cost: float = 0.25
    """QEScalor's p_d: cost of stopping one subtask, in slot-epochs."""
    heap_usage_threshold: float | None = None
    """The memory guard's heap usage (0..1) above which no managed memory is added (safeguards.memory)."""
    gc_pressure_threshold: float | None = None
    """The memory guard's GC time (0..1) above which what a round measured is not learned (safeguards.memory)."""

    def memory_held(self, pressure: MemoryPressure) -> str | None:
        """Why a memory decision waits this round (heap nearly full, or GC time over its threshold), or None.

        Managed memory comes out of the same TaskManager process as the heap: raising it under heap pressure
        shrinks the heap that is already short; and GC pauses read as slow state access, not a cache too small.
        """
        heap = pressure.heap_usage
        if self.heap_usage_threshold is not None and heap is not None and heap > self.heap_usage_threshold:
            return f"heap usage {heap:.0%} > {self.heap_usage_threshold:.0%}"
        if gc_dominates(pressure, self.gc_pressure_threshold):
            return f"GC time {pressure.gc_pressure:.0%} > {self.gc_pressure_threshold:.0%}"
        return None


OperatorPolicy = PlanningPolicy[OperatorPlanInput, OperatorConfig]
"""A per-vertex policy: one parallelism per job vertex (its decision's plan maps every vertex id)."""


# ---------------------------------------------------------------------------------------------- helpers


def check_topological(vertices: Sequence[VertexInput]) -> None:
    """Raise ValueError unless ids are unique and every vertex comes after its upstream vertices."""
    seen: set[str] = set()
    for vertex in vertices:
        if vertex.id in seen:
            raise ValueError(f"vertex {vertex.id!r} appears twice")
        missing = [u for u in vertex.upstream if u not in seen]
        if missing:
            raise ValueError(f"vertex {vertex.name or vertex.id}: upstream {missing} not before it (topological order)")
        if vertex.parallelism < 1:
            raise ValueError(f"vertex {vertex.name or vertex.id}: parallelism must be >= 1, got {vertex.parallelism}")
        seen.add(vertex.id)


def topological(vertices: Sequence[VertexInput]) -> tuple[VertexInput, ...]:
    """The vertices in topological order (Kahn's algorithm, stable); ValueError on a cycle or an unknown input.

    >>> a, b = VertexInput("a", "src", 1), VertexInput("b", "map", 1, ("a",))
    >>> [v.id for v in topological([b, a])]
    ['a', 'b']
    """
    by_id = {v.id: v for v in vertices}
    for vertex in vertices:
        unknown = [u for u in vertex.upstream if u not in by_id]
        if unknown:
            raise ValueError(f"vertex {vertex.name or vertex.id}: unknown upstream {unknown}")
    ordered: list[VertexInput] = []
    placed: set[str] = set()
    remaining = list(vertices)
    while remaining:
        ready = [v for v in remaining if all(u in placed for u in v.upstream)]
        if not ready:
            raise ValueError(f"the job graph has a cycle through {[v.id for v in remaining]}")
        for vertex in ready:
            ordered.append(vertex)
            placed.add(vertex.id)
        remaining = [v for v in remaining if v.id not in placed]
    return tuple(ordered)


def slots(parallelism: Mapping[str, int], *, shared: bool = True) -> int:
    """Task slots a plan needs: its largest parallelism when the vertices share slots, else the sum.

    >>> slots({"a": 1, "b": 4, "c": 2}), slots({"a": 1, "b": 4, "c": 2}, shared=False)
    (4, 7)
    """
    if not parallelism:
        return 0
    return max(parallelism.values()) if shared else sum(parallelism.values())


def subtasks(parallelism: Mapping[str, int]) -> int:
    """Subtasks a plan runs (threads, each busy on a core at saturation): the sum of its parallelism."""
    return sum(parallelism.values())


def source_shares(vertices: Sequence[VertexInput]) -> dict[str, float]:
    """Share of the workload each source vertex reads: by what they read this interval, equal if nothing.

    >>> source_shares([VertexInput("a", "s1", 1, metrics=VertexMetrics(300, 300, 0.5, 0.5)),
    ...                VertexInput("b", "s2", 1, metrics=VertexMetrics(100, 100, 0.2, 0.2))])
    {'a': 0.75, 'b': 0.25}
    """
    sources = [v for v in vertices if v.is_source]
    read = {v.id: (v.metrics.records_in_rate if v.metrics is not None else 0.0) for v in sources}
    total = sum(read.values())
    if total <= 0 or not math.isfinite(total):
        return {v.id: 1.0 / len(sources) for v in sources} if sources else {}
    return {vid: rate / total for vid, rate in read.items()}


def bounds(vertex: VertexInput, config: PlannerConfig) -> tuple[int, int]:
    """``[lower, upper]`` parallelism of a vertex: the operator's bounds, its max parallelism, a source's partitions."""
    upper = config.max_parallelism
    if vertex.max_parallelism > 0:
        upper = min(upper, vertex.max_parallelism)
    if vertex.is_source and config.source_partitions is not None:
        # A source reader beyond the partition count gets no split and only costs a slot.
        upper = min(upper, config.source_partitions)
    lower = min(config.min_parallelism, upper)
    return max(1, lower), max(1, upper)


def describe_plan(plan: Mapping[str, int], vertices: Sequence[VertexInput]) -> str:
    """``name=p`` for every vertex, in graph order (for reasons and logs)."""
    return ", ".join(f"{v.name or v.id}={plan.get(v.id, v.parallelism)}" for v in vertices)


def operator_code(current: Mapping[str, int], target: Mapping[str, int], desired: Mapping[str, int]) -> ReasonCode:
    """The loop's code of a per-vertex decision: any vertex up is a scale-out; all down is a scale-in."""
    up = any(target[v] > current.get(v, 0) for v in target)
    down = any(target[v] < current.get(v, 0) for v in target)
    held = any(desired.get(v, target[v]) < target[v] for v in target)
    if up:
        return ReasonCode.SCALE_OUT
    if down:
        return ReasonCode.STABILIZED if held else ReasonCode.SCALE_IN
    return ReasonCode.STABILIZED if held else ReasonCode.KEEP


def keep_all(
    plan_input: OperatorPlanInput,
    code: ReasonCode,
    *reasons: str,
    acted: bool = False,
    policy_state: Mapping[str, Any] | None = None,
) -> Decision:
    """A decision that keeps every vertex where it is."""
    current = plan_input.current
    return Decision(
        current,
        current,
        tuple(reasons),
        code,
        acted=acted,
        policy_state=plan_input.policy_state if policy_state is None else policy_state,
    )


def from_whole_job(plan_input: OperatorPlanInput, decision: Decision) -> Decision:
    """A guard's whole-job hold as a per-vertex one (every vertex kept)."""
    return keep_all(plan_input, decision.code, *decision.reasons, acted=decision.acted)


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def _true_rates(
    records_in: Mapping[str, float], records_out: Mapping[str, float], busy: Mapping[str, float]
) -> tuple[float, float, int]:
    """DS2's true processing and output rates summed over the subtasks whose busy fraction is defined and above
    :data:`MIN_BUSY_FRACTION` (eq. 1, 2, 5 and 6), and how many subtasks that is."""
    true_in = 0.0
    true_out = 0.0
    rated = 0
    for subtask, fraction in busy.items():
        if not math.isfinite(fraction) or fraction < MIN_BUSY_FRACTION or subtask not in records_in:
            continue
        processed = records_in[subtask]
        if not math.isfinite(processed) or processed < 0:
            continue
        useful = min(fraction, 1.0)
        true_in += processed / useful
        true_out += max(records_out.get(subtask, 0.0), 0.0) / useful
        rated += 1
    return true_in, true_out, rated


def metrics_from_subtasks(
    *,
    records_in: Mapping[str, float],
    records_out: Mapping[str, float],
    busy: Mapping[str, float],
    backpressure: Mapping[str, float] | None = None,
    state_size_bytes: Mapping[str, float] | None = None,
    managed_memory_used_bytes: Mapping[str, float] | None = None,
    cache_hit_rate: Mapping[str, float] | None = None,
    state_latency_ms: Mapping[str, float] | None = None,
) -> VertexMetrics:
    """A vertex's metrics from its subtasks' means (keyed by subtask index), DS2's true rates included.

    A subtask's true rates are its records over its busy fraction (eq. 1 and 2); the vertex's are their sums
    over the subtasks where busy time is defined and above :data:`MIN_BUSY_FRACTION` (eq. 5 and 6).

    >>> m = metrics_from_subtasks(records_in={"0": 100, "1": 300}, records_out={"0": 50, "1": 150},
    ...                           busy={"0": 0.25, "1": 0.75})
    >>> m.true_processing_rate, m.true_rate_per_subtask, m.busy_max, m.selectivity
    (800.0, 400.0, 0.75, 0.5)
    """
    true_in, true_out, rated = _true_rates(records_in, records_out, busy)
    busy_values = _finite(list(busy.values()))
    pressure = _finite(list((backpressure or {}).values()))

    def total(values: Mapping[str, float] | None) -> float | None:
        finite = _finite(list((values or {}).values()))
        return float(sum(finite)) if finite else None

    hits = _finite(list((cache_hit_rate or {}).values()))
    latency = _finite(list((state_latency_ms or {}).values()))
    return VertexMetrics(
        records_in_rate=float(sum(_finite(list(records_in.values())))),
        records_out_rate=float(sum(_finite(list(records_out.values())))),
        busy_mean=float(np.mean(busy_values)) if busy_values else None,
        busy_max=float(max(busy_values)) if busy_values else None,
        backpressure_mean=float(np.mean(pressure)) if pressure else None,
        true_processing_rate=true_in if rated else None,
        true_output_rate=true_out if rated else None,
        state_size_bytes=total(state_size_bytes),
        managed_memory_used_bytes=total(managed_memory_used_bytes),
        cache_hit_rate=float(np.mean(hits)) if hits else None,
        state_latency_ms=float(max(latency)) if latency else None,
        rated_subtasks=rated,
    )
