"""The per-operator policies: shared helpers, DS2 over a job graph, Daedalus's ladder, Justin, QEScalor.

The graphs are the trace job's split shape (source -> costly map -> cheap sink) and small variants;
the numbers are ours. Each table case says what it checks.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import registry
from planner.daedalus_per_operator import DaedalusPerOperator, Rates, ladder
from planner.ds2 import OperatorRates, ds2_parallelism
from planner.ds2_per_operator import Ds2PerOperator, ds2_plan, significant
from planner.history import Recommendations
from planner.justin_per_operator import JustinPerOperator, level_of
from planner.graph import MemoryProfile, VertexInput, VertexMetrics, check_topological
from planner.per_operator import (
    metrics_from_subtasks,
    slots,
    source_shares,
    topological,
)
from planner.qescalor_per_operator import QescalorPerOperator, epoch_peaks
from planner.types import PlanInput, PlannerConfig, ReasonCode

CONFIG = PlannerConfig(
    min_parallelism=1,
    max_parallelism=8,
    target_recovery_time_s=300.0,
    grace_period_s=0.0,
    recent_rescale_window_s=0.0,
    scale_down_stabilization_s=0.0,
)


def graph_input(vertices: tuple[VertexInput, ...], **kwargs: object) -> PlanInput:
    """The round's snapshot of a job graph: its scale-out the slots its vertices share."""
    current = slots({v.id: v.parallelism for v in vertices})
    return PlanInput(current_parallelism=current, vertices=vertices, **kwargs)  # type: ignore[arg-type]


def rated(rate_in: float, busy: float, subtasks: int, *, selectivity: float = 1.0, **extra: float) -> VertexMetrics:
    """A vertex whose ``subtasks`` each took in ``rate_in / subtasks`` records/s at busy fraction ``busy``."""
    per = {str(i): rate_in / subtasks for i in range(subtasks)}
    return metrics_from_subtasks(
        records_in=per,
        records_out={k: v * selectivity for k, v in per.items()},
        busy={k: busy for k in per},
        **{k: {str(i): v for i in range(subtasks)} for k, v in extra.items()},  # type: ignore[arg-type]
    )


def split_job(
    *, workload: float = 6000.0, cost_parallelism: int = 2, cost_busy: float | None = None, **kwargs: object
) -> PlanInput:
    """The trace job's split shape at ``workload``: a cheap source, a map of 2000/s per subtask, a cheap sink.

    The map is saturated (busy 1) when it gets less than the workload; otherwise its busy time is
    workload / (2000 x subtasks).
    """
    carried = min(workload, 2000.0 * cost_parallelism)
    busy = cost_busy if cost_busy is not None else min(1.0, carried / (2000.0 * cost_parallelism))
    vertices = (
        VertexInput("src", "Source: log", 1, metrics=rated(carried, carried / 40_000.0, 1)),
        VertexInput("cost", "cost", cost_parallelism, ("src",), metrics=rated(carried, busy, cost_parallelism)),
        VertexInput(
            "sink",
            "verify -> discard: Writer",
            1,
            ("cost",),
            metrics=rated(carried, carried / 20_000.0, 1, selectivity=0.0),
        ),
    )
    defaults: dict[str, object] = dict(
        now=1000.0,
        workload_avg=workload,
        uptime_s=600.0,
        forecast=np.full(900, workload),
        recent_workload=workload,
        consumer_lag=0.0,
        downtimes_s={n: 2.0 for n in range(1, 9)},
    )
    defaults.update(kwargs)
    return graph_input(vertices, **defaults)


# ---------------------------------------------------------------------------------------------- helpers


def test_metrics_from_subtasks_sums_true_rates_over_subtasks_with_busy_time() -> None:
    m = metrics_from_subtasks(
        records_in={"0": 100, "1": 300, "2": 0},
        records_out={"0": 100, "1": 300, "2": 0},
        busy={"0": 0.25, "1": 0.75, "2": 0.0},
        state_size_bytes={"0": 10, "1": 20},
    )
    # Eq. 1 and 5: 100/0.25 + 300/0.75; the idle subtask has no true rate (W_u = 0).
    assert m.true_processing_rate == pytest.approx(800.0)
    assert m.rated_subtasks == 2 and m.true_rate_per_subtask == pytest.approx(400.0)
    assert (m.busy_max, m.records_in_rate, m.state_size_bytes, m.stateful) == (0.75, 400.0, 30.0, True)


