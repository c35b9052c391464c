"""The safeguard stage of the loop: between the policy's decision and the scale target.

The policy plans as it always does; :class:`Safeguards` then reviews its decision with what this round
measured (the TaskManagers' heap and GC time, the clock against the blocked periods, the ineffective
scale-outs it remembers) and vetoes or limits it (``planner.safeguards`` judges; this module measures,
remembers and reports). Every veto or limit is a :class:`planner.safeguards.Finding`, reported by
:class:`DecisionReporter` as a Kubernetes Event and a log line, at most one per reason code per interval.
The quota lowers what every policy plans within (``Agent.round_config``), as the cluster's free slots do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import numpy as np
from apscheduler.triggers.cron import CronTrigger

from agent.json_types import JsonObject
from agent.knowledge.schema import IneffectiveScaleOutRecord
from agent.logging import get_logger
from agent.observation import Observation
from agent.ports import EventSink
from agent.safeguard_settings import BlockedPeriodSettings, EffectivenessSettings, SafeguardSettings, parse_period
from planner.safeguards import (
    Finding,
    IneffectiveScaleOut,
    MemoryPressure,
    SafeguardCode,
    Verdict,
    blocked_recovery_note,
    blocked_veto,
    gc_dominates,
    ineffective_veto,
    memory_veto,
    scale_out_effective,
    stabilization_limit,
    vetoed,
)
from planner.types import Decision


def memory_pressure(observation: Observation | None) -> MemoryPressure:
    """The worst TaskManager's mean heap usage and GC time over the round (None where not read)."""
    if observation is None:
        return MemoryPressure()

    def worst(series: Mapping[str, np.ndarray]) -> tuple[float | None, str | None]:
        means = {}
        for taskmanager, values in series.items():
            finite = values[np.isfinite(values)]
            if finite.size:
                means[taskmanager] = float(finite.mean())
        if not means:
            return None, None
        taskmanager = max(means, key=lambda tm: means[tm])
        return means[taskmanager], taskmanager

    heap, heap_tm = worst(observation.taskmanager_heap_usage)
    gc, gc_tm = worst(observation.taskmanager_gc_pressure)
    return MemoryPressure(heap, heap_tm, gc, gc_tm)


# ---------------------------------------------------------------- blocked periods


@dataclass(frozen=True)
class _Period:
    text: str
    daily: tuple[time, time] | None
    cron: CronTrigger | None


class BlockedPeriods:
    """Whether ``now`` lies in a blocked period, read in the configured time zone."""

    def __init__(self, settings: BlockedPeriodSettings) -> None:
        self.zone = ZoneInfo(settings.time_zone or "UTC")
        self.periods: list[_Period] = []
        for text in settings.periods:
            daily, cron = parse_period(text)
            trigger = CronTrigger.from_crontab(cron, timezone=self.zone) if cron is not None else None
            self.periods.append(_Period(text, daily, trigger))

    def active(self, now: float) -> str | None:
        """The first period that holds at ``now`` (Unix seconds), or None."""
        local = datetime.fromtimestamp(now, tz=self.zone)
        for period in self.periods:
            if period.daily is not None and not _within_daily(local, *period.daily):
                continue
            if period.cron is not None and not _cron_matches(period.cron, local):
                continue
            return period.text
        return None


def _within_daily(local: datetime, start: time, end: time) -> bool:
    clock = local.time().replace(tzinfo=None)
    if start <= end:
        return bool(start <= clock <= end)
    return bool(clock >= start or clock <= end)  # wraps past midnight


def _cron_matches(trigger: CronTrigger, local: datetime) -> bool:
    """True when the minute holding ``local`` is one the cron expression fires at."""
    minute = local.replace(second=0, microsecond=0)
    fire = trigger.get_next_fire_time(None, minute)
    return fire is not None and fire - minute < timedelta(seconds=1)


# ---------------------------------------------------------------- ineffective scale-outs


@dataclass(frozen=True)
class _Pending:
    """A scale-out applied and not judged yet."""

    at: float
    from_parallelism: int
    to_parallelism: int
    workload: float
    capacity_before: float
    predicted_capacity: float


