"""StreamBed's testbed on a real Flink cluster: the trace job at a fixed rate, sustained or not by its backlog.

``FlinkTestbed`` implements ``models.streambed.testbed.Testbed`` over a session cluster (one-slot
TaskManagers, the adaptive scheduler, Flink's Prometheus reporter) and the trace-driven log job of
``jobs/trace-source``. Why it is built this way:

- **Job-wide parallelism, chained shape.** The costly map runs chained to the source (``Source: log
  -> cost``), so a subtask's capacity is the map's and the job has one parallelism that matters; the
  verifier vertex runs at the same parallelism beside it. With Flink's default slot sharing a slot
  holds one subtask of *every* vertex, so a job needs as many slots as its largest vertex, not the
  sum of its vertices' parallelisms that the Configuration Optimizer's MILP assumes; handing the CO
  the split shape's three vertices would count slots the job never takes. The testbed therefore
  shows the CO one operator (``cost``), its parallelism is the job's, and the CO's configuration of
  T slots is T. That is also the agent's scale-out: one-slot TaskManagers, the job at that parallelism.
- **A fresh job per probe.** The job's production is a pure function of wall time fixed at
  submission, so ``set_rate`` cancels the running job and submits it again at the new rate, with the
  production epoch just after the submission. A fresh job has no backlog and no filled buffers left
  from the previous probe, so the estimator needs no cooldown (``cooldown_s=0``), and its warmup at
  an overload reads the saturated throughput itself, so the search can bracket just below it
  (``lower_fraction``) instead of descending from twice the answer.
- **Sustained means a bounded backlog.** Over the observation window, the least-squares slope of the
  summed ``pendingRecords`` of the source's readers (1-s samples from Prometheus) is the backlog's
  growth; the read rate comes from the ``numRecordsOut`` counters with ``rate()``. The estimator's
  ``is_sustainable`` then asks for a read rate of at least 99 % of the target and a growth of at most
  1 % of it, and little back-pressure on the source task.
- **One memory profile.** A TaskManager's memory is fixed when its JVM starts, and this job keeps
  almost no state (a per-partition offset ledger), so restarting TaskManagers per memory profile
  would spend runs measuring noise; the Resource Explorer explores task slots only, at the memory per
  slot the cluster has (TaskManager process memory / slots, read from the REST API).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from lab.flink import trace_job
from lab.flink.cluster import FlinkCluster, FlinkLabError, poll, rest_get
from lab.flink.prometheus import (
    PrometheusClient,
    PrometheusServer,
    PromQL,
    wait_for_samples,
)
from lab.flink.promql import FlinkQueries
from lab.flink.trace_job import TraceJob, TraceJobOptions
from models.streambed import EstimatorSettings

OPERATOR = "cost"
"""The one operator the testbed shows StreamBed: the source's chained task, whose map is the cost."""


class FlinkTestbedError(FlinkLabError):
    """The testbed cannot run or measure a configuration (one line: what and what to do)."""


