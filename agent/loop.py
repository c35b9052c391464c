"""The MAPE-K loop: monitor -> analyze -> plan -> execute -> knowledge, one round per loop interval.

Every step is fail-soft: an exception is logged with its step and the round ends without acting, so
a failed monitor or API call never crashes the process and never causes a rescale on missing data.
The clock is read once per round and ``now`` is passed down.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any, Protocol, TypeVar

import numpy as np

from agent.analyze import Analysis, AnalyzeStage, Analyzer
from agent.clock import Clock
from agent.json_types import member
from agent.knowledge.document import SCHEMA_VERSION, KnowledgeTooLarge, KnowledgeUnrecoverable, encode_document
from agent.knowledge.schema import check_moments, validate_document
from agent.logging import get_logger
from agent.observation import Observation, ReadingBounds, screened
from agent.plan_bounds import PlanBounds
from agent.ports import (
    EventSink,
    KnowledgeStore,
    MetricSource,
    ProbedScaler,
    Scaler,
    ScalerError,
)
from agent.rescales import Rescale, RescaleHistory
from agent.safeguards import Safeguards, memory_pressure
from agent.settings import Settings
from planner import Decision, PlanInput, PlannerConfig, Policy
from planner.history import Recommendations
from planner.safeguards import Finding, IneffectiveScaleOut, quota_limit, skew_cause
from planner.types import ReasonCode

KNOWLEDGE_SAVE_INTERVAL_S = 60.0
"""Write the knowledge document at most about this often (a peer that syncs every 10-15 s would
otherwise rewrite its ConfigMap four to six times a minute). A round that rescaled, the first round,
and every round after a failed write save at once, and the daemon flushes on stop, so what a restart
can lose is under a minute of samples, never a rescale."""


T = TypeVar("T")


def policy_for(settings: Settings) -> Policy:
    """The whole-job policy ``settings.policy`` names, with its options from the settings where it has some."""
    return settings.policy_spec.policy(settings)


def planner_config(settings: Settings) -> PlannerConfig:
    """The planner's projection of the settings (the per-vertex policies' knobs from ``operators`` included)."""
    ops = settings.operators
    return PlannerConfig(
        min_parallelism=settings.min_parallelism,
        max_parallelism=settings.max_parallelism,
        target_recovery_time_s=settings.target_recovery_time_s,
        loop_interval_s=settings.loop_interval_s,
        grace_period_s=settings.grace_period_s,
        recent_rescale_window_s=settings.recent_rescale_window_s,
        scale_down_stabilization_s=settings.scale_down_stabilization_s,
        holds=settings.holds,
        static_parallelism=settings.static_parallelism,
        source_partitions=settings.source_partitions,
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


def with_partitions(config: PlannerConfig, partitions: int | None) -> PlannerConfig:
    """``config`` with the source partitions the round read where the settings gave none (a set count is the
    analysis' count too)."""
    if partitions is None or partitions == config.source_partitions:
        return config
    return replace(config, source_partitions=partitions)


class RoundStatus(str, Enum):
    """How a round ended."""

    COMPLETED = "completed"
    """Every step ran (a decision was made; a rescale applied if it asked for one)."""
    NO_DATA = "no-data"
    """The monitor answered, but without the data a decision needs: nothing was planned."""
    FAILED = "failed"
    """A step raised or (execute) the scale target refused: the round ended there."""


@dataclass(frozen=True)
class RoundOutcome:
    """Which step ended the round and why, as data (telemetry counts ``status`` and ``step``)."""

    status: RoundStatus
    step: str | None = None
    """The failing step (monitor, analyze, plan, execute) when ``status`` is FAILED."""
    detail: str | None = None
    """Why, in words: the exception, the scaler's error kind, or the gaps of a round without data."""

    @property
    def message(self) -> str | None:
        """One line for logs and readiness; None for a completed round."""
        if self.status is RoundStatus.COMPLETED:
            return None
        if self.status is RoundStatus.NO_DATA:
            return "no usable data this round" + (f": {self.detail}" if self.detail else "")
        return f"{self.step} failed" + (f": {self.detail}" if self.detail else "")


COMPLETED = RoundOutcome(RoundStatus.COMPLETED)


@dataclass(frozen=True)
class KnowledgeSave:
    """How the round's knowledge write went: the document's size and, when it was not written, why."""

    size_bytes: int | None
    """Size of the encoded document; None when it could not even be encoded."""
    failure: str | None = None
    """None when written; ``too_large`` (over the store's limit), ``encode`` or ``store`` otherwise."""
    detail: str | None = None
    """The error, in words."""


@dataclass
class RoundResult:
    """What one round did, for the summary, the telemetry and the tests."""

    now: float
    outcome: RoundOutcome = COMPLETED
    observation: Observation | None = None
    analysis: Analysis | None = None
    decision: Decision | None = None
    rescaled_to: int | None = None
    durations_ms: dict[str, float] = field(default_factory=dict)
    background_ms: float = 0.0
    """Time spent on background work (model fits) that a replay ran inline; not loop latency."""
    knowledge: KnowledgeSave | None = None
    """How the knowledge write at the end of the round went."""
    findings: tuple[Finding, ...] = ()
    """What the safeguards vetoed or limited this round (agent.safeguards)."""

    @property
    def latency_ms(self) -> float:
        """Wall time of the whole round."""
        return sum(self.durations_ms.values())

    @property
    def skipped(self) -> str | None:
        """The one-line reason the round did not complete; None if it did."""
        return self.outcome.message


def _scale_in_refused(decision: Decision, current: int | None) -> str | None:
    """Why a decision that keeps the scale-out did not take one worker fewer: the reason the policy gave for it
    (Daedalus's candidate search gives one per scale-out tried, ``"n: ..."``), or None."""
    if current is None or decision.target_parallelism != current or decision.desired_parallelism != current:
        return None
    prefix = f"{current - 1}: "
    return next((reason[len(prefix) :] for reason in decision.reasons if reason.startswith(prefix)), None)


def _worker_means(series: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Mean of each worker's finite samples (workers without any are left out)."""
    means: dict[str, float] = {}
    for worker, values in series.items():
        finite = values[np.isfinite(values)]
        if finite.size:
            means[worker] = float(finite.sum()) / finite.size
    return means


class RoundTelemetry(Protocol):
    """What the agent reports to its telemetry (``agent.telemetry.Telemetry``)."""

    def record_round(self, result: RoundResult) -> None:
        """Count one round: its outcome, step durations, decision and knowledge write."""
        ...

    def state_refused(self, source: str, kind: str) -> None:
        """Count a state that was read but refused (``source``: where from, ``kind``: why)."""
        ...


class _NullEvents:
    def emit(self, *, reason: str, message: str, type_: str = "Normal") -> None:
        return None


class Agent:
    """One Perdix agent: the loop state plus its collaborators (the roles of the MAPE-K loop).

    ``planning`` is the round's plan and execute steps (default: the whole-job ones with ``policy``, or with the
    policy the settings name); the per-vertex ones come from ``agent.per_operator``."""

    def __init__(
        self,
        *,
        settings: Settings,
        clock: Clock,
        monitor: MetricSource,
        scaler: Scaler,
        knowledge: KnowledgeStore,
        events: EventSink | None = None,
        policy: Policy | None = None,
        planning: Planning | None = None,
        analyzer: AnalyzeStage | None = None,
        telemetry: RoundTelemetry | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.monitor = monitor
        self.scaler = scaler
        self.knowledge = knowledge
        self.events = events or _NullEvents()
        self.planning: Planning = planning or WholeJobPlanning(policy or policy_for(settings))
        self.policy: Policy = self.planning.policy
        self.analyzer: AnalyzeStage = analyzer or Analyzer(settings)
        if not self.policy.uses_forecast:
            self.analyzer.set_forecasting(False)
        self.policy_state: dict[str, object] | None = None
        """What the policy asked to keep after its last round (a peer's window, delays, history)."""
        self.telemetry = telemetry
        self.config = planner_config(settings)
        self.log = get_logger("perdix.loop")
        self.last_round_at: float | None = None
        self.last_rescale_at: float | None = None
        self.rescales = RescaleHistory()
        self.recommendations = Recommendations()
        self.bounds = PlanBounds()
        """The round's max_parallelism: the scale target's reach and the quota, as last read."""
        self._execute_failure: str | None = None
        """Kind of the last failed rescale until one succeeds (logs state changes, not rounds)."""
        self._knowledge_failure: str | None = None
        """Kind of the last failed knowledge write until one succeeds (an Event per change, not per round)."""
        self._saved_at: float | None = None
        """When the last round saved the knowledge (None: not yet in this process)."""
        self.reading_bounds = ReadingBounds()
        """What a job can report; a reading outside is a gap (:meth:`_validated`)."""
        self._disagreement: tuple[int | None, int] | None = None
        """Prometheus' and the scale target's parallelism when they last disagreed (logged once per pair)."""
        self.safeguards = Safeguards(settings.safeguards, self.events)
        self._restore()

    # ---------------------------------------------------------------- knowledge

    def _restore(self) -> None:
        try:
            document = self.knowledge.load()
        except KnowledgeUnrecoverable:
            raise  # a fresh start would overwrite a document it could not set aside
        except Exception as exc:  # a broken store must not stop the agent from starting fresh
            self.log.warning("knowledge.load_failed", error=str(exc))
            document = None
        if not document:
            self.log.info("knowledge.fresh_start")
            return
        try:
            # Read field by field (every store checked it already; a store of the lab's may not have).
            typed = validate_document(document)
            loop = typed.loop
            self.analyzer.restore(member(document, "analyzer"))
            check_moments(typed, self.clock.now())
            self.last_rescale_at = loop.last_rescale_at
            self.last_round_at = loop.last_round_at
            self.rescales = RescaleHistory.from_stored(loop.rescales)
            self.recommendations = Recommendations.from_list(loop.recommendations)
            self.safeguards.ineffective.restore(loop.ineffective_scale_outs)
            kept = loop.policy_state
            # Another policy's state (the operator switched policies) is not this one's to read.
            self.policy_state = dict(kept.state) if kept is not None and kept.policy == self.policy.name else None
        except Exception as exc:
            # The store could read it but the models cannot use it: the next save would overwrite it,
            # so move it aside first (never delete what the agent learned), then start fresh.
            error = f"{type(exc).__name__}: {exc}"
            try:
                moved_to = self.knowledge.set_aside(f"cannot restore: {error}")
            except KnowledgeUnrecoverable:
                raise
            except Exception as aside_exc:
                moved_to = None
                self.log.error("knowledge.set_aside_failed", error=f"{type(aside_exc).__name__}: {aside_exc}")
            self.log.warning("knowledge.restore_failed", error=error, moved_to=moved_to)
            if self.telemetry is not None:
                self.telemetry.state_refused("knowledge", "restore")
            self.analyzer.reset()
            self.last_rescale_at = None
            self.last_round_at = None
            self.rescales, self.recommendations, self.policy_state = RescaleHistory(), Recommendations(), None
            self.safeguards.ineffective.restore(None)
            return
        self.log.info(
            "knowledge.restored",
            rescales=len(self.rescales),
            last_rescale_at=self.last_rescale_at,
            observed_scale_outs=sorted(self.analyzer.observed_scale_outs()),
        )

    def document(self) -> dict[str, Any]:
        """The knowledge document as it stands now."""
        return {
            "version": SCHEMA_VERSION,
            "analyzer": self.analyzer.to_dict(),
            "loop": {
                "last_round_at": self.last_round_at,
                "last_rescale_at": self.last_rescale_at,
                "rescales": self.rescales.to_list(),
                "recommendations": self.recommendations.to_list(),
                "ineffective_scale_outs": self.safeguards.ineffective.to_list(),
                "policy_state": (
                    {"policy": self.policy.name, "state": self.policy_state} if self.policy_state is not None else None
                ),
            },
        }

    # ---------------------------------------------------------------- the round

    def round(self) -> RoundResult:
        """Run one MAPE-K round; never raises."""
        now = self.clock.now()
        result = RoundResult(now=now)
        since = self.last_round_at if self.last_round_at is not None else now - self.settings.loop_interval_s
        # Never look back further than a few intervals: a long outage is a gap, not a backlog of rounds.
        since = max(since, now - 5 * self.settings.loop_interval_s)
        self.last_round_at = now
        self._settle_pending(now)

        observation = self.step(result, "monitor", lambda: self.monitor.observe(since=since, now=now))
        if observation is None:
            return self._finish(result)
        observation = self._validated(observation)
        result.observation = observation

        analysis = self.step(result, "analyze", lambda: self.analyzer.analyze(observation, now=now))
        if analysis is None:
            return self._finish(result)
        result.analysis = analysis
        if analysis.restart_detected:
            self.events.emit(reason="JobRestarted", message=analysis.restart_detected, type_="Warning")
        if analysis.rescaled_outside:
            # An operator chose this scale-out: it gets the grace period and a fresh stabilization
            # window, like a rescale of our own, instead of being reverted the same round.
            self.last_rescale_at = now
            self.recommendations = Recommendations()

        current = analysis.parallelism
        if current is None or not observation.usable:
            gaps = ", ".join(f"{name}: {why}" for name, why in observation.gaps.items()) or None
            result.outcome = RoundOutcome(RoundStatus.NO_DATA, detail=gaps)
            return self._finish(result)

        self.planning.plan_and_execute(self, RoundContext(result, observation, analysis, current, since, now))
        return self._finish(result)

    def _settle_pending(self, now: float) -> None:
        """Record how a rescale left pending at the last stop ended: Flink finished it meanwhile, the scale
        target says at what (see :class:`agent.ports.InterruptibleScaler`). Unread: asked again next round."""
        pending = self.rescales.pending()
        if not pending:
            return
        try:
            reached = self.scaler.current_parallelism()
        except Exception as exc:  # the scale target cannot say now: the record stays pending
            reached = None
            self.log.debug("rescale.pending_unread", error=f"{type(exc).__name__}: {exc}")
        if reached is None:
            return
        self.rescales.settle(reached)
        last = pending[-1]
        if reached == last.to_parallelism:
            self.log.info("rescale.confirmed", requested_at=last.at, **{"from": last.from_parallelism}, to=reached)
            # The recovery of that rescale is the one under way now: watch it as if it had just been confirmed.
            self.analyzer.on_rescale(now=last.at, from_parallelism=last.from_parallelism or 0, to_parallelism=reached)
        else:
            self.log.warning(
                "rescale.unconfirmed", requested=last.to_parallelism, confirmed=reached, requested_at=last.at
            )

    def _validated(self, observation: Observation) -> Observation:
        """The one check between the monitor and the models: readings a job cannot have are gaps
        (:func:`agent.observation.screened`), and the current parallelism is the scale target's.

        The scale target is the source of truth for the parallelism (Prometheus counts the workers that
        report, which lags a rescale, and its answer may be anything); Prometheus' count stands only when
        the scale target cannot say. A disagreement is logged once per pair of values, not every round.
        """
        observation = screened(observation, self.reading_bounds)
        scaler = self.scaler
        try:
            truth = scaler.parallelism_now() if isinstance(scaler, ProbedScaler) else scaler.current_parallelism()
        except Exception as exc:  # unread: Prometheus' (validated) count stands this round
            self.log.debug("parallelism.target_unread", error=f"{type(exc).__name__}: {exc}")
            truth = None
        if truth is None or not 0 <= truth <= self.reading_bounds.max_parallelism:
            return observation
        seen = observation.parallelism
        if seen == truth:
            self._disagreement = None
            return observation
        if (seen, truth) != self._disagreement:
            self.log.warning(
                "parallelism.disagree",
                prometheus=seen,
                scale_target=truth,
                gap=observation.gaps.get("parallelism"),
                used=truth,
            )
            self._disagreement = (seen, truth)
        return replace(observation, parallelism=truth)

    # ---------------------------------------------------------------- what the planning part records

    @property
    def quota(self) -> tuple[int | None, str | None]:
        """The slots the quota allows and why, as last read (None: no quota)."""
        return self.bounds.quota

    def remember(self, policy_state: Mapping[str, object] | None, *, desired: int, acted: bool, now: float) -> None:
        """Keep what the policy asked to keep and, when it decided, the scale-out it wanted (for scale-down
        stabilization; per vertex: the desired plan's cost)."""
        if policy_state is not None:
            self.policy_state = dict(policy_state)
        if acted:
            keep_s = max(self.config.scale_down_stabilization_s, self.config.loop_interval_s) * 2
            self.recommendations = self.recommendations.add(now, desired, keep_s=keep_s)

    def execute_failed(self, result: RoundResult, error: ScalerError) -> bool:
        """The scale target refused the rescale: the round fails at execute. True when this kind of failure is new
        (a persistent one, a 403 until the Role is fixed, fails every round: it is logged once per change)."""
        new = error.kind != self._execute_failure
        self._execute_failure = error.kind
        result.outcome = RoundOutcome(RoundStatus.FAILED, step="execute", detail=error.kind)
        return new

    def execute_succeeded(self) -> None:
        """The scale target took a rescale: a failure logged before is over."""
        if self._execute_failure is not None:
            self.log.info("rescale.recovered", was=self._execute_failure)
            self._execute_failure = None

    def record_rescale(self, result: RoundResult, record: Rescale, *, reached: int | None) -> None:
        """Keep ``record`` in the history and log it; unless it was a dry run, the grace period starts at it and
        the round reports ``reached`` (None while pending: the next start confirms it, :meth:`_settle_pending`)."""
        self.rescales.add(record)
        if record.dry_run:
            self.log.info("rescale.dry_run", **record.fields())
            return
        self.last_rescale_at = record.at
        if record.pending:
            # The daemon is stopping: Flink finishes the rescale; the next start confirms it.
            self.log.warning("rescale.pending", **record.fields())
            return
        result.rescaled_to = reached
        self.log.info("rescale", **record.fields())

    def report_ineffective(self, record: IneffectiveScaleOut) -> None:
        """A log line and a Warning Event for a scale-out judged ineffective (each judged once)."""
        message = (
            f"scale-out {record.from_parallelism} -> {record.to_parallelism} gained "
            f"{record.measured_capacity - record.capacity_before:,.0f} records/s of "
            f"{record.predicted_capacity - record.capacity_before:,.0f} predicted"
            + (f"; {record.cause}" if record.cause else "")
            + f": not repeated while the workload stays near {record.workload:,.0f} records/s"
        )
        self.log.warning(
            "scale_out.ineffective", message=message, **{k: v for k, v in asdict(record).items() if k != "at"}
        )
        self.events.emit(reason="IneffectiveScaling", message=message, type_="Warning")

    def round_config(self) -> PlannerConfig:
        """The planner's settings for this round: ``max_parallelism`` lowered to what the scale target can run now
        and to the job's quota (:class:`agent.plan_bounds.PlanBounds`)."""
        return self.bounds.round_config(self.config, quota=self.settings.safeguards.quota, scaler=self.scaler)

    def step(self, result: RoundResult, name: str, fn: Callable[[], T]) -> T | None:
        """Run one step of the round, timed; an exception ends the round there (logged, the outcome FAILED): None."""
        start = time.perf_counter()  # wall time of the step, for telemetry only
        try:
            return fn()
        except Exception as exc:
            self.log.error("loop.step_failed", step=name, error=f"{type(exc).__name__}: {exc}")
            result.outcome = RoundOutcome(RoundStatus.FAILED, step=name, detail=f"{type(exc).__name__}: {exc}")
            return None
        finally:
            result.durations_ms[name] = (time.perf_counter() - start) * 1000.0

    def _finish(self, result: RoundResult) -> RoundResult:
        if self._save_due(result):
            start = time.perf_counter()
            result.knowledge = self._save_knowledge()
            result.durations_ms["knowledge"] = (time.perf_counter() - start) * 1000.0
            if result.knowledge.failure is None:
                self._saved_at = result.now
        self._log_round(result)
        if self.telemetry is not None:
            try:
                self.telemetry.record_round(result)
            except Exception as exc:
                self.log.error("telemetry.failed", error=str(exc))
        return result

    def _save_due(self, result: RoundResult) -> bool:
        """Whether this round writes the knowledge (see ``KNOWLEDGE_SAVE_INTERVAL_S``)."""
        if self._saved_at is None or self._knowledge_failure is not None or result.rescaled_to is not None:
            return True
        if result.analysis is not None and result.analysis.rescaled_outside:
            return True
        # Half a loop of slack, so a 60-s loop whose rounds land a little early still saves every round.
        return result.now - self._saved_at >= KNOWLEDGE_SAVE_INTERVAL_S - 0.5 * self.settings.loop_interval_s

    def _save_knowledge(self) -> KnowledgeSave:
        """Write the document; a failed write leaves the stored one as it was and the loop running."""
        document = self.document()
        size: int | None = None
        try:
            size = len(encode_document(document).encode())
            self.knowledge.save(document)
            save = KnowledgeSave(size_bytes=size)
        except KnowledgeTooLarge as exc:
            save = KnowledgeSave(size_bytes=exc.size_bytes, failure="too_large", detail=str(exc))
        except ValueError as exc:
            save = KnowledgeSave(size_bytes=size, failure="encode" if size is None else "store", detail=str(exc))
        except Exception as exc:
            save = KnowledgeSave(size_bytes=size, failure="store", detail=f"{type(exc).__name__}: {exc}")
        if save.failure is not None:
            self.log.error("knowledge.save_failed", kind=save.failure, size_bytes=save.size_bytes, error=save.detail)
            if save.failure != self._knowledge_failure:
                # One Event per change of trouble: a document that stays too large fails every round.
                self.events.emit(reason="KnowledgeNotSaved", message=save.detail or save.failure, type_="Warning")
        elif self._knowledge_failure is not None:
            self.log.info("knowledge.save_recovered", was=self._knowledge_failure, size_bytes=save.size_bytes)
        self._knowledge_failure = save.failure
        return save

    def _log_round(self, result: RoundResult) -> None:
        analysis, decision = result.analysis, result.decision
        fields: dict[str, object] = {
            "outcome": result.outcome.status.value,
            "skipped": result.skipped,
            "ms": {k: round(v, 2) for k, v in result.durations_ms.items()},
        }
        if analysis is not None:
            fields.update(analysis.summary())
        if decision is not None:
            fields.update(
                target=decision.target_parallelism,
                desired=decision.desired_parallelism,
                code=decision.code.value,
                reason=decision.reasons[-1] if decision.reasons else None,
            )
            refused = _scale_in_refused(decision, analysis.parallelism if analysis is not None else None)
            if refused is not None:
                fields["scale_in_refused"] = refused
        self.log.info("loop", **fields)


@dataclass(frozen=True)
class RoundContext:
    """What a round's plan step is given: the round so far, the validated observation and its analysis."""

    result: RoundResult
    observation: Observation
    analysis: Analysis
    current: int
    """The job's scale-out now (the analysis', which the scale target confirmed where it could)."""
    since: float
    """Start of the interval the round observed."""
    now: float


class Planning(Protocol):
    """A round's plan and execute steps, composed into the agent when it is built: one scale-out for the whole
    job (:class:`WholeJobPlanning`) or one parallelism per job vertex (``agent.per_operator.VertexPlanning``)."""

    @property
    def policy(self) -> Policy: ...

    def plan_and_execute(self, agent: Agent, context: RoundContext) -> None:
        """Plan on the analysed round and apply the decision, recording it in the agent's loop state."""
        ...


class WholeJobPlanning:
    """The plan and execute steps for one scale-out of the whole job (the scale target's replicas or parallelism)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def plan_and_execute(self, agent: Agent, context: RoundContext) -> None:
        """Ask the policy, let the safeguards review its decision, and rescale when it changes the scale-out."""
        result, analysis, current, now = context.result, context.analysis, context.current, context.now
        plan_input = plan_input_of(agent, analysis, now, context.observation)
        config = with_partitions(agent.round_config(), analysis.source_partitions)
        self.judge_scale_out(agent, analysis, plan_input.worker_busy, now)
        decision = agent.step(result, "plan", lambda: self.policy.decide(plan_input, config))
        if decision is None:
            return
        decision = self._review(agent, context, decision, config)
        result.decision = decision
        agent.remember(decision.policy_state, desired=decision.desired_parallelism, acted=decision.acted, now=now)
        if decision.rescales_from(current):
            agent.step(result, "execute", lambda: self._execute(agent, result, decision, current, analysis, now))

    def _review(self, agent: Agent, context: RoundContext, decision: Decision, config: PlannerConfig) -> Decision:
        """The safeguards' review of the policy's decision (agent.safeguards), its findings reported."""
        analysis, current, now = context.analysis, context.current, context.now
        review = agent.safeguards.review(
            decision,
            current=current,
            now=now,
            pressure=memory_pressure(context.observation),
            workload=analysis.workload_avg,
            recovery_s=analysis.recovery_times.get(current),
            target_recovery_s=agent.config.target_recovery_time_s,
        )
        findings = review.findings
        cap, why = agent.quota
        if cap is not None and cap == config.max_parallelism:
            limited = quota_limit(
                review.decision, current, cap, why, wanted_more=_wanted_more(review.decision, analysis, cap)
            )
            findings = findings if limited is None else (*findings, limited)
        context.result.findings = findings
        agent.safeguards.report(findings, now=now)
        return review.decision

    def judge_scale_out(self, agent: Agent, analysis: Analysis, worker_busy: Mapping[str, float], now: float) -> None:
        """Judge the last scale-out once its capacity is measured (safeguards.effectiveness); say when it fell short."""
        ineffective = agent.safeguards.ineffective
        if not agent.settings.safeguards.effectiveness.enabled or None not in ineffective.pending:
            return
        # Past the grace period and a round, the capacity at the new scale-out is measured, caught up or not: a
        # scale-out that leaves the job behind is the one that most needs judging (and is measured saturated).
        settled = (
            agent.last_rescale_at is not None
            and now - agent.last_rescale_at >= agent.config.grace_period_s + agent.config.loop_interval_s
        )
        parallelism = analysis.parallelism
        record = ineffective.judge(
            now=now,
            parallelism=parallelism,
            capacities=analysis.capacities,
            settled=settled,
            cause=skew_cause(worker_busy, parallelism=parallelism or 0, source_partitions=analysis.source_partitions),
        )
        if record is not None:
            agent.report_ineffective(record)

    def _execute(
        self, agent: Agent, result: RoundResult, decision: Decision, current: int, analysis: Analysis, now: float
    ) -> None:
        """Rescale the job to the decision's target and record it (dry-run: record and log only)."""
        target = decision.target_parallelism
        dry_run = agent.settings.dry_run
        try:
            outcome = agent.scaler.rescale(target, reasons=decision.reasons, dry_run=dry_run)
        except ScalerError as exc:
            if agent.execute_failed(result, exc):
                agent.log.error("rescale.failed", kind=exc.kind, error=str(exc), target=target, current=current)
            return
        agent.execute_succeeded()
        predicted = analysis.recovery_times.get(target)
        record = Rescale(
            at=now,
            from_parallelism=current,
            to_parallelism=target,
            confirmed=outcome.confirmed,
            dry_run=dry_run,
            predicted_recovery_s=predicted if predicted is not None and math.isfinite(predicted) else None,
            downtime_s=outcome.downtime_s,
            reasons=tuple(decision.reasons[-3:]),
            pending=True if outcome.pending else None,
        )
        settled = not dry_run and not outcome.pending
        if settled and outcome.confirmed != target:
            # Only what the target confirmed counts; the next round sees the real parallelism.
            agent.log.warning("rescale.unconfirmed", requested=target, confirmed=outcome.confirmed)
        agent.record_rescale(result, record, reached=outcome.confirmed)
        if not settled:
            return
        if agent.settings.safeguards.effectiveness.enabled:
            agent.safeguards.ineffective.watch(
                now=now,
                from_parallelism=current,
                to_parallelism=outcome.confirmed or target,
                workload=analysis.workload_avg,
                capacities=analysis.capacities,
            )
        agent.analyzer.on_rescale(
            now=now,
            from_parallelism=current,
            to_parallelism=outcome.confirmed if outcome.confirmed is not None else target,
            downtime_s=outcome.downtime_s,
            resumed_at=outcome.resumed_at,
        )


def _wanted_more(final: Decision, analysis: Analysis, cap: int) -> bool:
    """Whether the policy wanted more than the quota's cap: it said so, or the job at the cap cannot carry the load
    it planned for (a policy that clamps its desire to max_parallelism says nothing else)."""
    capacity = analysis.capacities.get(cap)
    upper = analysis.forecast_upper if analysis.forecast_upper is not None else analysis.forecast
    demand = max(
        [w for w in (analysis.workload_avg,) if w is not None]
        + ([float(np.nanmax(upper))] if upper is not None and np.isfinite(upper).any() else []),
        default=None,
    )
    short = capacity is not None and demand is not None and capacity < demand
    return final.desired_parallelism > final.target_parallelism or final.code is ReasonCode.NO_CANDIDATE or short


def plan_input_of(agent: Agent, analysis: Analysis, now: float, observation: Observation | None = None) -> PlanInput:
    """The whole-job policy's snapshot of the round: the analysis, the workers' means and the agent's loop state."""
    throughput = _worker_means(observation.worker_throughput) if observation is not None else {}
    cpu = _worker_means(observation.worker_cpu) if observation is not None else {}
    busy = _worker_means(observation.worker_busy) if observation is not None else {}
    uptime = observation.uptime_s if observation is not None else None
    return PlanInput(
        now=now,
        current_parallelism=analysis.parallelism or 0,
        workload_avg=analysis.workload_avg,
        workload_previous=analysis.workload_previous,
        workload_usual=analysis.workload_usual,
        workload_noise=analysis.workload_noise,
        workload_climb_from=analysis.workload_climb_from,
        forecast=analysis.forecast,
        forecast_upper=analysis.forecast_upper,
        consumer_lag=analysis.consumer_lag,
        capacities=analysis.capacities,
        recovery_times=analysis.recovery_times,
        last_rescale_at=agent.last_rescale_at,
        recovering=analysis.recovering,
        recovering_since=analysis.recovering_since,
        backlog_drain=analysis.backlog_drain,
        recent_recommendations=agent.recommendations,
        capacity_sources=analysis.capacity_sources,
        worker_cpu_avg=analysis.worker_cpu_avg,
        worker_throughput=throughput,
        worker_cpu=cpu,
        worker_busy=busy,
        source_rate=sum(throughput.values()) if throughput else None,
        uptime_s=uptime,
        job_running=uptime is None or uptime > 0,
        partition_offsets=observation.partition_offsets if observation is not None else None,
        policy_state=agent.policy_state,
        rescale_downtimes=analysis.rescale_downtimes,
        failure_ready=analysis.failure_ready,
        rescale_recoveries=analysis.rescale_recoveries,
        replay_records=analysis.replay_records,
    )
