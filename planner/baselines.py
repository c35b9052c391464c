"""Reactive Kubernetes baselines: the HPA on CPU and the KEDA Kafka scaler on consumer lag.

Both reduce to the HPA replica formula (Kubernetes docs, "Horizontal Pod Autoscaling", algorithm
details)::

    desired = ceil(current * current_metric / target_metric)

skipped while ``|current_metric / target_metric - 1| <= tolerance`` (0.1), with scale-in limited by
the scale-down stabilization window (300 s: the highest recommendation of the window wins). KEDA's
Kafka scaler feeds the HPA an ``AverageValue`` metric, the total consumer lag with a target of
``lagThreshold`` per replica, so ``desired = ceil(lag / lagThreshold)``; unless idle consumers are
allowed, the lag is first capped at ``partitions * lagThreshold`` so that no more consumers than
partitions are asked for. KEDA's ``cooldownPeriod`` only delays the step from one replica to zero,
which a Flink job (min scale-out >= 1) never takes; the 300 s that matter are the HPA
stabilization KEDA inherits.

The shared grace period after a rescale stands in for the HPA's CPU initialization period and
readiness delay (metrics of pods that are starting are ignored). The recovery hold of the shared guard
does not apply: an HPA knows nothing of recoveries, and holding a reactive policy until a job that it
under-provisioned catches up would hold it forever.
"""

from __future__ import annotations

import math

from planner import guards
from planner.types import Decision, PlanInput, PlannerConfig, decided

HPA_TOLERANCE = 0.1
"""Kubernetes' default ``--horizontal-pod-autoscaler-tolerance``."""
HPA_SCALE_DOWN_STABILIZATION_S = 300.0
"""Kubernetes' default ``behavior.scaleDown.stabilizationWindowSeconds``."""


def hpa_replicas(current: int, metric: float, target: float, *, tolerance: float = HPA_TOLERANCE) -> int:
    """The HPA replica formula ``ceil(current * metric / target)``; ``current`` within the tolerance.

    >>> hpa_replicas(4, 0.9, 0.8)  # ratio 1.125 > 1.1: scale out
    5
    >>> hpa_replicas(4, 0.85, 0.8)  # ratio 1.0625 within the tolerance
    4
    """
    if current < 1 or target <= 0:
        raise ValueError(f"need current >= 1 and target > 0, got current={current}, target={target}")
    ratio = metric / target
    if abs(ratio - 1.0) <= tolerance:
        return current
    # The tiny epsilon keeps float noise (0.9/0.9*3 = 3.0000000000000004) from adding a replica.
    return max(0, math.ceil(current * ratio - 1e-9))


def keda_lag_replicas(
    current: int,
    lag: float,
    lag_threshold: float,
    *,
    partitions: int | None,
    allow_idle_consumers: bool = False,
    tolerance: float = HPA_TOLERANCE,
) -> int:
    """Replicas the KEDA Kafka scaler makes the HPA ask for: ``ceil(lag / lagThreshold)``, capped at the partitions.

    >>> keda_lag_replicas(2, 250_000, 50_000, partitions=36)
    5
    >>> keda_lag_replicas(2, 10_000_000, 50_000, partitions=36)  # capped: one consumer per partition
    36
    """
    if lag_threshold <= 0:
        raise ValueError(f"lag_threshold must be positive, got {lag_threshold}")
    lag = max(0.0, lag)
    if partitions is not None and not allow_idle_consumers:
        lag = min(lag, partitions * lag_threshold)
    # AverageValue metric: the HPA compares the lag per current replica with the threshold.
    return hpa_replicas(current, lag / current, lag_threshold, tolerance=tolerance)


def _bounded(desired: int, config: PlannerConfig) -> int:
    return min(max(desired, config.min_parallelism), config.max_parallelism)


class HpaPolicy:
    """Kubernetes HPA on mean worker CPU (target 80 %, tolerance 0.1, 300 s scale-down stabilization)."""

    name = "hpa"

    def __init__(
        self,
        target_cpu: float = 0.8,
        tolerance: float = HPA_TOLERANCE,
        scale_down_stabilization_s: float = HPA_SCALE_DOWN_STABILIZATION_S,
    ) -> None:
        self.target_cpu = target_cpu
        self.tolerance = tolerance
        self.scale_down_stabilization_s = scale_down_stabilization_s

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """One HPA sync: the replica formula on the mean CPU, then the stabilization window."""
        current = plan_input.current_parallelism
        held = guards.grace_period(plan_input, config)
        if held is not None:
            return held
        cpu = plan_input.worker_cpu_avg
        if cpu is None:
            return guards.unknown(plan_input, "CPU unknown this round: the HPA keeps the current replicas")
        raw = hpa_replicas(current, cpu, self.target_cpu, tolerance=self.tolerance)
        desired = _bounded(raw, config)
        reasons = [
            f"hpa: ceil({current} x {cpu:.0%} / {self.target_cpu:.0%}) = {raw}"
            + (" (within tolerance)" if raw == current else "")
            + (f", bounded to {desired}" if desired != raw else "")
        ]
        target = guards.stabilize(
            plan_input, desired, reasons, window_s=self.scale_down_stabilization_s,
            loop_interval_s=config.loop_interval_s, upper=config.max_parallelism,
        )
        return decided(current, target, desired, reasons)


class KedaLagPolicy:
    """KEDA's Kafka scaler: consumer lag over ``lag_threshold`` per replica, capped at the partition count."""

    name = "keda-lag"

    def __init__(
        self,
        lag_threshold: float = 50_000.0,
        tolerance: float = HPA_TOLERANCE,
        scale_down_stabilization_s: float = HPA_SCALE_DOWN_STABILIZATION_S,
        allow_idle_consumers: bool = False,
    ) -> None:
        # KEDA's default lagThreshold (10) suits consumers of a few records per second; 50,000 is
        # about 3.5 s of one worker at 14,000 records/s, the simulated job's worker speed.
        self.lag_threshold = lag_threshold
        self.tolerance = tolerance
        self.scale_down_stabilization_s = scale_down_stabilization_s
        self.allow_idle_consumers = allow_idle_consumers

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """One HPA sync on KEDA's lag metric, then the stabilization window."""
        current = plan_input.current_parallelism
        held = guards.grace_period(plan_input, config)
        if held is not None:
            return held
        lag = plan_input.consumer_lag
        if lag is None:
            return guards.unknown(plan_input, "consumer lag unknown this round: keeping the current replicas")
        raw = keda_lag_replicas(
            current,
            lag,
            self.lag_threshold,
            partitions=config.source_partitions,
            allow_idle_consumers=self.allow_idle_consumers,
            tolerance=self.tolerance,
        )
        desired = _bounded(raw, config)
        reasons = [
            f"keda-lag: lag {lag:,.0f} / threshold {self.lag_threshold:,.0f} per replica -> {raw}"
            + (f" (partitions {config.source_partitions})" if config.source_partitions else "")
            + (f", bounded to {desired}" if desired != raw else "")
        ]
        target = guards.stabilize(
            plan_input, desired, reasons, window_s=self.scale_down_stabilization_s,
            loop_interval_s=config.loop_interval_s, upper=config.max_parallelism,
        )
        return decided(current, target, desired, reasons)
