"""The safeguards between a policy's decision and the scale target, as pure functions of what was measured.

Each returns a :class:`Finding` when it vetoes or limits the decision (what it found and the figures behind
it), or None. They apply to every policy alike, after it decided: a policy plans as it always does, and a
safeguard says why its rescale does not happen now (the Flink autoscaler's ScalingExecutor vetoes the same
way, after its evaluator). What the agent measures for them, and when it remembers what, lives in
``agent.safeguards``; these functions only judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from planner.graph import MemoryPressure
from planner.types import Decision, ReasonCode


class SafeguardCode(str, Enum):
    """Why a safeguard vetoed or limited a decision, as data (telemetry and the reports count these)."""

    MEMORY_PRESSURE = "memory-pressure"
    """A scale-in vetoed: a TaskManager's heap usage or GC time is above its threshold."""
    MEMORY_UNKNOWN = "memory-unknown"
    """A scale-in vetoed: the guard is on but this round has no heap or GC reading."""
    BLOCKED_PERIOD = "blocked-period"
    """A rescale vetoed: now is within a blocked period."""
    INEFFECTIVE_SCALE_OUT = "ineffective-scale-out"
    """A scale-out vetoed: one like it gained far less capacity than predicted, and its workload persists."""
    QUOTA = "quota"
    """The decision was planned within the job's resource quota, below what the policy would take."""
    STABILIZED = "stabilized"
    """A scale-in was held back (fully or in part) by the stabilization window."""


class Verdict(str, Enum):
    """What a safeguard did to the decision."""

    VETOED = "vetoed"
    """The rescale does not happen this round."""
    LIMITED = "limited"
    """The decision happens, smaller than the policy would have made it."""


Figure = float | int | str | None


@dataclass(frozen=True)
class Finding:
    """One safeguard's verdict on one decision, with the figures behind it (for the report and the log)."""

    code: SafeguardCode
    verdict: Verdict
    message: str
    figures: Mapping[str, Figure] = field(default_factory=dict)


def vetoed(decision: Decision, current: int, finding: Finding) -> Decision:
    """The decision kept at ``current`` by ``finding``: what the policy wanted stays its desire and its state."""
    return replace(
        decision.retargeted(current),
        reasons=(*decision.reasons, finding.message),
        code=ReasonCode.VETOED,
    )


# ---------------------------------------------------------------- memory pressure


def memory_veto(
    current: int, target: int, pressure: MemoryPressure, *, heap_threshold: float | None, gc_threshold: float | None
) -> Finding | None:
    """Veto a scale-in while a TaskManager's heap or GC time is above its threshold, or unread while guarded.

    Fewer TaskManagers hold the same state: a scale-in under heap pressure is how jobs run out of memory, and
    GC time reads as load, so a capacity measured under it is not the job's. A scale-out is never held: more
    TaskManagers relieve the heap. An unread signal holds the scale-in too (it can wait; an OOM cannot be undone).
    """
    if target >= current:
        return None
    figures: dict[str, Figure] = {"from": current, "to": target}
    checks = (
        ("heap usage", heap_threshold, pressure.heap_usage, pressure.heap_taskmanager, "heap_usage"),
        ("GC time", gc_threshold, pressure.gc_pressure, pressure.gc_taskmanager, "gc_pressure"),
    )
    for label, threshold, value, taskmanager, key in checks:
        if threshold is None:
            continue
        if value is None:
            return Finding(
                SafeguardCode.MEMORY_UNKNOWN,
                Verdict.VETOED,
                f"scale-in to {target} held: no {label} reading this round (the memory guard is on)",
                {**figures, f"{key}_threshold": threshold},
            )
        if value > threshold:
            return Finding(
                SafeguardCode.MEMORY_PRESSURE,
                Verdict.VETOED,
                f"scale-in to {target} held: {label} {value:.0%} on TaskManager {taskmanager} > {threshold:.0%}",
                {**figures, key: round(value, 4), f"{key}_threshold": threshold, "taskmanager": taskmanager},
            )
    return None


def gc_dominates(pressure: MemoryPressure, gc_threshold: float | None) -> bool:
    """True when a TaskManager spent more of the round in GC than the threshold allows: its load is not work."""
    return gc_threshold is not None and pressure.gc_pressure is not None and pressure.gc_pressure > gc_threshold


# ---------------------------------------------------------------- blocked periods


