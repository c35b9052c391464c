"""The per-operator policies replayed over a workload trace on the operator-DAG testbed, beside whole-job Daedalus.

``lab.dag`` runs DS2 and Justin to convergence at a fixed rate, as their papers do. This module runs
them, Daedalus per operator and QEScalor through hours of a trace, as ``perdix run`` would: every
policy decides at its own sync period from what the testbed measured since its last decision, its
plan is deployed, and the job is judged by the lab's one SLO judgement (``lab.slo``). The baseline is
whole-job Daedalus: the same Algorithm 1 with the same forecast and recovery model
(``planner.daedalus_per_operator`` with ``uniform=True``), every vertex at one parallelism, as
reactive mode runs a job; so the two Daedalus rows differ only in per-vertex plans.

The testbed (``simulator.dag``: map/filter -> keyed 10-s window aggregation -> sink, one task per slot,
a slot's memory shared by its window state) has no rescale of its own, so a plan change is a restart:

* the job stops for ``downtime = base + per_slot x slots`` (the larger deployment's slots), while
  arrivals pile up at the source;
* the new deployment starts behind by what was pending at the stop plus everything read since the
  last checkpoint (aligned checkpoints every ``checkpoint_interval_s``: the restore rewinds the source
  to it), plus what arrived while it was down (``DagRun.carry_backlog``);
* failures hit at the same instants for every policy (a Poisson process of ``failures_per_hour``), a
  restart at the same plan with the failure downtime.

Slots are the testbed's (the sum of the vertices' parallelism: no slot sharing); managed memory is the
stateful tasks' slot memory. Justin's memory levels and QEScalor's resource profile are applied at
the restarts they ask for (the testbed redeploys with any slot memory). QEScalor's random-forest
performance model starts from testbed runs at each memory level (its sampler, OOPSer, run offline
here): one measured minute per profile of the window operator's true rate per task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lab.dag import cache_hit_rate
from lab.inline import InlineExecutor
from lab.slo import Stop, judge
from models.forecast import ForecasterConfig, WorkloadForecaster
from planner.daedalus_per_operator import DaedalusPerOperator
from planner.history import Recommendations
from planner.justin import memory_mb
from planner import registry
from planner.graph import MemoryProfile, VertexInput, VertexMetrics
from planner.per_operator import slots, subtasks
from planner.qescalor_per_operator import ProfileSample
from planner.types import Decision, PlanInput, PlannerConfig, Policy
from simulator.dag import DagMeasurement, DagRun, DagTestbed
from simulator.trace import Trace

DAG_REPLAY_POLICIES: dict[str, Callable[[], Policy]] = {
    "daedalus": lambda: DaedalusPerOperator(uniform=True),
    **{name: registry.SPECS[name].vertex_policy for name in sorted(registry.per_vertex())},
}
"""The policies of the testbed replay: every policy with a per-vertex form (planner.registry), and ``daedalus``,
whole-job Daedalus (every vertex at one parallelism) as the baseline they are measured against."""

SERIES_STEP_S = 10
"""Resolution of the series kept for plots."""


@dataclass(frozen=True)
class DagReplaySettings:
    """One replay's knobs; the defaults are the lab's (target 300 s, 1 failure per hour, seed 7)."""

    hours: float | None = 6.0
    target_recovery_time_s: float = 300.0
    loop_interval_s: int = 60
    """The agent's loop: the sync period of policies without one of their own (Daedalus, QEScalor)."""
    checkpoint_interval_s: int = 10
    failures_per_hour: float = 1.0
    rescale_downtime_base_s: float = 10.0
    rescale_downtime_per_slot_s: float = 0.5
    failure_downtime_base_s: float = 8.0
    failure_downtime_per_slot_s: float = 0.25
    initial_parallelism: int = 4
    """Every vertex's parallelism at the start (all policies start alike)."""
    initial_memory_mb: float = 128.0
    """Slot memory at the start: Justin's level 0."""
    max_parallelism: int = 24
    """Upper bound of every vertex's parallelism."""
    grace_period_s: float = 180.0
    recent_rescale_window_s: float = 600.0
    scale_down_stabilization_s: float = 600.0
    seed: int = 7

    def rescale_downtime(self, task_slots: int) -> int:
        """Seconds a restart to (or from) ``task_slots`` slots stops the job."""
        return max(1, int(round(self.rescale_downtime_base_s + self.rescale_downtime_per_slot_s * task_slots)))

    def failure_downtime(self, task_slots: int) -> int:
        """Seconds a failure at ``task_slots`` slots stops the job."""
        return max(1, int(round(self.failure_downtime_base_s + self.failure_downtime_per_slot_s * task_slots)))

    def planner_config(self) -> PlannerConfig:
        """What every policy of the replay is configured with."""
        return PlannerConfig(
            min_parallelism=1,
            max_parallelism=self.max_parallelism,
            target_recovery_time_s=self.target_recovery_time_s,
            loop_interval_s=float(self.loop_interval_s),
            grace_period_s=self.grace_period_s,
            recent_rescale_window_s=self.recent_rescale_window_s,
            scale_down_stabilization_s=self.scale_down_stabilization_s,
            checkpoint_interval_s=float(self.checkpoint_interval_s),
            warm_up_s=30.0,
            slot_sharing=False,
            memory_min_mb=self.initial_memory_mb,
        )


