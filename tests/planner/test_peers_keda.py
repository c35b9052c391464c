"""The KEDA Kafka-scaler peer: committed-offset lag, the threshold per replica, the partition cap.

Each case names the upstream scenario (kedacore/keda ``kafka_scaler_test.go`` and the scaler's
documented behaviour) it mirrors; the numbers are ours.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.hpa import HpaCode
from planner.keda import (
    KafkaTrigger,
    KedaInputs,
    KedaPolicy,
    KedaState,
    OffsetResetPolicy,
    PartitionOffsets,
    find_factors,
    next_balanced_factor,
    total_lag,
)


def partitions(*lags: int | None, end: int = 10_000) -> list[PartitionOffsets]:
    """Partitions whose committed offset trails the log end by these lags (None: nothing committed)."""
    return [PartitionOffsets(end, None if lag is None else end - lag) for lag in lags]


# --- the lag metric (getTotalLag / getLagForPartition) -------------------------------------------


@pytest.mark.parametrize(
    ("lags", "trigger", "expected"),
    [
        # Lag is log end minus the committed offset, summed over partitions.
        ((100, 200, 300), KafkaTrigger(lag_threshold=1000), 600),
        # Capped so that no more consumers than partitions are asked for: 3 x 100.
        ((1000, 1000, 1000), KafkaTrigger(lag_threshold=100), 300),
        # The cap compares whole thresholds (integer division): 399 // 100 = 3 is not above 3
        # partitions, so 399 passes uncapped and the HPA will ask for 4 replicas.
        ((133, 133, 133), KafkaTrigger(lag_threshold=100), 399),
        # allowIdleConsumers lifts the cap.
        ((1000, 1000, 1000), KafkaTrigger(lag_threshold=100, allow_idle_consumers=True), 3000),
        # limitToPartitionsWithLag caps at the partitions that have lag: 2 x 100.
        ((1000, 1000, 0), KafkaTrigger(lag_threshold=100, limit_to_partitions_with_lag=True), 200),
        # ensureEvenDistributionOfPartitions rounds up to a divisor of the 6 partitions: 250 needs
        # 3 x 100 (3 divides 6).
        ((50, 50, 50, 50, 50, 0), KafkaTrigger(lag_threshold=100, ensure_even_distribution_of_partitions=True), 300),
        # No committed offset yet, offsetResetPolicy latest: each such partition counts as lag 1.
        ((None, None, 5), KafkaTrigger(lag_threshold=100), 7),
        # ... or 0 with scaleToZeroOnInvalidOffset.
        ((None, None, 5), KafkaTrigger(lag_threshold=100, scale_to_zero_on_invalid_offset=True), 5),
        # ... and the whole log with offsetResetPolicy earliest (uncapped with idle consumers allowed).
        (
            (None, 5),
            KafkaTrigger(lag_threshold=100, offset_reset_policy=OffsetResetPolicy.EARLIEST, allow_idle_consumers=True),
            10_005,
        ),
    ],
)
def test_total_lag(lags, trigger: KafkaTrigger, expected: int) -> None:
    lag, _ = total_lag(partitions(*lags), trigger, {})
    assert lag.total_lag == expected


def test_excluded_persistent_lag_needs_a_committed_offset_that_moved() -> None:
    # excludePersistentLag: a partition whose committed offset did not move since the scaler's last
    # query is left out (its lag still counts for activity). On Flink that is every partition between
    # two checkpoints.
    trigger = KafkaTrigger(lag_threshold=100, exclude_persistent_lag=True, allow_idle_consumers=True)
    first, previous = total_lag(partitions(300, 300), trigger, {})
    assert first.total_lag == 600
    second, previous = total_lag(partitions(300, 300), trigger, previous)
    assert (second.total_lag, second.total_lag_with_persistent) == (0, 600)
    moved = [PartitionOffsets(10_500, 10_200), PartitionOffsets(10_000, 9_700)]
    third, _ = total_lag(moved, trigger, previous)
    assert third.total_lag == 300  # only the partition that committed again


@pytest.mark.parametrize(
    ("n", "expected"),
    [(36, [1, 2, 3, 4, 6, 9, 12, 18, 36]), (7, [1, 7]), (1, [1]), (0, [])],
)
def test_find_factors(n: int, expected: list[int]) -> None:
    # TestFindFactors, with our numbers.
    assert find_factors(n) == expected


@pytest.mark.parametrize(
    ("lag", "expected"),
    [(5, 1), (25, 3), (40, 4), (41, 6), (361, 36)],
)
def test_next_balanced_factor(lag: int, expected: int) -> None:
    # TestGetNextFactor, with 36 partitions and a threshold of 10.
    assert next_balanced_factor(lag, 36, 10) == expected


def test_trigger_metadata_is_validated() -> None:
    # kafka_scaler_test parse cases: the options that cannot be combined, and a positive threshold.
    with pytest.raises(ValueError, match="lagThreshold"):
        KafkaTrigger(lag_threshold=0)
    with pytest.raises(ValueError, match="allowIdleConsumers and limitToPartitionsWithLag"):
        KafkaTrigger(allow_idle_consumers=True, limit_to_partitions_with_lag=True)
    with pytest.raises(ValueError, match="limitToPartitionsWithLag and ensureEvenDistribution"):
        KafkaTrigger(limit_to_partitions_with_lag=True, ensure_even_distribution_of_partitions=True)


# --- through the HPA ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "lags", "threshold", "expected"),
    [
        # 4 partitions x 100 lag = 400 at a threshold of 100 per replica, 2 replicas: ratio 2 -> 4.
        (2, (100, 100, 100, 100), 100, 4),
        # 380 over 4 replicas is 0.95 of the target per replica: within the tolerance, kept.
        (4, (95, 95, 95, 95), 100, 4),
        # The partition cap: 36 partitions, any large lag -> 36 replicas (from 18, under 2 x 18).
        (18, (10**6,) * 36, 100, 36),
        # The integer-division quirk lets one replica more than partitions through: 399 -> 4 > 3.
        (3, (133, 133, 133), 100, 4),
    ],
)
def test_replicas_from_the_committed_lag(current: int, lags, threshold: int, expected: int) -> None:
    decision = KedaPolicy(threshold).decide(
        KedaInputs(now=0.0, current_replicas=current, partitions=partitions(*lags)), KedaState()
    )
    assert decision.target_parallelism == expected


def test_flink_commits_only_at_checkpoints_so_a_job_that_keeps_up_shows_lag() -> None:
    # The job reads 500 records/s per partition and is at the log end, but its group offsets are
    # those of the checkpoint 60 s ago: KEDA sees 30,000 of lag per partition and scales out.
    end = 1_000_000
    keeping_up = [PartitionOffsets(end, end - 500 * 60) for _ in range(4)]
    decision = KedaPolicy(50_000).decide(KedaInputs(now=0.0, current_replicas=2, partitions=keeping_up), KedaState())
    assert decision.desired_parallelism == 3  # 120,000 / 50,000 -> 3
    # Right after the next checkpoint the committed lag is gone and the HPA wants 1, held by the
    # 300-s stabilization window.
    caught_up = [PartitionOffsets(end, end) for _ in range(4)]
    later = KedaPolicy(50_000).decide(KedaInputs(now=15.0, current_replicas=3, partitions=caught_up), decision.state)
    assert (later.desired_parallelism, later.target_parallelism) == (0, 3)
    assert later.code == HpaCode.SCALE_DOWN_STABILIZED


def test_cached_metrics_serve_the_last_poll_until_the_polling_interval_passes() -> None:
    # useCachedMetrics: the HPA's request within 30 s of the last poll gets the polled lag.
    policy = KedaPolicy(100, use_cached_metrics=True)
    first = policy.decide(KedaInputs(now=0.0, current_replicas=2, partitions=partitions(*[25] * 8)), KedaState())
    assert first.target_parallelism == 2
    cached = policy.decide(KedaInputs(now=15.0, current_replicas=2, partitions=partitions(*[100] * 8)), first.state)
    assert cached.target_parallelism == 2
    fresh = policy.decide(KedaInputs(now=30.0, current_replicas=2, partitions=partitions(*[100] * 8)), cached.state)
    assert fresh.target_parallelism == 4  # 800 / 100 = 8 wanted, legacy limit max(2 x 2, 4) = 4


def test_the_average_value_divides_by_the_running_pods() -> None:
    # computeStatusForExternalMetric passes the scale's status replicas: 2 of 4 pods running, 420 of
    # lag (6 partitions x 70) at 100 per replica is 2.1 per running pod: outside the tolerance ->
    # ceil(4.2) = 5.
    decision = KedaPolicy(100).decide(
        KedaInputs(now=0.0, current_replicas=4, partitions=partitions(*[70] * 6), status_replicas=2, max_replicas=10),
        KedaState(),
    )
    assert decision.desired_parallelism == 5


def test_state_round_trips_through_json() -> None:
    policy = KedaPolicy(100, use_cached_metrics=True, trigger_options={"exclude_persistent_lag": True})
    state = policy.decide(KedaInputs(now=0.0, current_replicas=2, partitions=partitions(100, None)), KedaState()).state
    assert KedaState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


@settings(max_examples=200, deadline=None)
@given(
    lags=st.lists(st.one_of(st.none(), st.integers(0, 10**7)), min_size=1, max_size=40),
    threshold=st.integers(1, 10**5),
    current=st.integers(1, 50),
)
def test_without_idle_consumers_never_more_than_one_replica_over_the_partitions(lags, threshold, current) -> None:
    decision = KedaPolicy(threshold).decide(
        KedaInputs(now=0.0, current_replicas=current, partitions=partitions(*lags, end=10**8), max_replicas=1000),
        KedaState(),
    )
    # The metric is capped at whole thresholds per partition, so at most partitions + 1 are wanted.
    assert decision.desired_parallelism <= max(len(lags) + 1, current)
    assert 1 <= decision.target_parallelism <= 1000