def blocked_veto(
    current: int,
    target: int,
    period: str | None,
    *,
    recovery_s: float | None,
    target_recovery_s: float,
    recovery_scale_out: bool,
) -> Finding | None:
    """Veto a rescale within a blocked period, except a scale-out of a job that could not recover in time.

    ``recovery_s`` is the predicted recovery at the current scale-out (infinite when the job falls behind).
    """
    if period is None or target == current:
        return None
    figures: dict[str, Figure] = {"from": current, "to": target, "period": period}
    if recovery_s is not None:
        figures["predicted_recovery_s"] = None if math.isinf(recovery_s) else round(recovery_s, 1)
    figures["target_recovery_s"] = target_recovery_s
    late = recovery_s is not None and recovery_s > target_recovery_s
    if target > current and recovery_scale_out and late:
        return None
    why = (
        ""
        if target < current or not recovery_scale_out
        else (
            ": the job recovers in time at its current scale-out"
            if recovery_s is not None
            else ": its recovery at the current scale-out is unknown"
        )
    )
    return Finding(
        SafeguardCode.BLOCKED_PERIOD,
        Verdict.VETOED,
        f"rescale to {target} held: blocked period {period!r}{why}",
        figures,
    )


def blocked_recovery_note(current: int, target: int, period: str | None, recovery_s: float | None) -> str | None:
    """The reason a scale-out goes ahead within a blocked period (it is needed to recover in time), or None."""
    if period is None or target <= current:
        return None
    shown = "never" if recovery_s is None or math.isinf(recovery_s) else f"{recovery_s:.0f} s"
    return f"scale-out within blocked period {period!r}: at {current} the job would recover in {shown}, too late"


# ---------------------------------------------------------------- ineffective scale-outs


@dataclass(frozen=True)
class IneffectiveScaleOut:
    """A scale-out that gained far less capacity than predicted, and the workload that led to it."""

    at: float
    from_parallelism: int
    to_parallelism: int
    workload: float
    """Mean workload when it was decided, records/s."""
    capacity_before: float
    predicted_capacity: float
    measured_capacity: float
    cause: str | None = None
    """What the analysis found behind it where it could (a skewed partition, a bottleneck vertex), or None."""
    vertex: str | None = None
    """The job vertex (its id) a per-vertex policy scaled out; None: the whole job."""


def scale_out_effective(
    capacity_before: float, predicted_capacity: float, measured_capacity: float, threshold: float
) -> bool | None:
    """Whether a scale-out gained at least ``threshold`` of the predicted gain; None when nothing was predicted.

    The Flink autoscaler's effectiveness test on the processing rate, here on the capacity Perdix learned:
    (measured − before) / (predicted − before) ≥ threshold.
    """
    predicted_gain = predicted_capacity - capacity_before
    if not math.isfinite(predicted_gain) or predicted_gain <= 0:
        return None
    return (measured_capacity - capacity_before) >= threshold * predicted_gain


def ineffective_veto(
    current: int,
    target: int,
    records: tuple[IneffectiveScaleOut, ...],
    *,
    workload: float | None,
    tolerance: float,
    vertex: str | None = None,
) -> Finding | None:
    """Veto a scale-out past the start of a remembered ineffective one while the workload that led to it persists
    (it has not risen more than ``tolerance`` above it): scaling out again would hit the same wall. ``vertex``: the
    job vertex scaled out (its own records count), None for the whole job."""
    if target <= current:
        return None
    for record in records:
        if record.vertex != vertex or target <= record.from_parallelism:
            continue
        if workload is not None and workload > record.workload * (1.0 + tolerance):
            continue  # a workload that rose past it is a new situation
        gain = record.measured_capacity - record.capacity_before
        predicted = record.predicted_capacity - record.capacity_before
        cause = f"; {record.cause}" if record.cause else ""
        return Finding(
            SafeguardCode.INEFFECTIVE_SCALE_OUT,
            Verdict.VETOED,
            f"scale-out to {target} held: the scale-out {record.from_parallelism} -> {record.to_parallelism} gained "
            f"{gain:,.0f} records/s of {predicted:,.0f} predicted{cause}",
            {
                "from": current,
                "to": target,
                "ineffective_from": record.from_parallelism,
                "ineffective_to": record.to_parallelism,
                "gained": round(gain, 1),
                "predicted_gain": round(predicted, 1),
                "workload": None if workload is None else round(workload, 1),
                "workload_then": round(record.workload, 1),
                "cause": record.cause,
            },
        )
    return None


