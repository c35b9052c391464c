"""The peers behind the planner's Policy protocol: what operators run today, fed from the same PlanInput.

Each peer (``planner.flink_autoscaler``, ``planner.hpa``, ``planner.keda``, ``planner.ds2_paper``) is a
faithful core with its own inputs and an explicit state. This module is the thin adapter: it reads
the peer's inputs off the PlanInput every policy sees, hands the state the loop kept from the last
round back to it (``PlanInput.policy_state``, JSON), and returns its answer as a Decision whose
``policy_state`` the loop keeps for the next round (and in the knowledge store across restarts).

Each adapter has the peer's main knob as its only argument (the lab sweeps it for Pareto fronts)
and the peer's own sync period (``sync_interval_s``), at which the lab calls it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from planner.defaults import KEDA_LAG_THRESHOLD
from planner.ds2_paper import Ds2Inputs, Ds2PaperPolicy, Ds2State
from planner.flink_autoscaler import FlinkAutoscalerInputs, FlinkAutoscalerPolicy, FlinkAutoscalerState
from planner.hpa import HpaInputs, HpaState, KubernetesHpaPolicy, PodMetric
from planner.keda import KedaInputs, KedaPolicy, KedaState, PartitionOffsets
from planner.peer_types import PeerDecision
from planner.types import Decision, PlanInput, PlannerConfig, ReasonCode, decided

StateT = TypeVar("StateT")


def _running(plan_input: PlanInput) -> bool:
    return plan_input.job_running and plan_input.uptime_s is not None


def _decision(plan_input: PlanInput, peer: PeerDecision[Any], *, held_codes: frozenset[str]) -> Decision:
    """The peer's answer as a Decision: its own code named in the first reason, the loop's code derived."""
    current = plan_input.current_parallelism
    reasons = (f"{peer.code}", *peer.reasons)
    state = peer.state.to_dict()
    if peer.code in held_codes:
        return Decision.whole_job(current, current, reasons, ReasonCode.UNKNOWN_DATA, acted=False, policy_state=state)
    base = decided(current, peer.target_parallelism, peer.desired_parallelism, reasons)
    return Decision.whole_job(
        base.target_parallelism, base.desired_parallelism, base.reasons, base.code, acted=True, policy_state=state
    )


class _PeerAdapter(Generic[StateT]):
    """Shared plumbing: restore the peer's state from the PlanInput, decide, hand the state back."""

    name: str
    uses_forecast = False
    held_codes: frozenset[str] = frozenset()
    state_type: Any

    def __init__(self, core: Any) -> None:
        self.core = core
        self.sync_interval_s: float | None = float(core.sync_interval_s)

    def _state(self, plan_input: PlanInput) -> StateT:
        stored = plan_input.policy_state
        return self.state_type.from_dict(stored) if stored else self.core.initial_state()


class FlinkAutoscaler(_PeerAdapter[FlinkAutoscalerState]):
    """The Flink Kubernetes Operator's autoscaler (``planner.flink_autoscaler``); knob: target utilization."""

    name = "flink-autoscaler"
    state_type = FlinkAutoscalerState
    held_codes = frozenset({"missing_data", "not_running"})

    def __init__(self, target_utilization: float = 0.7, **options: Any) -> None:
        """``options``: any other ``FlinkAutoscalerSettings`` field (windows, intervals), e.g. time-compressed."""
        super().__init__(FlinkAutoscalerPolicy(target_utilization=target_utilization, **options))
        self.knob = target_utilization

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """One reconcile of the autoscaler on this round's metrics."""
        uptime = plan_input.uptime_s
        inputs = FlinkAutoscalerInputs(
            now=plan_input.now,
            job_running=_running(plan_input),
            running_since=None if uptime is None else plan_input.now - uptime,
            current_parallelism=plan_input.current_parallelism,
            source_rate=plan_input.source_rate,
            source_backlog=plan_input.consumer_lag,
            busy_fractions=tuple(plan_input.worker_busy.values()),
            source_partitions=config.source_partitions,
            min_parallelism=config.min_parallelism,
            max_parallelism=config.max_parallelism,
        )
        return _decision(plan_input, self.core.decide(inputs, self._state(plan_input)), held_codes=self.held_codes)


