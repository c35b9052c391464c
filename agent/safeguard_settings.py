"""Settings of the safeguards that stand between a policy's decision and the scale target.

The ``safeguards`` section of the agent's settings tree (``agent.settings.Settings.safeguards``): a
memory-pressure guard, blocked periods, ineffective scale-out detection, resource quotas, and the
report (an Event and a log line) of every decision one of them vetoed or limited. Every default leaves
the agent as it was without them: no threshold, no period, detection off, no quota; see
docs/safeguards.md for what each does and how it compares with the Flink autoscaler's options.
"""

from __future__ import annotations

import re
from datetime import time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)


class MemoryGuardSettings(_Section):
    """No scale-in while the TaskManagers' heap is nearly full or GC eats their time (Flink's
    ``job.autoscaler.memory.heap-usage.threshold`` / ``memory.gc-pressure.threshold``)."""

    heap_usage_threshold: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Heap used over heap max (0..1) of the fullest TaskManager, averaged over the "
        "round, above which no scale-in is made (fewer TaskManagers would hold the same state). Reads "
        "prometheus.queries.heap_usage. Unset: off.",
    )
    gc_pressure_threshold: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Fraction of time (0..1) the busiest TaskManager spent in garbage collection "
        "over the round above which no scale-in is made, and the round's capacity is not learned (GC time reads as "
        "load). Reads prometheus.queries.gc_time. Unset: off.",
    )

    @property
    def enabled(self) -> bool:
        """True when either threshold is set."""
        return self.heap_usage_threshold is not None or self.gc_pressure_threshold is not None


_DAILY = re.compile(r"^\s*(\d{1,2}):(\d{2})(?::(\d{2}))?\s*-\s*(\d{1,2}):(\d{2})(?::(\d{2}))?\s*$")


def _clock_time(hours: str, minutes: str, seconds: str | None) -> time:
    return time(int(hours), int(minutes), int(seconds or 0))


def parse_period(text: str) -> tuple[tuple[time, time] | None, str | None]:
    """One blocked period: a daily range ``HH:MM[:SS]-HH:MM[:SS]``, a five-field cron expression, or both
    joined by ``&&`` (blocked when both hold). Returns ``(daily range, cron)``; ValueError saying what is wrong."""
    daily: tuple[time, time] | None = None
    cron: str | None = None
    for part in (p.strip() for p in text.split("&&")):
        match = _DAILY.match(part)
        if match:
            if daily is not None:
                raise ValueError(f"{text!r}: two daily ranges in one period")
            try:
                daily = (_clock_time(*match.group(1, 2, 3)), _clock_time(*match.group(4, 5, 6)))
            except ValueError as exc:
                raise ValueError(f"{text!r}: {part!r} is not a time range ({exc})") from None
            continue
        if cron is not None:
            raise ValueError(f"{text!r}: two cron expressions in one period")
        try:
            CronTrigger.from_crontab(part, timezone="UTC")
        except ValueError as exc:
            raise ValueError(
                f"{text!r}: {part!r} is neither a daily range (09:30-11:00) nor a cron expression "
                f"(minute hour day month weekday): {exc}"
            ) from None
        cron = part
    if daily is None and cron is None:
        raise ValueError("an empty period")
    return daily, cron


class BlockedPeriodSettings(_Section):
    """When Perdix plans and reports but does not rescale (Flink's ``job.autoscaler.excluded.periods``)."""

    periods: tuple[str, ...] = Field(
        (),
        description="Blocked periods, each a daily range 'HH:MM-HH:MM' (it may wrap past midnight), a cron "
        "expression 'minute hour day month weekday' whose every matching minute is blocked ('* 9-16 * * mon-fri'), "
        "or both joined by '&&' ('09:00-09:30 && * * * * mon-fri'). Empty: never blocked.",
    )
    time_zone: str | None = Field(
        None,
        description="IANA time zone the periods are read in (Europe/Berlin, America/New_York, UTC); required "
        "when periods are set, so a period never silently means UTC.",
    )
    recovery_scale_out: bool = Field(
        True,
        description="Within a blocked period, still scale out when the job at its current scale-out could "
        "not recover within target_recovery_time_s (its predicted recovery is longer, or it falls behind): a broken "
        "recovery target costs more than a rescale in the window. false: nothing rescales within a period.",
    )

    @field_validator("periods")
    @classmethod
    def _parsable(cls, periods: tuple[str, ...]) -> tuple[str, ...]:
        for period in periods:
            parse_period(period)
        return periods

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, zone: str | None) -> str | None:
        if zone is None:
            return None
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {zone!r} (an IANA name such as Europe/Berlin or UTC)") from None
        return zone

    @model_validator(mode="after")
    def _zone_with_periods(self) -> BlockedPeriodSettings:
        if self.periods and self.time_zone is None:
            raise ValueError(
                "time_zone: set the IANA time zone the blocked periods are read in (e.g. Europe/Berlin or UTC)"
            )
        return self


