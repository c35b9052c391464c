"""Metrics exporter for the simulator: the embedded Flink job on wall-clock time, served to Prometheus.

``perdix simulate --serve-metrics HOST:PORT --speed X`` steps the simulated job on a ScaledClock (X
simulated seconds per wall second) and serves, in the Prometheus text format, the series the default
PromQL queries read, under the names and labels Flink 2.3's Prometheus reporter uses (see
docs/flink-metrics.md); every per-task series carries ``tm_id`` and ``pod`` (the worker),
``subtask_index`` and the task attempt, which changes with every restart, as Flink's does:

- ``flink_taskmanager_job_task_operator_numRecordsOut{operator_name="Source:_<topic>"}``: records the
  source subtask read in this attempt (a counter);
- ``flink_taskmanager_job_task_operator_pendingRecords{operator_name="Source:_<topic>"}``: records waiting
  in the subtask's partitions (FLIP-33), so their sum is the job's lag;
- ``flink_taskmanager_job_task_accumulateBusyTimeMs`` / ``...IdleTimeMs`` / ``...BackPressuredTimeMs``:
  the task's busy and idle time in this attempt, milliseconds of wall time (counters);
- ``flink_taskmanager_Status_JVM_CPU_Load``: CPU load 0..1 per worker (moving average);
- ``flink_jobmanager_numRegisteredTaskManagers`` and ``flink_jobmanager_job_uptime`` (milliseconds);
- kafka_exporter's ``kafka_topic_partition_current_offset{topic,partition}`` (each partition's log-end offset)
  and ``kafka_consumergroup_current_offset{consumergroup,topic,partition}`` (the offset the job committed with
  its last completed checkpoint), for the queries a job with a Kafka source may add (``KAFKA_BROKER_QUERIES``);
  the brokers serve them while the job is down too.

While the job restarts no task series exist (Flink's go stale), only the JobManager's. Counts are
records and times are wall time, so an agent on the wall clock sees a consistent job at any speed: at X
times speed it looks like a job X times faster in every rate, whose restarts take 1/X of the time.
With ``follow`` set (a Scaler, e.g. the Kubernetes one), the job follows the scale target's replica
count like Flink's reactive mode follows its TaskManagers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from agent.clock import ScaledClock
from agent.logging import get_logger
from agent.ports import Scaler
from agent.telemetry import TEXT, EndpointServer, Route
from simulator import JobState, SimulatedFlinkJob, SimulatorSettings, Trace, worker_id

RECORDS_OUT = "flink_taskmanager_job_task_operator_numRecordsOut"
PENDING = "flink_taskmanager_job_task_operator_pendingRecords"
BUSY = "flink_taskmanager_job_task_accumulateBusyTimeMs"
IDLE = "flink_taskmanager_job_task_accumulateIdleTimeMs"
BACKPRESSURED = "flink_taskmanager_job_task_accumulateBackPressuredTimeMs"
CPU = "flink_taskmanager_Status_JVM_CPU_Load"
REGISTERED = "flink_jobmanager_numRegisteredTaskManagers"
UPTIME = "flink_jobmanager_job_uptime"
END_OFFSET = "kafka_topic_partition_current_offset"
COMMITTED_OFFSET = "kafka_consumergroup_current_offset"
JOB_NAME = "simulated_job"
CONSUMER_GROUP = JOB_NAME
"""The consumer group the simulated job commits its offsets as (its own name, as a Flink job's usually is)."""
TASK_LABELS = ["job_name", "task_name", "task_id", "subtask_index", "task_attempt_num", "tm_id", "pod"]
OPERATOR_LABELS = [*TASK_LABELS, "operator_name", "operator_id"]


MAX_SPEED = 1000.0
"""Fastest ``--speed``: the job is stepped one simulated second at a time, and past a thousand a wall second the
steps fall behind the clock."""


class ExporterError(ValueError):
    """Bad exporter input (address, speed); the message is the CLI's one line."""


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port), with a one-line error naming the flag."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ExporterError(f"--serve-metrics: expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


