"""DS2 per operator (paper 002): one parallelism per job vertex from true rates, in one traversal of the DAG.

The model of ``planner.ds2`` over a real job graph: vertices in topological order, each with its
upstream vertices (the edges of Flink's ``/jobs/{id}/plan``). A source vertex must take in its share
of the workload (times the target ratio); every other vertex what its upstream vertices emit when
each runs at its own optimal parallelism (eq. 8); its optimal parallelism is that input over its
average true processing rate per subtask (eq. 7)::

    in_i  = target_ratio * workload * share_i                     (i a source)
    in_i  = sum_{u -> i} sel_u * in_u,  sel_u = o_u[lambda_o] / o_u[lambda_p]
    pi_i  = ceil(in_i / (o_i[lambda_p] / p_i))

``in_i / workload`` is also how many records vertex ``i`` takes in per source record, which the
per-operator Daedalus uses to turn a vertex's capacity into the job's.

A vertex whose true rate is undefined this interval (idle: no busy time) keeps its parallelism and
passes its input on at its observed selectivity (1 if it saw nothing). The scaling manager is the
paper's, as in ``planner.ds2_paper``: a warm-up after every (re)start during which rates still mix the
old attempt, activation after one interval, and a scale-down by less than two subtasks ignored as
noise (``manager.rs`` ``consider_change``). All changed vertices go in one rescale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner.graph import VertexInput
from planner.per_operator import (
    bounds,
    describe_plan,
    keep_all,
    operator_code,
    source_shares,
)
from planner.types import Decision, PlanInput, PlannerConfig, ReasonCode


@dataclass(frozen=True)
class Ds2Plan:
    """DS2's answer for a target workload: parallelism per vertex and what each vertex must take in."""

    parallelism: dict[str, int]
    """Bounded optimal parallelism per vertex id (unknown vertices: their current parallelism)."""
    input_rate: dict[str, float]
    """Records/s each vertex takes in when every vertex before it keeps up (eq. 8's upstream sum)."""
    per_subtask: dict[str, float | None]
    """Average true processing rate per subtask (records/s of the vertex's own input); None where undefined."""
    unknown: tuple[str, ...]
    """Vertices kept at their parallelism because their true rate is undefined this interval."""
    reasons: tuple[str, ...]

    def input_ratio(self, workload: float) -> dict[str, float]:
        """Records each vertex takes in per source record (``in_i / workload``)."""
        if workload <= 0:
            raise ValueError("the input ratio needs a positive workload")
        return {vid: rate / workload for vid, rate in self.input_rate.items()}


def ds2_plan(
    vertices: Sequence[VertexInput],
    workload: float,
    config: PlannerConfig,
    *,
    target_ratio: float = 1.0,
) -> Ds2Plan:
    """Eq. 7 and 8 over the job graph for ``workload`` records/s at the sources (see the module docstring).

    >>> from planner.graph import VertexMetrics
    >>> from planner.types import PlannerConfig
    >>> graph = [
    ...     VertexInput("s", "source", 1, metrics=VertexMetrics(3000, 3000, 0.1, 0.1, true_processing_rate=30000,
    ...                 true_output_rate=30000, rated_subtasks=1)),
    ...     VertexInput("m", "map", 2, ("s",), metrics=VertexMetrics(3000, 3000, 0.75, 0.75, true_processing_rate=4000,
    ...                 true_output_rate=4000, rated_subtasks=2)),
    ...     VertexInput("k", "sink", 1, ("m",), metrics=VertexMetrics(3000, 0, 0.05, 0.05, true_processing_rate=60000,
    ...                 true_output_rate=0, rated_subtasks=1)),
    ... ]
    >>> ds2_plan(graph, 6000, PlannerConfig(1, 8, 300)).parallelism
    {'s': 1, 'm': 3, 'k': 1}
    """
    if not math.isfinite(workload) or workload < 0:
        raise ValueError(f"workload must be a finite non-negative rate, got {workload}")
    shares = source_shares(vertices)
    input_rate: dict[str, float] = {}
    output_rate: dict[str, float] = {}
    parallelism: dict[str, int] = {}
    per_subtask: dict[str, float | None] = {}
    unknown: list[str] = []
    reasons: list[str] = []
    for vertex in vertices:
        if vertex.is_source:
            incoming = workload * target_ratio * shares[vertex.id]
        else:
            incoming = sum(output_rate[u] for u in vertex.upstream)
        input_rate[vertex.id] = incoming
        metrics = vertex.metrics
        rate = metrics.true_rate_per_subtask if metrics is not None else None
        per_subtask[vertex.id] = rate
        selectivity = metrics.selectivity if metrics is not None else None
        output_rate[vertex.id] = incoming * (1.0 if selectivity is None else selectivity)
        if rate is None:
            unknown.append(vertex.id)
        parallelism[vertex.id], reason = _vertex_parallelism(vertex, incoming, rate, config)
        reasons.append(reason)
    return Ds2Plan(parallelism, input_rate, per_subtask, tuple(unknown), tuple(reasons))


