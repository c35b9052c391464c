"""The safeguards' judgements (planner.safeguards): each case with the figures that decide it."""

from __future__ import annotations

import math

import pytest

from planner.safeguards import (
    IneffectiveScaleOut,
    MemoryPressure,
    SafeguardCode,
    SlotResources,
    Verdict,
    blocked_veto,
    gc_dominates,
    ineffective_veto,
    memory_veto,
    quota_limit,
    quota_slots,
    scale_out_effective,
    skew_cause,
    stabilization_limit,
    vetoed,
)
from planner.types import Decision, ReasonCode, decided

FULL_HEAP = MemoryPressure(heap_usage=0.93, heap_taskmanager="tm-2", gc_pressure=0.02, gc_taskmanager="tm-1")
BUSY_GC = MemoryPressure(heap_usage=0.5, heap_taskmanager="tm-1", gc_pressure=0.4, gc_taskmanager="tm-3")
CALM = MemoryPressure(heap_usage=0.5, heap_taskmanager="tm-1", gc_pressure=0.02, gc_taskmanager="tm-1")


@pytest.mark.parametrize(
    ("current", "target", "pressure", "heap", "gc", "code"),
    [
        (6, 4, FULL_HEAP, 0.9, None, SafeguardCode.MEMORY_PRESSURE),  # heap over its threshold: held
        (6, 4, BUSY_GC, None, 0.3, SafeguardCode.MEMORY_PRESSURE),  # GC over its threshold: held
        (6, 4, CALM, 0.9, 0.3, None),  # both below: the scale-in goes ahead
        (4, 6, FULL_HEAP, 0.9, 0.3, None),  # a scale-out relieves the heap: never held
        (6, 4, MemoryPressure(), 0.9, None, SafeguardCode.MEMORY_UNKNOWN),  # guarded but unread: held
        (6, 4, MemoryPressure(), None, None, None),  # guard off: nothing read, nothing held
        (6, 4, FULL_HEAP, None, 0.3, None),  # only GC guarded, GC calm: a full heap is not looked at
    ],
)
def test_memory_guard_holds_scale_ins_under_pressure(
    current: int,
    target: int,
    pressure: MemoryPressure,
    heap: float | None,
    gc: float | None,
    code: SafeguardCode | None,
) -> None:
    finding = memory_veto(current, target, pressure, heap_threshold=heap, gc_threshold=gc)
    assert (finding.code if finding else None) is code
    if finding is not None:
        assert finding.verdict is Verdict.VETOED and finding.figures["from"] == current


def test_memory_finding_names_the_taskmanager_and_figures() -> None:
    finding = memory_veto(6, 4, FULL_HEAP, heap_threshold=0.9, gc_threshold=None)
    assert finding is not None
    assert finding.figures["heap_usage"] == 0.93 and finding.figures["taskmanager"] == "tm-2"
    assert "93%" in finding.message and "tm-2" in finding.message


def test_gc_dominates_only_above_its_threshold() -> None:
    assert gc_dominates(BUSY_GC, 0.3)
    assert not gc_dominates(BUSY_GC, 0.5)
    assert not gc_dominates(BUSY_GC, None)
    assert not gc_dominates(MemoryPressure(), 0.3)


@pytest.mark.parametrize(
    ("current", "target", "period", "recovery_s", "allow", "held"),
    [
        (4, 6, None, 100.0, True, False),  # no period: nothing held
        (6, 4, "09:00-10:00", 100.0, True, True),  # a scale-in waits for the period's end
        (4, 6, "09:00-10:00", 100.0, True, True),  # the job recovers in time where it is: held
        (4, 6, "09:00-10:00", 900.0, True, False),  # it would not: the scale-out goes ahead
        (4, 6, "09:00-10:00", math.inf, True, False),  # it falls behind: the scale-out goes ahead
        (4, 6, "09:00-10:00", math.inf, False, True),  # recovery scale-outs switched off: held
        (4, 6, "09:00-10:00", None, True, True),  # recovery unknown: held
        (4, 4, "09:00-10:00", math.inf, True, False),  # no rescale: nothing to hold
    ],
)
def test_blocked_period_holds_rescales_except_a_needed_recovery(
    current: int, target: int, period: str | None, recovery_s: float | None, allow: bool, held: bool
) -> None:
    finding = blocked_veto(
        current, target, period, recovery_s=recovery_s, target_recovery_s=300.0, recovery_scale_out=allow
    )
    assert (finding is not None) is held
    if finding is not None:
        assert finding.code is SafeguardCode.BLOCKED_PERIOD and finding.figures["period"] == period