def duration_of(trace: Trace, hours: float | None) -> int:
    """Seconds replayed."""
    total = int(trace.duration_s)
    return total if hours is None else min(total, int(hours * 3600))


def forecasts(
    trace: Trace, *, hours: float | None, loop_interval_s: int = 60, horizon_s: int = 900
) -> dict[int, np.ndarray]:
    """The agent's forecaster fed the trace's arrivals, its forecast at the end of every loop (by second).

    The arrivals do not depend on the policy, so one forecaster serves every policy of a trace.
    """
    duration = duration_of(trace, hours)
    rates = trace.per_second(0, duration)
    forecaster = WorkloadForecaster(ForecasterConfig(horizon_s=horizon_s, window_s=900), executor=InlineExecutor())
    out: dict[int, np.ndarray] = {}
    for end in range(loop_interval_s, duration + 1, loop_interval_s):
        result = forecaster.step(rates[end - loop_interval_s : end])
        if result.values is not None:
            out[end] = np.asarray(result.values, dtype=float)
    return out


def sample_profiles(
    testbed: DagTestbed, *, levels: Sequence[int] = (0, 1, 2), min_mb: float = 128.0, seed: int = 7
) -> list[ProfileSample]:
    """QEScalor's samples from testbed runs: per memory level, the window operator's true rate per task.

    Each run saturates a small deployment (2 map, 4 window, 1 sink tasks) for a warm-up and a measured
    minute; the performance is in source records/s per window task (its true rate over its input ratio).
    """
    index = next(i for i, op in enumerate(testbed.job.operators) if op.windowed)
    ratio = float(testbed.job.input_ratios[index])
    samples = []
    for level in levels:
        mb = memory_mb(level, min_memory_mb=min_mb)
        run = testbed.deploy((2, 4, 1), mb, seed=seed)
        run.set_rate(None)
        run.advance(90)
        measured = run.measure(60).operators[index]
        samples.append(ProfileSample(1.0, mb, measured.true_rate_per_task / ratio, 1))
    return samples


def vertex_inputs(
    testbed: DagTestbed, measurement: DagMeasurement, slot_memory_mb: float, config: PlannerConfig
) -> tuple[VertexInput, ...]:
    """The testbed's operators as job vertices with DS2's rates and, for a window, its cache hit rate."""
    vertices = []
    previous: str | None = None
    for i, (spec, op) in enumerate(zip(testbed.job.operators, measurement.operators)):
        rated = op.busyness > 0.0 and op.true_rate_per_task > 0
        hit = cache_hit_rate(testbed, i, op.parallelism, op.input_rate, slot_memory_mb)
        state = None
        if spec.windowed:
            state = op.input_rate * spec.window_s / 2.0 * spec.state_bytes_per_record
        metrics = VertexMetrics(
            records_in_rate=op.input_rate,
            records_out_rate=op.output_rate,
            busy_mean=op.busyness,
            busy_max=op.max_busyness,
            backpressure_mean=op.backpressure,
            true_processing_rate=op.true_rate_per_task * op.parallelism if rated else None,
            true_output_rate=op.output_rate / op.busyness if rated else None,
            state_size_bytes=state,
            cache_hit_rate=hit,
            rated_subtasks=op.parallelism if rated else 0,
        )
        vertices.append(
            VertexInput(
                spec.name,
                spec.name,
                op.parallelism,
                (previous,) if previous else (),
                max_parallelism=testbed.job.max_parallelism if spec.keyed else 0,
                metrics=metrics,
            )
        )
        previous = spec.name
    return tuple(vertices)