def _vertex_parallelism(
    vertex: VertexInput, incoming: float, rate: float | None, config: PlannerConfig
) -> tuple[int, str]:
    """Eq. 8 for one vertex within its bounds, and the reason: the subtasks its input needs at its true rate per
    subtask (kept where the rate is unknown)."""
    lower, upper = bounds(vertex, config)
    if rate is None:
        kept = min(max(vertex.parallelism, lower), upper)
        return kept, f"{vertex.name}: no true rate this interval (idle or unread): kept at {vertex.parallelism}"
    # The epsilon keeps an input that exactly matches k subtasks from asking for k + 1.
    optimal = max(1, math.ceil(incoming / rate - 1e-9))
    parallelism = min(max(optimal, lower), upper)
    bounded = "" if parallelism == optimal else f", bounded to {parallelism}"
    return parallelism, f"{vertex.name}: {incoming:,.0f}/s over {rate:,.0f}/s per subtask = {optimal}{bounded}"


def significant(current: int, proposed: int, min_scale_down_step: int) -> bool:
    """Any scale-up, or a scale-down by at least ``min_scale_down_step`` (DS2's ``consider_change``).

    >>> significant(4, 5, 2), significant(4, 3, 2), significant(4, 2, 2)
    (True, False, True)
    """
    return proposed > current or current - proposed >= min_scale_down_step


def warm_up_hold(plan_input: PlanInput, config: PlannerConfig) -> Decision | None:
    """Keep every vertex while the job is down, the workload unknown, or the rates still mix the last attempt."""
    if not plan_input.job_running:
        return keep_all(plan_input, ReasonCode.UNKNOWN_DATA, "the job is not running")
    if plan_input.workload_avg is None:
        return keep_all(plan_input, ReasonCode.UNKNOWN_DATA, "workload unknown this round")
    since = []
    if plan_input.uptime_s is not None:
        since.append(plan_input.uptime_s)
    if plan_input.last_rescale_at is not None:
        since.append(plan_input.now - plan_input.last_rescale_at)
    if since and min(since) < config.warm_up_s:
        return keep_all(
            plan_input,
            ReasonCode.GRACE,
            f"warm-up: {min(since):.0f} s since the last (re)start < {config.warm_up_s:.0f} s",
        )
    return None


def apply_manager(
    current: Mapping[str, int], proposed: Mapping[str, int], *, min_scale_down_step: int
) -> tuple[dict[str, int], list[str]]:
    """DS2's manager on each vertex: apply scale-ups and significant scale-downs; minor ones are noise."""
    target: dict[str, int] = {}
    notes: list[str] = []
    for vid, wanted in proposed.items():
        now = current[vid]
        if significant(now, wanted, min_scale_down_step):
            target[vid] = wanted
        else:
            target[vid] = now
            if wanted != now:
                notes.append(f"{vid}: scale-down {now} -> {wanted} is a minor change: ignored")
    return target, notes


class Ds2PerOperator:
    """DS2 over the job graph with its scaling manager; knob: the target ratio (1 + over-provisioning)."""

    name = "ds2"
    uses_forecast = False
    sync_interval_s: float | None = 10.0
    """The Flink experiments' policy interval (section 5.3); ``perdix run`` decides every loop."""

    def __init__(self, target_ratio: float = 1.0, *, min_scale_down_step: int = 2) -> None:
        if target_ratio < 1.0:
            raise ValueError(f"target_ratio must be at least 1, got {target_ratio}")
        self.target_ratio = target_ratio
        self.knob = target_ratio
        self.min_scale_down_step = min_scale_down_step

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """Warm-up → eq. 7/8 over the graph → the manager's minor-change rule, every vertex in one plan."""
        held = warm_up_hold(plan_input, config)
        if held is not None:
            return held
        assert plan_input.workload_avg is not None
        plan = ds2_plan(plan_input.vertices, plan_input.workload_avg, config, target_ratio=self.target_ratio)
        if len(plan.unknown) == len(plan_input.vertices):
            return keep_all(
                plan_input, ReasonCode.UNKNOWN_DATA, "no vertex has a true rate this interval", *plan.reasons
            )
        current = plan_input.current
        target, notes = apply_manager(current, plan.parallelism, min_scale_down_step=self.min_scale_down_step)
        reasons = [
            f"ds2: workload {plan_input.workload_avg:,.0f}/s"
            + (f" x {self.target_ratio:g}" if self.target_ratio != 1.0 else ""),
            *plan.reasons,
            *notes,
            f"plan: {describe_plan(target, plan_input.vertices)}",
        ]
        code = operator_code(current, target, plan.parallelism)
        return Decision(target, plan.parallelism, tuple(reasons), code, acted=True)
