"""The per-operator round: the agent's loop with the plan and execute steps done per job vertex.

:class:`OperatorAgent` is the agent (``agent.loop.Agent``): the same monitor and analyze steps on the
whole-job signals (workload, forecast, backlog, recoveries and their downtimes), the same knowledge
document and policy state. Its plan step adds the per-operator observation (every vertex's subtask
series and the job graph, ``agent.per_operator.monitor``), asks a per-operator policy
(``planner.OPERATOR_POLICY_FACTORIES``) for a parallelism per vertex, and its execute step writes
every changed vertex in one request (``agent.per_operator.execute``). A memory decision is applied
where the target can (a FlinkDeployment), and otherwise recommended: a ``memory.recommended`` log
line, the ``perdix_memory_recommended_mb`` gauge and a ``MemoryRecommended`` Event; a resource
profile (QEScalor) is always a recommendation. Dry-run logs the per-vertex plan and writes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Gauge

from agent.analyze import Analysis
from agent.loop import Agent, RoundOutcome, RoundResult, RoundStatus, planner_config
from agent.observation import Observation
from agent.per_operator.execute import VertexScaler
from agent.per_operator.monitor import OperatorMonitor
from agent.per_operator.observation import OperatorObservation, screened_operators
from agent.ports import ScalerError
from agent.safeguards import memory_pressure
from agent.settings import Settings
from planner import Decision, PlanInput, PlannerConfig, get_operator_policy
from planner.per_operator import (
    OperatorConfig,
    OperatorDecision,
    OperatorPlanInput,
    OperatorPolicy,
    describe_plan,
    slots,
    subtasks,
)
from planner.safeguards import stabilization_limit, vertex_cause
from planner.types import ReasonCode


def operator_config(settings: Settings) -> OperatorConfig:
    """The per-operator policies' projection of the settings."""
    ops = settings.operators
    return OperatorConfig(
        planner=planner_config(settings),
        checkpoint_interval_s=settings.checkpoint_interval_s,
        warm_up_s=max(ops.warm_up_s, 0.0),
        slot_sharing=True,
        memory_min_mb=ops.memory_min_mb,
        memory_max_level=ops.memory_max_level,
        cache_hit_threshold=ops.cache_hit_threshold,
        latency_threshold_ms=ops.latency_threshold_ms,
        memory_cost_per_gb=ops.memory_cost_per_gb,
        startup_cost=ops.startup_cost,
        shutdown_cost=ops.shutdown_cost,
        heap_usage_threshold=settings.safeguards.memory.heap_usage_threshold,
        gc_pressure_threshold=settings.safeguards.memory.gc_pressure_threshold,
    )


class _PlansPerVertex:
    """The whole-job Policy face of a per-operator policy: its name and forecast need; it never decides alone."""

    def __init__(self, policy: OperatorPolicy) -> None:
        self.name = policy.name
        self.uses_forecast = policy.uses_forecast
        self.sync_interval_s = policy.sync_interval_s

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        raise RuntimeError("a per-operator policy plans per vertex (OperatorAgent._plan_and_execute)")


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

    def record(self, observation: OperatorObservation, plan: OperatorPlanInput, decision: OperatorDecision) -> None:
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
    plan_input: OperatorPlanInput
    decision: OperatorDecision
    applied: dict[str, int] | None = None
    """The vertices written and their targets, when a rescale was applied (not in dry-run)."""