@dataclass(frozen=True, kw_only=True)
class FlinkTestbedSettings:
    """The trace job the testbed runs and how each probe is started."""

    capacity_per_slot: float = 2000.0
    """Records/s one subtask of the costly map carries (the job's ``--capacity``)."""
    max_rate: float | None = None
    """Records/s injected during the warmup, which must overload the configuration; None: twice
    ``capacity_per_slot`` per task slot of the configuration."""
    partitions: int = 12
    """Partitions of the log; 12 splits evenly over 1, 2, 3, 4 and 6 readers."""
    skew: float = 0.0
    """Zipf exponent of the partition weights: 0 spreads the load evenly over the readers; with skew,
    the MST at P slots is the capacity over the busiest reader's share, a step function of P."""
    seed: int = 0
    """Seed of the partition weights' shuffle (the same for every run, so the skew is the job's)."""
    checkpoint_interval_s: float | None = None
    """The job's checkpoint interval; None keeps the cluster's."""
    cluster_warmup_s: float = 45.0
    """Before the first run, the job runs this long at an overload on every slot of the cluster. The
    first testbed run after a local cluster's start read 4-5 % below the later ones in every
    benchmark (five JVMs compiling on two cores wake the map's parks late); 0 skips it."""
    start_lead_s: float = 1.5
    """Production starts this long after the submission (a fresh job takes about a second to run)."""
    job_name: str = "perdix-streambed"
    running_timeout_s: float = 90.0

    def __post_init__(self) -> None:
        checks = [
            ("capacity_per_slot", math.isfinite(self.capacity_per_slot) and self.capacity_per_slot > 0),
            ("max_rate", self.max_rate is None or (math.isfinite(self.max_rate) and self.max_rate > 0)),
            ("partitions", self.partitions >= 1),
            ("skew", 0.0 <= self.skew <= 10.0),
            ("start_lead_s", 0.0 <= self.start_lead_s <= 60.0),
            ("cluster_warmup_s", 0.0 <= self.cluster_warmup_s <= 3600.0),
        ]
        for name, ok in checks:
            if not ok:
                raise ValueError(f"{name}: invalid value {getattr(self, name)!r}")

    def warmup_rate(self, parallelism: int) -> float:
        """The warmup's injected rate for a configuration of ``parallelism`` slots."""
        return self.max_rate if self.max_rate is not None else 2.0 * self.capacity_per_slot * parallelism


def estimator_settings(
    *, rampup_s: int = 3, measure_s: int = 10, probes: int = 4, min_rate_fraction: float = 0.8
) -> EstimatorSettings:
    """The Capacity Estimator's phases for this testbed (a fresh job per probe; see the module docstring).

    The warmup lasts a ramp-up and an observation; no cooldown; the search runs from
    ``min_rate_fraction`` of the saturated warmup throughput up to that throughput (a job cannot read
    more than it carries), at most ``probes`` probes, and stops within 1 %.
    """
    return EstimatorSettings(
        warmup_s=rampup_s + measure_s,
        cooldown_s=0,
        cooldown_max_s=0,
        rampup_s=rampup_s,
        observe_s=measure_s,
        max_iterations=probes,
        upper_margin=1.0,
        lower_fraction=min_rate_fraction,
    )


@dataclass(frozen=True)
class OperatorMeasurement:
    """The chained ``Source: log -> cost`` task over an observation window (DS2's view of it)."""

    name: str
    parallelism: int
    input_rate: float
    busyness: float
    true_rate_per_task: float


@dataclass(frozen=True)
class FlinkMeasurement:
    """What one observation window of a probe showed."""

    seconds: int
    achieved_rate: float
    backpressure: float
    lag_growth: float
    operators: tuple[OperatorMeasurement, ...]
    backlog_samples: int
    """1-s samples of the backlog the growth was fitted on."""


PhaseKind = Literal["cluster-warmup", "warmup", "probe", "measured"]


@dataclass(frozen=True)
class PhaseEvent:
    """Progress: the cluster's warm-up, or inside a testbed run a submission (warmup or probe) or a measurement."""

    kind: PhaseKind
    parallelism: int
    rate: float
    """Injected records/s."""
    achieved_rate: float | None = None
    lag_growth: float | None = None


PhaseCallback = Callable[[PhaseEvent], None]


def memory_per_slot_mb(rest_url: str) -> float:
    """TaskManager process memory per slot, MB, the same on every TaskManager; FlinkTestbedError otherwise."""
    listing = rest_get(f"{rest_url}/taskmanagers")
    managers = (listing or {}).get("taskmanagers") or []
    if not managers:
        raise FlinkTestbedError(f"Flink {rest_url} lists no TaskManagers")
    sizes = set()
    for manager in managers:
        memory = manager.get("memoryConfiguration") or (rest_get(f"{rest_url}/taskmanagers/{manager['id']}") or {}).get(
            "memoryConfiguration"
        )
        slots = int(manager.get("slotsNumber") or 0)
        if not memory or slots < 1 or "totalProcessMemory" not in memory:
            raise FlinkTestbedError(
                f"Flink {rest_url}: TaskManager {manager.get('id')} reports no memory configuration"
            )
        sizes.add(round(float(memory["totalProcessMemory"]) / slots / 2**20))
    if len(sizes) != 1:
        raise FlinkTestbedError(
            f"Flink {rest_url}: TaskManagers have different memory per slot ({sorted(sizes)} MB); "
            "the testbed needs one profile"
        )
    return float(sizes.pop())