class EffectivenessSettings(_Section):
    """Remember a scale-out that gained far less capacity than predicted, and do not repeat it (Flink's
    ``job.autoscaler.scaling.effectiveness.detection.enabled`` / ``scaling.effectiveness.threshold``)."""

    enabled: bool = Field(False, description="Detect ineffective scale-outs and hold their repetition.")
    threshold: float = Field(
        0.1,
        gt=0,
        le=1,
        description="A scale-out is ineffective when the capacity it gained, once observed, is "
        "below this fraction of the gain predicted when it was decided (0.1: under a tenth).",
    )
    forget_after_s: float = Field(
        21600.0,
        gt=0,
        description="An ineffective scale-out is remembered this long, then forgotten (the wall it "
        "hit may be gone), seconds.",
    )
    workload_tolerance: float = Field(
        0.2,
        ge=0,
        description="The workload that led to an ineffective scale-out persists while the mean "
        "workload stays within this fraction above it; a workload that rose further may scale out again.",
    )
    measure_within_s: float = Field(
        1800.0,
        gt=0,
        description="How long after a scale-out its capacity may take to be observed before it is "
        "left unjudged, seconds.",
    )


class QuotaSettings(_Section):
    """A cap on what one job may take (Flink's ``job.autoscaler.quota.cpu`` / ``quota.memory``)."""

    slots: int | None = Field(
        None,
        ge=1,
        description="Most task slots the job may take (its widest vertex's parallelism with slot "
        "sharing). Unset: no slot quota.",
    )
    cpu: float | None = Field(
        None,
        gt=0,
        description="Most CPU cores the job's slots may take, read through the CPU per slot the scale "
        "target reports (flink-rest: the TaskManagers' resources; flinkdeployment: spec.taskManager.resource). "
        "Unset: no CPU quota.",
    )
    memory_mb: float | None = Field(
        None,
        gt=0,
        description="Most TaskManager process memory the job's slots may take, MB, through the memory "
        "per slot the scale target reports. Unset: no memory quota.",
    )

    @property
    def enabled(self) -> bool:
        """True when any quota is set."""
        return self.slots is not None or self.cpu is not None or self.memory_mb is not None


class ReportSettings(_Section):
    """An Event and a log line per vetoed or limited decision (Flink's ScalingVetoed / ScalingLimited)."""

    interval_s: float = Field(
        1800.0,
        ge=0,
        description="At most one report per reason code in this interval, seconds (Flink's "
        "job.autoscaler.scaling.event.interval; 0: every round).",
    )
    stabilization: bool = Field(
        False, description="Also report scale-ins the stabilization window held back (reason code 'stabilized')."
    )


class SafeguardSettings(_Section):
    """The safeguards between the policy and the scale target (docs/safeguards.md)."""

    memory: MemoryGuardSettings = Field(default_factory=MemoryGuardSettings, description="Memory-pressure guard.")
    blocked_periods: BlockedPeriodSettings = Field(
        default_factory=BlockedPeriodSettings, description="Periods without rescales."
    )
    effectiveness: EffectivenessSettings = Field(
        default_factory=EffectivenessSettings, description="Ineffective scale-out detection."
    )
    quota: QuotaSettings = Field(default_factory=QuotaSettings, description="Resource quota of the job.")
    reports: ReportSettings = Field(
        default_factory=ReportSettings, description="Reports of vetoed or limited decisions."
    )
