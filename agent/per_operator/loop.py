"""The per-vertex plan and execute steps: the agent's round planning one parallelism per job vertex.

:class:`VertexPlanning` is the agent's planning part (``agent.loop.Planning``) for a policy with a per-vertex
form on a target that sets vertices: the agent runs the same monitor and analyze steps on the whole-job signals
(workload, forecast, backlog, recoveries and their downtimes) and keeps the same knowledge document and policy
state. This plan step adds the per-operator observation (every vertex's subtask
series and the job graph, ``agent.per_operator.monitor``), asks a per-operator policy
(``planner.registry``) for a parallelism per vertex, and its execute step writes
every changed vertex in one request (``agent.per_operator.execute``). A memory decision is applied
where the target can (a FlinkDeployment), and otherwise recommended: a ``memory.recommended`` log
line, the ``perdix_memory_recommended_mb`` gauge and a ``MemoryRecommended`` Event; a resource
profile (QEScalor) is always a recommendation. Dry-run logs the per-vertex plan and writes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from prometheus_client import CollectorRegistry, Gauge

from agent.analyze import Analysis
from agent.loop import Agent, RoundContext, RoundOutcome, RoundResult, RoundStatus, with_partitions
from agent.per_operator.execute import VertexScaler
from agent.per_operator.monitor import OperatorMonitor
from agent.per_operator.observation import OperatorObservation, screened_operators
from agent.ports import ScalerError
from agent.rescales import Rescale
from agent.safeguards import memory_pressure
from agent.settings import Settings
from planner.per_operator import describe_plan, slots, subtasks
from planner.safeguards import stabilization_limit, vertex_cause
from planner.types import Decision, PlanInput, Policy, ReasonCode


class OperatorTelemetry:
    """Per-vertex gauges on the agent's registry: parallelism now and planned, true rates, recommendations."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.parallelism = Gauge(
            "perdix_vertex_parallelism", "Parallelism of each job vertex now.", ["vertex"], registry=r
        )
        self.planned = Gauge(
            "perdix_vertex_parallelism_recommended",
            "Parallelism the planner chose for each vertex this round.",
            ["vertex"],
            registry=r,
        )
        self.true_rate = Gauge(
            "perdix_vertex_true_rate",
            "DS2's true processing rate per subtask of each vertex, records/s.",
            ["vertex"],
            registry=r,
        )
        self.memory = Gauge(
            "perdix_memory_recommended_mb",
            "Managed memory per task slot Justin recommends (or applied), MB.",
            registry=r,
        )
        self.profile_memory = Gauge(
            "perdix_profile_recommended_memory_mb",
            "Managed memory per slot of the resource profile QEScalor advises, MB.",
            registry=r,
        )
        self.profile_cpu = Gauge(
            "perdix_profile_recommended_cpu",
            "CPU per slot of the resource profile QEScalor advises.",
            registry=r,
        )
        for gauge in (self.memory, self.profile_memory, self.profile_cpu):
            gauge.set(math.nan)

    def record(self, observation: OperatorObservation, plan: PlanInput, decision: Decision) -> None:
        """Update every gauge from one planned round."""
        for vertex in plan.vertices:
            label = vertex.name or vertex.id
            self.parallelism.labels(vertex=label).set(vertex.parallelism)
            self.planned.labels(vertex=label).set(decision.parallelism.get(vertex.id, vertex.parallelism))
            rate = vertex.metrics.true_rate_per_subtask if vertex.metrics is not None else None
            self.true_rate.labels(vertex=label).set(math.nan if rate is None else rate)
        if decision.memory is not None:
            self.memory.set(decision.memory.managed_memory_per_slot_mb)
        if decision.profile is not None:
            self.profile_memory.set(decision.profile.managed_memory_per_slot_mb)
            self.profile_cpu.set(decision.profile.cpu_per_slot)


@dataclass(frozen=True)
class OperatorRound:
    """What the per-operator part of a round saw and decided (for logs, tests and the next round)."""

    observation: OperatorObservation
    plan_input: PlanInput
    decision: Decision
    applied: dict[str, int] | None = None
    """The vertices written and their targets, when a rescale was applied (not in dry-run)."""


