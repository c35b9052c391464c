"""The Kubernetes HPA peer: the replica calculator, tolerance, stabilization, scale-up limits.

Each case names the upstream scenario (kubernetes ``replica_calculator_test.go`` /
``horizontal_test.go``) it mirrors; pods request 1 core unless said otherwise.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.hpa import (
    HpaBehavior,
    HpaCode,
    HpaInputs,
    HpaState,
    KubernetesHpaPolicy,
    PodMetric,
    TimedValue,
    cpu_sample_is_unready,
    resource_replicas,
)


def pods(*levels: float | None, unready: tuple[int, ...] = (), pending: tuple[int, ...] = ()) -> list[PodMetric]:
    """Pods at these CPU fractions of their 1-core request (None: no metric)."""
    return [PodMetric(cpu_usage=level, ready=i not in unready, pending=i in pending) for i, level in enumerate(levels)]


# --- the replica calculator ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "pod_list", "target", "expected"),
    [
        # TestReplicaCalcScaleUp: 30/50/70 % of a 30 % target -> 50 % mean -> ceil(1.67 x 3) = 5.
        (3, pods(0.3, 0.5, 0.7), 30, 5),
        # TestReplicaCalcScaleUpUnreadyLessScale: the unready pod's CPU is left out (60 % over two),
        # then counted as 0 % on the way up: 40 % over three -> ceil(1.33 x 3) = 4.
        (3, pods(0.3, 0.5, 0.7, unready=(0,)), 30, 4),
        # TestReplicaCalcScaleUpUnreadyNoScale: one ready pod at 40 % asks for more, but with the two
        # unready ones at 0 % the mean is 13 %: the direction flips, so the replicas stay.
        (3, pods(0.4, 0.5, 0.7, unready=(1, 2)), 30, 3),
        # A pending pod is unready too.
        (3, pods(0.3, 0.5, 0.7, pending=(0,)), 30, 4),
        # TestReplicaCalcScaleDown-style: 10 % over 5 pods at a 50 % target -> ceil(0.2 x 5) = 1.
        (5, pods(0.1, 0.1, 0.1, 0.1, 0.1), 50, 1),
        # ...MissingMetricsScaleDown-style: a pod without a metric counts as 100 % on a scale-down:
        # (3 x 10 + 100) / 4 = 32 % -> 0.64 -> ceil(2.56) = 3, not 1.
        (4, pods(0.1, 0.1, 0.1, None), 50, 3),
        # ...MissingMetricsScaleUp-style: counted as 0 % on a scale-up: 2 x 100 / 4 = 50 %, right on
        # target: the replicas stay (plain it would have been 4 x 2 = 8 wanted).
        (4, pods(1.0, 1.0, None, None), 50, 4),
        # TestReplicaCalcTolerance-style: 54 % of 50 % is a ratio of 1.08, within 0.1.
        (4, pods(0.54, 0.54, 0.54, 0.54), 50, 4),
        # 56 % -> 1.12 -> ceil(4.48) = 5.
        (4, pods(0.56, 0.56, 0.56, 0.56), 50, 5),
        # Utilization is an integer percent: 999m of 3000m is 33 %, a ratio of exactly 1.1 at a 30 %
        # target (kept), where 33.3 % would have been 1.11 (scaled).
        (3, pods(0.333, 0.333, 0.333), 30, 3),
    ],
)
def test_replica_calculator(current: int, pod_list: list[PodMetric], target: int, expected: int) -> None:
    replicas, _ = resource_replicas(current, pod_list, target)
    assert replicas == expected


def test_no_ready_pod_with_a_metric_is_an_error_and_the_hpa_keeps_its_replicas() -> None:
    # TestReplicaCalcEmptyMetrics-style: the HPA cannot compute and does not rescale.
    with pytest.raises(ValueError, match="did not receive metrics"):
        resource_replicas(2, pods(0.9, 0.9, unready=(0, 1)), 50)
    decision = KubernetesHpaPolicy().decide(
        HpaInputs(now=0.0, current_replicas=2, pods=pods(0.9, 0.9, unready=(0, 1))), HpaState()
    )
    assert (decision.code, decision.target_parallelism) == (HpaCode.FAILED_GET_METRICS, 2)


@pytest.mark.parametrize(
    ("start", "ready", "transition", "metric_time", "now", "expected"),
    [
        # groupPods: within the 5-min CPU initialization period, a Ready pod's sample counts only once a
        # whole metric window (here 30 s) has been collected since it became Ready.
        (0.0, True, 60.0, 80.0, 80.0, True),
        (0.0, True, 60.0, 90.0, 90.0, False),
        (0.0, False, 60.0, 90.0, 90.0, True),
        # After it, an unready pod is left out only if it never was Ready (its last transition came
        # within the 30 s initial readiness delay) ...
        (0.0, False, 20.0, 400.0, 400.0, True),
        # ... a pod that was Ready and then failed its probe still counts (TestGroupPods).
        (0.0, False, 200.0, 400.0, 400.0, False),
    ],
)
def test_which_cpu_samples_count(start, ready, transition, metric_time, now, expected) -> None:
    got = cpu_sample_is_unready(
        now=now,
        pod_start=start,
        ready=ready,
        ready_transition=transition,
        metric_time=metric_time,
        metric_window_s=30.0,
    )
    assert got is expected


# --- the controller: stabilization and limits ----------------------------------------------------


def run(policy: KubernetesHpaPolicy, levels_by_time: list[tuple[float, float]], *, current: int, n_max: int = 20):
    """Sync at each (time, CPU of every pod); the job follows the HPA at once. Returns the decisions."""
    state = policy.initial_state()
    out = []
    for now, cpu in levels_by_time:
        decision = policy.decide(
            HpaInputs(
                now=now, current_replicas=current, pods=pods(*([cpu] * current)), min_replicas=1, max_replicas=n_max
            ),
            state,
        )
        out.append((now, current, decision))
        state = decision.state
        current = decision.target_parallelism
    return out


def test_scale_down_waits_for_the_stabilization_window_and_takes_its_highest_recommendation() -> None:
    # horizontal_test.go TestNormalizeDesiredReplicas / TestScaleDownStabilizeInitialSize: a new HPA
    # starts by recommending the current 10. Then CPU at 10 replicas asks for 6 (48 % of 80 %) until
    # 90 s, for 8 at 105 s (64 %), and for 5 from 120 s (40 %).
    timeline = [(t, 0.48 if t <= 90 else 0.64 if t == 105 else 0.40) for t in range(0, 601, 15)]
    decisions = {now: (current, d) for now, current, d in run(KubernetesHpaPolicy(), timeline, current=10)}
    # Until 300 s the initial 10 is inside the window: no scale-down.
    assert all(decisions[t][1].target_parallelism == 10 for t in range(0, 301, 15))
    assert decisions[15][1].code == HpaCode.SCALE_DOWN_STABILIZED
    # At 315 s the window (15..315 s) holds 6, 8 and 5s: the highest, 8, wins.
    assert decisions[315][1].target_parallelism == 8
    # At 8 replicas 40 % asks for 4, but the window still holds the 8 of 105 s until 420 s (a
    # recommendation exactly 300 s old still counts), then the 5s of 120-300 s are the highest.
    assert decisions[405][1].target_parallelism == 8
    assert decisions[420][1].target_parallelism == 5


def test_legacy_scale_up_limit_is_twice_the_replicas_or_four() -> None:
    # TestScaleUpLimit / calculateScaleUpLimit: 2 replicas at 100 % of a 10 % target want 20,
    # get max(2 x 2, 4) = 4; at 10 replicas the limit is 20.
    policy = KubernetesHpaPolicy(target_cpu=0.1)
    first = policy.decide(HpaInputs(now=0.0, current_replicas=2, pods=pods(1.0, 1.0), max_replicas=100), HpaState())
    assert (first.target_parallelism, first.desired_parallelism, first.code) == (4, 20, HpaCode.SCALE_UP_LIMIT)
    ten = policy.decide(HpaInputs(now=0.0, current_replicas=10, pods=pods(*[1.0] * 10), max_replicas=100), HpaState())
    assert ten.target_parallelism == 20


def test_max_replicas_bounds_the_scale_up() -> None:
    decision = KubernetesHpaPolicy(target_cpu=0.1).decide(
        HpaInputs(now=0.0, current_replicas=10, pods=pods(*[1.0] * 10), max_replicas=12), HpaState()
    )
    assert (decision.target_parallelism, decision.code) == (12, HpaCode.TOO_MANY_REPLICAS)


def test_behavior_defaults_allow_four_pods_or_double_per_fifteen_seconds() -> None:
    # TestScaleUpRCImmediately / calculateScaleUpLimitWithScalingRules with the API defaults.
    policy = KubernetesHpaPolicy(target_cpu=0.1, behavior=HpaBehavior.defaults())
    state = HpaState()
    first = policy.decide(HpaInputs(now=0.0, current_replicas=2, pods=pods(1.0, 1.0), max_replicas=100), state)
    assert first.target_parallelism == 6  # max(2 + 4, 2 x 2)
    # Ten seconds later the +4 is still inside the 15-s period: no room left.
    again = policy.decide(HpaInputs(now=10.0, current_replicas=6, pods=pods(*[1.0] * 6), max_replicas=100), first.state)
    assert (again.target_parallelism, again.code) == (6, HpaCode.SCALE_UP_LIMIT)
    # At 15 s the event is exactly a period old and no longer counts: max(6 + 4, 12) = 12.
    later = policy.decide(HpaInputs(now=15.0, current_replicas=6, pods=pods(*[1.0] * 6), max_replicas=100), again.state)
    assert later.target_parallelism == 12


def test_behavior_scale_down_is_stabilized_for_300_s() -> None:
    policy = KubernetesHpaPolicy(behavior=HpaBehavior.defaults())
    timeline = [(float(t), 0.2) for t in range(0, 331, 15)]
    decisions = {now: d for now, _, d in run(policy, timeline, current=8)}
    # 20 % of 80 % at 8 replicas wants 2; the initial recommendation of 8 holds while it is newer than
    # 300 s. The behavior window counts recommendations strictly newer than now - 300 s, so at 300 s
    # it has gone (the legacy window still counts one exactly 300 s old, see above: 8 -> 5 at 420 s).
    assert decisions[285.0].target_parallelism == 8
    assert decisions[300.0].target_parallelism == 2


def test_current_replicas_outside_the_bounds_are_brought_back_without_stabilization() -> None:
    decision = KubernetesHpaPolicy().decide(
        HpaInputs(now=0.0, current_replicas=30, pods=pods(*[0.8] * 30), max_replicas=20), HpaState()
    )
    assert (decision.target_parallelism, decision.code) == (20, HpaCode.TOO_MANY_REPLICAS)


def test_state_round_trips_through_json() -> None:
    state = HpaState((TimedValue(1.0, 3), TimedValue(16.0, 5)), (TimedValue(16.0, 2),), ())
    assert HpaState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


# --- properties ----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.floats(0.0, 4.0), st.integers(0, 3), st.booleans()),
        min_size=1,
        max_size=40,
    ),
    start=st.integers(1, 30),
    bounds=st.tuples(st.integers(1, 30), st.integers(1, 30)).map(sorted),
    target=st.sampled_from([0.3, 0.5, 0.8]),
    with_behavior=st.booleans(),
)
def test_never_beyond_the_scale_up_limit_and_always_within_bounds(steps, start, bounds, target, with_behavior) -> None:
    low, high = bounds
    current = min(max(start, low), high)
    policy = KubernetesHpaPolicy(target_cpu=target, behavior=HpaBehavior.defaults() if with_behavior else None)
    state = policy.initial_state()
    additions: list[tuple[float, int]] = []
    for i, (cpu, unready, missing) in enumerate(steps):
        now = 15.0 * i
        pod_list = [
            PodMetric(cpu_usage=None if (missing and k == 0) else cpu, ready=k >= unready) for k in range(current)
        ]
        decision = policy.decide(
            HpaInputs(now=now, current_replicas=current, pods=pod_list, min_replicas=low, max_replicas=high), state
        )
        target_replicas = decision.target_parallelism
        assert low <= target_replicas <= high
        if with_behavior:
            # Per 15-s period: at most +4 pods or double the replicas at the period's start.
            added = sum(n for t, n in additions if t > now - 15.0)
            period_start = current - added
            assert target_replicas <= max(period_start + 4, 2 * period_start, current)
        else:
            assert target_replicas <= max(2 * current, 4, current)
        if target_replicas > current:
            additions.append((now, target_replicas - current))
        state = decision.state
        current = target_replicas
    json.dumps(state.to_dict(), allow_nan=False)
