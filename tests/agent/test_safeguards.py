"""The safeguard stage (agent.safeguards) alone and in the loop on the simulated job."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from agent.loop import WholeJobPlanning
from agent.observation import Observation
from agent.safeguard_settings import BlockedPeriodSettings, EffectivenessSettings
from agent.safeguards import BlockedPeriods, DecisionReporter, IneffectiveScaleOuts, memory_pressure
from agent.settings import ConfigError
from lab.replay import MemoryKnowledgeStore, Replay
from lab.settings import LabSettings, load_lab_settings
from lab.simulated import SimulatedMonitor
from planner.safeguards import Finding, IneffectiveScaleOut, SafeguardCode, Verdict
from planner.types import decided
from simulator import Trace


class RecordingEvents:
    """An EventSink that keeps what it was given."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def emit(self, *, reason: str, message: str, type_: str = "Normal") -> None:
        self.events.append((reason, message, type_))


def at(text: str, zone: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


# ---------------------------------------------------------------- blocked periods


@pytest.mark.parametrize(
    ("period", "local_time", "blocked"),
    [
        ("09:00-10:30", "2026-03-02 09:15:00", True),
        ("09:00-10:30", "2026-03-02 10:31:00", False),
        ("22:00-02:00", "2026-03-02 23:30:00", True),  # wraps past midnight
        ("22:00-02:00", "2026-03-03 01:59:00", True),
        ("22:00-02:00", "2026-03-03 02:01:00", False),
        ("* 9-16 * * mon-fri", "2026-03-02 16:59:30", True),  # Monday, a matching minute
        ("* 9-16 * * mon-fri", "2026-03-07 10:00:00", False),  # Saturday
        ("09:00-09:30 && * * * * sat,sun", "2026-03-07 09:10:00", True),  # both hold
        ("09:00-09:30 && * * * * sat,sun", "2026-03-02 09:10:00", False),  # only the range holds
        ("0 12 1 * *", "2026-04-01 12:00:59", True),  # one minute a month
        ("0 12 1 * *", "2026-04-01 12:01:00", False),
    ],
)
def test_blocked_periods_are_read_in_their_time_zone(period: str, local_time: str, blocked: bool) -> None:
    periods = BlockedPeriods(BlockedPeriodSettings(periods=(period,), time_zone="Europe/Berlin"))
    assert (periods.active(at(local_time, "Europe/Berlin")) == period) is blocked


def test_the_same_instant_is_blocked_in_one_zone_and_not_in_another() -> None:
    instant = at("2026-07-01 09:30:00", "Europe/Berlin")  # 07:30 UTC in summer time
    berlin = BlockedPeriods(BlockedPeriodSettings(periods=("09:00-10:00",), time_zone="Europe/Berlin"))
    utc = BlockedPeriods(BlockedPeriodSettings(periods=("09:00-10:00",), time_zone="UTC"))
    assert berlin.active(instant) == "09:00-10:00" and utc.active(instant) is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"safeguards.blocked_periods.periods": ["09:00-10:00"]}, "time_zone: set the IANA time zone"),
        (
            {"safeguards.blocked_periods.periods": ["9-10"], "safeguards.blocked_periods.time_zone": "UTC"},
            "neither a daily range",
        ),
        (
            {"safeguards.blocked_periods.periods": ["25:00-26:00"], "safeguards.blocked_periods.time_zone": "UTC"},
            "is not a time range",
        ),
        ({"safeguards.blocked_periods.time_zone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"safeguards.memory.heap_usage_threshold": 1.5}, "safeguards.memory.heap_usage_threshold"),
        (
            {"safeguards.memory.gc_pressure_threshold": 0.3, "scale_target.kind": "flink-rest"},
            "prometheus.queries.gc_time: safeguards.memory.gc_pressure_threshold reads it",
        ),
        ({"safeguards.quota.slots": 0}, "safeguards.quota.slots"),
    ],
)
def test_bad_safeguard_settings_fail_with_one_line_naming_the_key(values: dict[str, Any], message: str) -> None:
    from agent.settings import load_settings

    with pytest.raises(ConfigError) as caught:
        load_settings(None, values)
    assert message in str(caught.value) and "\n" not in str(caught.value)