RECORD = IneffectiveScaleOut(
    at=0.0,
    from_parallelism=4,
    to_parallelism=6,
    workload=10_000.0,
    capacity_before=8_000.0,
    predicted_capacity=12_000.0,
    measured_capacity=8_100.0,
    cause="skew: worker 3 busy 98%",
)


@pytest.mark.parametrize(
    ("current", "target", "workload", "held"),
    [
        (6, 8, 10_000.0, True),  # further out past the wall, same workload: held
        (4, 6, 10_500.0, True),  # the same scale-out again, workload within 20 %: held
        (4, 5, 10_000.0, True),  # any scale-out past its start
        (2, 4, 10_000.0, False),  # up to where it started is fine
        (4, 6, 13_000.0, False),  # the workload rose past it: a new situation
        (6, 4, 10_000.0, False),  # a scale-in is never held
    ],
)
def test_ineffective_scale_out_is_not_repeated_while_its_workload_persists(
    current: int, target: int, workload: float, held: bool
) -> None:
    finding = ineffective_veto(current, target, (RECORD,), workload=workload, tolerance=0.2)
    assert (finding is not None) is held
    if finding is not None:
        assert "skew: worker 3" in finding.message and finding.figures["gained"] == 100.0


@pytest.mark.parametrize(
    ("before", "predicted", "measured", "expected"),
    [
        (8_000.0, 12_000.0, 8_100.0, False),  # 100 of 4,000 predicted: under a tenth
        (8_000.0, 12_000.0, 8_400.0, True),  # exactly a tenth
        (8_000.0, 12_000.0, 11_000.0, True),
        (8_000.0, 8_000.0, 8_000.0, None),  # nothing predicted: nothing to judge
    ],
)
def test_effectiveness_is_the_share_of_the_predicted_gain(
    before: float, predicted: float, measured: float, expected: bool | None
) -> None:
    assert scale_out_effective(before, predicted, measured, 0.1) is expected


def test_skew_cause_names_missing_partitions_or_a_hot_worker() -> None:
    assert "4 partitions" in (skew_cause({}, parallelism=6, source_partitions=4) or "")
    hot = skew_cause({"0": 0.98, "1": 0.3, "2": 0.25}, parallelism=3, source_partitions=None)
    assert hot is not None and "worker 0" in hot
    assert skew_cause({"0": 0.9, "1": 0.85}, parallelism=2, source_partitions=None) is None


@pytest.mark.parametrize(
    ("slots", "cpu", "memory", "per_slot", "cap"),
    [
        (None, None, None, None, None),
        (8, None, None, None, 8),
        (None, 4.0, None, SlotResources(cpu=0.5), 8),
        (10, 4.0, None, SlotResources(cpu=0.5), 8),  # the tighter quota binds
        (None, None, 8192.0, SlotResources(memory_mb=1700.0), 4),
        (None, 4.0, None, None, None),  # a CPU quota the target cannot read into slots caps nothing
        (None, 0.1, None, SlotResources(cpu=0.5), 1),  # never below one slot
    ],
)
def test_quota_slots(
    slots: int | None, cpu: float | None, memory: float | None, per_slot: SlotResources | None, cap: int | None
) -> None:
    assert quota_slots(slots=slots, cpu=cpu, memory_mb=memory, per_slot=per_slot)[0] == cap


def test_quota_limit_reports_a_decision_held_at_the_cap() -> None:
    at_cap = Decision.whole_job(8, 8, ("no candidate",), ReasonCode.NO_CANDIDATE)
    finding = quota_limit(at_cap, 6, 8, "quota of 8 slots", wanted_more=True)
    assert finding is not None and finding.verdict is Verdict.LIMITED and finding.figures["quota_slots"] == 8
    assert quota_limit(at_cap, 6, 8, "quota of 8 slots", wanted_more=False) is None
    assert quota_limit(decided(6, 7, 7, ["x"]), 6, 8, "quota", wanted_more=True) is None
    assert quota_limit(at_cap, 6, None, None, wanted_more=True) is None


