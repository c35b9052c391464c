"""KEDA's Kafka scaler driving the Kubernetes HPA, on a Flink job's consumer-group lag.

Followed source: kedacore/keda snapshot 8b4f083ca8c8c2baf8477e322bd4d16ac4dfa09a (main, August 2026):

* ``pkg/scalers/kafka_scaler.go``: trigger metadata and defaults (lines 66-74: ``lagThreshold`` 10,
  ``activationLagThreshold`` 0, ``offsetResetPolicy`` latest, ``allowIdleConsumers``,
  ``excludePersistentLag``, ``scaleToZeroOnInvalidOffset``, ``limitToPartitionsWithLag``,
  ``ensureEvenDistributionOfPartitions`` all false), their validation (116-146), the lag of a
  partition from the group's committed offset (``getLagForPartition`` 631-711: no committed offset
  counts as lag 1 with ``latest``), the total and its cap (``getTotalLag`` 801-852: unless idle
  consumers are allowed, ``totalLag / lagThreshold`` is capped at the partition count with integer
  division, so the cap lets one replica more through when the remainder is non-zero;
  ``getNextFactorThatBalancesConsumersToTopicPartitions`` 854-862), and the metric spec
  (``GetMetricSpecForScaling`` 733-749: an external metric, ``AverageValue`` = ``lagThreshold``;
  ``pkg/scalers/scaler.go`` ``GetMetricTargetType`` 101-111).
* ``apis/keda/v1alpha1/withtriggers_types.go`` 51 (``pollingInterval`` 30 s),
  ``scaledobject_types.go`` 96-97 (HPA min 1, max 100), ``controllers/keda/hpa.go`` 79-83 (the HPA
  gets ``advanced.horizontalPodAutoscalerConfig.behavior``, nil by default, so the legacy HPA
  limits apply), ``pkg/scaling/scale_handler.go`` 772-787 (the metrics adapter asks the scaler
  afresh on every HPA request unless the trigger sets ``useCachedMetrics``, then it serves the
  value of the last poll).
* the HPA side: ``GetExternalPerPodMetricReplicas`` (``replica_calculator.go``, called with the
  scale's status replicas by ``computeStatusForExternalMetric``): ratio = lag / (threshold x
  replicas), kept within the 0.1 tolerance, else ``ceil(lag / threshold)``; then the HPA's
  stabilization and limits (``planner.hpa``).

Sync period: the HPA asks for the metric every 15 s, and by default the scaler reads the offsets
live each time, so this policy runs at ``sync_interval_s = 15``; the 30 s ``pollingInterval`` only
drives activation (the step between 0 and 1 replica, which a Flink job with min >= 1 never takes)
and, with ``use_cached_metrics``, how fresh the served lag is. (The request for this module put
KEDA at a 30 s sync; the sources say otherwise.)

Committed lag on Flink: Flink's Kafka source commits the group's offsets only when a checkpoint
completes, so the lag KEDA sees is the log end minus the offsets of the last completed checkpoint:
it grows between checkpoints even when the job keeps up. The lab supplies those committed offsets.

Inputs needed per sync (``KedaInputs``): now; current replicas; per partition the log-end offset and
the group's committed offset (None if nothing committed); min/max replicas.
State (``KedaState``): the HPA's state, the scaler's previous committed offsets (for
``excludePersistentLag``) and the cached lag (for ``useCachedMetrics``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict, Unpack

from planner.hpa import (
    HPA_DOWNSCALE_STABILIZATION_S,
    HPA_SYNC_PERIOD_S,
    HPA_TOLERANCE,
    HpaBehavior,
    HpaState,
    external_per_pod_replicas,
    reconcile,
)
from planner.peer_types import (
    PeerDecision,
    integer_from_json,
    items_from_json,
    number_from_json,
    object_from_json,
)

KEDA_POLLING_INTERVAL_S = 30.0
"""``pollingInterval`` default of a ScaledObject."""


class OffsetResetPolicy(enum.StrEnum):
    """``offsetResetPolicy``: where a consumer without a committed offset would start."""

    LATEST = "latest"
    EARLIEST = "earliest"


@dataclass(frozen=True)
class KafkaTrigger:
    """The Kafka trigger's metadata with KEDA's defaults."""

    lag_threshold: int = 10
    """``lagThreshold``: target lag per replica (the HPA's AverageValue)."""
    activation_lag_threshold: int = 0
    """``activationLagThreshold``: above it the scaler is active (matters only for scaling from zero)."""
    offset_reset_policy: OffsetResetPolicy = OffsetResetPolicy.LATEST
    allow_idle_consumers: bool = False
    """``allowIdleConsumers``: allow more replicas than partitions."""
    exclude_persistent_lag: bool = False
    """``excludePersistentLag``: ignore partitions whose committed offset did not move since the last query."""
    scale_to_zero_on_invalid_offset: bool = False
    limit_to_partitions_with_lag: bool = False
    """``limitToPartitionsWithLag``: cap at the partitions that have lag, not all of them."""
    ensure_even_distribution_of_partitions: bool = False
    """``ensureEvenDistributionOfPartitions``: round the replicas up to a divisor of the partitions."""

    def __post_init__(self) -> None:
        if self.lag_threshold <= 0:
            raise ValueError(f'"lagThreshold" must be positive number, got {self.lag_threshold}')
        if self.activation_lag_threshold < 0:
            raise ValueError('"activationLagThreshold" must be a non-negative number')
        if self.allow_idle_consumers and self.limit_to_partitions_with_lag:
            raise ValueError("allowIdleConsumers and limitToPartitionsWithLag cannot be set simultaneously")
        if self.limit_to_partitions_with_lag and self.ensure_even_distribution_of_partitions:
            raise ValueError(
                "limitToPartitionsWithLag and ensureEvenDistributionOfPartitions cannot be set simultaneously"
            )


@dataclass(frozen=True)
class PartitionOffsets:
    """One partition of the source topic."""

    latest_offset: int
    """The partition's log-end offset."""
    committed_offset: int | None
    """The consumer group's committed offset (Flink: at the last completed checkpoint); None if none yet."""


@dataclass(frozen=True)
class KedaInputs:
    """What one HPA sync sees through KEDA."""

    now: float
    current_replicas: int
    """``scale.spec.replicas``."""
    partitions: Sequence[PartitionOffsets]
    min_replicas: int = 1
    max_replicas: int = 100
    status_replicas: int | None = None
    """``scale.status.replicas`` (pods running), which the AverageValue ratio divides by; None: the current replicas."""


@dataclass(frozen=True)
class TotalLag:
    """``getTotalLag``'s answer."""

    total_lag: int
    """The metric value after the partition cap."""
    total_lag_with_persistent: int
    """The lag before persistent-lag exclusion and the cap (drives activity)."""
    uncapped_lag: int
    partitions: int
    partitions_with_lag: int


def find_factors(n: int) -> list[int]:
    """All factors of ``n`` in ascending order (``FindFactors``).

    >>> find_factors(36)
    [1, 2, 3, 4, 6, 9, 12, 18, 36]
    """
    if n < 1:
        return []
    factors: set[int] = set()
    for i in range(1, math.isqrt(n) + 1):
        if n % i == 0:
            factors.update((i, n // i))
    return sorted(factors)


def next_balanced_factor(total_lag: int, partitions: int, lag_threshold: int) -> int:
    """The smallest divisor of the partition count whose consumers carry the lag at the threshold.

    >>> next_balanced_factor(99, 100, 10)
    10
    """
    for factor in find_factors(partitions):
        if factor * lag_threshold >= total_lag:
            return factor
    return partitions


def partition_lag(
    index: int,
    offsets: PartitionOffsets,
    trigger: KafkaTrigger,
    previous: Mapping[int, int],
) -> tuple[int, int, dict[int, int]]:
    """``getLagForPartition``: (lag, lag with persistent, updated previous offsets)."""
    consumer = offsets.committed_offset
    updated = dict(previous)
    if consumer is None:
        if trigger.offset_reset_policy is OffsetResetPolicy.LATEST:
            value = 0 if trigger.scale_to_zero_on_invalid_offset else 1
            return value, value, updated
        if trigger.scale_to_zero_on_invalid_offset:
            return 0, 0, updated
        return offsets.latest_offset, offsets.latest_offset, updated
    lag = offsets.latest_offset - consumer
    if trigger.exclude_persistent_lag:
        if index not in previous or previous[index] != consumer:
            updated[index] = consumer
        else:
            return 0, lag, updated
    return lag, lag, updated


def total_lag(
    partitions: Sequence[PartitionOffsets], trigger: KafkaTrigger, previous: Mapping[int, int]
) -> tuple[TotalLag, dict[int, int]]:
    """``getTotalLag``: the summed lag with the partition cap, and the updated previous offsets.

    >>> total_lag([PartitionOffsets(100, 0)] * 3, KafkaTrigger(lag_threshold=10), {})[0].total_lag
    30
    """
    total = 0
    with_persistent = 0
    with_lag = 0
    updated = dict(previous)
    for index, offsets in enumerate(partitions):
        lag, lag_persistent, updated = partition_lag(index, offsets, trigger, updated)
        total += lag
        with_persistent += lag_persistent
        if lag > 0:
            with_lag += 1
    uncapped = total
    count = len(partitions)
    threshold = trigger.lag_threshold
    if (
        not trigger.allow_idle_consumers
        or trigger.limit_to_partitions_with_lag
        or trigger.ensure_even_distribution_of_partitions
    ):
        upper_bound = count
        if trigger.ensure_even_distribution_of_partitions:
            total = next_balanced_factor(total, count, threshold) * threshold
        if trigger.limit_to_partitions_with_lag:
            upper_bound = with_lag
        # Go's integer division truncates towards zero.
        if int(total / threshold) > upper_bound:
            total = upper_bound * threshold
    return TotalLag(total, with_persistent, uncapped, count, with_lag), updated


@dataclass(frozen=True)
class KedaState:
    """The HPA's memory plus the scaler's: previous committed offsets and the cached metric."""

    hpa: HpaState = field(default_factory=HpaState)
    previous_offsets: tuple[tuple[int, int], ...] = ()
    """(partition index, committed offset) at the scaler's last query (``excludePersistentLag``)."""
    cached_lag: int | None = None
    """The metric value served from the cache (``useCachedMetrics``)."""
    cached_at: float | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "hpa": self.hpa.to_dict(),
            "previous_offsets": [list(pair) for pair in self.previous_offsets],
            "cached_lag": self.cached_lag,
            "cached_at": self.cached_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> KedaState:
        """The inverse of :meth:`to_dict`."""
        cached_at = data.get("cached_at")
        cached_lag = data.get("cached_lag")
        offsets = (items_from_json(pair) for pair in items_from_json(data.get("previous_offsets", ())))
        return cls(
            hpa=HpaState.from_dict(object_from_json(data.get("hpa", {}))),
            previous_offsets=tuple((integer_from_json(i), integer_from_json(o)) for i, o in offsets),
            cached_lag=None if cached_lag is None else integer_from_json(cached_lag),
            cached_at=None if cached_at is None else number_from_json(cached_at),
        )


@dataclass(frozen=True)
class KedaSettings:
    """The ScaledObject: its Kafka trigger, polling and the HPA it creates."""

    trigger: KafkaTrigger = field(default_factory=KafkaTrigger)
    polling_interval_s: float = KEDA_POLLING_INTERVAL_S
    use_cached_metrics: bool = False
    """``useCachedMetrics`` on the trigger: serve the HPA the lag of the last poll."""
    tolerance: float = HPA_TOLERANCE
    downscale_stabilization_s: float = HPA_DOWNSCALE_STABILIZATION_S
    behavior: HpaBehavior | None = None
    """``advanced.horizontalPodAutoscalerConfig.behavior``; None by default."""


class KafkaTriggerOptions(TypedDict, total=False):
    """The :class:`KafkaTrigger` fields besides ``lagThreshold``, as ``trigger_options`` of :class:`KedaPolicy`."""

    activation_lag_threshold: int
    offset_reset_policy: OffsetResetPolicy
    allow_idle_consumers: bool
    exclude_persistent_lag: bool
    scale_to_zero_on_invalid_offset: bool
    limit_to_partitions_with_lag: bool
    ensure_even_distribution_of_partitions: bool


class KedaOptions(TypedDict, total=False):
    """The :class:`KedaSettings` besides the trigger, as keyword arguments of :class:`KedaPolicy`."""

    polling_interval_s: float
    use_cached_metrics: bool
    tolerance: float
    downscale_stabilization_s: float
    behavior: HpaBehavior | None


class KedaPolicy:
    """KEDA's Kafka scaler (committed-offset lag, ``lagThreshold`` per replica) through the HPA."""

    name = "keda-kafka"
    sync_interval_s: float = HPA_SYNC_PERIOD_S
    """The HPA's sync: each one asks KEDA's metrics adapter, which reads the offsets afresh."""

    def __init__(
        self,
        lag_threshold: int = 10,
        *,
        trigger_options: KafkaTriggerOptions | None = None,
        **options: Unpack[KedaOptions],
    ) -> None:
        trigger = KafkaTrigger(lag_threshold=int(lag_threshold), **(trigger_options or KafkaTriggerOptions()))
        self.settings = KedaSettings(trigger=trigger, **options)

    @staticmethod
    def initial_state() -> KedaState:
        """The state of a freshly created ScaledObject."""
        return KedaState()

    def decide(self, inputs: KedaInputs, state: KedaState) -> PeerDecision[KedaState]:
        """One HPA sync on KEDA's lag metric."""
        settings = self.settings
        trigger = settings.trigger
        metric, note, state = self._lag_metric(inputs, state)
        usage = float(max(metric, 0))
        replicas = external_per_pod_replicas(
            inputs.current_replicas if inputs.status_replicas is None else inputs.status_replicas,
            usage,
            float(trigger.lag_threshold),
            tolerance_up=settings.tolerance,
            tolerance_down=settings.tolerance,
        )
        note += f"; lagThreshold {trigger.lag_threshold:,} per replica: {replicas} replicas"
        decision = reconcile(
            state.hpa,
            now=inputs.now,
            current=inputs.current_replicas,
            metric_desired=replicas,
            metric_note=note,
            min_replicas=inputs.min_replicas,
            max_replicas=inputs.max_replicas,
            behavior=settings.behavior,
            downscale_stabilization_s=settings.downscale_stabilization_s,
        )
        return PeerDecision(
            decision.target_parallelism,
            decision.desired_parallelism,
            decision.code,
            decision.reasons,
            replace(state, hpa=decision.state),
        )

    def _lag_metric(self, inputs: KedaInputs, state: KedaState) -> tuple[int, str, KedaState]:
        """The lag KEDA's metrics adapter serves this sync (read afresh, or the last poll's with
        ``useCachedMetrics``), its note, and the state that remembers the offsets and the cache."""
        settings = self.settings
        fresh = not (
            settings.use_cached_metrics
            and state.cached_at is not None
            and state.cached_lag is not None
            and inputs.now - state.cached_at < settings.polling_interval_s
        )
        if not fresh:
            assert state.cached_lag is not None
            return state.cached_lag, f"cached lag {state.cached_lag:,} from the poll at {state.cached_at:.0f} s", state
        lag, previous = total_lag(inputs.partitions, settings.trigger, dict(state.previous_offsets))
        metric = lag.total_lag
        note = f"committed lag {lag.uncapped_lag:,} over {lag.partitions} partitions" + (
            f", capped to {lag.total_lag:,}" if lag.total_lag != lag.uncapped_lag else ""
        )
        state = replace(
            state,
            previous_offsets=tuple(sorted(previous.items())),
            cached_lag=metric if settings.use_cached_metrics else None,
            cached_at=inputs.now if settings.use_cached_metrics else None,
        )
        return metric, note, state