class VertexPlanning:
    """The plan and execute steps per job vertex (see the module docstring)."""

    def __init__(
        self,
        policy: Policy,
        *,
        monitor: OperatorMonitor,
        scaler: VertexScaler,
        telemetry: OperatorTelemetry | None = None,
    ) -> None:
        self.policy = policy
        self.monitor = monitor
        """Every vertex's subtask series and the job graph (``agent.per_operator.monitor``)."""
        self.scaler = scaler
        """Writes every changed vertex in one request (``agent.per_operator.execute``)."""
        self.telemetry = telemetry
        self.last_round: OperatorRound | None = None
        self._recommended: tuple[float, float] | None = None
        """The last memory / profile recommendation emitted as an Event (one Event per change, not per round)."""

    def plan_and_execute(self, agent: Agent, context: RoundContext) -> None:
        """Observe the vertices, ask the policy for a plan, let the safeguards review it, write what changes."""
        result, now = context.result, context.now
        seen = self._observe(agent, context)
        if seen is None:
            return
        plan_input = agent.step(result, "plan", lambda: self._plan_input(agent, seen, context))
        if plan_input is None:
            return
        config = with_partitions(agent.round_config(), context.analysis.source_partitions)
        self._judge_vertices(agent, plan_input, now)
        decision = agent.step(result, "plan", lambda: self.policy.decide(plan_input, config))
        if decision is None:
            return
        decision = self._review(agent, context, decision, plan_input)
        before = plan_input.current
        result.decision = decision
        agent.remember(decision.policy_state, desired=subtasks(decision.desired), acted=decision.acted, now=now)
        agent.log.info(
            "operators.plan",
            policy=self.policy.name,
            code=decision.code.value,
            current=describe_plan(before, plan_input.vertices),
            planned=describe_plan(decision.parallelism, plan_input.vertices),
            reasons=list(decision.reasons),
        )
        applied = None
        if decision.rescales_from(before):
            applied = agent.step(result, "execute", lambda: self._execute(agent, context, decision, plan_input))
        self._memory(agent, result, decision)
        self._profile(agent, decision)
        if self.telemetry is not None:
            self.telemetry.record(seen, plan_input, decision)
        self.last_round = OperatorRound(seen, plan_input, decision, applied)

    def _observe(self, agent: Agent, context: RoundContext) -> OperatorObservation | None:
        """The vertices' series and the job graph, screened; None (the round ends without data) when unusable."""
        result = context.result
        seen = agent.step(result, "monitor", lambda: self.monitor.observe(since=context.since, now=context.now))
        if seen is None:
            return None
        seen = screened_operators(seen)
        if not seen.usable:
            gaps = ", ".join(f"operators.{name}: {why}" for name, why in seen.gaps.items()) or "no vertex series"
            result.outcome = RoundOutcome(RoundStatus.NO_DATA, detail=gaps)
            return None
        return seen

    def _review(self, agent: Agent, context: RoundContext, decision: Decision, plan_input: PlanInput) -> Decision:
        """The safeguards' review of the per-vertex plan (agent.safeguards), its findings reported."""
        before = plan_input.current
        names = {v.id: v.name or v.id for v in plan_input.vertices}
        analysis, now = context.analysis, context.now
        current = analysis.parallelism
        kept, findings = agent.safeguards.review_vertices(
            before,
            decision.parallelism,
            names,
            now=now,
            pressure=memory_pressure(context.observation),
            recovery_s=analysis.recovery_times.get(current) if current is not None else None,
            target_recovery_s=agent.config.target_recovery_time_s,
            workload=analysis.workload_avg,
        )
        if findings:
            code = ReasonCode.VETOED if all(kept[v] == before.get(v, p) for v, p in kept.items()) else decision.code
            decision = replace(
                decision, parallelism=kept, code=code, reasons=(*decision.reasons, *(f.message for f in findings))
            )
        if agent.settings.safeguards.reports.stabilization:
            held = stabilization_limit(decision, slots(before))
            findings = findings if held is None else (*findings, held)
        context.result.findings = findings
        agent.safeguards.report(findings, now=now)
        return decision

    def _judge_vertices(self, agent: Agent, plan_input: PlanInput, now: float) -> None:
        """Judge each vertex's last scale-out once its true rate is measured at it (safeguards.effectiveness): the
        vertex's capacity is its true processing rate (records/s at full load, DS2's), predicted as the rate per
        subtask before times its new parallelism."""
        ineffective = agent.safeguards.ineffective
        if not agent.settings.safeguards.effectiveness.enabled:
            return
        # Past the grace period, the warm-up (rates no longer mix the old attempt) and a round, caught up or not.
        wait_s = max(agent.config.grace_period_s, agent.config.warm_up_s) + agent.config.loop_interval_s
        settled = agent.last_rescale_at is not None and now - agent.last_rescale_at >= wait_s
        for vertex in plan_input.vertices:
            pending = ineffective.pending.get(vertex.id)
            if pending is None:
                continue
            metrics = vertex.metrics
            measured = metrics.true_processing_rate if metrics is not None else None
            cause = vertex_cause(
                vertex.name or vertex.id,
                metrics.busy_mean if metrics is not None else None,
                metrics.busy_max if metrics is not None else None,
                pending.capacity_before / pending.from_parallelism,
                None if measured is None else measured / max(vertex.parallelism, 1),
            )
            record = ineffective.judge(
                now=now,
                parallelism=vertex.parallelism,
                capacities={} if measured is None else {vertex.parallelism: measured},
                settled=settled,
                cause=cause,
                vertex=vertex.id,
            )
            if record is not None:
                agent.report_ineffective(record)

    def _plan_input(self, agent: Agent, seen: OperatorObservation, context: RoundContext) -> PlanInput:
        """The planner's snapshot: the graph with every vertex's metrics, and the whole-job signals."""
        settings, observation, analysis = agent.settings, context.observation, context.analysis
        interval = max(1, int(round(settings.checkpoint_interval_s / settings.prometheus.step_s)))
        tail = observation.workload[-interval:]
        finite = tail[np.isfinite(tail)]
        vertices = seen.plan_vertices()
        largest = max(settings.max_parallelism, max((v.parallelism for v in vertices), default=1))
        downtimes = {n: agent.analyzer.downtime("rescale", n) for n in range(1, largest + 1)}
        current_slots = slots({v.id: v.parallelism for v in vertices})
        uptime = observation.uptime_s
        return PlanInput(
            now=context.now,
            current_parallelism=current_slots,
            workload_avg=analysis.workload_avg,
            forecast=analysis.forecast,
            consumer_lag=analysis.consumer_lag,
            vertices=vertices,
            recent_workload=float(finite.mean()) if finite.size else analysis.workload_avg,
            downtimes_s=downtimes,
            failure_downtime_s=agent.analyzer.downtime("failure", current_slots),
            uptime_s=uptime,
            job_running=uptime is None or uptime > 0,
            last_rescale_at=agent.last_rescale_at,
            recovering=analysis.recovering,
            recent_recommendations=agent.recommendations,
            memory=seen.graph.profile,
            memory_applies=self.scaler.memory_applies,
            memory_pressure=memory_pressure(observation),
            policy_state=agent.policy_state,
        )

    def _execute(
        self, agent: Agent, context: RoundContext, decision: Decision, plan_input: PlanInput
    ) -> dict[str, int] | None:
        """Write every changed vertex in one request; record the rescale like the whole-job steps do."""
        result, now = context.result, context.now
        before = plan_input.current
        changes = decision.changes(before)
        dry_run = agent.settings.dry_run
        try:
            outcome = self.scaler.rescale_vertices(changes, reasons=decision.reasons, dry_run=dry_run)
        except ScalerError as exc:
            if agent.execute_failed(result, exc):
                agent.log.error("rescale.failed", kind=exc.kind, error=str(exc), targets=changes)
            return None
        agent.execute_succeeded()
        names = {v.id: v.name for v in plan_input.vertices}
        record = Rescale(
            at=now,
            from_parallelism=slots(before),
            to_parallelism=slots(decision.parallelism),
            vertices={names.get(v, v): (before[v], p) for v, p in changes.items()},
            confirmed=outcome.confirmed,
            dry_run=dry_run,
            downtime_s=outcome.downtime_s,
            reasons=tuple(decision.reasons[-3:]),
        )
        agent.record_rescale(result, record, reached=slots(decision.parallelism))
        if dry_run:
            return None
        self._watch(agent, decision, plan_input, context.analysis, now)
        # The whole-job models count the sources' subtasks as the scale-out (prometheus.queries.parallelism).
        sources = [v.id for v in plan_input.vertices if v.is_source]
        source_before = max((before[v] for v in sources), default=context.analysis.parallelism or 0)
        source_after = max((decision.parallelism[v] for v in sources), default=source_before)
        agent.analyzer.on_rescale(
            now=now, from_parallelism=source_before, to_parallelism=source_after, downtime_s=outcome.downtime_s
        )
        return changes

    def _watch(self, agent: Agent, decision: Decision, plan_input: PlanInput, analysis: Analysis, now: float) -> None:
        """Watch each rescaled vertex's capacity for the effectiveness safeguard (its true rate times subtasks)."""
        if not agent.settings.safeguards.effectiveness.enabled:
            return
        before = plan_input.current
        changes = decision.changes(before)
        for vertex in plan_input.vertices:
            rate = vertex.metrics.true_rate_per_subtask if vertex.metrics is not None else None
            target = decision.parallelism.get(vertex.id, vertex.parallelism)
            if rate is not None and vertex.id in changes:
                agent.safeguards.ineffective.watch(
                    now=now,
                    from_parallelism=before[vertex.id],
                    to_parallelism=target,
                    vertex=vertex.id,
                    workload=analysis.workload_avg,
                    capacities={before[vertex.id]: rate * before[vertex.id], target: rate * target},
                )

    def _memory(self, agent: Agent, result: RoundResult, decision: Decision) -> None:
        """Apply Justin's memory where the target can; otherwise recommend it once per change."""
        memory = decision.memory
        if memory is None or not memory.changes:
            return
        mb = memory.managed_memory_per_slot_mb
        if self.scaler.memory_applies and not agent.settings.dry_run:

            def apply() -> None:
                done = self.scaler.apply_memory(mb, reasons=decision.reasons, dry_run=False)
                agent.log.info("memory.applied", managed_memory_per_slot_mb=mb, confirmed_mb=done.confirmed_mb)

            agent.step(result, "execute", apply)
            return
        levels = {k: v for k, v in memory.levels.items() if v is not None}
        agent.log.info(
            "memory.recommended",
            managed_memory_per_slot_mb=mb,
            levels=levels,
            why="the scale target cannot change TaskManager memory in place"
            if not self.scaler.memory_applies
            else "dry-run",
        )
        if self._recommended is None or self._recommended[0] != mb:
            self._recommended = (mb, self._recommended[1] if self._recommended else math.nan)
            agent.events.emit(
                reason="MemoryRecommended",
                message=f"Justin recommends {mb:.0f} MB managed memory per task slot (levels {levels})",
            )

    def _profile(self, agent: Agent, decision: Decision) -> None:
        """QEScalor's resource profile is advice: logged every round, an Event when it changes."""
        profile = decision.profile
        if profile is None:
            return
        agent.log.info(
            "profile.recommended",
            cpu_per_slot=profile.cpu_per_slot,
            managed_memory_per_slot_mb=profile.managed_memory_per_slot_mb,
            exploring=profile.exploring,
            reason=profile.reason,
        )
        previous = self._recommended[1] if self._recommended else None
        if previous != profile.managed_memory_per_slot_mb:
            self._recommended = (
                self._recommended[0] if self._recommended else math.nan,
                profile.managed_memory_per_slot_mb,
            )
            agent.events.emit(reason="ProfileRecommended", message=f"QEScalor: {profile.reason}")


def vertex_planning(
    settings: Settings,
    *,
    monitor: OperatorMonitor,
    scaler: VertexScaler,
    registry: CollectorRegistry | None = None,
    policy: Policy | None = None,
) -> VertexPlanning:
    """The per-vertex planning part for ``settings``: its policy's per-vertex form (or ``policy``) and the per-vertex
    gauges on ``registry`` (None: none). Its config is the agent's round config (``agent.loop.planner_config``)."""
    return VertexPlanning(
        policy or settings.policy_spec.vertex_policy(),
        monitor=monitor,
        scaler=scaler,
        telemetry=OperatorTelemetry(registry) if registry is not None else None,
    )
