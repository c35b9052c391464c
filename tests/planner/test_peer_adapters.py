"""The peers behind the Policy protocol: inputs read off a PlanInput, state carried round to round as JSON."""

from __future__ import annotations

import json

from planner import SPECS, PlanInput, PlannerConfig
from planner.peers import Ds2, FlinkAutoscaler, Hpa, KedaLag
from planner.types import Decision, ReasonCode

CONFIG = PlannerConfig(min_parallelism=1, max_parallelism=16, target_recovery_time_s=300, source_partitions=36)


def rounds(policy: object, inputs: list[PlanInput], state: dict[str, object] | None = None) -> list[Decision]:
    """Decide every input in turn, handing each round the state the previous one returned (through JSON)."""
    decisions: list[Decision] = []
    for plan_input in inputs:
        plan_input = PlanInput(**{**plan_input.__dict__, "policy_state": state})
        decision = policy.decide(plan_input, CONFIG)  # type: ignore[attr-defined]
        state = json.loads(json.dumps(decision.policy_state)) if decision.policy_state is not None else state
        decisions.append(decision)
    return decisions


def steady(
    now: float,
    *,
    current: int = 4,
    busy: float = 0.95,
    rate: float = 40_000,
    lag: float = 0.0,
    uptime: float | None = None,
    cpu: float = 0.9,
) -> PlanInput:
    workers = {f"taskmanager-{i}": rate / current for i in range(current)}
    return PlanInput(
        now=now,
        current_parallelism=current,
        workload_avg=rate,
        forecast=None,
        consumer_lag=lag,
        capacities={},
        recovery_times={},
        worker_throughput=workers,
        worker_cpu={w: cpu for w in workers},
        worker_busy={w: busy for w in workers},
        source_rate=rate,
        uptime_s=now if uptime is None else uptime,
        job_running=True,
        partition_offsets=tuple((1_000_000, 1_000_000 - int(lag / 36)) for _ in range(36)),
    )


def test_the_flink_autoscaler_waits_out_stabilization_and_its_window_then_scales_out_on_busy_time() -> None:
    # A job that started at 0 s, saturated (100 % busy) at 4 workers with a backlog: nothing for 5 min of
    # stabilization plus the 15 min metric window, then one scale-out sized by the true rate (10k/s per
    # worker) for the input at utilization 0.7 plus the catch-up: factor 1.62, ceil(6.5) = 7, aligned to 8.
    policy = FlinkAutoscaler()
    decisions = rounds(policy, [steady(t, busy=1.0, lag=2_000_000) for t in range(15, 1500, 15)])
    first = next(i for i, d in enumerate(decisions) if d.target_parallelism != 4)
    assert 15 * (first + 1) >= 20 * 60, "acted before stabilization + window"
    assert decisions[first].code is ReasonCode.SCALE_OUT
    assert decisions[first].target_parallelism == 8
    # At 95 % busy without a backlog the true rate sits inside the 0.4 ... 1.0 band: no action at all.
    calm = rounds(policy, [steady(t, busy=0.95) for t in range(15, 1500, 15)])
    assert {d.target_parallelism for d in calm} == {4}


def test_the_flink_autoscaler_state_survives_a_restart_of_the_agent() -> None:
    policy = FlinkAutoscaler()
    inputs = [steady(t, busy=1.0, lag=2_000_000) for t in range(15, 1500, 15)]
    straight = rounds(policy, inputs)
    # The same rounds, split in two with the state written to JSON and read back in between.
    first_half = rounds(policy, inputs[:40])
    carried = first_half[-1].policy_state
    resumed = rounds(policy, inputs[40:], state=json.loads(json.dumps(carried)))
    assert [d.target_parallelism for d in resumed] == [d.target_parallelism for d in straight[40:]]
    assert resumed[-1].policy_state == straight[-1].policy_state


def test_the_hpa_scales_out_at_most_to_twice_or_plus_four_per_sync() -> None:
    # Every pod at 100 % CPU with a target of 20 % asks for 20 replicas; the legacy limit allows max(2x4, 4+... )= 8.
    decisions = rounds(Hpa(target_cpu=0.2), [steady(15.0, cpu=1.0)])
    assert decisions[0].target_parallelism == 8 and decisions[0].code is ReasonCode.SCALE_OUT


def test_the_hpa_counts_pods_of_a_restarting_job_as_unready() -> None:
    down = PlanInput(**{**steady(15.0, cpu=1.0).__dict__, "uptime_s": 0.0, "job_running": False})
    decision = Hpa(target_cpu=0.2).decide(down, CONFIG)
    assert decision.target_parallelism == 4, "no CPU from pods of a job that is down: no scale-out on it"


def test_keda_asks_for_the_committed_lag_over_the_threshold_capped_at_the_partitions() -> None:
    # 36 partitions, 3,600,000 records committed-behind in all: 72 replicas at 50k each, capped at 36, then max 16.
    decision = KedaLag(lag_threshold=50_000).decide(steady(15.0, lag=3_600_000), CONFIG)
    assert decision.target_parallelism == 8  # the HPA's legacy scale-up limit from 4
    assert decision.desired_parallelism >= 8


def test_keda_without_offsets_holds() -> None:
    plan_input = PlanInput(**{**steady(15.0).__dict__, "partition_offsets": None})
    decision = KedaLag().decide(plan_input, CONFIG)
    assert decision.code is ReasonCode.UNKNOWN_DATA and decision.target_parallelism == 4


def test_ds2_warms_up_three_intervals_then_sizes_by_true_rates() -> None:
    # 4 workers each processing 15k/s at 50 % useful time: 30k/s true each; the 60k/s read and arriving
    # needs 2 (a scale-in by 2, which DS2 does not dismiss as noise).
    inputs = [steady(10.0 * k, busy=0.5, rate=60_000) for k in range(1, 6)]
    decisions = rounds(Ds2(), inputs)
    assert [d.target_parallelism for d in decisions[:3]] == [4, 4, 4]
    assert decisions[3].target_parallelism == 2 and decisions[3].code is ReasonCode.SCALE_IN
    # When the source reads less than arrives (a backlog builds), the paper's final adjustment scales up.
    short = [
        PlanInput(**{**steady(10.0 * k, busy=0.5, rate=40_000).__dict__, "workload_avg": 60_000.0}) for k in range(1, 6)
    ]
    assert rounds(Ds2(), short)[3].target_parallelism == 5  # ceil(60k/20k) x 60/40


def test_every_policy_declares_its_forecast_use_and_sync_period() -> None:
    policies = {name: spec.policy() for name, spec in SPECS.items() if not spec.vertex_only}
    for name, policy in policies.items():
        assert isinstance(policy.uses_forecast, bool), name
        assert policy.sync_interval_s is None or policy.sync_interval_s > 0, name
    assert not policies["flink-autoscaler"].uses_forecast and policies["daedalus"].uses_forecast