def vertex_cause(
    name: str, busy_mean: float | None, busy_max: float | None, rate_before: float | None, rate_after: float | None
) -> str:
    """What a vertex's shortfall points at: one subtask busy while the others idle (a skewed key), or each subtask
    slower than before (a bottleneck the subtasks share: an external system, the network, the state backend)."""
    if busy_max is not None and busy_mean is not None and busy_max >= 0.8 and busy_mean <= 0.6 * busy_max:
        return f"vertex {name}: a subtask busy {busy_max:.0%} while they average {busy_mean:.0%} (a skewed key)"
    if rate_before is not None and rate_after is not None and rate_after < rate_before:
        return (
            f"vertex {name}: each subtask processes {rate_after:,.0f}/s at full load, down from "
            f"{rate_before:,.0f}/s (a bottleneck its subtasks share)"
        )
    return f"vertex {name}"


def skew_cause(worker_busy: Mapping[str, float], *, parallelism: int, source_partitions: int | None) -> str | None:
    """What a measured scale-out shortfall points at: more workers than source partitions, or one busy worker
    while the rest idle (a skewed key or partition). None when neither shows."""
    if source_partitions is not None and parallelism > source_partitions:
        return (
            f"the source has {source_partitions} partitions: {parallelism - source_partitions} of "
            f"{parallelism} workers read nothing"
        )
    if len(worker_busy) < 2:
        return None
    busiest = max(worker_busy, key=lambda w: worker_busy[w])
    top = worker_busy[busiest]
    others = [v for w, v in worker_busy.items() if w != busiest]
    rest = sum(others) / len(others)
    if top >= 0.8 and rest <= 0.5 * top:
        return f"skew: worker {busiest} busy {top:.0%} while the others average {rest:.0%}"
    return None


# ---------------------------------------------------------------- quotas


@dataclass(frozen=True)
class SlotResources:
    """What one task slot takes, as the scale target reports it (None where it does not say)."""

    cpu: float | None = None
    memory_mb: float | None = None


def quota_slots(
    *, slots: int | None, cpu: float | None, memory_mb: float | None, per_slot: SlotResources | None
) -> tuple[int | None, str | None]:
    """The most slots the quota allows and which quota binds (None, None: no quota applies).

    A CPU or memory quota counts only where the per-slot figure is known: a quota that cannot be read
    into slots caps nothing, and the agent says so once.
    """
    caps: list[tuple[int, str]] = []
    if slots is not None:
        caps.append((slots, f"quota of {slots} slots"))
    if cpu is not None and per_slot is not None and per_slot.cpu:
        caps.append((int(math.floor(cpu / per_slot.cpu + 1e-9)), f"CPU quota {cpu:g} at {per_slot.cpu:g} per slot"))
    if memory_mb is not None and per_slot is not None and per_slot.memory_mb:
        caps.append(
            (
                int(math.floor(memory_mb / per_slot.memory_mb + 1e-9)),
                f"memory quota {memory_mb:,.0f} MB at {per_slot.memory_mb:,.0f} MB per slot",
            )
        )
    if not caps:
        return None, None
    cap, why = min(caps)
    return max(cap, 1), why


def quota_limit(
    decision: Decision, current: int, cap: int | None, why: str | None, wanted_more: bool
) -> Finding | None:
    """A LIMITED finding when the decision sits at the quota's cap and the policy wanted more (or found no
    scale-out within it that meets every constraint)."""
    if cap is None or decision.target_parallelism < cap or not wanted_more:
        return None
    return Finding(
        SafeguardCode.QUOTA,
        Verdict.LIMITED,
        f"planned within the quota: {decision.target_parallelism} slots at most ({why})",
        {
            "from": current,
            "to": decision.target_parallelism,
            "desired": decision.desired_parallelism,
            "quota_slots": cap,
            "binding": why,
        },
    )


def stabilization_limit(decision: Decision, current: int) -> Finding | None:
    """A finding when the stabilization window held a wanted scale-in back (vetoed in full, limited in part)."""
    if decision.code is not ReasonCode.STABILIZED or decision.desired_parallelism >= current:
        return None
    target = decision.target_parallelism
    verdict = Verdict.VETOED if target == current else Verdict.LIMITED
    return Finding(
        SafeguardCode.STABILIZED,
        verdict,
        f"scale-in to {decision.desired_parallelism} stabilized at {target}",
        {"from": current, "to": target, "desired": decision.desired_parallelism},
    )