# ---------------------------------------------------------------- reports


def finding(code: SafeguardCode, verdict: Verdict = Verdict.VETOED) -> Finding:
    return Finding(code, verdict, f"{code.value} held", {"from": 6, "to": 4, "unused": None})


def test_reports_are_one_per_reason_code_per_interval() -> None:
    events = RecordingEvents()
    reporter = DecisionReporter(events, interval_s=1800.0)
    assert reporter.report((finding(SafeguardCode.MEMORY_PRESSURE),), now=0.0)
    assert not reporter.report((finding(SafeguardCode.MEMORY_PRESSURE),), now=600.0)  # within the interval
    assert reporter.report((finding(SafeguardCode.BLOCKED_PERIOD),), now=600.0)  # another code
    assert reporter.report((finding(SafeguardCode.MEMORY_PRESSURE),), now=1800.0)
    assert reporter.report((finding(SafeguardCode.QUOTA, Verdict.LIMITED),), now=1800.0)
    reasons = [(reason, type_) for reason, _, type_ in events.events]
    assert reasons == [
        ("ScalingVetoed", "Warning"),
        ("ScalingVetoed", "Warning"),
        ("ScalingVetoed", "Warning"),
        ("ScalingLimited", "Normal"),
    ]
    message = events.events[0][1]
    assert message.startswith("[memory-pressure] memory-pressure held") and "from=6, to=4" in message
    assert "unused" not in message


# ---------------------------------------------------------------- ineffective scale-outs


def test_an_ineffective_scale_out_is_judged_once_settled_remembered_and_aged_out() -> None:
    memory = IneffectiveScaleOuts(EffectivenessSettings(enabled=True, forget_after_s=3600.0))
    memory.watch(now=0.0, from_parallelism=4, to_parallelism=6, workload=10_000.0, capacities={4: 8_000.0, 6: 12_000.0})
    # Not settled yet, then settled: 8,100 of a predicted 12,000.
    assert memory.judge(now=60.0, parallelism=6, capacities={6: 8_100.0}, settled=False, cause=None) is None
    record = memory.judge(now=240.0, parallelism=6, capacities={6: 8_100.0}, settled=True, cause="skew")
    assert record is not None and record.measured_capacity == 8_100.0 and memory.pending == {}
    assert memory.live(3000.0) == (record,)
    # What the knowledge keeps reads back the same; malformed entries are refused.
    again = IneffectiveScaleOuts(memory.settings)
    again.restore(memory.to_list())
    assert again.records == (record,)
    assert memory.live(240.0 + 3600.0) == ()
    with pytest.raises(ValueError):
        again.restore([{**memory.to_list()[0], "from_parallelism": -1}] if memory.to_list() else [{"at": "x"}])
    with pytest.raises(ValueError):
        again.restore({"not": "a list"})
    again.restore(None)  # a document without the field: none remembered
    assert again.records == ()


def test_an_effective_or_superseded_scale_out_is_not_remembered() -> None:
    memory = IneffectiveScaleOuts(EffectivenessSettings(enabled=True))
    memory.watch(now=0.0, from_parallelism=4, to_parallelism=6, workload=10_000.0, capacities={4: 8_000.0, 6: 12_000.0})
    assert memory.judge(now=240.0, parallelism=6, capacities={6: 11_500.0}, settled=True, cause=None) is None
    memory.watch(now=0.0, from_parallelism=4, to_parallelism=6, workload=10_000.0, capacities={4: 8_000.0, 6: 12_000.0})
    assert memory.judge(now=240.0, parallelism=7, capacities={6: 8_000.0}, settled=True, cause=None) is None  # rescaled
    assert memory.pending == {} and memory.records == ()


# ---------------------------------------------------------------- memory pressure read from an observation


