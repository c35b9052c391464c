"""Replays a workload trace through the simulated Flink job with the real agent loop, in simulated time.

The simulator steps one second at a time; every ``loop_interval_s`` the agent runs a round on the
same simulated clock, so six hours replay in seconds. The summary measures what an operator cares
about: worker-hours, rescales, recoveries that missed the target, lag, records lost (always 0).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agent.analyze import AnalyzeStage, Analyzer
from agent.clock import SimulatedClock
from agent.loop import Agent, RoundResult
from agent.ports import KnowledgeStore, MetricSource
from lab.inline import InlineExecutor
from lab.settings import LabSettings
from lab.simulated import SimulatedMonitor, SimulatedScaler
from lab.slo import SloJudgement, judge, stops_from
from planner import Policy, Signal
from simulator import SimulatedFlinkJob, Trace


class ReplayError(ValueError):
    """A replay that cannot run (e.g. a trace shorter than one loop)."""


class MemoryKnowledgeStore:
    """Knowledge kept in memory, for replays that must not leave files behind."""

    def __init__(self) -> None:
        self.document: dict[str, Any] | None = None
        self.aside: list[dict[str, Any]] = []

    def load(self) -> dict[str, Any] | None:
        """The last saved document."""
        return self.document

    def save(self, document: dict[str, Any]) -> None:
        """Keep the document."""
        self.document = document

    def set_aside(self, reason: str) -> str | None:
        """Keep the unusable document in ``aside``."""
        if self.document is None:
            return None
        self.aside.append(self.document)
        self.document = None
        return f"aside[{len(self.aside) - 1}]"


@dataclass
class ReplayResult:
    """Summary and per-second series of one replay."""

    summary: dict[str, Any]
    series: dict[str, np.ndarray]
    rounds: list[RoundResult] = field(default_factory=list)
    rescales: list[tuple[int, int, bool]] = field(default_factory=list)


class Replay:
    """A simulated job and an agent on one simulated clock, advanced second by second."""

    def __init__(
        self,
        trace: Trace,
        settings: LabSettings,
        *,
        hours: float | None = None,
        failures_per_hour: float = 0.0,
        knowledge: KnowledgeStore | None = None,
        monitor: MetricSource | None = None,
        policy: Policy | None = None,
        judged_target_s: float | None = None,
    ) -> None:
        """``policy``: a policy object (e.g. a peer with another knob) instead of ``settings.policy``'s
        default; ``judged_target_s``: the target recovery time the SLO is judged against, when the policy
        plans with another (a sweep of Daedalus's own target)."""
        duration = int(trace.duration_s if hours is None else min(hours * 3600.0, trace.duration_s))
        if duration < settings.loop_interval_s:
            raise ReplayError(
                f"{trace.name}: trace covers {duration} s, shorter than one loop ({settings.loop_interval_s:.0f} s)"
            )
        self.trace = trace
        self.settings = settings
        self.duration_s = duration
        self.job = SimulatedFlinkJob(trace, settings.simulator)
        self.clock = SimulatedClock(0.0)
        self.scaler = SimulatedScaler(self.job)
        self.knowledge = knowledge or MemoryKnowledgeStore()
        self.monitor = monitor or SimulatedMonitor(self.job)
        self.failures = set(self.job.environment.failures(duration, failures_per_hour))
        self.rounds: list[RoundResult] = []
        self.policy = policy
        self.judged_target_s = settings.target_recovery_time_s if judged_target_s is None else judged_target_s
        self.agent = self.start_agent()

    def start_agent(self) -> Agent:
        """A fresh agent process on this job, loading whatever the knowledge store holds (a restart)."""
        analyzer: AnalyzeStage
        self.background = InlineExecutor()
        if Signal.SIMULATOR_TRUTH in self.settings.policy_spec.signals:
            # The oracle is handed the simulator's truth instead of the online models' estimates.
            from lab.oracle import OracleAnalyzer

            analyzer = OracleAnalyzer(self.job, self.settings)
        else:
            analyzer = Analyzer(self.settings, executor=self.background)
        return Agent(
            settings=self.settings,
            clock=self.clock,
            monitor=self.monitor,
            scaler=self.scaler,
            knowledge=self.knowledge,
            analyzer=analyzer,
            policy=self.policy,
        )

    def run(self, until_s: int | None = None, progress: Callable[[int, int], None] | None = None) -> None:
        """Advance job and agent to ``until_s`` (default: the end of the replay)."""
        end = self.duration_s if until_s is None else min(until_s, self.duration_s)
        interval = int(self.settings.loop_interval_s)
        job = self.job
        failures = sorted(self.failures)
        while job.now_s < end:
            if job.now_s in self.failures:
                job.fail()
            # Up to the next round or failure, whichever comes first: the job runs those seconds at once.
            stop = min(end, (job.now_s // interval + 1) * interval)
            due = bisect.bisect_right(failures, job.now_s)
            if due < len(failures):
                stop = min(stop, failures[due])
            started = job.now_s
            job.run_until(stop)
            self.clock.advance(float(stop - started))
            if job.now_s % interval == 0:
                fitted_before = self.background.spent_s
                result = self.agent.round()
                fit_ms = (self.background.spent_s - fitted_before) * 1000.0
                if fit_ms > 0:
                    # Booked apart: in production this fit runs in a background thread.
                    result.durations_ms["analyze"] = max(0.0, result.durations_ms.get("analyze", 0.0) - fit_ms)
                    result.background_ms = fit_ms
                self.rounds.append(result)
                if progress is not None:
                    progress(job.now_s, end)

    def result(self) -> ReplayResult:
        """Summary and series of what has run so far."""
        summary = summarize(
            self.job,
            self.settings,
            self.rounds,
            self.scaler,
            trace_name=self.trace.name,
            judged_target_s=self.judged_target_s,
        )
        # Injected so far; one that lands while the job is already down is absorbed by that stop.
        summary["failures_injected"] = sum(1 for t in self.failures if t < self.job.now_s)
        return ReplayResult(
            summary=summary, series=_series(self.job, self.rounds), rounds=self.rounds, rescales=self.scaler.requests
        )


def replay(
    trace: Trace,
    settings: LabSettings,
    *,
    hours: float | None = None,
    failures_per_hour: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replay ``trace`` (or its first ``hours``) through the simulator under the agent's policy."""
    run = Replay(trace, settings, hours=hours, failures_per_hour=failures_per_hour)
    run.run(progress=progress)
    return run.result()


def _series(job: SimulatedFlinkJob, rounds: list[RoundResult]) -> dict[str, np.ndarray]:
    window = job.window(0, job.recorded_seconds)
    throughput = sum(window.throughput.values()) if window.throughput else np.zeros_like(window.times)
    capacity = np.array([job.true_capacity(int(n)) if n > 0 else 0.0 for n in window.parallelism])
    loop_times = np.array([r.now for r in rounds])
    forecast_peak = np.array(
        [
            float(np.max(r.analysis.forecast)) if r.analysis is not None and r.analysis.forecast is not None else np.nan
            for r in rounds
        ]
    )
    return {
        "time_s": window.times,
        "workload": window.workload,
        "throughput": np.asarray(throughput, dtype=float),
        "lag": window.lag,
        "parallelism": window.parallelism.astype(float),
        "true_capacity": capacity,
        "loop_time_s": loop_times,
        "forecast_peak": forecast_peak,
    }


def judge_replay(job: SimulatedFlinkJob, target_recovery_time_s: float) -> SloJudgement:
    """The SLO judgement (``lab.slo``) of everything the job recorded: its lag, workload and stops."""
    window = job.window(0, job.recorded_seconds)
    stops = stops_from(job.restarts, job.restart_in_progress)
    return judge(window.lag, window.workload, stops, target_recovery_time_s=target_recovery_time_s)


def summarize(
    job: SimulatedFlinkJob,
    settings: LabSettings,
    rounds: list[RoundResult],
    scaler: SimulatedScaler,
    *,
    trace_name: str,
    judged_target_s: float | None = None,
) -> dict[str, Any]:
    """The summary.json of a replay: the job's (:func:`job_summary`) and what the agent measured of itself."""
    measured_errors = [
        abs(rec.predicted_s - rec.measured_s) / rec.measured_s
        for r in rounds
        if r.analysis is not None
        for rec in r.analysis.recoveries
        if rec.predicted_s and rec.measured_s > 0
    ]
    wapes = [
        r.analysis.forecast_wape for r in rounds if r.analysis is not None and r.analysis.forecast_wape is not None
    ]
    latencies = [r.latency_ms for r in rounds]
    executed = [req for req in scaler.requests if not req[2]]
    summary = job_summary(
        job,
        trace_name=trace_name,
        policy=settings.policy,
        target_recovery_time_s=settings.target_recovery_time_s if judged_target_s is None else judged_target_s,
        rescales=len(executed),
        rescales_proposed=len(scaler.requests),
    )
    summary.update(
        recovery_error_median=float(np.median(measured_errors)) if measured_errors else None,
        forecast_wape_median=float(np.median(wapes)) if wapes else None,
        loop_latency_p95_ms=float(np.percentile(latencies, 95)) if latencies else None,
        dry_run=settings.dry_run,
    )
    return summary


def job_summary(
    job: SimulatedFlinkJob,
    *,
    trace_name: str,
    policy: str,
    target_recovery_time_s: float,
    rescales: int,
    rescales_proposed: int,
) -> dict[str, Any]:
    """What the simulated job went through, whoever scaled it: cost, the SLO judgement (``lab.slo``), records."""
    window = job.window(0, job.recorded_seconds)
    lag, workload, parallelism = window.lag, window.workload, window.parallelism
    accounting = job.accounting
    target = target_recovery_time_s
    capacity_by_n = {int(n): job.true_capacity(int(n)) for n in np.unique(parallelism) if n > 0}
    spare = np.array([capacity_by_n.get(int(n), 0.0) for n in parallelism]) - workload
    # Lag the current capacity cannot work off within the target recovery time.
    over_target = (lag > np.maximum(spare, 0.0) * target) & (lag > workload)
    verdict = judge_replay(job, target)
    return {
        "trace": trace_name,
        "policy": policy,
        "duration_s": int(job.now_s),
        "worker_hours": round(float(parallelism.sum()) / 3600.0, 3),
        "rescales": rescales,
        "rescales_proposed": rescales_proposed,
        "failures": sum(1 for r in job.restarts if r.kind == "failure"),
        # Recoveries are the SLO's episodes: from a stop, or from falling behind, until caught up.
        "recoveries": len(verdict.episodes),
        "recoveries_incomplete": verdict.cut_short,
        "recovery_max_s": float(verdict.longest_episode_s),
        **verdict.to_summary(),
        "lag_over_target_s": int(over_target.sum()),
        "max_lag_records": int(lag.max()) if lag.size else 0,
        "records_produced": accounting.produced,
        "records_processed": accounting.effective_processed,
        "records_lost": accounting.lost,
        "final_parallelism": int(job.target_parallelism),
        "target_recovery_time_s": target,
    }


def series_of(job: SimulatedFlinkJob) -> dict[str, np.ndarray]:
    """The per-second series of everything the job recorded (no agent rounds)."""
    return _series(job, [])
