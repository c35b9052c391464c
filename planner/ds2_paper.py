"""DS2 as its paper states it (paper 002, OSDI 2018), with its scaling manager, on the single-vertex job.

The model (section 3, eq. 1-8; ``planner.ds2`` holds the per-operator math reused here): an
instance's true processing rate is its observed rate over its useful-time fraction; the vertex's
optimal parallelism is the target source rate over the mean true rate per instance, rounded up.

The scaling manager (section 4, "Operational issues"), checked against the authors' controller,
strymon-system/ds2 e3decca4197cff38dafa2cf50a0d2767ec08f728 (``controller/src/bin/manager.rs``
43-53 and 225-311, ``controller/src/policy/scaling.rs`` 96-263 and 293-390,
``controller/config/ds2.toml``):

* policy interval: metrics are aggregated and the policy invoked once per interval; the Flink
  experiments use 10 s (section 5.3; 5-30 s "reasonable for Flink"): ``sync_interval_s = 10``.
* warm-up: the number of policy intervals ignored after a scaling action (and at start): 30 s at
  10 s = 3 intervals in the Flink experiments; counted only in intervals that deliver metrics.
* activation time: the number of consecutive policy decisions considered before a scaling
  command, 1 in the Flink and Heron experiments; the paper suggests the maximum or the median of
  them, and section 5.4 reads five intervals as "the decision is unchanged over 5 consecutive
  intervals". ``activation_rule`` picks one: ``persist`` (default: the decision must have held for
  all of them), ``max``, ``median``, or ``latest`` (the authors' manager, which waits for the count
  and applies the newest decision).
* minor changes are ignored: the manager applies any scale-up but a scale-down only by 2 or more
  (``manager.rs`` ``consider_change``; the paper says "by one or two").
* target rate ratio: when a decision does not scale up and the target source rate exceeds the
  observed source rate by more than this ratio, the decision is multiplied by that ratio
  (``scaling.rs`` 217-259); 1.0 in every experiment of the paper; the authors' default is
  ``f64::MAX`` (off) and their online manager never applies it, so ``None`` turns it off.
* over-provisioning (``scaling_factor``, default 0): ``ceil(optimal x (1 + factor))``.

The paper's assumptions hold here as there: no skew (the mean instance speaks for all) and linear
scaling; on the skewed simulated job DS2 under-provisions the hottest worker.

Inputs needed per interval (``Ds2Inputs``): now; whether the job runs; current parallelism; the
target source rate (what producers write) and the observed source rate (what the job read); per
worker its processed records/s and useful-time fraction; min/max parallelism.
State (``Ds2State``): intervals since the last rescale, the decisions since then, the scale-out
DS2 believes is deployed.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from planner.ds2 import OperatorRates, ds2_parallelism, mean_true_rate
from planner.peer_types import PeerDecision, integer_from_json, items_from_json


class ActivationRule(enum.StrEnum):
    """How the decisions of the activation window become one scaling command."""

    PERSIST = "persist"
    """All decisions in the window agree (section 5.4's reading)."""
    MAX = "max"
    MEDIAN = "median"
    LATEST = "latest"
    """The authors' manager: the newest decision once enough were made."""


@dataclass(frozen=True)
class Ds2Settings:
    """The scaling manager's parameters (``config/ds2.toml`` ``[scaling_manager]``)."""

    target_rate_ratio: float | None = 1.0
    """Final-adjustment threshold on target / observed source rate; None: off."""
    over_provisioning: float = 0.0
    """``scaling_factor``: deploy ``(1 + this)`` x the optimal instances."""
    policy_interval_s: float = 10.0
    warm_up_intervals: int = 3
    activation_intervals: int = 1
    activation_rule: ActivationRule = ActivationRule.PERSIST
    min_scale_down_step: int = 2
    """A scale-down smaller than this is ignored as noise."""

    def __post_init__(self) -> None:
        if self.target_rate_ratio is not None and self.target_rate_ratio < 1.0:
            raise ValueError(f"target_rate_ratio must be >= 1 (or None), got {self.target_rate_ratio}")
        if self.over_provisioning < 0 or self.warm_up_intervals < 0 or self.activation_intervals < 1:
            raise ValueError("need over_provisioning >= 0, warm_up_intervals >= 0 and activation_intervals >= 1")


@dataclass(frozen=True)
class Ds2Inputs:
    """One policy interval's metrics for the single vertex."""

    now: float
    job_running: bool
    current_parallelism: int
    target_source_rate: float | None
    """Records/s the sources must sustain (what producers wrote this interval)."""
    observed_source_rate: float | None
    """Records/s the sources actually read this interval."""
    worker_processed_rate: Mapping[str, float] = field(default_factory=dict)
    """Records/s each instance processed this interval (``R_prc``)."""
    worker_useful_fraction: Mapping[str, float] = field(default_factory=dict)
    """Each instance's useful-time fraction this interval (``W_u`` over the interval)."""
    min_parallelism: int = 1
    max_parallelism: int = 1_000_000


@dataclass(frozen=True)
class Ds2State:
    """What the scaling manager remembers."""

    intervals_since_rescale: int = 0
    decisions: tuple[int, ...] = ()
    """Policy decisions since the last rescale, newest last, at most the activation window."""
    deployed: int | None = None
    """The scale-out DS2 last saw or set; a different current one means the job was rescaled."""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "intervals_since_rescale": self.intervals_since_rescale,
            "decisions": list(self.decisions),
            "deployed": self.deployed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Ds2State:
        """The inverse of :meth:`to_dict`."""
        deployed = data.get("deployed")
        return cls(
            intervals_since_rescale=integer_from_json(data.get("intervals_since_rescale", 0)),
            decisions=tuple(integer_from_json(d) for d in items_from_json(data.get("decisions", ()))),
            deployed=None if deployed is None else integer_from_json(deployed),
        )


class Ds2Code(enum.StrEnum):
    """Outcome of a policy interval."""

    NO_METRICS = "no_metrics"
    WARM_UP = "warm_up"
    NO_TRUE_RATE = "no_true_rate"
    ACTIVATING = "activating"
    AT_OPTIMUM = "at_optimum"
    MINOR_CHANGE = "minor_change"
    SCALE_UP = "scale_up"
    SCALE_DOWN = "scale_down"


def significant_change(current: int, proposed: int, min_scale_down_step: int = 2) -> bool:
    """Any scale-up, or a scale-down by at least ``min_scale_down_step`` (``consider_change``).

    >>> significant_change(10, 11), significant_change(10, 9), significant_change(10, 8)
    (True, False, True)
    """
    return proposed > current or current - proposed >= min_scale_down_step


def activated_decision(decisions: tuple[int, ...], window: int, rule: ActivationRule) -> int | None:
    """The scaling command the last ``window`` decisions yield, or None while they do not yet.

    >>> activated_decision((4, 5, 5), 2, ActivationRule.PERSIST), activated_decision((4, 6), 2, ActivationRule.PERSIST)
    (5, None)
    >>> activated_decision((4, 7, 5), 3, ActivationRule.MEDIAN)
    5
    """
    if len(decisions) < window:
        return None
    recent = decisions[-window:]
    if rule is ActivationRule.PERSIST:
        return recent[0] if all(d == recent[0] for d in recent) else None
    if rule is ActivationRule.MAX:
        return max(recent)
    if rule is ActivationRule.MEDIAN:
        return math.ceil(statistics.median(recent))
    return recent[-1]


class Ds2Options(TypedDict, total=False):
    """The :class:`Ds2Settings` besides the target rate ratio, as keyword arguments of :class:`Ds2PaperPolicy`."""

    over_provisioning: float
    policy_interval_s: float
    warm_up_intervals: int
    activation_intervals: int
    activation_rule: ActivationRule
    min_scale_down_step: int


class Ds2PaperPolicy:
    """DS2 with its scaling manager (policy interval, warm-up, activation, target rate ratio)."""

    name = "ds2-paper"

    def __init__(self, target_rate_ratio: float | None = 1.0, **options: Unpack[Ds2Options]) -> None:
        self.settings = Ds2Settings(target_rate_ratio=target_rate_ratio, **options)
        self.sync_interval_s: float = self.settings.policy_interval_s

    @staticmethod
    def initial_state() -> Ds2State:
        """The state of a freshly started scaling manager."""
        return Ds2State()

    def decide(self, inputs: Ds2Inputs, state: Ds2State) -> PeerDecision[Ds2State]:
        """One policy interval."""
        settings = self.settings
        current = inputs.current_parallelism
        reasons: list[str] = []
        if state.deployed != current:
            if state.deployed is not None:
                reasons.append(f"scale-out changed {state.deployed} -> {current}: warm-up again")
            state = Ds2State(deployed=current)

        def keep(code: Ds2Code, new_state: Ds2State, desired: int | None = None) -> PeerDecision[Ds2State]:
            return PeerDecision(current, current if desired is None else desired, code.value, tuple(reasons), new_state)

        target_rate = inputs.target_source_rate
        if not inputs.job_running or target_rate is None or not inputs.worker_processed_rate:
            reasons.append("no metrics this interval")
            return keep(Ds2Code.NO_METRICS, state)
        if state.intervals_since_rescale < settings.warm_up_intervals:
            reasons.append(f"warm-up interval {state.intervals_since_rescale + 1} of {settings.warm_up_intervals}")
            return keep(Ds2Code.WARM_UP, Ds2State(state.intervals_since_rescale + 1, (), current))

        counted = Ds2State(state.intervals_since_rescale + 1, state.decisions, current)
        per_instance = mean_true_rate(inputs.worker_processed_rate, inputs.worker_useful_fraction)
        if per_instance is None or not math.isfinite(target_rate * (1.0 + settings.over_provisioning) / per_instance):
            reasons.append("no instance with useful time and output: true rate undefined")
            return keep(Ds2Code.NO_TRUE_RATE, counted)
        decision = self._bounded_optimum(inputs, target_rate, per_instance, reasons)
        decisions = (*counted.decisions, decision)[-settings.activation_intervals :]
        counted = Ds2State(counted.intervals_since_rescale, decisions, current)
        command = activated_decision(decisions, settings.activation_intervals, settings.activation_rule)
        if command is None:
            reasons.append(
                f"activation: {len(decisions)} of {settings.activation_intervals} decisions "
                f"({settings.activation_rule.value})"
            )
            return keep(Ds2Code.ACTIVATING, counted, decision)
        if command == current:
            return keep(Ds2Code.AT_OPTIMUM, counted, decision)
        if not significant_change(current, command, settings.min_scale_down_step):
            reasons.append(f"scale-down {current} -> {command} is a minor change: ignored")
            return keep(Ds2Code.MINOR_CHANGE, counted, decision)
        reasons.append(f"{current} -> {command}")
        code = Ds2Code.SCALE_UP if command > current else Ds2Code.SCALE_DOWN
        return PeerDecision(command, decision, code.value, tuple(reasons), Ds2State(0, (), command))

    def _bounded_optimum(self, inputs: Ds2Inputs, target_rate: float, per_instance: float, reasons: list[str]) -> int:
        """DS2's optimal scale-out for the target rate, raised by how far the source falls short of its target
        (``target_rate_ratio``), within the parallelism bounds: this interval's policy decision."""
        settings = self.settings
        current = inputs.current_parallelism
        aggregate = per_instance * current
        operator = OperatorRates("job", current, aggregate, aggregate)
        optimal = ds2_parallelism([operator], target_rate, target_ratio=1.0 + settings.over_provisioning)["job"]
        reasons.append(
            f"ds2: target {target_rate:,.0f}/s over true rate {per_instance:,.0f}/s per instance"
            + (f" x {1 + settings.over_provisioning:g}" if settings.over_provisioning else "")
            + f" = {optimal}"
        )
        observed = inputs.observed_source_rate
        threshold = settings.target_rate_ratio
        if threshold is not None and optimal <= current and observed is not None and observed > 0:
            ratio = target_rate / observed
            if ratio > threshold:
                adjusted = math.ceil(ratio * optimal)
                reasons.append(
                    f"source reads {observed:,.0f}/s, {ratio:.3f} x short of its target: adjusted to {adjusted}"
                )
                optimal = adjusted
        decision = min(max(optimal, inputs.min_parallelism), inputs.max_parallelism)
        if decision != optimal:
            reasons.append(f"bounded to {decision}")
        return decision