class Hpa(_PeerAdapter[HpaState]):
    """The Kubernetes HPA on TaskManager CPU (``planner.hpa``); knob: target CPU utilization."""

    name = "hpa"
    state_type = HpaState

    def __init__(self, target_cpu: float = 0.8) -> None:
        super().__init__(KubernetesHpaPolicy(target_cpu=target_cpu))
        self.knob = target_cpu

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """One HPA sync: one pod per worker, its CPU if it has a metric, unready while the job restarts."""
        running = _running(plan_input)
        pods = []
        for index in range(plan_input.current_parallelism):
            usage = list(plan_input.worker_cpu.values())[index] if index < len(plan_input.worker_cpu) else None
            pods.append(
                PodMetric(
                    cpu_usage=usage if running and usage is not None and math.isfinite(usage) else None,
                    ready=running,
                )
            )
        inputs = HpaInputs(
            now=plan_input.now,
            current_replicas=plan_input.current_parallelism,
            pods=tuple(pods),
            min_replicas=config.min_parallelism,
            max_replicas=config.max_parallelism,
        )
        return _decision(plan_input, self.core.decide(inputs, self._state(plan_input)), held_codes=self.held_codes)


class KedaLag(_PeerAdapter[KedaState]):
    """KEDA's Kafka scaler through the HPA (``planner.keda``); knob: ``lagThreshold``."""

    name = "keda-lag"
    state_type = KedaState

    def __init__(self, lag_threshold: float = KEDA_LAG_THRESHOLD) -> None:
        super().__init__(KedaPolicy(lag_threshold=int(lag_threshold)))
        self.knob = lag_threshold

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """One HPA sync on the committed-offset lag of every partition."""
        offsets = plan_input.partition_offsets
        if offsets is None:
            return Decision.whole_job(
                plan_input.current_parallelism,
                plan_input.current_parallelism,
                ("keda-lag: partition offsets unknown this round",),
                ReasonCode.UNKNOWN_DATA,
                acted=False,
                policy_state=plan_input.policy_state,
            )
        inputs = KedaInputs(
            now=plan_input.now,
            current_replicas=plan_input.current_parallelism,
            partitions=tuple(
                PartitionOffsets(int(latest), None if committed is None else int(committed))
                for latest, committed in offsets
            ),
            min_replicas=config.min_parallelism,
            max_replicas=config.max_parallelism,
        )
        return _decision(plan_input, self.core.decide(inputs, self._state(plan_input)), held_codes=self.held_codes)


class Ds2(_PeerAdapter[Ds2State]):
    """DS2 with its scaling manager (``planner.ds2_paper``); knob: the target ratio (1 + over-provisioning)."""

    name = "ds2"
    state_type = Ds2State

    def __init__(self, target_ratio: float = 1.0) -> None:
        if target_ratio < 1.0:
            raise ValueError(f"target_ratio must be at least 1, got {target_ratio}")
        super().__init__(Ds2PaperPolicy(over_provisioning=target_ratio - 1.0))
        self.knob = target_ratio

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """One DS2 policy interval: target rate = arrivals, observed = reads, true rates from busy time."""
        inputs = Ds2Inputs(
            now=plan_input.now,
            job_running=_running(plan_input),
            current_parallelism=plan_input.current_parallelism,
            target_source_rate=plan_input.workload_avg,
            observed_source_rate=plan_input.source_rate,
            worker_processed_rate=dict(plan_input.worker_throughput),
            worker_useful_fraction=dict(plan_input.worker_busy or plan_input.worker_cpu),
            min_parallelism=config.min_parallelism,
            max_parallelism=config.max_parallelism,
        )
        return _decision(plan_input, self.core.decide(inputs, self._state(plan_input)), held_codes=self.held_codes)


PEER_KNOBS: Mapping[str, str] = {
    FlinkAutoscaler.name: "target utilization",
    Hpa.name: "target CPU",
    KedaLag.name: "lagThreshold",
    Ds2.name: "target ratio",
}
"""Each peer's main knob, which its constructor takes and the lab sweeps."""