class IneffectiveScaleOuts:
    """The ineffective scale-outs remembered (aged out after ``forget_after_s``) and the ones being judged.

    The one owner of this state: it is told of each applied scale-out (of the whole job, or of one job vertex
    under a per-vertex policy), judges it once its capacity is measured, trims what aged out, and answers
    whether a scale-out would repeat one.
    """

    def __init__(self, settings: EffectivenessSettings) -> None:
        self.settings = settings
        self.records: tuple[IneffectiveScaleOut, ...] = ()
        self.pending: dict[str | None, _Pending] = {}
        """The scale-outs applied and not judged yet, by vertex id (None: the whole job)."""

    def to_list(self) -> list[JsonObject]:
        """The records as plain data for the knowledge document."""
        return [asdict(record) for record in self.records]

    def restore(self, data: Iterable[IneffectiveScaleOutRecord | Mapping[str, object]] | None) -> None:
        """Read the records back (the knowledge schema's, or plain data checked against it); None is none, a
        malformed entry raises (the document is set aside)."""
        if data is None:
            self.records = ()
            return
        if not isinstance(data, (list, tuple)):
            raise ValueError(f"ineffective_scale_outs: expected a list, found {type(data).__name__}")
        self.records = tuple(
            IneffectiveScaleOut(**IneffectiveScaleOutRecord.model_validate(item, from_attributes=True).model_dump())
            for item in data
        )

    def live(self, now: float) -> tuple[IneffectiveScaleOut, ...]:
        """The records younger than ``forget_after_s`` (the older ones are dropped)."""
        self.records = tuple(r for r in self.records if now - r.at < self.settings.forget_after_s)
        return self.records

    def watch(
        self,
        *,
        now: float,
        from_parallelism: int,
        to_parallelism: int,
        workload: float | None,
        capacities: Mapping[int, float | None],
        vertex: str | None = None,
    ) -> None:
        """Start judging an applied scale-out of the job (or of ``vertex``): a scale-in or a rescale without
        predictions stops the watch."""
        before, predicted = capacities.get(from_parallelism), capacities.get(to_parallelism)
        if (
            to_parallelism <= from_parallelism
            or workload is None
            or before is None
            or predicted is None
            or not (math.isfinite(before) and math.isfinite(predicted))
        ):
            self.pending.pop(vertex, None)
            return
        self.pending[vertex] = _Pending(now, from_parallelism, to_parallelism, workload, before, predicted)

    def judge(
        self,
        *,
        now: float,
        parallelism: int | None,
        capacities: Mapping[int, float | None],
        settled: bool,
        cause: str | None,
        vertex: str | None = None,
    ) -> IneffectiveScaleOut | None:
        """Judge the watched scale-out of the job (or of ``vertex``) once it runs settled at it; the record when it
        was ineffective."""
        pending = self.pending.get(vertex)
        if pending is None:
            return None
        if parallelism != pending.to_parallelism or now - pending.at > self.settings.measure_within_s:
            del self.pending[vertex]  # rescaled again, or never measured: left unjudged
            return None
        measured = capacities.get(pending.to_parallelism)
        if not settled or measured is None or not math.isfinite(measured):
            return None
        del self.pending[vertex]
        effective = scale_out_effective(
            pending.capacity_before, pending.predicted_capacity, measured, self.settings.threshold
        )
        if effective is None or effective:
            return None
        record = IneffectiveScaleOut(
            at=now,
            from_parallelism=pending.from_parallelism,
            to_parallelism=pending.to_parallelism,
            workload=pending.workload,
            capacity_before=pending.capacity_before,
            predicted_capacity=pending.predicted_capacity,
            measured_capacity=measured,
            cause=cause,
            vertex=vertex,
        )
        self.records = (*self.records, record)
        return record


# ---------------------------------------------------------------- reports


class DecisionReporter:
    """A Kubernetes Event and a log line per vetoed or limited decision, at most one per reason code per interval."""

    def __init__(self, events: EventSink, *, interval_s: float) -> None:
        self.events = events
        self.interval_s = interval_s
        self.log = get_logger("perdix.safeguards")
        self._last: dict[SafeguardCode, float] = {}

    def report(self, findings: tuple[Finding, ...], *, now: float) -> list[Finding]:
        """Report each finding whose code was not reported within the interval; the ones reported."""
        reported = []
        for finding in findings:
            last = self._last.get(finding.code)
            if last is not None and now - last < self.interval_s:
                continue
            self._last[finding.code] = now
            figures = {k: v for k, v in finding.figures.items() if v is not None}
            self.log.warning(
                f"decision.{finding.verdict.value}", code=finding.code.value, message=finding.message, **figures
            )
            shown = ", ".join(f"{k}={v}" for k, v in figures.items())
            reason = "ScalingVetoed" if finding.verdict is Verdict.VETOED else "ScalingLimited"
            self.events.emit(
                reason=reason,
                message=f"[{finding.code.value}] {finding.message} ({shown})",
                type_="Warning" if finding.verdict is Verdict.VETOED else "Normal",
            )
            reported.append(finding)
        return reported


# ---------------------------------------------------------------- the stage


@dataclass(frozen=True)
class Review:
    """The decision after the safeguards, and what they found."""

    decision: Decision
    findings: tuple[Finding, ...] = ()


