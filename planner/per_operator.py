"""What the per-operator policies share: plans of one parallelism per job vertex, and the rates they size from.

A Flink job is a DAG of vertices (chains of operators); a per-operator policy sizes each vertex on
its own, so a cheap vertex is not scaled with the costly one. Its input is the round's
:class:`planner.types.PlanInput` with the job graph (vertices in topological order, each with its
upstream vertices and its metrics over the last policy interval, ``planner.graph``) beside the
whole-job signals (workload, its forecast, the backlog); its output is a target parallelism per
vertex, applied in one request, and what the policy recommends but a target cannot apply in place
(TaskManager memory, a resource profile).

Pure: frozen dataclasses and small functions, no I/O. The rates follow DS2 (paper 002, section 3.2):
a vertex's aggregated true processing rate is the sum over its subtasks of records processed per
second of useful (busy) time, ``o_i[lambda_p] = sum_k R_prc,k / W_u,k`` (eq. 1 and 5).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from planner.graph import MIN_BUSY_FRACTION, MemoryPressure, VertexInput, VertexMetrics
from planner.safeguards import gc_dominates
from planner.types import Decision, PlanInput, PlannerConfig, ReasonCode


# ---------------------------------------------------------------------------------------------- helpers


def memory_held(config: PlannerConfig, pressure: MemoryPressure) -> str | None:
    """Why a memory decision waits this round (heap nearly full, or GC time over its threshold), or None.

    Managed memory comes out of the same TaskManager process as the heap: raising it under heap pressure
    shrinks the heap that is already short; and GC pauses read as slow state access, not a cache too small.
    """
    heap = pressure.heap_usage
    if config.heap_usage_threshold is not None and heap is not None and heap > config.heap_usage_threshold:
        return f"heap usage {heap:.0%} > {config.heap_usage_threshold:.0%}"
    if gc_dominates(pressure, config.gc_pressure_threshold):
        return f"GC time {pressure.gc_pressure:.0%} > {config.gc_pressure_threshold:.0%}"
    return None


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
    plan_input: PlanInput,
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


def from_whole_job(plan_input: PlanInput, decision: Decision) -> Decision:
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