@given(st.lists(st.tuples(st.floats(0.0, 1e6), st.floats(0.0, 1.0)), min_size=1, max_size=12))
def test_true_rate_is_never_below_the_observed_rate(subtasks: list[tuple[float, float]]) -> None:
    records = {str(i): r for i, (r, _) in enumerate(subtasks)}
    busy = {str(i): b for i, (_, b) in enumerate(subtasks)}
    m = metrics_from_subtasks(records_in=records, records_out=records, busy=busy)
    rated_in = sum(r for r, b in subtasks if b >= 0.01)
    if m.true_processing_rate is not None:
        # DS2's inequality: observed <= true (section 3.2), summed over the subtasks that have one.
        assert m.true_processing_rate >= rated_in - 1e-6


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        # A chain given backwards is put in order.
        ([("c", ("b",)), ("b", ("a",)), ("a", ())], ["a", "b", "c"]),
        # A diamond: both branches before the join.
        ([("j", ("l", "r")), ("r", ("s",)), ("l", ("s",)), ("s", ())], ["s", "r", "l", "j"]),
        # Two sources.
        ([("m", ("s1", "s2")), ("s1", ()), ("s2", ())], ["s1", "s2", "m"]),
    ],
)
def test_topological_order(order: list[tuple[str, tuple[str, ...]]], expected: list[str]) -> None:
    vertices = [VertexInput(vid, vid, 1, up) for vid, up in order]
    assert [v.id for v in topological(vertices)] == expected
    check_topological(topological(vertices))


def test_topological_rejects_a_cycle_and_unknown_inputs() -> None:
    with pytest.raises(ValueError, match="cycle"):
        topological([VertexInput("a", "a", 1, ("b",)), VertexInput("b", "b", 1, ("a",))])
    with pytest.raises(ValueError, match="unknown upstream"):
        topological([VertexInput("a", "a", 1, ("x",))])
    with pytest.raises(ValueError, match="topological"):
        check_topological([VertexInput("b", "b", 1, ("a",)), VertexInput("a", "a", 1)])


def test_slots_shared_and_separate_and_source_shares() -> None:
    assert slots({"a": 2, "b": 5}) == 5 and slots({"a": 2, "b": 5}, shared=False) == 7
    shares = source_shares([VertexInput("a", "a", 1), VertexInput("b", "b", 1)])
    assert shares == {"a": 0.5, "b": 0.5}


# ---------------------------------------------------------------------------------------------- DS2


@pytest.mark.parametrize(
    ("workload", "cost_parallelism", "expected_cost"),
    [
        (6000.0, 2, 3),  # under-provisioned: 6000 / 2000 per subtask
        (6000.0, 3, 3),  # at the optimum
        (3000.0, 4, 2),  # over-provisioned: scale in
        (20_000.0, 1, 8),  # bounded by max_parallelism
    ],
)
def test_ds2_plan_sizes_the_costly_vertex_and_leaves_the_cheap_ones(
    workload: float, cost_parallelism: int, expected_cost: int
) -> None:
    plan = ds2_plan(split_job(workload=workload, cost_parallelism=cost_parallelism).vertices, workload, CONFIG)
    assert plan.parallelism == {"src": 1, "cost": expected_cost, "sink": 1}