def test_stabilization_finding_and_veto_keep_the_policys_desire() -> None:
    held = decided(6, 6, 4, ["scale-in held"])
    finding = stabilization_limit(held, 6)
    assert finding is not None and finding.verdict is Verdict.VETOED and finding.figures["desired"] == 4
    partly = decided(6, 5, 4, ["scale-in stabilized"])
    assert stabilization_limit(partly, 6).verdict is Verdict.LIMITED  # type: ignore[union-attr]
    assert stabilization_limit(decided(6, 4, 4, ["in"]), 6) is None

    blocked = blocked_veto(6, 4, "p", recovery_s=1.0, target_recovery_s=300.0, recovery_scale_out=True)
    assert blocked is not None
    decision = vetoed(decided(6, 4, 4, ["in"]), 6, blocked)
    assert decision.target_parallelism == 6 and decision.desired_parallelism == 4
    assert decision.code is ReasonCode.VETOED and decision.reasons[-1] == blocked.message
    assert not decision.rescales_from(6)


# ---------------------------------------------------------------- Justin and QEScalor read the same signals


def test_justin_adds_no_memory_under_heap_or_gc_pressure() -> None:
    from dataclasses import replace as copy_with

    from planner.justin_per_operator import JustinPerOperator
    from planner.graph import MemoryProfile, VertexInput
    from tests.planner.test_per_operator import CONFIG, graph_input, rated, stateful_job

    hot = stateful_job(hit=0.5)
    sink = hot.vertices[2]
    busy_sink = VertexInput(
        sink.id,
        sink.name,
        1,
        sink.upstream,
        metrics=rated(4000.0, 0.9, 1, selectivity=0.0, state_size_bytes=1e9, cache_hit_rate=0.5, state_latency_ms=0.1),
    )
    job = graph_input(
        (*hot.vertices[:2], busy_sink),
        now=hot.now,
        workload_avg=6000.0,
        uptime_s=600.0,
        memory=MemoryProfile(128.0),
        memory_applies=True,
    )
    guarded = copy_with(CONFIG, heap_usage_threshold=0.9, gc_pressure_threshold=0.3)
    # Calm: Justin trades the sink's scale-out for a memory level (as without the guard).
    calm = JustinPerOperator().decide(copy_with(job, memory_pressure=CALM), guarded)
    assert calm.memory is not None and calm.memory.levels["sink"] == 1 and calm.parallelism["sink"] == 1
    for pressure in (FULL_HEAP, BUSY_GC):
        decision = JustinPerOperator().decide(copy_with(job, memory_pressure=pressure), guarded)
        assert decision.memory is not None and decision.memory.levels["sink"] == 0, decision.reasons
        assert decision.parallelism["sink"] == 2  # DS2's scale-out instead
        assert any(reason.startswith("memory levels held") for reason in decision.reasons)
        assert decision.policy_state["vertices"]["sink"]["scaled_up"] is False  # type: ignore[index]


def test_qescalor_learns_no_profile_from_a_round_under_gc_pressure() -> None:
    from dataclasses import replace as copy_with

    from planner.graph import MemoryProfile
    from planner.qescalor_per_operator import QescalorPerOperator
    from tests.planner.test_per_operator import CONFIG, split_job

    state = {"profiles": [{"cpu": 1.0, "memory_mb": 128.0, "performance": 2000.0, "count": 5}]}
    job = split_job(memory=MemoryProfile(128.0), policy_state=state)
    guarded = copy_with(CONFIG, gc_pressure_threshold=0.3)
    learned = QescalorPerOperator().decide(copy_with(job, memory_pressure=CALM), guarded)
    assert learned.policy_state["profiles"][0]["count"] == 6  # type: ignore[index]
    held = QescalorPerOperator().decide(copy_with(job, memory_pressure=BUSY_GC), guarded)
    assert held.policy_state["profiles"] == state["profiles"]  # type: ignore[index]
    assert any("not learned" in reason for reason in held.reasons)
