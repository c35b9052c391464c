"""Justin per operator (paper 003) on a running job: DS2's plan, then memory for memory-bound state.

Each round DS2 proposes a parallelism per vertex (``planner.ds2_per_operator``); Justin's Algorithm 1
(``planner.justin.justin_plan``) then trades the scale-out of a stateful vertex for one more memory
level when its cache hit rate is below ``cache_hit_threshold`` or its state access latency above
``latency_threshold_ms``, keeps raising while that helps, and rolls back a scale-up that did not help.
A vertex is stateful when it reports state-backend metrics (RocksDB's live data, cache, or keyed-state
latency); a stateless vertex gets no managed memory (Justin's bottom).

Memory needs a TaskManager restart with a new memory configuration, which Flink's REST API cannot do
in place. So the input says whether the target applies memory (``memory_applies``: a FlinkDeployment's
TaskManager resources):

* it does: Justin's plan is applied whole, parallelism and memory, and the next round judges whether
  the scale-up helped (the paper's ``v^{t-1}``);
* it does not (``flink-rest``): memory stays what it is, so cancelling a scale-out for memory would
  leave the vertex short; the parallelism applied is DS2's for such a vertex, and the memory levels
  are a recommendation (logged, a metric, an Event). The paper's history then never records a
  scale-up, since none happened.

The slots of a TaskManager share one memory configuration, so the managed memory a slot needs is the
highest level of any stateful vertex (none when no vertex is stateful).
Policy state (JSON): per vertex the memory level deployed, whether the last decision raised it, and
last round's cache hit rate and latency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from planner.ds2_per_operator import apply_manager, ds2_plan, warm_up_hold
from planner.justin import JustinPlan, OperatorMemoryState, justin_plan, memory_mb
from planner.per_operator import describe_plan, keep_all, memory_held, operator_code
from planner.types import Decision, MemoryRecommendation, PlanInput, PlannerConfig, ReasonCode


def level_of(managed_memory_per_slot_mb: float | None, *, min_mb: float, max_level: int) -> int | None:
    """The memory level a slot's managed memory corresponds to (nearest doubling of ``min_mb``); None for none.

    >>> level_of(256, min_mb=128, max_level=3), level_of(0, min_mb=128, max_level=3)
    (1, None)
    >>> level_of(5000, min_mb=128, max_level=3)
    2
    """
    if managed_memory_per_slot_mb is None or managed_memory_per_slot_mb <= 0:
        return None
    level = round(math.log2(max(managed_memory_per_slot_mb, 1e-9) / min_mb))
    return int(min(max(level, 0), max_level - 1))


def _state(data: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Policy state per vertex id (empty on the first round)."""
    return {str(k): dict(v) for k, v in (data or {}).get("vertices", {}).items()}


class JustinPerOperator:
    """Justin's hybrid CPU/memory policy over the job graph (see the module docstring)."""

    name = "justin"
    uses_forecast = False
    sync_interval_s: float | None = 10.0

    def __init__(self, *, min_scale_down_step: int = 2) -> None:
        self.min_scale_down_step = min_scale_down_step

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """DS2 → Justin's Algorithm 1 → what the target can apply now, and the memory recommendation."""
        held = warm_up_hold(plan_input, config)
        if held is not None:
            return held
        assert plan_input.workload_avg is not None
        proposal = ds2_plan(plan_input.vertices, plan_input.workload_avg, config)
        if len(proposal.unknown) == len(plan_input.vertices):
            return keep_all(plan_input, ReasonCode.UNKNOWN_DATA, "no vertex has a true rate this interval")
        current = plan_input.current
        states = _memory_states(plan_input, config)
        plan = justin_plan(
            proposal.parallelism,
            states,
            hit_threshold=config.cache_hit_threshold,
            latency_threshold_ms=config.latency_threshold_ms,
            max_level=config.memory_max_level,
        )
        names = {v.id: v.name for v in plan_input.vertices}
        reasons = [f"justin: workload {plan_input.workload_avg:,.0f}/s", *proposal.reasons]
        reasons += [_named(r, names) for r in plan.reasons]
        applies = plan_input.memory_applies
        pressure = memory_held(config, plan_input.memory_pressure)
        if pressure is not None and any(plan.scaled_up.values()):
            # No memory level is raised under memory pressure: the vertex takes DS2's parallelism instead.
            reasons.append(f"memory levels held ({pressure}): DS2's parallelism where Justin would add memory")
            plan = _without_memory_raises(plan, proposal.parallelism, states)
        wanted = _wanted(plan_input, plan, proposal.parallelism, reasons)
        target, notes = apply_manager(current, wanted, min_scale_down_step=self.min_scale_down_step)
        reasons += notes
        recommendation = _recommendation(plan_input, config, plan, states, reasons)
        reasons.append(f"plan: {describe_plan(target, plan_input.vertices)}")
        code = operator_code(current, target, wanted)
        if code is ReasonCode.KEEP and recommendation.changes and applies:
            now_mb = plan_input.memory.managed_memory_per_slot_mb if plan_input.memory is not None else None
            grows = recommendation.managed_memory_per_slot_mb > (now_mb or 0.0)
            code = ReasonCode.SCALE_OUT if grows else ReasonCode.SCALE_IN
        state = _next_state(plan, states, applies=applies)
        return Decision(target, wanted, tuple(reasons), code, acted=True, policy_state=state, memory=recommendation)