@given(
    st.lists(st.tuples(st.integers(1, 6), st.floats(50.0, 5e4), st.floats(0.0, 2.0)), min_size=1, max_size=6),
    st.floats(1.0, 1e5),
)
def test_ds2_plan_on_a_chain_equals_planner_ds2(chain: list[tuple[int, float, float]], workload: float) -> None:
    # On a chain with one source, the per-vertex traversal is eq. 7/8 of planner.ds2 exactly.
    vertices = []
    operators = []
    for i, (p, per_subtask, selectivity) in enumerate(chain):
        up = (f"v{i - 1}",) if i else ()
        metrics = VertexMetrics(
            per_subtask * p * 0.5,
            per_subtask * p * 0.5 * selectivity,
            0.5,
            0.5,
            true_processing_rate=per_subtask * p,
            true_output_rate=per_subtask * p * selectivity,
            rated_subtasks=p,
        )
        vertices.append(VertexInput(f"v{i}", f"v{i}", p, up, metrics=metrics))
        operators.append(OperatorRates(f"v{i}", p, per_subtask * p, per_subtask * p * selectivity, up))
    config = PlannerConfig(1, 10**6, 300)
    assert ds2_plan(vertices, workload, config).parallelism == ds2_parallelism(operators, workload)


def test_ds2_keeps_an_idle_vertex_and_names_it() -> None:
    job = split_job()
    idle = VertexInput("sink", "sink", 2, ("cost",), metrics=VertexMetrics(0.0, 0.0, 0.0, 0.0))
    plan = ds2_plan((*job.vertices[:2], idle), 6000.0, CONFIG)
    assert plan.parallelism["sink"] == 2 and plan.unknown == ("sink",)


@pytest.mark.parametrize(("current", "proposed", "applied"), [(4, 5, True), (4, 3, False), (4, 2, True), (4, 4, False)])
def test_minor_scale_downs_are_noise(current: int, proposed: int, applied: bool) -> None:
    assert significant(current, proposed, 2) is (applied and proposed != current)


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"uptime_s": 10.0}, ReasonCode.GRACE),  # warm-up after a restart: rates mix the old attempt
        ({"job_running": False}, ReasonCode.UNKNOWN_DATA),
        ({"workload_avg": None}, ReasonCode.UNKNOWN_DATA),
        ({}, ReasonCode.SCALE_OUT),
    ],
)
def test_ds2_policy_guards_and_decision(kwargs: dict[str, object], code: ReasonCode) -> None:
    decision = Ds2PerOperator().decide(split_job(**kwargs), CONFIG)
    assert decision.code is code
    if code is ReasonCode.SCALE_OUT:
        assert decision.parallelism == {"src": 1, "cost": 3, "sink": 1}
        assert decision.changes({"src": 1, "cost": 2, "sink": 1}) == {"cost": 3}
        assert decision.target_parallelism == 3


# ---------------------------------------------------------------------------------------------- Daedalus


def test_ladder_grows_the_bottleneck_one_subtask_at_a_time() -> None:
    job = split_job()
    plan = ds2_plan(job.vertices, 6000.0, CONFIG)
    rates = Rates.of(job.vertices, plan, 6000.0)
    rungs = ladder(job.vertices, rates, CONFIG)
    capacities = [rates.capacity(r) for r in rungs]
    assert rungs[0] == {"src": 1, "cost": 1, "sink": 1}
    assert all(sum(b.values()) == sum(a.values()) + 1 for a, b in zip(rungs, rungs[1:]))
    assert capacities == sorted(capacities)
    # The cheap source and sink (40k/s and 20k/s per subtask) never grow before the map reaches 8.
    assert rungs[-1] == {"src": 1, "cost": 8, "sink": 1}


@given(st.lists(st.floats(100.0, 1e5), min_size=1, max_size=5), st.integers(1, 12))
def test_each_rung_is_the_cheapest_plan_reaching_its_capacity(per_subtask: list[float], top: int) -> None:
    vertices = [VertexInput(f"v{i}", f"v{i}", 1, (f"v{i - 1}",) if i else ()) for i in range(len(per_subtask))]
    rates = Rates({f"v{i}": k for i, k in enumerate(per_subtask)}, {})
    config = PlannerConfig(1, top, 300)
    previous = -math.inf
    for rung in ladder(vertices, rates, config):
        capacity = rates.capacity(rung)
        if capacity > previous * (1 + 1e-9):
            # The first rung at a new capacity has the fewest subtasks that reach it (a capacity above the
            # last by rounding alone, 100 against 100.00000000000001, is the same capacity).
            cheapest = sum(max(1, math.ceil(capacity / k - 1e-9)) for k in per_subtask)
            assert sum(rung.values()) == cheapest
        assert capacity >= previous
        previous = capacity