@dataclass
class _Down:
    """A restart in progress."""

    kind: str
    resume_s: int
    backlog: float
    """Records behind when it stopped (pending plus the replay since the last checkpoint) plus arrivals since."""
    plan: dict[str, int]
    memory_mb: float


@dataclass
class _Progress:
    """Where one replay stands: the deployment running or the restart in progress, and what happened so far."""

    plan: dict[str, int]
    memory_mb: float
    run: DagRun
    duration: int
    deployed_at: int = 0
    down: _Down | None = None
    last_rescale: float | None = None
    recommendations: Recommendations = field(default_factory=Recommendations)
    stops: list[Stop] = field(default_factory=list)
    rescales: int = 0
    lost: int = 0
    lag: np.ndarray = field(init=False)
    """Consumer lag per second."""
    used_slots: np.ndarray = field(init=False)
    managed: np.ndarray = field(init=False)
    """Managed memory per second, MB."""

    def __post_init__(self) -> None:
        self.lag = np.zeros(self.duration)
        self.used_slots = np.zeros(self.duration)
        self.managed = np.zeros(self.duration)


@dataclass(frozen=True)
class DagReplayResult:
    """The summary and the thinned series of one replay."""

    trace: str
    policy: str
    summary: dict[str, Any]
    series: dict[str, np.ndarray] = field(default_factory=dict)