def test_memory_pressure_is_the_worst_taskmanagers_mean() -> None:
    obs = Observation(
        now=10.0,
        times=np.arange(3.0),
        workload=np.ones(3),
        worker_throughput={},
        worker_cpu={},
        consumer_lag=np.zeros(3),
        parallelism=2,
        uptime_s=100.0,
        taskmanager_heap_usage={"tm-a": np.array([0.5, 0.6, np.nan]), "tm-b": np.array([0.9, 0.95, 0.85])},
        taskmanager_gc_pressure={"tm-a": np.array([0.3, 0.3, 0.3]), "tm-b": np.array([np.nan] * 3)},
    )
    pressure = memory_pressure(obs)
    assert pressure.heap_taskmanager == "tm-b" and pressure.heap_usage == pytest.approx(0.9)
    assert pressure.gc_taskmanager == "tm-a" and pressure.gc_pressure == pytest.approx(0.3)
    assert memory_pressure(replace(obs, taskmanager_heap_usage={}, taskmanager_gc_pressure={})).heap_usage is None


# ---------------------------------------------------------------- in the loop, on the simulated job


def steps(levels: list[tuple[float, float]], seconds: int) -> Trace:
    """A workload of flat steps: (start second, records/s)."""
    times, rates = [], []
    for i, (start, rate) in enumerate(levels):
        end = levels[i + 1][0] - 1.0 if i + 1 < len(levels) else float(seconds)
        times += [start, end]
        rates += [rate, rate]
    return Trace("steps", np.array(times), np.array(rates))


def lab_settings(**overrides: Any) -> LabSettings:
    base: dict[str, Any] = {"simulator.initial_parallelism": 6, "max_parallelism": 16, "target_recovery_time_s": 300}
    base.update(overrides)
    return load_lab_settings(None, base)


class FullHeapMonitor:
    """The simulated job's monitor with every TaskManager's heap at ``heap`` (the simulator models no JVM)."""

    def __init__(self, inner: SimulatedMonitor, heap: float) -> None:
        self.inner, self.heap = inner, heap

    def observe(self, *, since: float, now: float) -> Observation:
        seen = self.inner.observe(since=since, now=now)
        return replace(seen, taskmanager_heap_usage={"tm-1": np.full(seen.times.size, self.heap)})


SCALE_IN = steps([(0.0, 95_000.0), (1800.0, 30_000.0)], 3 * 3600)
"""A high workload that drops at 30 min: the policy scales in after it."""


def executed(run: Replay) -> list[tuple[int, int]]:
    return [(t, n) for t, n, dry in run.scaler.requests if not dry]