class Safeguards:
    """The safeguard stage (see the module docstring): review each decision, remember scale-outs, report."""

    def __init__(self, settings: SafeguardSettings, events: EventSink) -> None:
        self.settings = settings
        self.blocked = BlockedPeriods(settings.blocked_periods)
        self.ineffective = IneffectiveScaleOuts(settings.effectiveness)
        self.reporter = DecisionReporter(events, interval_s=settings.reports.interval_s)
        self.log = get_logger("perdix.safeguards")

    def gc_dominates(self, pressure: MemoryPressure) -> bool:
        """True when this round's GC time is above the guard's threshold (its capacity is not learned)."""
        return gc_dominates(pressure, self.settings.memory.gc_pressure_threshold)

    def review(
        self,
        decision: Decision,
        *,
        current: int,
        now: float,
        pressure: MemoryPressure,
        workload: float | None,
        recovery_s: float | None,
        target_recovery_s: float,
    ) -> Review:
        """Veto or keep the decision: memory pressure, a blocked period, a repeated ineffective scale-out."""
        target = decision.target_parallelism
        findings: list[Finding] = []
        if self.settings.reports.stabilization:
            held = stabilization_limit(decision, current)
            if held is not None:
                findings.append(held)
        if target == current:
            return Review(decision, tuple(findings))
        round_ = self._round(now, pressure, recovery_s, target_recovery_s, workload)
        veto = round_.veto(current, target)
        if veto is not None:
            return Review(vetoed(decision, current, veto), (*findings, veto))
        note = blocked_recovery_note(current, target, round_.period, recovery_s)
        if note is not None:
            decision = replace(decision, reasons=(*decision.reasons, note))
        return Review(decision, tuple(findings))

    def review_vertices(
        self,
        before: Mapping[str, int],
        planned: Mapping[str, int],
        names: Mapping[str, str],
        *,
        now: float,
        pressure: MemoryPressure,
        recovery_s: float | None,
        target_recovery_s: float,
        workload: float | None = None,
    ) -> tuple[dict[str, int], tuple[Finding, ...]]:
        """A per-vertex plan reviewed vertex by vertex: a vertex the memory guard, a blocked period or one of its
        own ineffective scale-outs holds keeps its parallelism (a scale-in of one vertex is still a scale-in); the
        others go ahead."""
        round_ = self._round(now, pressure, recovery_s, target_recovery_s, workload)
        kept = dict(planned)
        findings: list[Finding] = []
        for vertex, target in planned.items():
            current = before.get(vertex, target)
            if target == current:
                continue
            veto = round_.veto(current, target, vertex=vertex)
            if veto is not None:
                kept[vertex] = current
                name = names.get(vertex, vertex)
                findings.append(
                    replace(veto, message=f"{name}: {veto.message}", figures={**veto.figures, "vertex": name})
                )
        return kept, tuple(findings)

    def _round(
        self,
        now: float,
        pressure: MemoryPressure,
        recovery_s: float | None,
        target_recovery_s: float,
        workload: float | None,
    ) -> _RoundVetoes:
        """This round's vetoes: the settings with the blocked period and the ineffective scale-outs live now."""
        return _RoundVetoes(
            settings=self.settings,
            pressure=pressure,
            period=self.blocked.active(now) if self.settings.blocked_periods.periods else None,
            ineffective=self.ineffective.live(now) if self.settings.effectiveness.enabled else (),
            recovery_s=recovery_s,
            target_recovery_s=target_recovery_s,
            workload=workload,
        )

    def report(self, findings: tuple[Finding, ...], *, now: float) -> None:
        """Report the findings (rate-limited per reason code)."""
        if findings:
            self.reporter.report(findings, now=now)


@dataclass(frozen=True)
class _RoundVetoes:
    """The safeguards that can veto a rescale this round, checked in order: memory pressure, a blocked period,
    a repeated ineffective scale-out."""

    settings: SafeguardSettings
    pressure: MemoryPressure
    period: str | None
    """The blocked period in force (as configured), or None."""
    ineffective: tuple[IneffectiveScaleOut, ...]
    recovery_s: float | None
    target_recovery_s: float
    workload: float | None

    def veto(self, current: int, target: int, *, vertex: str | None = None) -> Finding | None:
        """The first safeguard that holds a rescale ``current`` -> ``target`` (of ``vertex``, None: the whole job)."""
        memory = self.settings.memory
        effectiveness = self.settings.effectiveness
        if memory.enabled:
            held = memory_veto(
                current,
                target,
                self.pressure,
                heap_threshold=memory.heap_usage_threshold,
                gc_threshold=memory.gc_pressure_threshold,
            )
            if held is not None:
                return held
        held = blocked_veto(
            current,
            target,
            self.period,
            recovery_s=self.recovery_s,
            target_recovery_s=self.target_recovery_s,
            recovery_scale_out=self.settings.blocked_periods.recovery_scale_out,
        )
        if held is not None or not self.ineffective:
            return held
        return ineffective_veto(
            current,
            target,
            self.ineffective,
            workload=self.workload,
            tolerance=effectiveness.workload_tolerance,
            vertex=vertex,
        )