@pytest.mark.parametrize(
    ("workload", "forecast_peak", "expected_cost", "code"),
    [
        # 6000/s on a map of 2000/s per subtask: 4 subtasks (3 leave no spare capacity to recover).
        (6000.0, 6000.0, 4, ReasonCode.SCALE_OUT),
        # A forecast peak of 9000/s asks for 5 (9000 / 2000 rounded up and above the peak).
        (6000.0, 9000.0, 5, ReasonCode.SCALE_OUT),
    ],
)
def test_daedalus_per_operator_chooses_the_cheapest_plan_that_recovers(
    workload: float, forecast_peak: float, expected_cost: int, code: ReasonCode
) -> None:
    forecast = np.full(900, workload)
    forecast[300:] = forecast_peak
    decision = DaedalusPerOperator().decide(split_job(workload=workload, forecast=forecast), CONFIG)
    assert decision.code is code, decision.reasons
    assert decision.parallelism == {"src": 1, "cost": expected_cost, "sink": 1}, decision.reasons


def test_daedalus_uniform_scales_every_vertex_together() -> None:
    decision = DaedalusPerOperator(uniform=True).decide(split_job(), CONFIG)
    assert set(decision.parallelism.values()) == {4} and decision.code is ReasonCode.SCALE_OUT


def test_daedalus_per_operator_keeps_a_plan_that_qualifies() -> None:
    decision = DaedalusPerOperator().decide(split_job(cost_parallelism=4), CONFIG)
    assert decision.code is ReasonCode.KEEP and decision.parallelism == {"src": 1, "cost": 4, "sink": 1}


def test_daedalus_per_operator_holds_a_scale_in_for_the_stabilization_window() -> None:
    config = PlannerConfig(
        1, 8, 300.0, grace_period_s=0.0, recent_rescale_window_s=0.0, scale_down_stabilization_s=600.0
    )
    job = split_job(workload=3000.0, cost_parallelism=6, recent_recommendations=Recommendations())
    decision = DaedalusPerOperator().decide(job, config)
    assert decision.parallelism == job.current and decision.desired["cost"] < 6
    assert decision.code is ReasonCode.STABILIZED


def test_daedalus_per_operator_falls_back_to_the_shortest_recovery() -> None:
    # 20 000/s cannot be carried by 8 map subtasks: no plan qualifies.
    decision = DaedalusPerOperator().decide(split_job(workload=20_000.0), CONFIG)
    assert decision.code is ReasonCode.NO_CANDIDATE and decision.parallelism["cost"] == 8


def test_daedalus_per_operator_waits_without_a_forecast() -> None:
    decision = DaedalusPerOperator().decide(split_job(forecast=None), CONFIG)
    assert decision.code is ReasonCode.UNKNOWN_DATA and not decision.acted


# ---------------------------------------------------------------------------------------------- Justin


def stateful_job(
    *,
    hit: float,
    latency_ms: float = 0.1,
    policy_state: object = None,
    memory_applies: bool = False,
    managed_mb: float = 128.0,
) -> PlanInput:
    base = split_job()
    sink = VertexInput(
        "sink",
        "window",
        1,
        ("cost",),
        metrics=rated(
            4000.0, 0.2, 1, selectivity=0.0, state_size_bytes=1e9, cache_hit_rate=hit, state_latency_ms=latency_ms
        ),
    )
    return graph_input(
        (*base.vertices[:2], sink),
        now=base.now,
        workload_avg=base.workload_avg,
        uptime_s=600.0,
        memory=MemoryProfile(managed_mb),
        memory_applies=memory_applies,
        policy_state=policy_state,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("mb", "level"), [(None, None), (0.0, None), (128.0, 0), (256.0, 1), (300.0, 1), (4096.0, 2)])
def test_level_of(mb: float | None, level: int | None) -> None:
    assert level_of(mb, min_mb=128.0, max_level=3) == level