def test_scale_ins_go_ahead_below_the_heap_threshold_and_wait_above_it() -> None:
    settings = lab_settings(**{"safeguards.memory.heap_usage_threshold": 0.9})
    free = Replay(SCALE_IN, settings, hours=1.5)
    free.agent.monitor = FullHeapMonitor(SimulatedMonitor(free.job), heap=0.5)
    free.run()
    lowest = min(n for _, n in executed(free))
    assert lowest < max(n for _, n in executed(free)), "the workload's drop should scale the job in"

    events = RecordingEvents()
    full = Replay(SCALE_IN, settings, hours=1.5)
    full.agent.monitor = FullHeapMonitor(SimulatedMonitor(full.job), heap=0.95)
    full.agent.safeguards.reporter.events = events
    full.run()
    peak = max(n for _, n in executed(full))
    assert all(n >= peak for t, n in executed(full) if t > 1800), executed(full)
    vetoes = [f for r in full.rounds for f in r.findings if f.code is SafeguardCode.MEMORY_PRESSURE]
    assert vetoes and all(f.figures["heap_usage"] == 0.95 for f in vetoes)
    # Reported once per interval (30 min) while the rounds keep holding: every round counts, few are Events.
    held_at = [r.now for r in full.rounds if any(f.code is SafeguardCode.MEMORY_PRESSURE for f in r.findings)]
    reported = [e for e in events.events if "[memory-pressure]" in e[1]]
    assert len(reported) == int((held_at[-1] - held_at[0]) // 1800) + 1 < len(vetoes)


def test_within_a_blocked_period_only_a_needed_recovery_rescales() -> None:
    # The simulated clock starts at 1970-01-01 00:00 UTC; the workload steps up at 40 min.
    trace = steps([(0.0, 45_000.0), (2400.0, 95_000.0)], 2 * 3600)
    blocked = {"safeguards.blocked_periods.periods": ["00:00-01:00"], "safeguards.blocked_periods.time_zone": "UTC"}
    strict = Replay(
        trace, lab_settings(**blocked, **{"safeguards.blocked_periods.recovery_scale_out": False}), hours=1.5
    )
    strict.run()
    assert all(t > 3600 for t, _ in executed(strict)), executed(strict)
    assert any(f.code is SafeguardCode.BLOCKED_PERIOD for r in strict.rounds for f in r.findings)

    lenient = Replay(trace, lab_settings(**blocked), hours=1.5)
    lenient.run()
    inside = [(t, n) for t, n in executed(lenient) if t <= 3600]
    assert inside and all(n > 6 for _, n in inside), executed(lenient)
    reasons = [r.decision.reasons[-1] for r in lenient.rounds if r.rescaled_to is not None and r.now <= 3600]
    assert reasons and "within blocked period" in reasons[0]


def test_every_policy_plans_within_the_slot_quota() -> None:
    trace = steps([(0.0, 45_000.0), (1200.0, 95_000.0)], 2 * 3600)
    for policy in ("daedalus", "ds2", "flink-autoscaler"):
        run = Replay(
            trace,
            lab_settings(policy=policy, **{"simulator.initial_parallelism": 3, "safeguards.quota.slots": 5}),
            hours=1.0,
        )
        run.run()
        assert executed(run) and max(n for _, n in executed(run)) <= 5, (policy, executed(run))
        # 95,000 records/s need more than five workers: each policy's decision at the cap is reported limited.
        limited = [f for r in run.rounds for f in r.findings if f.code is SafeguardCode.QUOTA]
        assert limited and limited[0].verdict is Verdict.LIMITED and limited[0].figures["quota_slots"] == 5, policy


def test_ineffective_scale_outs_survive_a_restart_in_the_knowledge() -> None:
    store = MemoryKnowledgeStore()
    settings = lab_settings(**{"safeguards.effectiveness.enabled": True})
    run = Replay(steps([(0.0, 45_000.0)], 3600), settings, hours=0.2, knowledge=store)
    run.run()
    memory = run.agent.safeguards.ineffective
    memory.records = (
        *memory.records,
        IneffectiveScaleOut(
            at=run.clock.now(),
            from_parallelism=6,
            to_parallelism=8,
            workload=45_000.0,
            capacity_before=50_000.0,
            predicted_capacity=66_000.0,
            measured_capacity=50_500.0,
            cause=None,
        ),
    )
    run.agent.knowledge.save(run.agent.document())
    restarted = run.start_agent()
    assert restarted.safeguards.ineffective.records == memory.records
    # An older document without the field loads with none remembered.
    document = run.agent.document()
    del document["loop"]["ineffective_scale_outs"]
    store.save(document)
    assert run.start_agent().safeguards.ineffective.records == ()


def test_the_loop_judges_its_scale_out_reports_it_and_holds_the_next_one() -> None:
    settings = lab_settings(**{"safeguards.effectiveness.enabled": True, "simulator.partitions": 36})
    run = Replay(steps([(0.0, 45_000.0)], 3600), settings, hours=0.2)
    run.run()
    agent, now = run.agent, run.clock.now()
    events = RecordingEvents()
    agent.events = events
    agent.safeguards.reporter.events = events
    analysis = run.rounds[-1].analysis
    assert analysis is not None
    # A scale-out 4 -> 6 predicted to carry 12,000 records/s more, measured at 100 more, 10 minutes on.
    agent.safeguards.ineffective.watch(
        now=now - 600, from_parallelism=4, to_parallelism=6, workload=45_000.0, capacities={4: 40_000.0, 6: 52_000.0}
    )
    agent.last_rescale_at = now - 600
    settled = replace(analysis, parallelism=6, capacities={**analysis.capacities, 6: 40_100.0}, recovering=False)
    assert isinstance(agent.planning, WholeJobPlanning)
    agent.planning.judge_scale_out(agent, settled, {"0": 0.98, "1": 0.3, "2": 0.2}, now)
    [record] = agent.safeguards.ineffective.records
    assert (record.from_parallelism, record.to_parallelism, record.measured_capacity) == (4, 6, 40_100.0)
    assert record.cause is not None and "worker 0" in record.cause
    assert [reason for reason, _, _ in events.events] == ["IneffectiveScaling"]
    # The policy's next scale-out past 4 is vetoed while the workload stays near 45,000 records/s.
    review = agent.safeguards.review(
        decided(6, 8, 8, ["scale out"]),
        current=6,
        now=now,
        pressure=memory_pressure(None),
        workload=46_000.0,
        recovery_s=10.0,
        target_recovery_s=300.0,
    )
    assert review.decision.target_parallelism == 6
    assert [f.code for f in review.findings] == [SafeguardCode.INEFFECTIVE_SCALE_OUT]
    assert "gained 100 records/s of 12,000 predicted" in review.decision.reasons[-1]


def test_a_per_vertex_plan_keeps_the_vertices_a_safeguard_holds() -> None:
    from agent.safeguard_settings import SafeguardSettings
    from agent.safeguards import Safeguards
    from planner.safeguards import MemoryPressure

    guards = Safeguards(SafeguardSettings(memory={"heap_usage_threshold": 0.9}), RecordingEvents())
    before = {"src": 2, "map": 4, "sink": 2}
    planned = {"src": 2, "map": 2, "sink": 3}
    names = {"src": "Source: log", "map": "cost", "sink": "sink"}
    full = MemoryPressure(heap_usage=0.95, heap_taskmanager="tm-1")
    kept, findings = guards.review_vertices(
        before, planned, names, now=0.0, pressure=full, recovery_s=10.0, target_recovery_s=300.0
    )
    # The scale-in of 'cost' waits; the scale-out of 'sink' goes ahead.
    assert kept == {"src": 2, "map": 4, "sink": 3}
    assert [f.figures["vertex"] for f in findings] == ["cost"] and findings[0].message.startswith("cost: ")
    calm = MemoryPressure(heap_usage=0.5, heap_taskmanager="tm-1")
    assert guards.review_vertices(
        before, planned, names, now=0.0, pressure=calm, recovery_s=10.0, target_recovery_s=300.0
    ) == (planned, ())


def test_every_finding_is_counted_by_code_and_verdict() -> None:
    from prometheus_client import CollectorRegistry

    from agent.loop import RoundResult
    from agent.telemetry import Telemetry

    registry = CollectorRegistry()
    telemetry = Telemetry(registry)
    for _ in range(3):
        telemetry.record_round(
            RoundResult(
                now=0.0,
                findings=(finding(SafeguardCode.MEMORY_PRESSURE), finding(SafeguardCode.QUOTA, Verdict.LIMITED)),
            )
        )
    value = registry.get_sample_value
    assert value("perdix_safeguard_findings_total", {"code": "memory-pressure", "verdict": "vetoed"}) == 3
    assert value("perdix_safeguard_findings_total", {"code": "quota", "verdict": "limited"}) == 3


def test_the_per_operator_round_is_held_by_a_blocked_period_and_capped_by_the_quota(tmp_path: Any) -> None:
    from agent.safeguard_settings import SafeguardSettings
    from agent.safeguards import Safeguards
    from tests.agent.test_per_operator import COST, SplitJobMonitor, agent_for

    # DS2 wants the costly vertex at 3 (it runs at 2); every minute is blocked, recovery scale-outs off.
    monitor = SplitJobMonitor()
    agent, scaler, events = agent_for(tmp_path / "blocked", "ds2", monitor)
    blocked = SafeguardSettings(
        blocked_periods={"periods": ["* * * * *"], "time_zone": "UTC", "recovery_scale_out": False}
    )
    agent.safeguards = Safeguards(blocked, events)
    result = agent.round()
    assert scaler.calls == [] and monitor.parallelism[COST] == 2
    [held] = result.findings
    assert held.code is SafeguardCode.BLOCKED_PERIOD and held.figures["vertex"] == "cost"
    assert [reason for reason, _ in events.emitted] == ["ScalingVetoed"]

    # A quota of 2 slots: the costly vertex is planned at 2 at most.
    monitor = SplitJobMonitor()
    agent, scaler, events = agent_for(tmp_path / "quota", "ds2", monitor)
    agent.settings = agent.settings.model_copy(update={"safeguards": SafeguardSettings(quota={"slots": 2})})
    agent.round()
    assert all(max(targets.values()) <= 2 for targets, _ in scaler.calls) and monitor.parallelism[COST] == 2


def test_a_vertex_scale_out_that_gains_nothing_is_named_and_not_repeated(tmp_path: Any) -> None:
    from agent.safeguard_settings import SafeguardSettings
    from agent.safeguards import Safeguards
    from tests.agent.test_per_operator import COST, SplitJobMonitor, agent_for

    # The costly vertex carries 4,000/s at two saturated subtasks; DS2 scales it to 3 for 6,000/s, and at 3 the
    # three subtasks still carry 4,000/s between them (a bottleneck they share).
    monitor = SplitJobMonitor()
    agent, scaler, events = agent_for(tmp_path, "ds2", monitor)
    guarded = SafeguardSettings(effectiveness={"enabled": True})
    agent.settings = agent.settings.model_copy(update={"safeguards": guarded})
    agent.safeguards = Safeguards(guarded, events)
    agent.round()
    assert scaler.calls == [({COST: 3}, False)] and COST in agent.safeguards.ineffective.pending
    agent.clock.advance(120.0)  # type: ignore[attr-defined]
    result = agent.round()
    [record] = agent.safeguards.ineffective.records
    assert (record.vertex, record.from_parallelism, record.to_parallelism) == (COST, 2, 3)
    assert record.measured_capacity == pytest.approx(4000.0) and record.predicted_capacity == pytest.approx(6000.0)
    assert record.cause is not None and "vertex cost" in record.cause and "down from 2,000/s" in record.cause
    assert any(reason == "IneffectiveScaling" for reason, _ in events.emitted)
    # DS2 now wants the vertex wider still: held, the vertex named.
    assert scaler.calls == [({COST: 3}, False)], scaler.calls
    [held] = [f for f in result.findings if f.code is SafeguardCode.INEFFECTIVE_SCALE_OUT]
    assert held.figures["vertex"] == "cost" and held.figures["ineffective_from"] == 2
    # Remembered in the knowledge with its vertex.
    assert agent.document()["loop"]["ineffective_scale_outs"][0]["vertex"] == COST


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("from_parallelism", 0),
        ("measured_capacity", float("nan")),
        ("workload", -1.0),
        ("to_parallelism", "8"),  # no numbers read from strings
        ("extra", 1),
    ],
)
def test_a_malformed_ineffective_record_is_refused_by_the_knowledge_schema(field: str, value: Any) -> None:
    from agent.knowledge.document import SCHEMA_VERSION
    from agent.knowledge.schema import validate_document

    good = {
        "at": 10.0,
        "from_parallelism": 4,
        "to_parallelism": 6,
        "workload": 1000.0,
        "capacity_before": 900.0,
        "predicted_capacity": 1400.0,
        "measured_capacity": 910.0,
        "cause": None,
        "vertex": None,
    }
    assert validate_document({"version": SCHEMA_VERSION, "loop": {"ineffective_scale_outs": [good]}})
    with pytest.raises(ValueError, match="ineffective_scale_outs|NaN"):
        validate_document({"version": SCHEMA_VERSION, "loop": {"ineffective_scale_outs": [{**good, field: value}]}})
