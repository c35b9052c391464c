"""The real-Flink harness: cluster + Prometheus + the trace job + ``perdix run``, shared by tests and benchmarks.

One place that knows how the parts of an end-to-end run on real Flink fit together:

- :class:`RealFlink` holds a loopback session cluster (lab/flink/cluster.py), a real Prometheus
  scraping every JobManager and TaskManager each second (lab/flink/prometheus.py), and the trace
  job's jar (lab/flink/trace_job.py). ``RealFlink.start`` starts and owns them (the benchmarks);
  ``RealFlink(cluster, prometheus, jar)`` wraps parts a test fixture owns.
- :func:`agent_settings` is the smallest ``perdix run`` configuration for the ``flink-rest`` target:
  the Prometheus URL, the REST URL, the job's name and the worker label, plus what a caller passes
  (the time-scale knobs of a short run). Everything else is Perdix's shipped default.
- :meth:`RealFlink.record` reads what happened to a job, second by second, from Prometheus and
  the job's own production schedule: workload, backlog, running parallelism; :func:`stops_from_log`
  turns the agent's rescale log into the stops the SLO judgement (``lab.slo``) needs.

Every process is stopped by its pid whatever happens (``stop`` in a ``finally``, context managers).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import numpy as np

from lab.flink import trace_job
from lab.flink.agent_process import PerdixProcess
from lab.flink.cluster import FlinkCluster, FlinkLabError, poll
from lab.flink.prometheus import PrometheusServer
from lab.flink.trace_job import JobCounts, TraceJob, TraceJobOptions
from lab.slo import Stop

OPERATOR = "flink_taskmanager_job_task_operator"


def reporter_name(name: str) -> str:
    """A label value as Flink's Prometheus reporter writes it: every character outside [a-zA-Z0-9:_] becomes '_'."""
    return re.sub(r"[^a-zA-Z0-9:_]", "_", name)


def agent_settings(
    *,
    prometheus_url: str,
    rest_url: str,
    job_name: str,
    knowledge_path: Path,
    policy: str = "daedalus",
    **overrides: Any,
) -> dict[str, Any]:
    """The smallest ``perdix run`` settings for the flink-rest target on this harness, plus ``overrides``.

    Set: the Prometheus URL, the flink-rest target's REST URL and job, the same job in the queries
    (``prometheus.flink_job``, so a cluster that ran other jobs before is read right), the knowledge file
    and JSON logs without a metrics port (several agents may run on one machine); the worker label is the
    default one. ``overrides`` are top-level keys (``loop_interval_s=5``) or nested dicts merged in.
    """
    settings: dict[str, Any] = {
        "policy": policy,
        "prometheus": {"url": prometheus_url, "flink_job": reporter_name(job_name)},
        "scale_target": {"kind": "flink-rest", "rest_url": rest_url, "job": job_name},
        "knowledge": {"path": str(knowledge_path)},
        "telemetry": {"log_format": "json", "log_level": "info", "metrics_port": 0},
    }
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(settings.get(key), dict):
            settings[key] = {**settings[key], **value}
        else:
            settings[key] = value
    return settings


def log_time(event: Mapping[str, Any]) -> float:
    """Unix seconds of a structlog event's ISO timestamp."""
    return datetime.fromisoformat(str(event["timestamp"])).timestamp()


@dataclass(frozen=True)
class Rescale:
    """One rescale the agent applied, from its log: requested at ``requested_at``, confirmed at ``confirmed_at``."""

    from_parallelism: int
    to_parallelism: int
    requested_at: float
    confirmed_at: float
    downtime_s: float | None


def rescales_from_log(events: list[dict[str, Any]]) -> list[Rescale]:
    """The applied rescales of an agent's JSON log (``rescale.requested`` then ``rescale``; dry runs skipped)."""
    out: list[Rescale] = []
    requested: float | None = None
    for event in events:
        name = event.get("event")
        if name == "rescale.requested":
            requested = log_time(event)
        elif name == "rescale" and not event.get("dry_run"):
            confirmed_at = log_time(event)
            confirmed = event.get("confirmed")
            out.append(
                Rescale(
                    from_parallelism=int(event["from"]),
                    to_parallelism=int(confirmed if confirmed is not None else event["to"]),
                    requested_at=requested if requested is not None else confirmed_at,
                    confirmed_at=confirmed_at,
                    downtime_s=event.get("downtime_s"),
                )
            )
            requested = None
    return out