class OperatorAgent(Agent):
    """The agent planning one parallelism per job vertex (see the module docstring)."""

    def __init__(
        self,
        *,
        settings: Settings,
        operator_monitor: OperatorMonitor,
        vertex_scaler: VertexScaler,
        operator_policy: OperatorPolicy | None = None,
        **parts: Any,
    ) -> None:
        self.operator_policy = operator_policy or get_operator_policy(settings.policy)
        super().__init__(settings=settings, policy=_PlansPerVertex(self.operator_policy), **parts)
        self.operator_monitor = operator_monitor
        self.vertex_scaler = vertex_scaler
        self.operator_config = operator_config(settings)
        registry = getattr(self.telemetry, "registry", None)
        self.operator_telemetry = OperatorTelemetry(registry) if registry is not None else None
        self.last_operator_round: OperatorRound | None = None
        self._recommended: tuple[float, float] | None = None
        """The last memory / profile recommendation emitted as an Event (one Event per change, not per round)."""

    # ---------------------------------------------------------------- the round's plan and execute steps

    def _plan_and_execute(
        self,
        result: RoundResult,
        observation: Observation,
        analysis: Analysis,
        current: int,
        *,
        since: float,
        now: float,
    ) -> None:
        seen = self._step(result, "monitor", lambda: self.operator_monitor.observe(since=since, now=now))
        if seen is None:
            return
        seen = screened_operators(seen)
        if not seen.usable:
            gaps = ", ".join(f"operators.{name}: {why}" for name, why in seen.gaps.items()) or "no vertex series"
            result.outcome = RoundOutcome(RoundStatus.NO_DATA, detail=gaps)
            return
        plan_input = self._step(result, "plan", lambda: self._operator_input(seen, observation, analysis, now))
        if plan_input is None:
            return
        config = self._operator_round_config()
        self._judge_vertices(plan_input, analysis, now)
        decision = self._step(result, "plan", lambda: self.operator_policy.decide(plan_input, config))
        if decision is None:
            return
        decision = self._review_vertices(result, decision, plan_input, observation, analysis, now)
        before = plan_input.current
        result.decision = decision.summary(before, shared=self.operator_config.slot_sharing)
        if decision.policy_state is not None:
            self.policy_state = dict(decision.policy_state)
        if decision.acted:
            keep_s = max(self.config.scale_down_stabilization_s, self.config.loop_interval_s) * 2
            self.recommendations = self.recommendations.add(now, subtasks(decision.desired), keep_s=keep_s)
        self.log.info(
            "operators.plan",
            policy=self.operator_policy.name,
            code=decision.code.value,
            current=describe_plan(before, plan_input.vertices),
            planned=describe_plan(decision.parallelism, plan_input.vertices),
            reasons=list(decision.reasons),
        )
        applied = None
        if decision.rescales_from(before):
            applied = self._step(
                result, "execute", lambda: self._execute_vertices(result, decision, plan_input, seen, analysis, now)
            )
        self._memory(result, decision, now)
        self._profile(decision)
        if self.operator_telemetry is not None:
            self.operator_telemetry.record(seen, plan_input, decision)
        self.last_operator_round = OperatorRound(seen, plan_input, decision, applied)

    def _review_vertices(
        self,
        result: RoundResult,
        decision: OperatorDecision,
        plan_input: OperatorPlanInput,
        observation: Observation,
        analysis: Analysis,
        now: float,
    ) -> OperatorDecision:
        """The safeguards' review of the per-vertex plan (agent.safeguards), its findings reported."""
        before = plan_input.current
        names = {v.id: v.name or v.id for v in plan_input.vertices}
        current = analysis.parallelism
        kept, findings = self.safeguards.review_vertices(
            before,
            decision.parallelism,
            names,
            now=now,
            pressure=memory_pressure(observation),
            recovery_s=analysis.recovery_times.get(current) if current is not None else None,
            target_recovery_s=self.config.target_recovery_time_s,
            workload=analysis.workload_avg,
        )
        if findings:
            code = ReasonCode.VETOED if all(kept[v] == before.get(v, p) for v, p in kept.items()) else decision.code
            decision = replace(
                decision, parallelism=kept, code=code, reasons=(*decision.reasons, *(f.message for f in findings))
            )
        if self.settings.safeguards.reports.stabilization:
            shared = self.operator_config.slot_sharing
            held = stabilization_limit(decision.summary(before, shared=shared), slots(before, shared=shared))
            findings = findings if held is None else (*findings, held)
        result.findings = findings
        self.safeguards.report(findings, now=now)
        return decision

    def _judge_vertices(self, plan_input: OperatorPlanInput, analysis: Analysis, now: float) -> None:
        """Judge each vertex's last scale-out once its true rate is measured at it (safeguards.effectiveness): the
        vertex's capacity is its true processing rate (records/s at full load, DS2's), predicted as the rate per
        subtask before times its new parallelism."""
        ineffective = self.safeguards.ineffective
        if not self.settings.safeguards.effectiveness.enabled:
            return
        # Past the grace period, the warm-up (rates no longer mix the old attempt) and a round, caught up or not.
        wait_s = max(self.config.grace_period_s, self.operator_config.warm_up_s) + self.config.loop_interval_s
        settled = self.last_rescale_at is not None and now - self.last_rescale_at >= wait_s
        for vertex in plan_input.vertices:
            pending = ineffective.pending.get(vertex.id)
            if pending is None:
                continue
            metrics = vertex.metrics
            measured = metrics.true_processing_rate if metrics is not None else None
            name = vertex.name or vertex.id
            cause = vertex_cause(
                name,
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
                self._report_ineffective(record)

    def _operator_round_config(self) -> OperatorConfig:
        """The per-operator settings for this round: every vertex's upper bound lowered to what the cluster can run
        now (:meth:`Agent._round_config`). With slot sharing a job takes as many slots as its widest vertex, so
        the job-wide reach bounds each vertex; without it a vertex past the free slots was refused at the write."""
        planner = self._round_config()
        if planner.max_parallelism == self.operator_config.planner.max_parallelism:
            return self.operator_config
        return replace(self.operator_config, planner=planner)

    def _operator_input(
        self, seen: OperatorObservation, observation: Observation, analysis: Analysis, now: float
    ) -> OperatorPlanInput:
        """The planner's snapshot: the graph with every vertex's metrics, and the whole-job signals."""
        settings = self.settings
        interval = max(1, int(round(settings.checkpoint_interval_s / settings.prometheus.step_s)))
        tail = observation.workload[-interval:]
        finite = tail[np.isfinite(tail)]
        recovery = getattr(self.analyzer, "recovery", None)
        vertices = seen.plan_vertices()
        largest = max(settings.max_parallelism, max((v.parallelism for v in vertices), default=1))
        downtimes = {n: recovery.downtime("rescale", n) for n in range(1, largest + 1)} if recovery is not None else {}
        current_slots = slots({v.id: v.parallelism for v in vertices})
        uptime = observation.uptime_s
        return OperatorPlanInput(
            now=now,
            vertices=vertices,
            workload_avg=analysis.workload_avg,
            forecast=analysis.forecast,
            consumer_lag=analysis.consumer_lag,
            recent_workload=float(finite.mean()) if finite.size else analysis.workload_avg,
            downtimes_s=downtimes,
            failure_downtime_s=recovery.downtime("failure", current_slots) if recovery is not None else None,
            uptime_s=uptime,
            job_running=uptime is None or uptime > 0,
            last_rescale_at=self.last_rescale_at,
            recovering=analysis.recovering,
            recent_recommendations=self.recommendations,
            memory=seen.graph.profile,
            memory_applies=self.vertex_scaler.memory_applies,
            memory_pressure=memory_pressure(observation),
            policy_state=self.policy_state,
        )

    def _execute_vertices(
        self,
        result: RoundResult,
        decision: OperatorDecision,
        plan_input: OperatorPlanInput,
        seen: OperatorObservation,
        analysis: Analysis,
        now: float,
    ) -> dict[str, int] | None:
        """Write every changed vertex in one request; record the rescale like the whole-job agent does."""
        before = plan_input.current
        changes = decision.changes(before)
        dry_run = self.settings.dry_run
        try:
            outcome = self.vertex_scaler.rescale_vertices(changes, reasons=decision.reasons, dry_run=dry_run)
        except ScalerError as exc:
            if exc.kind != self._execute_failure:
                self.log.error("rescale.failed", kind=exc.kind, error=str(exc), targets=changes)
            self._execute_failure = exc.kind
            result.outcome = RoundOutcome(RoundStatus.FAILED, step="execute", detail=exc.kind)
            return None
        self._execute_failure = None
        names = {v.id: v.name for v in plan_input.vertices}
        record = {
            "at": now,
            "from": slots(before),
            "to": slots(decision.parallelism),
            "vertices": {names.get(v, v): [before[v], p] for v, p in changes.items()},
            "confirmed": outcome.confirmed,
            "dry_run": dry_run,
            "downtime_s": outcome.downtime_s,
            "reasons": list(decision.reasons[-3:]),
        }
        self.rescales.append(record)
        event = "rescale.dry_run" if dry_run else "rescale"
        self.log.info(event, **{k: v for k, v in record.items() if k != "at"})
        if dry_run:
            return None
        self.last_rescale_at = now
        result.rescaled_to = slots(decision.parallelism)
        if self.settings.safeguards.effectiveness.enabled:
            for vertex in plan_input.vertices:
                rate = vertex.metrics.true_rate_per_subtask if vertex.metrics is not None else None
                target = decision.parallelism.get(vertex.id, vertex.parallelism)
                if rate is not None and vertex.id in changes:
                    self.safeguards.ineffective.watch(
                        now=now,
                        from_parallelism=before[vertex.id],
                        to_parallelism=target,
                        vertex=vertex.id,
                        workload=analysis.workload_avg,
                        capacities={before[vertex.id]: rate * before[vertex.id], target: rate * target},
                    )
        # The whole-job models count the sources' subtasks as the scale-out (prometheus.queries.parallelism).
        sources = [v.id for v in plan_input.vertices if v.is_source]
        source_before = max((before[v] for v in sources), default=analysis.parallelism or 0)
        source_after = max((decision.parallelism[v] for v in sources), default=source_before)
        self.analyzer.on_rescale(
            now=now, from_parallelism=source_before, to_parallelism=source_after, downtime_s=outcome.downtime_s
        )
        return changes

    def _memory(self, result: RoundResult, decision: OperatorDecision, now: float) -> None:
        """Apply Justin's memory where the target can; otherwise recommend it once per change."""
        memory = decision.memory
        if memory is None or not memory.changes:
            return
        mb = memory.managed_memory_per_slot_mb
        if self.vertex_scaler.memory_applies and not self.settings.dry_run:

            def apply() -> None:
                done = self.vertex_scaler.apply_memory(mb, reasons=decision.reasons, dry_run=False)
                self.log.info("memory.applied", managed_memory_per_slot_mb=mb, confirmed_mb=done.confirmed_mb)

            self._step(result, "execute", apply)
            return
        levels = {k: v for k, v in memory.levels.items() if v is not None}
        self.log.info(
            "memory.recommended",
            managed_memory_per_slot_mb=mb,
            levels=levels,
            why="the scale target cannot change TaskManager memory in place"
            if not self.vertex_scaler.memory_applies
            else "dry-run",
        )
        if self._recommended is None or self._recommended[0] != mb:
            self._recommended = (mb, self._recommended[1] if self._recommended else math.nan)
            self.events.emit(
                reason="MemoryRecommended",
                message=f"Justin recommends {mb:.0f} MB managed memory per task slot (levels {levels})",
            )

    def _profile(self, decision: OperatorDecision) -> None:
        """QEScalor's resource profile is advice: logged every round, an Event when it changes."""
        profile = decision.profile
        if profile is None:
            return
        self.log.info(
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
            self.events.emit(reason="ProfileRecommended", message=f"QEScalor: {profile.reason}")