class DagReplay:
    """One trace under one policy on the testbed (see the module docstring)."""

    def __init__(
        self,
        trace: Trace,
        policy: str,
        settings: DagReplaySettings | None = None,
        *,
        testbed: DagTestbed | None = None,
        forecast_by_second: Mapping[int, np.ndarray] | None = None,
        profiles: Sequence[ProfileSample] | None = None,
    ) -> None:
        if policy not in DAG_REPLAY_POLICIES:
            raise ValueError(
                f"policy {policy!r} is not replayed on the testbed; known: {', '.join(DAG_REPLAY_POLICIES)}"
            )
        self.trace = trace
        self.name = policy
        self.policy = DAG_REPLAY_POLICIES[policy]()
        self.settings = settings or DagReplaySettings()
        self.testbed = testbed or DagTestbed()
        self.config = self.settings.planner_config()
        self.forecasts = forecast_by_second
        if self.policy.uses_forecast and forecast_by_second is None:
            self.forecasts = forecasts(
                self.trace, hours=self.settings.hours, loop_interval_s=self.settings.loop_interval_s
            )
        self.policy_state: dict[str, Any] | None = None
        if policy == "qescalor":
            samples = profiles if profiles is not None else sample_profiles(self.testbed, seed=self.settings.seed)
            self.policy_state = {"profiles": [s.to_dict() for s in samples]}

    def failure_times(self, duration: int) -> set[int]:
        """The failure instants of the trace: the same for every policy."""
        rate = self.settings.failures_per_hour
        if rate <= 0:
            return set()
        rng = np.random.default_rng([self.settings.seed, 11])
        times: set[int] = set()
        t = 0.0
        while True:
            t += float(rng.exponential(3600.0 / rate))
            if t >= duration:
                return times
            times.add(int(t))

    def run(self) -> DagReplayResult:
        """Replay the trace; the summary is the lab's (slots, memory, SLO, rescales)."""
        s = self.settings
        duration = duration_of(self.trace, s.hours)
        rates = self.trace.per_second(0, duration)
        failures = self.failure_times(duration)
        sync = int(self.policy.sync_interval_s or s.loop_interval_s)
        plan = {name: s.initial_parallelism for name in self.testbed.operator_names}
        progress = _Progress(plan, s.initial_memory_mb, self._deploy(plan, s.initial_memory_mb, 0), duration)
        for t in range(duration):
            self._second(progress, t, rates, failures, sync)
        progress.lost += progress.run.accounting.lost
        return self._result(progress, rates, duration, sync)

    def _second(self, progress: _Progress, t: int, rates: np.ndarray, failures: set[int], sync: int) -> None:
        """Second ``t``: a restart resumes or goes on, or the job runs a second, fails, or its policy decides."""
        rate = float(rates[t])
        down = progress.down
        if down is not None and t >= down.resume_s:
            progress.lost += progress.run.accounting.lost
            progress.plan, progress.memory_mb = down.plan, down.memory_mb
            progress.run = self._deploy(progress.plan, progress.memory_mb, t)
            progress.run.carry_backlog(int(round(down.backlog)))
            progress.deployed_at, progress.down = t, None
        if progress.down is not None:
            progress.down.backlog += rate
            progress.lag[t] = progress.down.backlog
            progress.used_slots[t] = max(slots(progress.plan, shared=False), slots(progress.down.plan, shared=False))
            progress.managed[t] = self._managed_mb(progress.plan, progress.memory_mb)
            return
        run = progress.run
        run.set_rate(rate)
        run.step()
        # The consumer lag, as Flink's pendingRecords reports it: records the source has not read yet
        # (records in the operators' input buffers are in flight, not behind).
        progress.lag[t] = run.pending
        progress.used_slots[t] = slots(progress.plan, shared=False)
        progress.managed[t] = self._managed_mb(progress.plan, progress.memory_mb)
        now = t + 1
        if t in failures:
            downtime = self.settings.failure_downtime(slots(progress.plan, shared=False))
            progress.down = self._stop(
                run, "failure", progress.plan, progress.memory_mb, now, progress.deployed_at, downtime
            )
            progress.stops.append(Stop("failure", now, progress.down.resume_s))
            return
        if now % sync or now - progress.deployed_at < 1:
            return
        self._decide(progress, now, rates, sync)

    def _decide(self, progress: _Progress, now: int, rates: np.ndarray, sync: int) -> None:
        """The policy's round at ``now``: its decision, remembered, and a restart when it changes the plan."""
        s = self.settings
        decision = self.policy.decide(self._plan_input(progress, now, rates, sync), self.config)
        if decision.policy_state is not None:
            self.policy_state = dict(decision.policy_state)
        if decision.acted:
            keep_s = max(s.scale_down_stabilization_s, s.loop_interval_s) * 2
            progress.recommendations = progress.recommendations.add(
                float(now), subtasks(decision.desired), keep_s=keep_s
            )
        plan, memory = progress.plan, progress.memory_mb
        new_plan = {name: int(decision.parallelism[name]) for name in self.testbed.operator_names}
        new_memory = self._memory(decision, memory)
        if new_plan != plan or new_memory != memory:
            downtime = s.rescale_downtime(max(slots(plan, shared=False), slots(new_plan, shared=False)))
            progress.down = self._stop(
                progress.run, "rescale", new_plan, new_memory, now, progress.deployed_at, downtime
            )
            progress.stops.append(Stop("rescale", now, progress.down.resume_s))
            progress.rescales += 1
            progress.last_rescale = float(now)

    def _plan_input(self, progress: _Progress, now: int, rates: np.ndarray, sync: int) -> PlanInput:
        """What the policy sees at ``now``: the testbed's measurement since the last decision (or deployment),
        the workload, the forecast and the restart costs."""
        s = self.settings
        measurement = progress.run.measure(min(sync, now - progress.deployed_at))
        vertices = vertex_inputs(self.testbed, measurement, progress.memory_mb, self.config)
        return PlanInput(
            now=float(now),
            current_parallelism=slots({v.id: v.parallelism for v in vertices}),
            vertices=vertices,
            workload_avg=float(np.mean(rates[max(0, now - sync) : now])),
            forecast=self._forecast(now),
            consumer_lag=float(progress.run.pending),
            recent_workload=float(np.mean(rates[max(0, now - s.checkpoint_interval_s) : now])),
            downtimes_s={n: float(s.rescale_downtime(n)) for n in range(1, 3 * s.max_parallelism + 1)},
            failure_downtime_s=float(s.failure_downtime(slots(progress.plan, shared=False))),
            uptime_s=float(now - progress.deployed_at),
            last_rescale_at=progress.last_rescale,
            recent_recommendations=progress.recommendations,
            memory=MemoryProfile(progress.memory_mb),
            memory_applies=True,
            policy_state=self.policy_state,
        )

    def _result(self, progress: _Progress, rates: np.ndarray, duration: int, sync: int) -> DagReplayResult:
        """The lab's summary of the replay (slots, memory, SLO verdict, rescales) and its thinned series."""
        lag, used_slots = progress.lag, progress.used_slots
        verdict = judge(lag, rates, progress.stops, target_recovery_time_s=self.settings.target_recovery_time_s)
        final = progress.down.plan if progress.down is not None else progress.plan
        summary: dict[str, Any] = {
            "trace": self.trace.name,
            "policy": self.name,
            "duration_s": duration,
            "slot_hours": round(float(used_slots.sum()) / 3600.0, 2),
            "managed_memory_gb_hours": round(float(progress.managed.sum()) / 1024.0 / 3600.0, 2),
            "mean_slots": round(float(used_slots.mean()), 2),
            "peak_slots": int(used_slots.max()),
            "rescales": progress.rescales,
            "failures": sum(1 for stop in progress.stops if stop.kind == "failure"),
            "max_lag": round(float(lag.max()), 1),
            "final_parallelism": dict(final),
            "final_slot_memory_mb": progress.memory_mb,
            "records_lost": int(progress.lost),
            "sync_interval_s": sync,
            **verdict.to_summary(),
        }
        keep = slice(None, None, SERIES_STEP_S)
        series = {
            "time_s": np.arange(duration)[keep],
            "workload": rates[keep],
            "slots": used_slots[keep],
            "lag": lag[keep],
        }
        return DagReplayResult(self.trace.name, self.name, summary, series)

    def _managed_mb(self, plan: Mapping[str, int], memory: float) -> float:
        """Managed memory of ``plan``: the slot memory of the stateful (windowed) vertices' tasks."""
        stateful = [op.windowed for op in self.testbed.job.operators]
        return sum(p for p, w in zip(plan.values(), stateful, strict=False) if w) * memory

    # ------------------------------------------------------------------ helpers

    def _deploy(self, plan: Mapping[str, int], memory: float, t: int) -> DagRun:
        names = self.testbed.operator_names
        return self.testbed.deploy(tuple(plan[n] for n in names), memory, seed=self.settings.seed + t)

    def _forecast(self, now: int) -> np.ndarray | None:
        if self.forecasts is None:
            return None
        known = [second for second in self.forecasts if second <= now]
        return self.forecasts[max(known)] if known else None

    def _memory(self, decision: Decision, memory: float) -> float:
        """Slot memory after this decision: Justin's levels, or QEScalor's modelled profile; at least level 0."""
        if decision.memory is not None:
            return max(decision.memory.managed_memory_per_slot_mb, self.settings.initial_memory_mb)
        profile = decision.profile
        if profile is not None and not profile.exploring:
            return max(profile.managed_memory_per_slot_mb, self.settings.initial_memory_mb)
        return memory

    def _stop(
        self, run: DagRun, kind: str, plan: dict[str, int], memory: float, now: int, deployed_at: int, downtime: int
    ) -> _Down:
        """Stop the job: pending records plus everything read since the last checkpoint are behind."""
        since = (now - deployed_at) % self.settings.checkpoint_interval_s
        replay = run.measure(since).achieved_rate * since if since > 0 else 0.0
        return _Down(kind, now + downtime, float(run.pending) + replay, dict(plan), memory)


def replay_all(
    trace: Trace, policies: Sequence[str], settings: DagReplaySettings | None = None
) -> list[DagReplayResult]:
    """Every policy on one trace, sharing the forecast (arrivals do not depend on the policy)."""
    settings = settings or DagReplaySettings()
    shared = None
    if any(DAG_REPLAY_POLICIES[p]().uses_forecast for p in policies):
        shared = forecasts(trace, hours=settings.hours, loop_interval_s=settings.loop_interval_s)
    testbed = DagTestbed()
    profiles = sample_profiles(testbed, seed=settings.seed) if "qescalor" in policies else None
    return [
        DagReplay(trace, p, settings, testbed=testbed, forecast_by_second=shared, profiles=profiles).run()
        for p in policies
    ]


__all__ = [
    "DAG_REPLAY_POLICIES",
    "DagReplay",
    "DagReplayResult",
    "DagReplaySettings",
    "forecasts",
    "replay_all",
    "sample_profiles",
    "vertex_inputs",
]