class SimulationExporter(Collector):
    """A simulated job stepped in (scaled) real time, exported as Prometheus series."""

    def __init__(
        self,
        trace: Trace,
        config: SimulatorSettings,
        *,
        speed: float = 1.0,
        topic: str = "input",
        follow: Scaler | None = None,
        follow_interval_s: float = 1.0,
    ) -> None:
        if not 0 < speed <= MAX_SPEED:  # NaN fails too
            raise ExporterError(f"--speed: must be above 0 and at most {MAX_SPEED:g} (got {speed})")
        self.job = SimulatedFlinkJob(trace, config)
        self.clock = ScaledClock(speed)
        self.speed = speed
        self.topic = topic
        self.follow = follow
        self.follow_interval_s = follow_interval_s
        self.duration_s = int(trace.duration_s)
        self.log = get_logger("perdix.exporter")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.registry = CollectorRegistry()
        self.registry.register(self)

    # ------------------------------------------------------------------ stepping

    def advance(self) -> None:
        """Step the job up to the clock (past the end of the trace its last rate holds)."""
        target = int(self.clock.now())
        with self._lock:
            while self.job.now_s < target:
                self.job.step()

    def _follow_once(self) -> None:
        if self.follow is None:
            return
        wanted = self.follow.current_parallelism()
        if wanted is None:
            return
        wanted = max(1, min(wanted, self.job.config.partitions))
        with self._lock:
            if wanted != self.job.target_parallelism and self.job.rescale(wanted):
                self.log.info("exporter.rescale", to=wanted, at_s=self.job.now_s)

    def _run(self) -> None:
        next_follow = 0.0
        while not self._stop.is_set():
            self.advance()
            if self.follow is not None and self.clock.now() >= next_follow:
                try:
                    self._follow_once()
                except Exception as exc:  # following is best effort; the job keeps running
                    self.log.warning("exporter.follow_failed", error=str(exc))
                next_follow = self.clock.now() + self.follow_interval_s * self.speed
            self._stop.wait(min(0.05, 1.0 / self.speed))

    def start(self) -> SimulationExporter:
        """Start stepping in a background thread."""
        self._thread = threading.Thread(target=self._run, name="perdix-sim-exporter", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop stepping."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # ------------------------------------------------------------------ exposition

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The current values of every series (called on each scrape)."""
        with self._lock:
            job = self.job
            if job.recorded_seconds == 0:
                return
            running = job.state is JobState.RUNNING
            parallelism = job.parallelism
            read, busy_s = job.attempt_totals()
            backlogs = job.worker_backlogs()
            attempt = len(job.restarts)
            last = job.window(job.recorded_seconds - 1, job.recorded_seconds)
            uptime_s = float(last.uptime_s[-1])
            cpu = {w: float(s[-1]) for w, s in last.cpu.items() if np.isfinite(s[-1])}
            ends, committed = job.end_offsets, job.committed_offsets
        speed = self.speed
        registered = GaugeMetricFamily(REGISTERED, "Registered TaskManagers (simulated).")
        registered.add_metric([], parallelism)
        yield registered
        up = GaugeMetricFamily(UPTIME, "Job uptime in milliseconds (wall time).", labels=["job_name"])
        up.add_metric([JOB_NAME], uptime_s / speed * 1000.0)
        yield up
        load = GaugeMetricFamily(CPU, "JVM CPU load per TaskManager.", labels=["tm_id", "pod"])
        for worker, value in sorted(cpu.items(), key=lambda item: _worker_index(item[0])):
            load.add_metric([worker, worker], value)
        yield load
        end_offsets = GaugeMetricFamily(END_OFFSET, "Log-end offset of each partition.", labels=["topic", "partition"])
        group_offsets = GaugeMetricFamily(
            COMMITTED_OFFSET,
            "Offset the consumer group committed on each partition.",
            labels=["consumergroup", "topic", "partition"],
        )
        for partition, (end, done) in enumerate(zip(ends.tolist(), committed.tolist())):
            end_offsets.add_metric([self.topic, str(partition)], float(end))
            group_offsets.add_metric([CONSUMER_GROUP, self.topic, str(partition)], float(done))
        yield end_offsets
        yield group_offsets
        if not running:
            return
        source = "Source:_" + self.topic
        task = source + "____process"
        records = GaugeMetricFamily(
            RECORDS_OUT, "Records the source subtask emitted in this attempt.", labels=OPERATOR_LABELS
        )
        pending = GaugeMetricFamily(PENDING, "Records waiting in the subtask's partitions.", labels=OPERATOR_LABELS)
        times = {
            name: GaugeMetricFamily(name, f"{name} in this attempt, ms.", labels=TASK_LABELS)
            for name in (BUSY, IDLE, BACKPRESSURED)
        }
        uptime_wall_ms = uptime_s / speed * 1000.0
        for index in range(parallelism):
            worker = worker_id(index)
            task_labels = [JOB_NAME, task, "task-0", str(index), str(attempt), worker, worker]
            operator_labels = [*task_labels, source, "op-source"]
            records.add_metric(operator_labels, float(read[index]))
            pending.add_metric(operator_labels, float(backlogs[index]))
            busy_ms = float(busy_s[index]) / speed * 1000.0
            times[BUSY].add_metric(task_labels, busy_ms)
            times[IDLE].add_metric(task_labels, max(0.0, uptime_wall_ms - busy_ms))
            times[BACKPRESSURED].add_metric(task_labels, 0.0)
        yield records
        yield pending
        yield from times.values()


def _worker_index(worker: str) -> int:
    try:
        return int(worker.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0


class MetricsServer(EndpointServer):
    """/metrics (and /healthz) for a registry, on a background thread."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        routes: dict[str, Route] = {
            "/metrics": lambda: (200, generate_latest(registry), CONTENT_TYPE_LATEST),
            "/healthz": lambda: (200, b"ok\n", TEXT),
        }
        super().__init__(routes, host, port, name="perdix-exporter")


def serve(trace: Trace, settings: Any, *, address: str, speed: float, follow_scale_target: bool) -> None:
    """``perdix simulate --serve-metrics``: run the exporter until SIGTERM/SIGINT; ExporterError on bad input."""
    import signal

    host, port = parse_address(address)
    follow = None
    if follow_scale_target:
        from agent.execute.kubernetes import KubeConfigError, KubernetesScaler, api_client

        try:
            follow = KubernetesScaler(settings.scale_target, api_client(settings.scale_target))
        except (KubeConfigError, ValueError) as exc:
            raise ExporterError(f"--follow-scale-target: {exc}") from None
    exporter = SimulationExporter(trace, settings.simulator, speed=speed, follow=follow)
    try:
        server = MetricsServer(exporter.registry, host, port).start()
    except OSError as exc:
        raise ExporterError(f"--serve-metrics: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    exporter.start()
    log = get_logger("perdix.exporter")
    log.info(
        "exporter.started",
        url=f"http://{host}:{server.port}/metrics",
        speed=speed,
        trace=trace.name,
        follow=settings.scale_target.name if follow else None,
    )
    try:
        stop.wait()
    finally:
        exporter.stop()
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("exporter.stopped", simulated_s=exporter.job.now_s)