def total_slots(rest_url: str) -> int:
    """Task slots of the cluster (GET /overview); FlinkTestbedError when its REST API does not answer."""
    overview = rest_get(f"{rest_url}/overview")
    if not overview:
        raise FlinkTestbedError(f"Flink REST API {rest_url} does not answer")
    return int(overview.get("slots-total", 0))


@dataclass
class FlinkTestbed:
    """The trace job on a running session cluster, measured through a Prometheus that scrapes it."""

    rest_url: str
    prometheus: PromQL
    settings: FlinkTestbedSettings = field(default_factory=FlinkTestbedSettings)
    jar: Path | None = None
    on_phase: PhaseCallback | None = None
    check_alive: Callable[[], None] | None = None
    """Raises when the cluster's processes died (a local cluster); called while waiting."""
    process_ids: tuple[int, ...] = ()
    """The JVMs of a local cluster (for CPU accounting); empty for an existing one."""
    operator_names: tuple[str, ...] = (OPERATOR,)
    memory_mb: float = 0.0
    """Memory per task slot; read from the cluster (process memory / slots) unless given."""
    job: TraceJob | None = None
    """The job that runs now (at most one)."""
    submissions: int = 0

    def __post_init__(self) -> None:
        if self.jar is None:
            self.jar = trace_job.build_jar()
        if self.memory_mb <= 0:
            self.memory_mb = memory_per_slot_mb(self.rest_url)

    @property
    def job_name(self) -> str:
        """The job's name in Flink (and in the capacity model file)."""
        return self.settings.job_name

    def describe(self) -> dict[str, Any]:
        """What the capacity model file records about the testbed."""
        return {
            "kind": "flink",
            "job": "jobs/trace-source",
            "shape": "chained",
            "parallelism": "job-wide (the source's chained costly map and the verifier at one parallelism)",
            "capacity_per_slot": self.settings.capacity_per_slot,
            "partitions": self.settings.partitions,
            "skew": self.settings.skew,
            "memory_mb_per_slot": self.memory_mb,
            "memory_profiles": "one: a TaskManager's memory is fixed at its start",
            "sustained": "backlog (summed pendingRecords) slope <= 1 % of the target and read rate >= 99 %",
        }

    def deploy(self, parallelism: Sequence[int], memory_mb: float, *, seed: int | None = None) -> FlinkTestbedRun:
        """A run of the job at ``parallelism[0]`` slots; nothing is submitted before its first ``set_rate``."""
        if len(parallelism) != 1 or parallelism[0] < 1:
            raise FlinkTestbedError(f"the Flink testbed takes one job-wide parallelism >= 1, got {tuple(parallelism)}")
        if memory_mb != self.memory_mb:
            raise FlinkTestbedError(
                f"the cluster runs {self.memory_mb:g} MB per slot; {memory_mb:g} MB needs TaskManagers restarted"
            )
        slots = total_slots(self.rest_url)
        if parallelism[0] > slots:
            raise FlinkTestbedError(f"{parallelism[0]} slots asked, the cluster at {self.rest_url} has {slots}")
        return FlinkTestbedRun(self, int(parallelism[0]))

    def submit(self, rate: float, parallelism: int) -> TraceJob:
        """Cancel the running job and submit the trace job at ``rate``; returns once production started."""
        self.cancel()
        options = TraceJobOptions(
            job_name=self.settings.job_name,
            rate_per_s=rate,
            capacity_per_subtask=self.settings.capacity_per_slot,
            partitions=self.settings.partitions,
            skew=self.settings.skew,
            seed=self.settings.seed,
            checkpoint_interval_s=self.settings.checkpoint_interval_s,
            parallelism=parallelism,
            epoch_ms=int((time.time() + self.settings.start_lead_s) * 1000),
        )
        self.job = trace_job.submit(
            self.rest_url, options, jar=self.jar, running_timeout_s=self.settings.running_timeout_s
        )
        self.submissions += 1
        epoch = (self.job.options.epoch_ms or 0) / 1000
        self.wait_until(epoch)
        return self.job

    def cancel(self) -> None:
        """Cancel the running job, if any, and wait until it stopped."""
        job, self.job = self.job, None
        if job is not None:
            trace_job.cancel(self.rest_url, job.job_id)

    def close(self) -> None:
        """Cancel whatever runs."""
        self.cancel()

    def warm_up(self, slots: int) -> None:
        """Run the job at an overload on ``slots`` slots for ``cluster_warmup_s`` (nothing is measured)."""
        if self.settings.cluster_warmup_s <= 0:
            return
        rate = self.settings.warmup_rate(slots)
        self.emit(PhaseEvent("cluster-warmup", slots, rate))
        self.submit(rate, slots)
        self.wait_until(time.time() + self.settings.cluster_warmup_s)
        self.cancel()

    def wait_until(self, wall_s: float) -> None:
        """Wait until the wall clock reaches ``wall_s``, failing early when the cluster or the job dies."""
        job = self.job

        def reached() -> bool:
            if self.check_alive is not None:
                self.check_alive()
            if job is not None:
                state = (rest_get(f"{self.rest_url}/jobs/{job.job_id}") or {}).get("state")
                if state in ("FAILED", "CANCELED", "FINISHED"):
                    raise FlinkTestbedError(f"job {job.job_id} is {state} during a probe")
            return time.time() >= wall_s

        poll(reached, timeout_s=max(1.0, wall_s - time.time() + 30.0), interval_s=0.5, what=f"wall time {wall_s:.1f}")

    def emit(self, event: PhaseEvent) -> None:
        """Report progress, if anyone listens."""
        if self.on_phase is not None:
            self.on_phase(event)