def test_justin_strips_memory_without_state_and_recommends_on_flink_rest() -> None:
    # No stateful vertex: Justin's bottom for all, and no managed memory per slot.
    decision = JustinPerOperator().decide(split_job(), CONFIG)
    assert decision.memory is not None and decision.memory.managed_memory_per_slot_mb == 0.0
    assert set(decision.memory.levels.values()) == {None}
    assert decision.parallelism["cost"] == 3


def test_justin_trades_a_scale_out_for_memory_only_where_memory_applies() -> None:
    # The window vertex is memory-bound (hit rate 50 %) and DS2 wants to scale it out (busy 0.2 at 4000/s in,
    # 6000/s arriving -> still 1 subtask: make it want 2 by a hot vertex).
    hot = stateful_job(hit=0.5)
    sink = hot.vertices[2]
    busy_sink = VertexInput(
        sink.id,
        sink.name,
        1,
        sink.upstream,
        metrics=rated(4000.0, 0.9, 1, selectivity=0.0, state_size_bytes=1e9, cache_hit_rate=0.5, state_latency_ms=0.1),
    )
    for applies in (False, True):
        job = graph_input(
            (*hot.vertices[:2], busy_sink),
            now=hot.now,
            workload_avg=6000.0,
            uptime_s=600.0,
            memory=MemoryProfile(128.0),
            memory_applies=applies,
        )
        decision = JustinPerOperator().decide(job, CONFIG)
        assert decision.memory is not None and decision.memory.levels["sink"] == 1
        assert decision.memory.managed_memory_per_slot_mb == 256.0
        # Memory applied: the scale-out is cancelled for memory; recommended only: DS2's scale-out goes ahead.
        assert decision.parallelism["sink"] == (1 if applies else 2), decision.reasons
        assert decision.policy_state["vertices"]["sink"]["scaled_up"] is applies  # type: ignore[index]


# ---------------------------------------------------------------------------------------------- QEScalor


def test_epoch_peaks() -> None:
    assert epoch_peaks(np.arange(150.0), epoch_s=60) == [59.0, 119.0, 149.0]


def test_qescalor_plans_by_cost_and_asks_to_sample_a_second_profile() -> None:
    decision = QescalorPerOperator().decide(split_job(memory=MemoryProfile(128.0)), CONFIG)
    assert decision.parallelism["cost"] == 3 and decision.parallelism["src"] == 1
    assert decision.profile is not None and decision.profile.exploring
    assert decision.profile.managed_memory_per_slot_mb == 256.0
    samples = decision.policy_state["profiles"]  # type: ignore[index]
    assert len(samples) == 1 and samples[0]["memory_mb"] == 128.0


def test_qescalor_models_profiles_once_two_were_sampled() -> None:
    # 128 MB gave 2000/s per map subtask, 256 MB gave 4000/s: twice the performance for a little more price.
    state = {
        "profiles": [
            {"cpu": 1.0, "memory_mb": 128.0, "performance": 2000.0, "count": 5},
            {"cpu": 1.0, "memory_mb": 256.0, "performance": 4000.0, "count": 5},
        ]
    }
    decision = QescalorPerOperator().decide(split_job(memory=MemoryProfile(256.0), policy_state=state), CONFIG)
    assert decision.profile is not None and not decision.profile.exploring
    assert decision.profile.managed_memory_per_slot_mb >= 256.0


def test_qescalor_keeps_subtasks_that_the_next_epochs_need_again() -> None:
    # A dip to 2000/s for one epoch between 6000/s epochs: restarting a subtask costs more than running it.
    forecast = np.full(900, 6000.0)
    forecast[:60] = 2000.0
    config = replace(CONFIG, startup_cost=5.0, shutdown_cost=5.0)
    decision = QescalorPerOperator().decide(split_job(workload=2000.0, cost_parallelism=3, forecast=forecast), config)
    assert decision.parallelism["cost"] == 3, decision.reasons


# ---------------------------------------------------------------------------------------------- registry


def test_every_per_operator_policy_is_registered_and_runs_in_production() -> None:
    for name in ("ds2", "daedalus-per-operator", "justin", "qescalor"):
        assert name in registry.per_vertex() and name in registry.production()
        assert registry.spec(name).vertex_policy().name == name
    with pytest.raises(KeyError, match="known"):
        registry.spec("hpa").vertex_policy()