def _memory_states(plan_input: PlanInput, config: PlannerConfig) -> list[OperatorMemoryState]:
    """Each vertex's memory state for Algorithm 1: its level (remembered, else what the TaskManagers run), its
    cache hit rate and state latency now and at the last round."""
    remembered = _state(plan_input.policy_state)
    deployed_level = level_of(
        plan_input.memory.managed_memory_per_slot_mb if plan_input.memory is not None else None,
        min_mb=config.memory_min_mb,
        max_level=config.memory_max_level,
    )
    states = []
    for vertex in plan_input.vertices:
        m = vertex.metrics
        stateful = m is not None and m.stateful
        kept = remembered.get(vertex.id, {})
        level = kept.get("level", deployed_level if stateful else None)
        states.append(
            OperatorMemoryState(
                name=vertex.id,
                stateful=stateful,
                parallelism=vertex.parallelism,
                memory_level=None if not stateful else (0 if level is None else int(level)),
                scaled_up_last=bool(kept.get("scaled_up", False)),
                cache_hit_rate=m.cache_hit_rate if m is not None else None,
                access_latency_ms=m.state_latency_ms if m is not None else None,
                previous_cache_hit_rate=kept.get("theta"),
                previous_access_latency_ms=kept.get("tau"),
            )
        )
    return states


def _without_memory_raises(plan: JustinPlan, ds2: Mapping[str, int], states: list[OperatorMemoryState]) -> JustinPlan:
    """The plan with every memory raise undone: those vertices at DS2's parallelism and their level kept."""
    kept_levels = {s.name: s.memory_level for s in states}
    return replace(
        plan,
        parallelism={v: ds2[v] if plan.scaled_up[v] else p for v, p in plan.parallelism.items()},
        memory_level={v: kept_levels[v] if plan.scaled_up[v] else lv for v, lv in plan.memory_level.items()},
        scaled_up={v: False for v in plan.scaled_up},
    )


def _wanted(plan_input: PlanInput, plan: JustinPlan, ds2: Mapping[str, int], reasons: list[str]) -> dict[str, int]:
    """Each vertex's parallelism: Justin's, or DS2's where memory was traded for it but cannot be applied."""
    applies = plan_input.memory_applies
    wanted: dict[str, int] = {}
    for vertex in plan_input.vertices:
        traded = plan.scaled_up[vertex.id]
        # Without a way to apply memory, a scale-out traded for memory would leave the vertex short.
        wanted[vertex.id] = plan.parallelism[vertex.id] if applies or not traded else ds2[vertex.id]
        if traded and not applies:
            reasons.append(
                f"{vertex.name}: memory cannot change in place: DS2's {wanted[vertex.id]} subtasks, "
                f"memory level {plan.memory_level[vertex.id]} recommended"
            )
    return wanted


def _recommendation(
    plan_input: PlanInput,
    config: PlannerConfig,
    plan: JustinPlan,
    states: list[OperatorMemoryState],
    reasons: list[str],
) -> MemoryRecommendation:
    """The managed memory per slot the plan's levels need (the largest stateful vertex's), and whether it changes
    what the TaskManagers run now."""
    stateful_levels = [
        lv for s, lv in ((s, plan.memory_level[s.name]) for s in states) if s.stateful and lv is not None
    ]
    slot_mb = max((memory_mb(lv, min_memory_mb=config.memory_min_mb) for lv in stateful_levels), default=0.0)
    now_mb = plan_input.memory.managed_memory_per_slot_mb if plan_input.memory is not None else None
    recommendation = MemoryRecommendation(
        levels=dict(plan.memory_level),
        managed_memory_per_slot_mb=slot_mb,
        changes=now_mb is None or abs(now_mb - slot_mb) > 0.5,
    )
    if recommendation.changes:
        applies = plan_input.memory_applies
        reasons.append(
            f"memory: {slot_mb:.0f} MB managed memory per slot "
            + ("(applied with the plan)" if applies else "(recommended: the target cannot change memory in place)")
        )
    return recommendation


def _next_state(plan: JustinPlan, states: list[OperatorMemoryState], *, applies: bool) -> dict[str, Any]:
    """What the next round remembers per vertex: the level (the new one only where it applies), whether memory
    was raised, and the cache hit rate and latency now."""
    return {
        "vertices": {
            s.name: {
                "level": plan.memory_level[s.name] if applies else s.memory_level,
                "scaled_up": bool(plan.scaled_up[s.name]) and applies,
                "theta": s.cache_hit_rate,
                "tau": s.access_latency_ms,
            }
            for s in states
        }
    }


def _named(reason: str, names: Mapping[str, str]) -> str:
    """Justin's reasons name vertices by id; show their names."""
    vid, sep, rest = reason.partition(":")
    return f"{names.get(vid, vid)}{sep}{rest}" if sep else reason
