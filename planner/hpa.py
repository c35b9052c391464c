"""The Kubernetes Horizontal Pod Autoscaler on TaskManager CPU, as the controller runs it by default.

Followed source: kubernetes/kubernetes ``pkg/controller/podautoscaler/`` at the version with
per-HPA tolerances (v1.33+), as stored in the code index: ``replica_calculator.go``
(``Tolerances.isWithin``, ``GetResourceReplicas``, ``GetExternalPerPodMetricReplicas``,
``groupPods``), ``metrics/utilization.go`` (``GetResourceUtilizationRatio``) and ``horizontal.go``
(``reconcileAutoscaler``, ``recordInitialRecommendation``, ``stabilizeRecommendation``,
``normalizeDesiredReplicas``, ``convertDesiredReplicasWithRules``, ``calculateScaleUpLimit``,
``stabilizeRecommendationWithBehaviors``, ``convertDesiredReplicasWithBehaviorRate``,
``calculateScaleUpLimitWithScalingRules``, ``calculateScaleDownLimitWithBehaviors``,
``getReplicasChangePerPeriod``, ``storeScaleEvent``); defaults from
``pkg/controller/podautoscaler/config/v1alpha1/defaults.go`` and ``pkg/apis/autoscaling/v2/defaults.go``.

Rules and their defaults:

* sync every 15 s (``--horizontal-pod-autoscaler-sync-period``): ``sync_interval_s = 15``.
* utilization = integer percent of summed usage over summed requests of the counted pods
  (``(sum usage x 100) / sum requests``, integer division); ratio = utilization / target percent.
* tolerance 0.1 each way (``--horizontal-pod-autoscaler-tolerance``): ratio within
  [0.9, 1.1] keeps the current replicas.
* plain case: ``ceil(ratio x ready pods)``.
* pods without a metric count as using max(100 %, target) of their request on a scale-down and
  0 % on a scale-up; unready pods (pending, not Ready, or in the 5 min CPU initialization period
  without a full metric window since they became Ready; 30 s initial readiness delay) are left out,
  and on a scale-up counted as 0 %; the ratio is then recomputed and the HPA keeps the current
  replicas if it falls within the tolerance or the direction would flip.
* the HPA records the current replicas as its first recommendation when it starts.
* no ``behavior`` (the API default: ``SetDefaults_HorizontalPodAutoscalerBehavior`` only fills a
  behavior the user set): scale-down stabilization 300 s
  (``--horizontal-pod-autoscaler-downscale-stabilization``): the highest recommendation of the last
  300 s wins; scale-up limited to max(2 x current, 4) per sync; then [min, max].
* with ``behavior`` (its defaults when set): scale-up stabilization 0 s, policies +4 pods and
  +100 % per 15 s, the larger (selectPolicy Max); scale-down stabilization 300 s (the controller
  flag), policy -100 % per 15 s; the limits count the replicas already added or removed within each
  policy's period.
* no grace period of its own: right after a rescale the new pods are simply not ready or have no
  metric yet, which the rules above handle.

Inputs needed per round (``HpaInputs``): now; the current (spec) replicas; per TaskManager pod its
CPU usage and request, whether it has a metric, and whether it counts as ready (``cpu_sample_is_unready``
derives that from pod start, readiness transitions and the metric timestamp); min/max replicas.
State (``HpaState``): the recommendation history and, with ``behavior``, the scale events.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from planner.peer_types import PeerDecision, integer_from_json, items_from_json, number_from_json

HPA_SYNC_PERIOD_S = 15.0
"""``--horizontal-pod-autoscaler-sync-period``."""
HPA_TOLERANCE = 0.1
"""``--horizontal-pod-autoscaler-tolerance``."""
HPA_DOWNSCALE_STABILIZATION_S = 300.0
"""``--horizontal-pod-autoscaler-downscale-stabilization``."""
HPA_CPU_INITIALIZATION_PERIOD_S = 300.0
"""``--horizontal-pod-autoscaler-cpu-initialization-period``."""
HPA_INITIAL_READINESS_DELAY_S = 30.0
"""``--horizontal-pod-autoscaler-initial-readiness-delay``."""
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0


class PolicyType(enum.StrEnum):
    """``HPAScalingPolicyType``."""

    PODS = "Pods"
    PERCENT = "Percent"


class SelectPolicy(enum.StrEnum):
    """``ScalingPolicySelect``."""

    MAX = "Max"
    MIN = "Min"
    DISABLED = "Disabled"


@dataclass(frozen=True)
class ScalingPolicy:
    """One ``HPAScalingPolicy``: change by ``value`` pods or percent within ``period_s``."""

    type: PolicyType
    value: int
    period_s: float


@dataclass(frozen=True)
class ScalingRules:
    """``HPAScalingRules`` for one direction."""

    stabilization_s: float
    policies: tuple[ScalingPolicy, ...]
    select: SelectPolicy = SelectPolicy.MAX


@dataclass(frozen=True)
class HpaBehavior:
    """``spec.behavior``; :meth:`defaults` is what the API server fills in for an empty one."""

    scale_up: ScalingRules
    scale_down: ScalingRules

    @classmethod
    def defaults(cls, downscale_stabilization_s: float = HPA_DOWNSCALE_STABILIZATION_S) -> HpaBehavior:
        """+4 pods or +100 % per 15 s up (the larger), -100 % per 15 s down, 0 s / 300 s stabilization."""
        return cls(
            scale_up=ScalingRules(
                stabilization_s=0.0,
                policies=(ScalingPolicy(PolicyType.PODS, 4, 15.0), ScalingPolicy(PolicyType.PERCENT, 100, 15.0)),
            ),
            scale_down=ScalingRules(
                stabilization_s=downscale_stabilization_s,
                policies=(ScalingPolicy(PolicyType.PERCENT, 100, 15.0),),
            ),
        )


@dataclass(frozen=True)
class PodMetric:
    """One TaskManager pod as the HPA sees it at a sync."""

    cpu_usage: float | None
    """CPU cores used over the last metric window (metrics-server); None if the pod has no metric."""
    cpu_request: float = 1.0
    """CPU cores requested by the pod."""
    ready: bool = True
    """False if the pod's sample is unready (see :func:`cpu_sample_is_unready`)."""
    pending: bool = False
    """The pod is Pending (not yet running)."""


