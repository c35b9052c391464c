"""Justin (paper 003): DS2's CPU decisions plus memory levels for state-heavy operators.

Algorithm 1 of the paper, per operator, after DS2 proposed a parallelism:

* a stateless operator gets no managed memory (level ``None``, the paper's ⊥) and DS2's parallelism;
* a stateful operator DS2 does not rescale keeps its parallelism and memory level;
* a stateful operator DS2 wants to rescale:
  - if it was scaled up (memory) last time and that improved the cache hit rate or the state access
    latency, and one more level is allowed, the scale-out is cancelled for one more memory level;
    without an improvement the last scale-up is rolled back and DS2's parallelism applies;
  - otherwise, if the cache hit rate is below ``hit_threshold`` (80 %) or the access latency above
    ``latency_threshold_ms`` (1 ms) and one more level is allowed, the scale-out is cancelled and
    the memory level raised.

Memory levels double the per-task managed memory from a minimum (level 0 = ``min_memory_mb``).
The paper's condition for another level is ``m + 1 < maxLevel`` with ``maxLevel = 3``.
Justin only runs where operators report state metrics and can get per-operator memory: the
operator-DAG testbed, not the single-vertex job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class OperatorMemoryState:
    """What Justin knows of one operator at decision ``t`` (metrics of this and the previous period)."""

    name: str
    stateful: bool
    parallelism: int
    """``p^{t-1}``: the parallelism it runs at."""
    memory_level: int | None
    """``m^{t-1}``: its memory level (None for no managed memory)."""
    scaled_up_last: bool = False
    """``v^{t-1}``: the last decision raised its memory level."""
    cache_hit_rate: float | None = None
    """``theta^t`` (0..1); None when the operator reports none."""
    access_latency_ms: float | None = None
    """``tau^t``; None when not reported."""
    previous_cache_hit_rate: float | None = None
    """``theta^{t-1}``."""
    previous_access_latency_ms: float | None = None
    """``tau^{t-1}``."""


@dataclass(frozen=True)
class JustinPlan:
    """Justin's configuration ``C^t``: parallelism and memory level per operator, and why."""

    parallelism: dict[str, int]
    memory_level: dict[str, int | None]
    scaled_up: dict[str, bool]
    reasons: tuple[str, ...] = field(default=())


def memory_mb(level: int | None, *, min_memory_mb: float = 128.0) -> float:
    """Managed memory per task at ``level``: ``2**level`` times the minimum (0 for None)."""
    return 0.0 if level is None else min_memory_mb * 2**level


def _improved(op: OperatorMemoryState) -> bool:
    hit_better = (
        op.cache_hit_rate is not None
        and op.previous_cache_hit_rate is not None
        and op.cache_hit_rate > op.previous_cache_hit_rate
    )
    latency_better = (
        op.access_latency_ms is not None
        and op.previous_access_latency_ms is not None
        and op.access_latency_ms < op.previous_access_latency_ms
    )
    return hit_better or latency_better


def justin_plan(
    ds2: Mapping[str, int],
    operators: Sequence[OperatorMemoryState],
    *,
    hit_threshold: float = 0.8,
    latency_threshold_ms: float = 1.0,
    max_level: int = 3,
) -> JustinPlan:
    """Algorithm 1: start from DS2's parallelism and trade scale-outs of stateful operators for memory."""
    parallelism: dict[str, int] = {}
    levels: dict[str, int | None] = {}
    scaled_up: dict[str, bool] = {}
    reasons: list[str] = []
    for op in operators:
        step = _operator_step(op, ds2[op.name], hit_threshold, latency_threshold_ms, max_level)
        parallelism[op.name], levels[op.name], scaled_up[op.name] = step.parallelism, step.level, step.scaled_up
        if step.reason is not None:
            reasons.append(step.reason)
    return JustinPlan(parallelism, levels, scaled_up, tuple(reasons))


@dataclass(frozen=True)
class _Step:
    """One operator's outcome of Algorithm 1: its parallelism, memory level, whether memory was raised, why."""

    parallelism: int
    level: int | None
    scaled_up: bool = False
    reason: str | None = None


def _operator_step(
    op: OperatorMemoryState, proposed: int, hit_threshold: float, latency_threshold_ms: float, max_level: int
) -> _Step:
    """DS2's ``proposed`` parallelism for ``op``, or a memory level up instead where its state access asks for it."""
    if not op.stateful:
        return _Step(proposed, None)
    level = op.memory_level or 0
    if proposed == op.parallelism:
        return _Step(proposed, op.memory_level)
    can_raise = level + 1 < max_level
    if op.scaled_up_last:
        return _after_scale_up(op, proposed, level, can_raise)
    hit, latency = op.cache_hit_rate, op.access_latency_ms
    memory_bound = (hit is not None and hit < hit_threshold) or (latency is not None and latency > latency_threshold_ms)
    if memory_bound and can_raise:
        shown = "?" if hit is None else f"{hit:.0%}"
        reason = (
            f"{op.name}: cache hit rate {shown} < {hit_threshold:.0%}: memory level {level + 1} "
            f"instead of {proposed} tasks"
        )
        return _Step(op.parallelism, level + 1, True, reason)
    return _Step(proposed, op.memory_level, reason=f"{op.name}: DS2's {proposed} tasks at memory level {level}")


def _after_scale_up(op: OperatorMemoryState, proposed: int, level: int, can_raise: bool) -> _Step:
    """An operator whose memory was raised last time: raise it again if that helped, else step it back down."""
    if not _improved(op):
        back = max(0, level - 1)
        return _Step(
            proposed, back, reason=f"{op.name}: last scale-up did not help: back to level {back}, {proposed} tasks"
        )
    if can_raise:
        reason = f"{op.name}: last scale-up helped: memory level {level + 1} instead of {proposed} tasks"
        return _Step(op.parallelism, level + 1, True, reason)
    return _Step(
        proposed,
        op.memory_level,
        reason=f"{op.name}: last scale-up helped but level {level} is the highest: {proposed} tasks",
    )