def stops_from_log(rescales: list[Rescale], epoch: float) -> tuple[Stop, ...]:
    """The SLO judgement's stops: each rescale from its request to its confirmation, in seconds after ``epoch``."""
    return tuple(
        Stop("rescale", math.floor(r.requested_at - epoch), math.ceil(r.confirmed_at - epoch)) for r in rescales
    )


@dataclass(frozen=True, eq=False)
class JobRecord:
    """What a job went through, one value per wall second from its epoch (``time_s`` = 0, 1, ...)."""

    time_s: np.ndarray
    workload: np.ndarray
    """Records produced in each second, from the job's production schedule (the ground truth)."""
    lag: np.ndarray
    """Records produced and not read at each second (FLIP-33 pendingRecords summed over the readers, from
    Prometheus); the gap of a scrape or two while readers restart holds the last value."""
    parallelism: np.ndarray
    """Slots the job holds in each second (the initial parallelism, then each rescale from its request on)."""
    running: np.ndarray
    """Source subtasks running in each second (Prometheus; 0 while the job restarts)."""


@dataclass
class RealFlink:
    """A loopback Flink cluster, a Prometheus scraping it, and the trace job's jar."""

    cluster: FlinkCluster
    prometheus: PrometheusServer
    jar: Path
    owned: bool = False
    """True when ``stop`` should stop the cluster and Prometheus (``start`` made them)."""
    agents: list[PerdixProcess] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        workdir: Path,
        *,
        taskmanagers: int,
        checkpoint_interval_s: int = 10,
        extra_config: dict[str, Any] | None = None,
        scrape_interval: str = "1s",
    ) -> RealFlink:
        """Start a cluster of ``taskmanagers`` one-slot TaskManagers and a Prometheus scraping it every
        ``scrape_interval``; build the jar.

        A start that fails stops whatever it started before raising.
        """
        cluster = FlinkCluster(
            workdir / "flink",
            taskmanagers=taskmanagers,
            checkpoint_interval_s=checkpoint_interval_s,
            extra_config=dict(extra_config or {}),
        )
        prometheus: PrometheusServer | None = None
        try:
            (workdir / "flink").mkdir(parents=True, exist_ok=True)
            cluster.start()
            prometheus = PrometheusServer(
                workdir / "prometheus", cluster.metrics_targets, scrape_interval=scrape_interval
            ).start()
            harness = cls(cluster, prometheus, trace_job.build_jar(), owned=True)
            harness.wait_scraped()
            return harness
        except BaseException:
            if prometheus is not None:
                prometheus.stop()
            cluster.stop()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop every agent started here, then (when owned) Prometheus and the cluster; each by its pid."""
        for agent in self.agents:
            agent.stop()
        self.agents.clear()
        if self.owned:
            self.prometheus.stop()
            self.cluster.stop()

    def wait_scraped(self, timeout_s: float = 60.0) -> None:
        """Wait until Prometheus scrapes every process of the cluster."""
        targets = len(self.cluster.metrics_targets)
        self.prometheus.wait_for(f"count(up == 1) == {targets}", timeout_s=timeout_s)

    # ------------------------------------------------------------------ the job

    def submit(self, options: TraceJobOptions, *, running_timeout_s: float = 90.0) -> TraceJob:
        """Submit the trace job and return once every subtask runs."""
        job = trace_job.submit(self.cluster.rest_url, options, jar=self.jar, running_timeout_s=running_timeout_s)
        self.cluster.jobs.append(job.job_id)
        return job

    def cancel(self, job: TraceJob) -> None:
        """Cancel the job and wait until it stopped."""
        self.cluster.cancel(job.job_id)

    def counts(self, job: TraceJob) -> JobCounts:
        """The job's accounting now (produced, pending, verified, ahead, duplicates, lost), from REST."""
        return trace_job.read_counts(self.cluster.rest_url, job.job_id)

    def drained(self, job: TraceJob, *, timeout_s: float) -> tuple[JobCounts, int]:
        """After production ended: wait until the backlog is 0, the source reports every record produced
        and every produced record is verified.

        Returns the last counts and the number produced (``schedule().produced_all`` at the end); on a
        timeout the counts say what is missing instead of raising.
        """
        schedule = job.schedule()
        end_s = job.options.end_s
        if end_s is None:
            raise FlinkLabError("drained: the job has no end (end_s), its production never stops")
        expected = schedule.produced_all(schedule.epoch_ms + math.ceil(end_s * 1000) + 1)
        last: list[JobCounts] = []

        def done() -> bool:
            # The REST API's metrics are dumps of each TaskManager's at its own moment: the source's gauge of
            # what was produced can lag the verifier's count by a dump, so all three must agree at once.
            self.cluster.check_alive()
            counts = self.counts(job)
            last[:] = [counts]
            return counts.pending == 0 and counts.verified == expected and counts.produced == expected

        try:
            poll(done, timeout_s=timeout_s, interval_s=1.0, what="the backlog drained and every record verified")
        except FlinkLabError:
            pass
        return (last[0] if last else self.counts(job)), expected

    # ------------------------------------------------------------------ the agent

    def settings(
        self, job: TraceJob, workdir: Path, *, policy: str = "daedalus", rest_url: str | None = None, **overrides: Any
    ) -> dict[str, Any]:
        """:func:`agent_settings` for ``job`` on this cluster (``rest_url``: e.g. a recording proxy in front of it)."""
        return agent_settings(
            prometheus_url=self.prometheus.url,
            rest_url=rest_url or self.cluster.rest_url,
            job_name=job.options.job_name,
            knowledge_path=workdir / "knowledge.json",
            policy=policy,
            **overrides,
        )

    def perdix(self, workdir: Path, settings: dict[str, Any], *, dry_run: bool = False) -> PerdixProcess:
        """Start ``perdix run`` with ``settings``; it is stopped with the harness if nobody stops it first."""
        agent = PerdixProcess(workdir, settings, dry_run=dry_run).start()
        self.agents.append(agent)
        return agent

    # ------------------------------------------------------------------ what happened

    def _per_second(self, promql: str, start: float, seconds: int) -> np.ndarray:
        """One value per second ``start + k`` (NaN where Prometheus has none)."""
        out = np.full(seconds, np.nan)
        if seconds <= 0:
            return out
        result = self.prometheus.query_range(promql, start, start + seconds - 1, 1.0)
        for series in result[:1]:
            for ts, raw in series.get("values", []):
                index = round(float(ts) - start)
                if 0 <= index < seconds:
                    value = float(raw)
                    out[index] = value if math.isfinite(value) else np.nan
        return out

    def record(self, job: TraceJob, *, seconds: int, rescales: list[Rescale] | None = None) -> JobRecord:
        """The job's first ``seconds`` after its epoch, per second (see :class:`JobRecord`)."""
        epoch = job.schedule().epoch_ms / 1000.0
        schedule = job.schedule()
        marks = [schedule.produced_all(schedule.epoch_ms + 1000 * k) for k in range(seconds + 1)]
        workload = np.diff(np.asarray(marks, dtype=float))
        matcher = f'job_id="{job.job_id}",operator_name=~"Source:.*"'
        lag = self._per_second(f"sum({OPERATOR}_pendingRecords{{{matcher}}})", epoch, seconds)
        running = self._per_second(f"count({OPERATOR}_numRecordsOut{{{matcher}}})", epoch, seconds)
        lag = _hold_last(lag)
        running = np.nan_to_num(running, nan=0.0)
        parallelism = np.full(seconds, float(job.options.parallelism))
        for rescale in rescales or []:
            at = math.floor(rescale.requested_at - epoch)
            if at < seconds:
                parallelism[max(at, 0) :] = rescale.to_parallelism
        return JobRecord(np.arange(seconds, dtype=float), workload, lag, parallelism, running)

    def wait_until(self, job: TraceJob, wall_s: float, *, agent: PerdixProcess | None = None) -> None:
        """Poll until the wall clock reaches ``wall_s``; fail early if the cluster, the job or the agent dies."""

        def reached() -> bool:
            self.cluster.check_alive()
            if agent is not None:
                agent.check_alive()
            details = self.cluster.job(job.job_id) or {}
            state = details.get("state")
            if state in ("FAILED", "CANCELED", "FINISHED"):
                raise FlinkLabError(f"job {job.job_id} is {state}")
            return time.time() >= wall_s

        poll(reached, timeout_s=max(1.0, wall_s - time.time() + 30.0), interval_s=0.5, what=f"wall time {wall_s:.1f}")


def _hold_last(series: np.ndarray) -> np.ndarray:
    """NaN samples replaced by the last finite one before them (0 before the first)."""
    out = np.asarray(series, dtype=float).copy()
    last = 0.0
    for index, value in enumerate(out):
        if math.isfinite(value):
            last = value
        else:
            out[index] = last
    return out
