"""The planner's shared types: what it is given (PlanInput, PlannerConfig), what it returns (Decision).

Frozen dataclasses, no I/O: a policy is a pure function ``decide(plan_input, config) -> Decision``. A job is a map
of vertices to parallelism: a per-vertex policy reads every vertex of the input and plans each, a whole-job policy
plans the degenerate map of one vertex (:data:`JOB`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Protocol

import numpy as np

from planner import defaults
from planner.graph import MemoryPressure, MemoryProfile, VertexInput, check_topological
from planner.history import Recommendations


@dataclass(frozen=True)
class PlannerConfig:
    """The settings a policy reads (a projection of the agent's settings, so planner/ stays pure)."""

    min_parallelism: int
    max_parallelism: int
    target_recovery_time_s: float
    loop_interval_s: float = defaults.LOOP_INTERVAL_S
    grace_period_s: float = defaults.GRACE_PERIOD_S
    recent_rescale_window_s: float = defaults.RECENT_RESCALE_WINDOW_S
    scale_down_stabilization_s: float = defaults.SCALE_DOWN_STABILIZATION_S
    holds: str = defaults.HOLDS
    """``cost``: the three windows above are ceilings, and Daedalus shortens each to what this job's rescales
    cost (:mod:`planner.daedalus`); ``fixed``: they apply as they are."""
    static_parallelism: int | None = None
    source_partitions: int | None = None
    """Partitions of the source topic; KEDA's Kafka scaler never asks for more consumers than this."""

    # What the per-vertex policies read beyond the above (a whole-job policy reads none of it).
    checkpoint_interval_s: float = 10.0
    warm_up_s: float = 30.0
    """Rounds this soon after a (re)start only watch: rates still mix the old attempt (DS2's warm-up)."""
    slot_sharing: bool = True
    """True: the vertices share slots (Flink's default group), a job needs its largest parallelism in slots;
    False: every subtask has a slot of its own (the operator-DAG testbed), a job needs their sum."""
    memory_min_mb: float = 128.0
    """Justin's memory level 0: managed memory per slot of a stateful vertex, MB."""
    memory_max_level: int = 3
    """Justin's maxLevel: levels 0 .. max_level - 1 double the memory."""
    cache_hit_threshold: float = 0.8
    """Justin's Delta_theta: below this cache hit rate a stateful vertex is memory-bound."""
    latency_threshold_ms: float = 1.0
    """Justin's Delta_tau: above this state access latency a stateful vertex is memory-bound."""
    memory_cost_per_gb: float = 0.125
    """QEScalor's price of 1 GB of slot memory relative to one CPU core per epoch."""
    startup_cost: float = 0.5
    """QEScalor's p_u: cost of starting one subtask, in slot-epochs."""
    shutdown_cost: float = 0.25
    """QEScalor's p_d: cost of stopping one subtask, in slot-epochs."""
    heap_usage_threshold: float | None = None
    """The memory guard's heap usage (0..1) above which no managed memory is added (safeguards.memory)."""
    gc_pressure_threshold: float | None = None
    """The memory guard's GC time (0..1) above which what a round measured is not learned (safeguards.memory)."""


@dataclass(frozen=True, eq=False)
class PlanInput:
    """A snapshot of what was observed and predicted, taken once per loop.

    For a per-vertex policy it holds the job graph too (:attr:`vertices` and the fields after it); without
    vertices the job is its one vertex :data:`JOB` at :attr:`current_parallelism`.
    """

    now: float
    current_parallelism: int
    """The job's scale-out now (with vertices: the task slots it runs on, its largest parallelism)."""
    workload_avg: float | None
    """Mean workload since the last loop, records/s; None if unknown."""
    forecast: np.ndarray | None = None
    """Forecast workload per second over the horizon, records/s; None if unknown."""
    consumer_lag: float | None = None
    """Records waiting at the source now; None if unknown."""
    capacities: Mapping[int, float | None] = field(default_factory=dict)
    """Sustainable records/s per candidate scale-out; None where unknown (a per-vertex policy sizes from the
    vertices' rates instead)."""
    recovery_times: Mapping[int, float] = field(default_factory=dict)
    """Predicted recovery time per candidate scale-out (rescale to it, or failure at the current one), s."""
    forecast_upper: np.ndarray | None = None
    """The workload as high as it may rise over the horizon (a quantile of its recent rises), records/s;
    what a decision that must hold plans for. None: the forecast itself."""
    workload_previous: float | None = None
    """Mean workload over the loop before the last one, records/s; None if unknown (the workload's trend)."""
    workload_usual: float | None = None
    """The workload the job stood at or under for the rise quantile of the last hour the agent keeps, records/s;
    None until that hour is kept whole (where the workload stands against its own recent past)."""
    workload_noise: float | None = None
    """How far the workload's mean moves from one loop to the next by noise alone, relative to its level (a standard
    deviation); None until enough of the last hour is kept."""
    workload_climb_from: float | None = None
    """The mean workload ``SUSTAINED_CLIMB_LOOPS`` loops before the last one (``planner.daedalus``), where each loop
    since ran above the one before, records/s; None otherwise (a sustained climb's foot)."""
    last_rescale_at: float | None = None
    recovering: bool = False
    """True while the recovery watcher says the job has not caught up after a rescale or failure."""
    recovering_since: float | None = None
    """When that recovery started (processing first stopped, through every stop inside it: a failure, or a rescale
    taken because it could not catch up in time), s; None while the watcher holds for none. The target recovery time
    counts from it."""
    backlog_drain: float | None = None
    """Records/s the backlog fell by over the last loop while the job recovers (negative where it grew); None where
    unknown or while it does not recover."""
    recent_recommendations: Recommendations = field(default_factory=Recommendations)
    """Desired scale-outs of earlier rounds, for scale-down stabilization."""
    capacity_sources: Mapping[int, str] = field(default_factory=dict)
    """Where each capacity came from (observed, estimated, prior), for the reasons."""
    worker_cpu_avg: float | None = None
    """Mean CPU load (0..1) over workers since the last loop, for CPU-driven baselines."""
    worker_throughput: Mapping[str, float] = field(default_factory=dict)
    """Mean records/s each worker processed since the last loop (DS2's observed rate per instance)."""
    worker_cpu: Mapping[str, float] = field(default_factory=dict)
    """Mean CPU load (0..1) of each worker since the last loop."""
    worker_busy: Mapping[str, float] = field(default_factory=dict)
    """Mean busy fraction (0..1, Flink's busyTimeMsPerSecond / 1000) of each worker since the last loop."""
    source_rate: float | None = None
    """Records/s the source read since the last loop (the sum over workers); None if unknown."""
    uptime_s: float | None = None
    """Seconds since the job last (re)started processing; 0 while it is down; None if unknown."""
    job_running: bool = True
    """False while the job is down (restarting after a rescale or failure)."""
    partition_offsets: tuple[tuple[int, int | None], ...] | None = None
    """Per source partition: (log-end offset, offset committed at the last completed checkpoint); None if unknown."""
    policy_state: Mapping[str, Any] | None = None
    """What the policy asked to keep after its last round (:attr:`Decision.policy_state`), or None."""
    rescale_downtimes: Mapping[int, float] = field(default_factory=dict)
    """Expected downtime of a rescale from the current scale-out to each candidate (learned from measured
    rescales, a prior before), s; empty when unknown."""
    failure_ready: Mapping[int, float] = field(default_factory=dict)
    """The highest steady workload at which a failure at each candidate scale-out recovers within the target,
    records/s; absent where unknown."""
    rescale_recoveries: Mapping[int, float] = field(default_factory=dict)
    """Predicted recovery of a rescale to each candidate scale-out alone (at the current one: of a failure there),
    s; absent where unknown. :attr:`recovery_times` is the slower of it and a failure once there."""
    replay_records: float | None = None
    """Records a rescale now replays (those since the last checkpoint, expected; none where the scale target
    aligns rescales with a checkpoint); None if unknown."""

    # The job graph, for the per-vertex policies (empty for a whole-job one).
    vertices: tuple[VertexInput, ...] = ()
    """Every vertex, in topological order (each after all its upstream vertices)."""
    recent_workload: float | None = None
    """Mean workload over the last checkpoint interval: what a restart replays per second of it."""
    downtimes_s: Mapping[int, float] = field(default_factory=dict)
    """Expected downtime of a rescale to a job that needs ``n`` task slots, s (the recovery predictor's)."""
    failure_downtime_s: float | None = None
    """Expected downtime of a failure at the current plan, s."""
    memory: MemoryProfile | None = None
    """The TaskManagers' profile now; None if unknown."""
    memory_applies: bool = False
    """True when the scale target can change the TaskManagers' memory (a FlinkDeployment); otherwise memory
    decisions are recommendations only."""
    memory_pressure: MemoryPressure = field(default_factory=MemoryPressure)
    """The fullest TaskManager's heap usage and the busiest one's GC time this round (the memory guard's)."""

    def __post_init__(self) -> None:
        check_topological(self.vertices)

    @property
    def current(self) -> dict[str, int]:
        """Parallelism of every vertex now, by id (without vertices: ``{JOB: current_parallelism}``)."""
        if not self.vertices:
            return {JOB: self.current_parallelism}
        return {v.id: v.parallelism for v in self.vertices}


class ReasonCode(str, Enum):
    """Why a decision is what it is, as data: telemetry counts these, never the prose of the reasons."""

    GRACE = "grace"
    """Held: the grace period after a rescale has not passed."""
    RECOVERING = "recovering"
    """Held: the job has not caught up after its last rescale or failure."""
    UNKNOWN_DATA = "unknown-data"
    """Held: a signal the policy needs is unknown this round."""
    BOUNDS = "bounds"
    """Moved into the operator's [min, max] scale-out bounds."""
    SCALE_OUT = "scale-out"
    """Rescale to more workers."""
    SCALE_IN = "scale-in"
    """Rescale to fewer workers."""
    STABILIZED = "stabilized"
    """A scale-in was wanted but the stabilization window held it back (fully or in part)."""
    NO_CANDIDATE = "no-candidate"
    """No scale-out met every constraint: the policy's fallback chose."""
    KEEP = "keep"
    """The current scale-out is what the policy wants."""
    VETOED = "vetoed"
    """The policy's rescale was vetoed by a safeguard (planner.safeguards): memory pressure, a blocked period,
    an ineffective scale-out it would repeat."""


JOB = "job"
"""The one vertex of a whole-job plan: a policy that plans one scale-out for the job plans ``{JOB: n}``."""


@dataclass(frozen=True)
class MemoryRecommendation:
    """Justin's memory decision: a level per vertex and the TaskManager slot memory it implies."""

    levels: Mapping[str, int | None]
    """Memory level per vertex id; None: the vertex needs no managed memory (Justin's bottom)."""
    managed_memory_per_slot_mb: float
    """Managed memory a slot needs: the largest level of a stateful vertex (0 when none is stateful)."""
    changes: bool
    """The recommendation differs from what the TaskManagers run now."""


@dataclass(frozen=True)
class ProfileRecommendation:
    """QEScalor's TaskManager resource profile: what a slot should get, and the model's reasons."""

    cpu_per_slot: float
    managed_memory_per_slot_mb: float
    performance: float | None
    """Predicted records/s one subtask of the bottleneck vertex sustains at this profile (source records)."""
    cost: float | None
    """QCESA's cost of the forecast horizon at this profile."""
    exploring: bool
    """True while too few profiles were sampled to model: the profile is the next sample (QEScalor's DSA)."""
    reason: str


@dataclass(frozen=True)
class Decision:
    """What a policy would do and why: the plan as a map from job vertex to parallelism, as Flink applies one.

    A policy that plans per vertex maps each vertex id to its parallelism; a whole-job policy plans one scale-out,
    the degenerate map ``{JOB: n}`` (:meth:`whole_job`). Either way :attr:`target_parallelism` is the job's
    scale-out: the task slots the plan needs when the vertices share slots (its largest parallelism).
    """

    parallelism: Mapping[str, int]
    """Target parallelism per vertex after this round (equal to the current one: no rescale)."""
    desired: Mapping[str, int]
    """What the policy wanted before stabilization held it back."""
    reasons: tuple[str, ...]
    """Human-readable reasons: which constraint ruled out each smaller scale-out, which guard held."""
    code: ReasonCode
    """The outcome as a code (see :class:`ReasonCode`)."""
    acted: bool = True
    """False when a guard (grace period, missing data) stopped the policy from deciding at all."""
    policy_state: Mapping[str, Any] | None = None
    """JSON the policy wants back next round (a peer's metric window, stabilization, delayed scale-down)."""
    memory: MemoryRecommendation | None = None
    """Justin's managed memory per slot, where the policy decides it."""
    profile: ProfileRecommendation | None = None
    """QEScalor's TaskManager resource profile (advice), where the policy decides it."""

    @classmethod
    def whole_job(
        cls,
        target: int,
        desired: int,
        reasons: tuple[str, ...],
        code: ReasonCode,
        *,
        acted: bool = True,
        policy_state: Mapping[str, Any] | None = None,
    ) -> Decision:
        """A whole-job decision: run the job at ``target`` (the policy wanted ``desired``)."""
        return cls({JOB: target}, {JOB: desired}, reasons, code, acted=acted, policy_state=policy_state)

    @property
    def target_parallelism(self) -> int:
        """The scale-out to run at after this round: the whole-job target, or the plan's largest parallelism."""
        return max(self.parallelism.values(), default=0)

    @property
    def desired_parallelism(self) -> int:
        """The scale-out the policy wanted before stabilization held it back (as :attr:`target_parallelism`)."""
        return max(self.desired.values(), default=0)

    def retargeted(self, target: int) -> Decision:
        """This whole-job decision running at ``target`` instead (a safeguard's veto or limit)."""
        return replace(self, parallelism={JOB: target})

    def changes(self, current: Mapping[str, int]) -> dict[str, int]:
        """The vertices whose parallelism this decision changes, with their targets."""
        return {vid: p for vid, p in self.parallelism.items() if current.get(vid) != p}

    def rescales_from(self, current: int | Mapping[str, int]) -> bool:
        """True if this decision changes the scale-out (``current`` an int) or any vertex (a map by vertex id)."""
        if isinstance(current, int):
            return self.target_parallelism != current
        return bool(self.changes(current))


class Policy(Protocol):
    """A scaling policy: a pure function of the round's snapshot and the config, returning a :class:`Decision`.

    A whole-job policy plans one scale-out (its decision's plan is ``{JOB: n}``); a per-vertex one reads the job
    graph (:attr:`PlanInput.vertices`) and plans every vertex."""

    @property
    def name(self) -> str: ...

    @property
    def uses_forecast(self) -> bool:
        """Whether the policy reads the forecast (the agent skips forecasting for those that do not)."""
        ...

    @property
    def sync_interval_s(self) -> float | None:
        """The policy's own sync period (the lab calls it at this period); None: the agent's loop interval."""
        ...

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """Choose the plan for the next round."""
        ...


def keep(current: int, code: ReasonCode, *reasons: str, acted: bool = False) -> Decision:
    """A decision that keeps the current scale-out, with the code of why."""
    return Decision.whole_job(current, current, tuple(reasons), code, acted=acted)


def decided(current: int, target: int, desired: int, reasons: tuple[str, ...] | list[str]) -> Decision:
    """A decision the policy reached (acted): its code follows from the current, desired and target scale-outs."""
    if target > current:
        code = ReasonCode.SCALE_OUT
    elif target < current:
        code = ReasonCode.SCALE_IN if target == desired else ReasonCode.STABILIZED
    else:
        code = ReasonCode.STABILIZED if desired < current else ReasonCode.KEEP
    return Decision.whole_job(target, desired, tuple(reasons), code, acted=True)