@dataclass
class FlinkTestbedRun:
    """One configuration: every ``set_rate`` submits the job afresh at that rate (a ``TestbedRun``)."""

    testbed: FlinkTestbed
    parallelism: int
    rate: float = 0.0
    warmup: bool = False
    started_at: float = 0.0
    """Wall time production started at the current rate."""

    def set_rate(self, rate: float | None) -> None:
        """Run the job at ``rate`` records/s from now; ``None``: at the warmup's overload."""
        self.warmup = rate is None
        self.rate = self.testbed.settings.warmup_rate(self.parallelism) if rate is None else float(rate)
        if not math.isfinite(self.rate) or self.rate <= 0:
            raise FlinkTestbedError(f"cannot inject {self.rate} records/s")
        job = self.testbed.submit(self.rate, self.parallelism)
        self.started_at = (job.options.epoch_ms or 0) / 1000
        self.testbed.emit(PhaseEvent("warmup" if self.warmup else "probe", self.parallelism, self.rate))

    def advance(self, seconds: int) -> None:
        """Let ``seconds`` of wall time pass (checking that the cluster and the job live)."""
        self.testbed.wait_until(time.time() + seconds)

    @property
    def job(self) -> TraceJob:
        """The job of the current rate."""
        if self.testbed.job is None:
            raise FlinkTestbedError("no job runs: set a rate first")
        return self.testbed.job

    def queries(self, window_s: int) -> FlinkQueries:
        """The recommended queries, narrowed to the current job."""
        job_id = self.job.job_id
        return FlinkQueries(
            source=f'operator_name="Source:_{trace_job.SOURCE_NAME}",job_id="{job_id}"',
            source_task=f'task_name=~"Source:_{trace_job.SOURCE_NAME}.*",job_id="{job_id}"',
            job=f'job_id="{job_id}"',
            window_s=window_s,
        )

    def measure(self, seconds: int) -> FlinkMeasurement:
        """Read rate, backlog growth, busyness and back-pressure over the last ``seconds`` (at most since the start)."""
        now = time.time()
        window = int(min(seconds, math.floor(now - self.started_at)))
        if window < 3:
            raise FlinkTestbedError(
                f"a measurement needs 3 s of the job at its rate, it has run {now - self.started_at:.1f} s"
            )
        client, queries = self.testbed.prometheus, self.queries(window)
        wait_for_samples(client, queries.backlog, timeout_s=10.0, what=f"pendingRecords of job {self.job.job_id}")
        read = client.instant(queries.read_rate, now)
        points = [(t, v) for _, values in client.range(queries.backlog, now - window, now) for t, v in values]
        if not read or len(points) < max(3, window // 2):
            raise FlinkTestbedError(
                f"Prometheus {client.url} has {len(points)} backlog samples of job {self.job.job_id} in the last "
                f"{window} s: it must scrape every TaskManager each second"
            )
        times = np.array([t for t, _ in points]) - now
        growth = float(np.polyfit(times, [v for _, v in points], 1)[0])
        achieved = read[0][1]
        busy = _mean(client.instant(queries.busy_fraction, now))
        pressured = _mean(client.instant(queries.backpressured_fraction, now))
        if not math.isfinite(achieved) or not math.isfinite(busy):
            raise FlinkTestbedError(f"no read rate or busy time of job {self.job.job_id} in Prometheus {client.url}")
        if self.warmup and achieved >= 0.98 * self.rate:
            raise FlinkTestbedError(
                f"the warmup at {self.rate:,.0f} records/s did not overload {self.parallelism} slots (they read "
                f"{achieved:,.0f}/s): raise the max rate"
            )
        operator = OperatorMeasurement(
            OPERATOR, self.parallelism, achieved, busy, achieved / (self.parallelism * busy) if busy > 0 else 0.0
        )
        measurement = FlinkMeasurement(
            seconds=window,
            achieved_rate=achieved,
            backpressure=pressured if math.isfinite(pressured) else 0.0,
            lag_growth=growth,
            operators=(operator,),
            backlog_samples=len(points),
        )
        self.testbed.emit(PhaseEvent("measured", self.parallelism, self.rate, achieved, growth))
        return measurement

    @property
    def backlog(self) -> float:
        """Records produced and not read yet, summed over the readers."""
        series = self.testbed.prometheus.instant(self.queries(10).backlog)
        return series[0][1] if series else math.nan


def _mean(series: list[tuple[dict[str, str], float]]) -> float:
    values = [v for _, v in series if math.isfinite(v)]
    return sum(values) / len(values) if values else math.nan


@contextmanager
def open_flink_testbed(
    *,
    slots: int,
    settings: FlinkTestbedSettings,
    rest_url: str | None = None,
    prometheus_url: str | None = None,
    workdir: Path | None = None,
    on_phase: PhaseCallback | None = None,
) -> Iterator[FlinkTestbed]:
    """A testbed of at least ``slots`` task slots: a local cluster and Prometheus started in ``workdir``
    (``slots`` one-slot TaskManagers; stopped by pid on exit), or the existing cluster and Prometheus named.
    """
    if (rest_url is None) != (prometheus_url is None):
        raise FlinkTestbedError(
            "an existing testbed cluster needs both its REST URL and the Prometheus that scrapes it"
        )
    if rest_url is not None and prometheus_url is not None:
        client = PrometheusClient(prometheus_url)
        client.check()
        available = total_slots(rest_url)
        if available < slots:
            raise FlinkTestbedError(f"the cluster at {rest_url} has {available} task slots, the plan needs {slots}")
        testbed = FlinkTestbed(rest_url, client, settings, on_phase=on_phase)
        try:
            testbed.warm_up(slots)
            yield testbed
        finally:
            testbed.close()
        return
    if workdir is None:
        raise FlinkTestbedError("a local testbed cluster needs a working directory")
    jar = trace_job.build_jar()
    with (
        FlinkCluster(workdir / "flink", taskmanagers=slots) as cluster,
        PrometheusServer(workdir / "prometheus", cluster.metrics_targets) as prometheus,
    ):
        prometheus.wait_scraping()
        testbed = FlinkTestbed(
            cluster.rest_url,
            prometheus.client,
            settings,
            jar=jar,
            on_phase=on_phase,
            check_alive=cluster.check_alive,
            process_ids=tuple(p.process.pid for p in cluster.processes),
        )
        try:
            testbed.warm_up(slots)
            yield testbed
        finally:
            testbed.close()
