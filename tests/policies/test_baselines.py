"""HPA and KEDA-lag: the replica formula, the tolerance, the partition cap and the stabilization window."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import HpaPolicy, KedaLagPolicy
from planner.baselines import hpa_replicas, keda_lag_replicas
from tests.policies.conftest import CONFIG, snapshot


@pytest.mark.parametrize(
    ("current", "metric", "target", "expected"),
    [
        (4, 0.90, 0.80, 5),  # ratio 1.125: ceil(4.5) = 5 (the Kubernetes docs' scale-up case)
        (4, 0.85, 0.80, 4),  # ratio 1.0625 is within the 0.1 tolerance: no change
        (4, 0.72, 0.80, 4),  # ratio 0.9, exactly at the tolerance: no change
        (4, 0.70, 0.80, 4),  # ratio 0.875 outside the tolerance: ceil(3.5) = 4
        (4, 0.40, 0.80, 2),  # half the target: half the replicas
        (3, 1.00, 0.80, 4),  # saturated: ceil(3.75) = 4
        (10, 0.05, 0.80, 1),  # idle: ceil(0.625) = 1
        (1, 2.00, 0.50, 4),  # the docs' "200m used, 100m target" doubling, from 1 replica at 4x
    ],
)
def test_hpa_replica_formula_with_tolerance(current: int, metric: float, target: float, expected: int) -> None:
    assert hpa_replicas(current, metric, target) == expected


@given(
    current=st.integers(1, 200),
    metric=st.floats(0.0, 5.0, allow_nan=False),
    target=st.floats(0.05, 1.0, allow_nan=False),
)
def test_hpa_formula_is_ceil_outside_the_tolerance_and_current_inside(current: int, metric: float, target: float) -> None:
    ratio = metric / target
    got = hpa_replicas(current, metric, target)
    if abs(ratio - 1.0) <= 0.1:
        assert got == current
    else:
        exact = current * ratio
        assert got in (math.ceil(exact), math.ceil(exact - 1e-9))
        assert got >= exact - 1e-6


@pytest.mark.parametrize(
    ("current", "lag", "threshold", "partitions", "expected"),
    [
        (2, 250_000, 50_000, 36, 5),  # ceil(250k / 50k) = 5
        (2, 260_000, 50_000, 36, 6),  # ceil(5.2) = 6
        (5, 240_000, 50_000, 36, 5),  # 0.96 of the target per replica: within the tolerance
        (2, 10_000_000, 50_000, 36, 36),  # 200 replicas wanted, capped at the partition count
        (2, 10_000_000, 50_000, None, 200),  # no partition count known: no cap
        (4, 0, 50_000, 36, 0),  # no lag: KEDA asks for zero (the planner bounds it at min)
    ],
)
def test_keda_lag_replicas_and_partition_cap(
    current: int, lag: float, threshold: float, partitions: int | None, expected: int
) -> None:
    assert keda_lag_replicas(current, lag, threshold, partitions=partitions) == expected


def test_keda_idle_consumers_lift_the_cap() -> None:
    assert keda_lag_replicas(2, 10_000_000, 50_000, partitions=36, allow_idle_consumers=True) == 200


def test_hpa_policy_scales_out_at_once() -> None:
    decision = HpaPolicy().decide(snapshot(current=4, cpu=1.0), CONFIG)
    assert decision.target_parallelism == 5
    assert "hpa: ceil(4 x 100% / 80%) = 5" in decision.reasons[0]


def test_hpa_scale_in_waits_for_the_300_s_window() -> None:
    now = 10_000.0
    # Wanted 6 two minutes ago: the highest recommendation of the last 300 s wins.
    history = ((now - 360, 4), (now - 300, 4), (now - 120, 6), (now - 60, 2))
    decision = HpaPolicy().decide(snapshot(current=6, cpu=0.2, now=now, history=history), CONFIG)
    assert decision.desired_parallelism == 2
    assert decision.target_parallelism == 6
    # Five minutes later only low recommendations remain in the window: scale in.
    later = ((now - 360, 2), (now - 300, 2), (now - 120, 2), (now - 60, 2))
    decision = HpaPolicy().decide(snapshot(current=6, cpu=0.2, now=now, history=later), CONFIG)
    assert decision.target_parallelism == 2


def test_hpa_waits_out_the_grace_period_but_not_a_recovery() -> None:
    held = HpaPolicy().decide(snapshot(cpu=1.0, last_rescale_at=10_000.0 - 60), CONFIG)
    assert held.target_parallelism == 4 and not held.acted
    # An under-provisioned job never "recovers"; a reactive HPA must still scale it out.
    acting = HpaPolicy().decide(snapshot(cpu=1.0, recovering=True), CONFIG)
    assert acting.target_parallelism == 5


def test_hpa_keeps_the_current_scale_out_without_cpu() -> None:
    decision = HpaPolicy().decide(snapshot(cpu=None), CONFIG)
    assert decision.target_parallelism == 4 and not decision.acted


def test_keda_policy_caps_at_partitions_and_max() -> None:
    config = CONFIG.__class__(**{**CONFIG.__dict__, "max_parallelism": 40, "source_partitions": 36})
    decision = KedaLagPolicy(lag_threshold=50_000).decide(snapshot(current=4, lag=1e9), config)
    assert decision.target_parallelism == 36
    decision = KedaLagPolicy(lag_threshold=50_000).decide(snapshot(current=4, lag=1e9), CONFIG)
    assert decision.target_parallelism == 16  # max_parallelism below the partition count


def test_keda_policy_with_no_lag_goes_to_min_after_the_window() -> None:
    now = 10_000.0
    history = ((now - 400, 1), (now - 300, 1), (now - 60, 1))
    decision = KedaLagPolicy().decide(snapshot(current=4, lag=0, now=now, history=history), CONFIG)
    assert decision.target_parallelism == CONFIG.min_parallelism