@dataclass(frozen=True)
class HpaInputs:
    """What one sync observes."""

    now: float
    current_replicas: int
    """``scale.spec.replicas`` of the TaskManager Deployment/StatefulSet."""
    pods: Sequence[PodMetric]
    """The pods the selector matches, without deleted or failed ones."""
    min_replicas: int = 1
    max_replicas: int = 10


@dataclass(frozen=True)
class TimedValue:
    """A value with the time it was recorded (a recommendation, or a replica change)."""

    time: float
    value: int


@dataclass(frozen=True)
class HpaState:
    """What the controller keeps in memory per HPA: recommendations and, with ``behavior``, scale events."""

    recommendations: tuple[TimedValue, ...] = ()
    scale_up_events: tuple[TimedValue, ...] = ()
    scale_down_events: tuple[TimedValue, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            name: [[item.time, item.value] for item in getattr(self, name)]
            for name in ("recommendations", "scale_up_events", "scale_down_events")
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> HpaState:
        """The inverse of :meth:`to_dict`."""

        def timed_values(name: str) -> tuple[TimedValue, ...]:
            pairs = (items_from_json(pair) for pair in items_from_json(data.get(name, ())))
            return tuple(TimedValue(number_from_json(t), integer_from_json(v)) for t, v in pairs)

        return cls(
            recommendations=timed_values("recommendations"),
            scale_up_events=timed_values("scale_up_events"),
            scale_down_events=timed_values("scale_down_events"),
        )


class HpaCode(enum.StrEnum):
    """Outcome of a sync (after the HPA's condition reasons)."""

    FAILED_GET_METRICS = "failed_get_metrics"
    SCALE_UP = "scale_up"
    SCALE_DOWN = "scale_down"
    SCALE_DOWN_STABILIZED = "scale_down_stabilized"
    SCALE_UP_STABILIZED = "scale_up_stabilized"
    SCALE_UP_LIMIT = "scale_up_limit"
    SCALE_DOWN_LIMIT = "scale_down_limit"
    TOO_MANY_REPLICAS = "too_many_replicas"
    TOO_FEW_REPLICAS = "too_few_replicas"
    NO_CHANGE = "no_change"


def cpu_sample_is_unready(
    *,
    now: float,
    pod_start: float | None,
    ready: bool | None,
    ready_transition: float | None,
    metric_time: float,
    metric_window_s: float,
    cpu_initialization_period_s: float = HPA_CPU_INITIALIZATION_PERIOD_S,
    initial_readiness_delay_s: float = HPA_INITIAL_READINESS_DELAY_S,
) -> bool:
    """Whether ``groupPods`` leaves a running pod's CPU sample out as unready.

    Within the CPU initialization period after the pod started, the sample counts only if the pod
    is Ready and a whole metric window was collected since it became Ready; after it, only pods
    that are not Ready and never were (their last transition within the initial readiness delay of
    the start) are left out.

    >>> cpu_sample_is_unready(now=100, pod_start=0, ready=True, ready_transition=90, metric_time=100,
    ...     metric_window_s=30)
    True
    >>> cpu_sample_is_unready(now=400, pod_start=0, ready=False, ready_transition=200, metric_time=400,
    ...     metric_window_s=30)
    False
    """
    if ready is None or pod_start is None or ready_transition is None:
        return True
    if pod_start + cpu_initialization_period_s > now:
        return (not ready) or metric_time < ready_transition + metric_window_s
    return (not ready) and pod_start + initial_readiness_delay_s > ready_transition


def _within(ratio: float, tolerance_up: float, tolerance_down: float) -> bool:
    return (1.0 - tolerance_down) <= ratio <= (1.0 + tolerance_up)


def _milli(value: float) -> int:
    return int(round(value * 1000))


def _utilization(usage_m: Mapping[int, int], requests_m: Mapping[int, int], target_percent: int) -> tuple[float, int]:
    metrics_total = sum(usage_m.values())
    requests_total = sum(requests_m[pod] for pod in usage_m)
    utilization = (metrics_total * 100) // requests_total
    return utilization / target_percent, utilization


@dataclass(frozen=True)
class _PodGroups:
    """``groupPods``: the CPU usage of the ready pods (millicores by pod) and the pods left out."""

    usage: dict[int, int]
    unready: list[int]
    """Pending pods and pods that are not Ready."""
    missing: list[int]
    """Pods without a CPU sample."""
    ready_count: int


def _group_pods(pods: Sequence[PodMetric]) -> _PodGroups:
    usage: dict[int, int] = {}
    unready: list[int] = []
    missing: list[int] = []
    ready_count = 0
    for i, pod in enumerate(pods):
        if pod.pending:
            unready.append(i)
        elif pod.cpu_usage is None:
            missing.append(i)
        elif not pod.ready:
            unready.append(i)
        else:
            ready_count += 1
            usage[i] = _milli(pod.cpu_usage)
    return _PodGroups(usage, unready, missing, ready_count)


def resource_replicas(
    current: int,
    pods: Sequence[PodMetric],
    target_percent: int,
    *,
    tolerance_up: float = HPA_TOLERANCE,
    tolerance_down: float = HPA_TOLERANCE,
) -> tuple[int, int]:
    """``GetResourceReplicas``: (replicas, current utilization percent); ValueError without metrics.

    >>> resource_replicas(3, [PodMetric(0.3), PodMetric(0.5), PodMetric(0.7)], 30)
    (5, 50)
    """
    if not pods:
        raise ValueError("no pods returned by selector while calculating replica count")
    requests = {i: _milli(pod.cpu_request) for i, pod in enumerate(pods)}
    groups = _group_pods(pods)
    if not groups.usage:
        raise ValueError("did not receive metrics for targeted pods (pods might be unready)")
    if any(requests[i] <= 0 for i in groups.usage):
        raise ValueError("missing request for cpu")

    ratio, utilization = _utilization(groups.usage, requests, target_percent)
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if _within(ratio, tolerance_up, tolerance_down):
            return current, utilization
        return math.ceil(ratio * groups.ready_count), utilization
    replicas = _replicas_with_assumed_usage(
        current, groups, requests, target_percent, ratio, scale_up_with_unready, tolerance_up, tolerance_down
    )
    return replicas, utilization


def _replicas_with_assumed_usage(
    current: int,
    groups: _PodGroups,
    requests: Mapping[int, int],
    target_percent: int,
    ratio: float,
    scale_up_with_unready: bool,
    tolerance_up: float,
    tolerance_down: float,
) -> int:
    """The replicas once the pods without a sample (and, on a scale-up, the unready ones) are given the usage
    that dampens the change; ``current`` when that turns the direction round or lands within the tolerance."""
    usage = dict(groups.usage)
    if groups.missing:
        if ratio < 1.0:
            fallback = max(100, target_percent)
            for i in groups.missing:
                usage[i] = requests[i] * fallback // 100
        elif ratio > 1.0:
            for i in groups.missing:
                usage[i] = 0
    if scale_up_with_unready:
        for i in groups.unready:
            usage[i] = 0

    new_ratio, _ = _utilization(usage, requests, target_percent)
    if (
        _within(new_ratio, tolerance_up, tolerance_down)
        or (ratio < 1.0 and new_ratio > 1.0)
        or (ratio > 1.0 and new_ratio < 1.0)
    ):
        return current
    new_replicas = math.ceil(new_ratio * len(usage))
    if (new_ratio < 1.0 and new_replicas > current) or (new_ratio > 1.0 and new_replicas < current):
        return current
    return new_replicas


def external_per_pod_replicas(
    status_replicas: int,
    usage: float,
    target_per_pod: float,
    *,
    tolerance_up: float = HPA_TOLERANCE,
    tolerance_down: float = HPA_TOLERANCE,
) -> int:
    """``GetExternalPerPodMetricReplicas``: an ``AverageValue`` external metric (KEDA's).

    >>> external_per_pod_replicas(2, 250.0, 50.0)
    5
    >>> external_per_pod_replicas(5, 240.0, 50.0)  # 0.96 of the target per replica: kept
    5
    """
    replicas = status_replicas
    ratio = usage / (target_per_pod * replicas) if replicas > 0 else math.inf
    if not _within(ratio, tolerance_up, tolerance_down):
        replicas = min(math.ceil(usage / target_per_pod), 2**31 - 1)
    return replicas


@dataclass(frozen=True)
class Normalized:
    """A normalized recommendation: replicas, the limiting condition and the updated state."""

    replicas: int
    code: HpaCode
    reason: str
    state: HpaState


def _changes_in_period(events: Sequence[TimedValue], period_s: float, now: float) -> int:
    cutoff = now - period_s
    return sum(e.value for e in events if e.time > cutoff)


def _period_start(current: int, state: HpaState, period_s: float, now: float) -> int:
    """The replicas at the start of a policy's period: ``current`` with the period's scale events undone
    (the ``periodStartReplicas`` both limits start from)."""
    return (
        current
        - _changes_in_period(state.scale_up_events, period_s, now)
        + _changes_in_period(state.scale_down_events, period_s, now)
    )


def scale_up_limit(current: int, state: HpaState, rules: ScalingRules, now: float) -> int:
    """``calculateScaleUpLimitWithScalingRules``."""
    if rules.select is SelectPolicy.DISABLED:
        return current
    proposals = []
    for policy in rules.policies:
        start = _period_start(current, state, policy.period_s, now)
        if policy.type is PolicyType.PODS:
            proposals.append(start + policy.value)
        else:
            proposals.append(math.ceil(start * (1 + policy.value / 100)))
    return (min if rules.select is SelectPolicy.MIN else max)(proposals)


def scale_down_limit(current: int, state: HpaState, rules: ScalingRules, now: float) -> int:
    """``calculateScaleDownLimitWithBehaviors``."""
    if rules.select is SelectPolicy.DISABLED:
        return current
    proposals = []
    for policy in rules.policies:
        start = _period_start(current, state, policy.period_s, now)
        if policy.type is PolicyType.PODS:
            proposals.append(start - policy.value)
        else:
            proposals.append(int(start * (1 - policy.value / 100)))
    return (max if rules.select is SelectPolicy.MIN else min)(proposals)


def normalize_legacy(
    state: HpaState,
    *,
    now: float,
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    downscale_stabilization_s: float = HPA_DOWNSCALE_STABILIZATION_S,
) -> Normalized:
    """``normalizeDesiredReplicas``: the highest recommendation of the window, max(2x, 4) up, [min, max]."""
    cutoff = now - downscale_stabilization_s
    recent = [r for r in state.recommendations if not r.time < cutoff]
    stabilized = max([desired, *(r.value for r in recent)])
    new_state = HpaState((*recent, TimedValue(now, desired)), state.scale_up_events, state.scale_down_events)
    limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
    if max_replicas > limit:
        maximum, limited_code, limited_reason = (
            limit,
            HpaCode.SCALE_UP_LIMIT,
            f"scale-up limit max(2 x {current}, 4) = {limit}",
        )
    else:
        maximum, limited_code, limited_reason = max_replicas, HpaCode.TOO_MANY_REPLICAS, f"max replicas {max_replicas}"
    stabilized_note = (
        f"stabilized at {stabilized}: highest recommendation of the last {downscale_stabilization_s:.0f} s"
        if stabilized != desired
        else ""
    )
    if stabilized < min_replicas:
        return Normalized(min_replicas, HpaCode.TOO_FEW_REPLICAS, f"min replicas {min_replicas}", new_state)
    if stabilized > maximum:
        return Normalized(maximum, limited_code, limited_reason, new_state)
    if stabilized != desired:
        return Normalized(stabilized, HpaCode.SCALE_DOWN_STABILIZED, stabilized_note, new_state)
    return Normalized(stabilized, HpaCode.NO_CHANGE, "desired within range", new_state)


def normalize_with_behavior(
    state: HpaState,
    behavior: HpaBehavior,
    *,
    now: float,
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
) -> Normalized:
    """``normalizeDesiredReplicasWithBehaviors``: both stabilization windows, then the rate limits."""
    recommendation, new_state = _stabilize_with_behavior(state, behavior, now=now, current=current, desired=desired)
    code = HpaCode.NO_CHANGE
    reason = "desired within range"
    if recommendation != desired:
        if desired >= current:
            code, reason = HpaCode.SCALE_UP_STABILIZED, f"stabilized at {recommendation}: lowest recent recommendation"
        else:
            code, reason = (
                HpaCode.SCALE_DOWN_STABILIZED,
                f"stabilized at {recommendation}: highest recent recommendation",
            )
    limited = _rate_limited(
        state,
        behavior,
        now=now,
        current=current,
        recommendation=recommendation,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
    )
    if limited is not None:
        replicas, code, reason = limited
        return Normalized(replicas, code, reason, new_state)
    return Normalized(recommendation, code, reason, new_state)


def _stabilize_with_behavior(
    state: HpaState, behavior: HpaBehavior, *, now: float, current: int, desired: int
) -> tuple[int, HpaState]:
    """``stabilizeRecommendationWithBehaviors``: the current replicas moved no further than the lowest recent
    recommendation allows up and the highest allows down; and the state with this recommendation recorded."""
    up_cutoff = now - behavior.scale_up.stabilization_s
    down_cutoff = now - behavior.scale_down.stabilization_s
    up_recommendation = desired
    down_recommendation = desired
    for rec in state.recommendations:
        if rec.time > up_cutoff:
            up_recommendation = min(rec.value, up_recommendation)
        if rec.time > down_cutoff:
            down_recommendation = max(rec.value, down_recommendation)
    recommendation = current
    if recommendation < up_recommendation:
        recommendation = up_recommendation
    if recommendation > down_recommendation:
        recommendation = down_recommendation
    oldest_kept = min(up_cutoff, down_cutoff)
    kept = tuple(r for r in state.recommendations if not r.time < oldest_kept)
    new_state = HpaState((*kept, TimedValue(now, desired)), state.scale_up_events, state.scale_down_events)
    return recommendation, new_state


def _rate_limited(
    state: HpaState,
    behavior: HpaBehavior,
    *,
    now: float,
    current: int,
    recommendation: int,
    min_replicas: int,
    max_replicas: int,
) -> tuple[int, HpaCode, str] | None:
    """``convertDesiredReplicasWithBehaviorRate``: the replicas, condition and reason when a rate limit or the
    replica bounds cut the recommendation short; None when they do not."""
    if recommendation > current:
        limit = max(scale_up_limit(current, state, behavior.scale_up, now), current)
        if max_replicas > limit:
            maximum, code, reason = limit, HpaCode.SCALE_UP_LIMIT, f"scale-up limit {limit} per policy period"
        else:
            maximum, code, reason = max_replicas, HpaCode.TOO_MANY_REPLICAS, f"max replicas {max_replicas}"
        return (maximum, code, reason) if recommendation > maximum else None
    if recommendation < current:
        limit = min(scale_down_limit(current, state, behavior.scale_down, now), current)
        if min_replicas < limit:
            minimum, code, reason = limit, HpaCode.SCALE_DOWN_LIMIT, f"scale-down limit {limit} per policy period"
        else:
            minimum, code, reason = min_replicas, HpaCode.TOO_FEW_REPLICAS, f"min replicas {min_replicas}"
        return (minimum, code, reason) if recommendation < minimum else None
    return None


def record_scale_event(
    state: HpaState, behavior: HpaBehavior | None, *, now: float, previous: int, new: int
) -> HpaState:
    """``storeScaleEvent``: remember a rescale for the rate limits (only with ``behavior``)."""
    if behavior is None or new == previous:
        return state
    if new > previous:
        longest = max((p.period_s for p in behavior.scale_up.policies), default=0.0)
        events = tuple(e for e in state.scale_up_events if not e.time < now - longest)
        return HpaState(state.recommendations, (*events, TimedValue(now, new - previous)), state.scale_down_events)
    longest = max((p.period_s for p in behavior.scale_down.policies), default=0.0)
    events = tuple(e for e in state.scale_down_events if not e.time < now - longest)
    return HpaState(state.recommendations, state.scale_up_events, (*events, TimedValue(now, previous - new)))


def with_initial_recommendation(state: HpaState, *, now: float, current: int) -> HpaState:
    """``recordInitialRecommendation``: a new HPA starts by recommending the current replicas."""
    if state.recommendations:
        return state
    return HpaState((TimedValue(now, current),), state.scale_up_events, state.scale_down_events)


def _normalize(
    state: HpaState,
    behavior: HpaBehavior | None,
    *,
    now: float,
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    downscale_stabilization_s: float,
) -> Normalized:
    """The legacy normalization without ``spec.behavior``, the behavior's with it."""
    if behavior is None:
        return normalize_legacy(
            state,
            now=now,
            current=current,
            desired=desired,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            downscale_stabilization_s=downscale_stabilization_s,
        )
    return normalize_with_behavior(
        state,
        behavior,
        now=now,
        current=current,
        desired=desired,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
    )


def reconcile(
    state: HpaState,
    *,
    now: float,
    current: int,
    metric_desired: int | None,
    metric_note: str,
    min_replicas: int,
    max_replicas: int,
    behavior: HpaBehavior | None,
    downscale_stabilization_s: float,
) -> PeerDecision[HpaState]:
    """``reconcileAutoscaler`` from the metric's desired replicas on: bounds, normalization, the scale event."""
    state = with_initial_recommendation(state, now=now, current=current)
    reasons = [metric_note]
    if current > max_replicas or current < min_replicas:
        bound, code = (
            (max_replicas, HpaCode.TOO_MANY_REPLICAS)
            if current > max_replicas
            else (min_replicas, HpaCode.TOO_FEW_REPLICAS)
        )
        reasons.append(f"current {current} outside [{min_replicas}, {max_replicas}]: {current} -> {bound}")
        state = record_scale_event(state, behavior, now=now, previous=current, new=bound)
        return PeerDecision(bound, bound, code.value, tuple(reasons), state)
    if metric_desired is None:
        return PeerDecision(current, current, HpaCode.FAILED_GET_METRICS.value, tuple(reasons), state)
    desired = max(metric_desired, 0)
    normalized = _normalize(
        state,
        behavior,
        now=now,
        current=current,
        desired=desired,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        downscale_stabilization_s=downscale_stabilization_s,
    )
    target = normalized.replicas
    if normalized.code is not HpaCode.NO_CHANGE:
        reasons.append(normalized.reason)
    new_state = record_scale_event(normalized.state, behavior, now=now, previous=current, new=target)
    reasons.append(f"{current} -> {target}" if target != current else f"keeps {current}")
    code = _sync_code(normalized, current=current, desired=desired)
    return PeerDecision(target, desired, code.value, tuple(reasons), new_state)


_LIMITS = (HpaCode.SCALE_UP_LIMIT, HpaCode.SCALE_DOWN_LIMIT, HpaCode.TOO_MANY_REPLICAS, HpaCode.TOO_FEW_REPLICAS)


def _sync_code(normalized: Normalized, *, current: int, desired: int) -> HpaCode:
    """A rescale is reported by its direction unless a limit shaped it; a kept count by what held it."""
    target = normalized.replicas
    if target != current:
        if normalized.code in _LIMITS:
            return normalized.code
        return HpaCode.SCALE_UP if target > current else HpaCode.SCALE_DOWN
    return HpaCode.NO_CHANGE if desired == current else normalized.code


@dataclass(frozen=True)
class HpaSettings:
    """The HPA object and the controller flags that shape it."""

    target_cpu: float = 0.8
    """``averageUtilization`` / 100 (the API's default metric is CPU at 80 %)."""
    tolerance: float = HPA_TOLERANCE
    """``--horizontal-pod-autoscaler-tolerance`` (both directions)."""
    downscale_stabilization_s: float = HPA_DOWNSCALE_STABILIZATION_S
    """``--horizontal-pod-autoscaler-downscale-stabilization``."""
    behavior: HpaBehavior | None = None
    """``spec.behavior``; None is the API default (the legacy limits); ``HpaBehavior.defaults()`` an empty one
    filled in."""
    target_percent: int = field(init=False)

    def __post_init__(self) -> None:
        percent = int(round(self.target_cpu * 100))
        if percent <= 0:
            raise ValueError(f"target_cpu must be at least 1 %, got {self.target_cpu}")
        object.__setattr__(self, "target_percent", percent)


class HpaOptions(TypedDict, total=False):
    """The :class:`HpaSettings` besides the target, as keyword arguments of :class:`KubernetesHpaPolicy`."""

    tolerance: float
    downscale_stabilization_s: float
    behavior: HpaBehavior | None


class KubernetesHpaPolicy:
    """The Kubernetes HPA on TaskManager CPU utilization."""

    name = "hpa-controller"
    sync_interval_s: float = HPA_SYNC_PERIOD_S

    def __init__(self, target_cpu: float = 0.8, **options: Unpack[HpaOptions]) -> None:
        self.settings = HpaSettings(target_cpu=target_cpu, **options)

    @staticmethod
    def initial_state() -> HpaState:
        """The state of a freshly created HPA."""
        return HpaState()

    def decide(self, inputs: HpaInputs, state: HpaState) -> PeerDecision[HpaState]:
        """One HPA sync."""
        settings = self.settings
        current = inputs.current_replicas
        metric_desired: int | None
        try:
            metric_desired, utilization = resource_replicas(
                current,
                inputs.pods,
                settings.target_percent,
                tolerance_up=settings.tolerance,
                tolerance_down=settings.tolerance,
            )
            counted = sum(1 for p in inputs.pods if p.ready and not p.pending and p.cpu_usage is not None)
            note = (
                f"cpu {utilization} % of request over {counted} ready of {len(inputs.pods)} pods, "
                f"target {settings.target_percent} %: {metric_desired} replicas"
            )
        except ValueError as error:
            metric_desired, note = None, f"unable to compute the replica count: {error}"
        return reconcile(
            state,
            now=inputs.now,
            current=current,
            metric_desired=metric_desired,
            metric_note=note,
            min_replicas=inputs.min_replicas,
            max_replicas=inputs.max_replicas,
            behavior=settings.behavior,
            downscale_stabilization_s=settings.downscale_stabilization_s,
        )
