"""One typed settings tree for the agent: defaults < YAML file < PERDIX_* environment < CLI flags.

Every knob an operator can turn lives here, with its unit in its name and a description; the Helm
chart renders its values into the YAML this module reads, key for key. Bad values fail at start
with one line naming the key (see :func:`load_settings` and :class:`ConfigError`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar, Literal, TypeVar, overload
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from agent.operator_settings import OperatorSettings
from agent.promql import accumulated_time_rate, check_query
from agent.safeguard_settings import SafeguardSettings
from agent.settings_sources import (
    ENV_NESTED_DELIMITER,
    ENV_PREFIX,
    ConfigError,
    SettingsFileSource,
    env_settings_error,
    flag_tree,
    format_validation_error,
    origin_naming,
    reading,
    unknown_environment_variable,
)
from models.forecast.config import DEFAULT_FORECASTER
from models.recovery import CHECKPOINT_INTERVAL_S, DOWNTIME_FAILURE_PRIOR_S, DOWNTIME_RESCALE_PRIOR_S
from planner import registry
from planner import defaults
from planner.daedalus import cheap_rescale

DAY_S = 86_400
"""Longest duration a time setting takes, seconds: a day is past any round, recovery or hold a job needs, and
every timer, window and backoff built from it stays within what the scheduler, Prometheus and the clocks hold."""
MAX_JOB_PARALLELISM = 32_768
"""Flink's ceiling on a job's max parallelism (2**15): no scale-out of any job is above it."""


class _Section(BaseModel):
    # No setting is infinite or NaN: a non-finite duration, rate or threshold compares false with everything
    # and overflows the timers built from it.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)


_SOURCE = 'operator_name=~"{source}",job_name=~"{job}"'
_TASKS = 'job_name=~"{job}"'


_BY_WORKER = "{worker_label}, task_id, subtask_index"
_BUSY = accumulated_time_rate("Busy", selector=_TASKS, by=_BY_WORKER)
_IDLE = accumulated_time_rate("Idle", selector=_TASKS, by=_BY_WORKER)
_BACK_PRESSURED = accumulated_time_rate("BackPressured", selector=_TASKS, by=_BY_WORKER)


PARTITION_OFFSET_QUERIES = ("partition_end_offsets", "partition_committed_offsets")
"""The queries that answer one series per source partition from the brokers (kafka_exporter's offsets)."""
PARTITION_READ_QUERIES = ("partition_read_offsets",)
"""The queries that answer one series per source partition from the job's readers; no series: not known, no gap."""
MEMORY_QUERIES = ("heap_usage", "gc_time")
"""The queries that answer one series per TaskManager (the memory-pressure guard's JVM metrics)."""
MAX_SOURCE_PARTITIONS = 1_000_000
"""The most source partitions a job is taken to have, set or read (the planner holds a weight per partition)."""
COUNT_QUERIES = ("source_partitions",)
"""The queries that answer one count that a job may not report at all (no series: unknown, no gap)."""
OPTIONAL_QUERIES = PARTITION_OFFSET_QUERIES + PARTITION_READ_QUERIES + MEMORY_QUERIES + COUNT_QUERIES
"""Queries that may be left empty (not read); every other one must be set."""


class PromQLQueries(_Section):
    """PromQL queries the Prometheus monitor runs; the defaults need nothing but Flink's Prometheus reporter.

    Placeholders: ``{worker_label}`` (prometheus.worker_label), ``{window}`` (prometheus.rate_window_s),
    ``{step}`` (prometheus.step_s, the subqueries' resolution), ``{source}`` (prometheus.source_operator) and
    ``{job}`` (prometheus.flink_job). Rates come from
    Flink's counters with ``rate()``: the per-second meters restart at zero with every task restart and
    climb for a minute, the counters do not (a restart starts new series, which ``sum(rate())`` adds up).
    """

    workload: str = Field(
        f"sum(rate(flink_taskmanager_job_task_operator_numRecordsOut{{{_SOURCE}}}[{{window}}s]))"
        f" + (sum(delta(flink_taskmanager_job_task_operator_pendingRecords{{{_SOURCE}}}[{{window}}s])) / {{window}}"
        " or vector(0))",
        description="Records/s arriving at the source: what the sources read (numRecordsOut counters) plus the "
        "growth of their backlog (FLIP-33 pendingRecords) over the same window, both per reader (each reader's "
        "two series are scraped together, so both terms cover the same stretch of the window). A source that "
        "reports no pendingRecords in the whole window (datagen, connectors without FLIP-33) adds no growth term: its "
        "workload is what it reads, which falls short of the demand while the job is saturated. "
        "Needs: numRecordsOut; pendingRecords where the source has it.",
    )
    throughput: str = Field(
        f"sum by ({{worker_label}}) "
        f"(rate(flink_taskmanager_job_task_operator_numRecordsOut{{{_SOURCE}}}[{{window}}s]))",
        description="Records/s the source reads per worker. Needs: the sources' numRecordsOut.",
    )
    busy: str = Field(
        f"max by ({{worker_label}}) ({_BUSY} / ({_BUSY} + {_IDLE} + {_BACK_PRESSURED}))",
        description="Busy fraction (0..1) of each worker's busiest task over the window: accumulated busy time "
        "over busy + idle + back-pressured time (what busyTimeMsPerSecond averages, from counters). "
        "Needs: accumulateBusyTimeMs, accumulateIdleTimeMs, accumulateBackPressuredTimeMs.",
    )
    cpu: str = Field(
        "avg(avg_over_time(flink_taskmanager_Status_JVM_CPU_Load[1m])) by ({worker_label})",
        description="CPU load (0..1) per worker, a one-minute moving average (read when utilization is cpu, or "
        "by the hpa policy). Needs: Status.JVM.CPU.Load.",
    )
    consumer_lag: str = Field(
        f"sum(flink_taskmanager_job_task_operator_pendingRecords{{{_SOURCE}}})",
        description="Records available at the sources but not yet read (FLIP-33 pendingRecords, summed over the "
        "source readers; Flink's KafkaSource reports it). Needs: pendingRecords.",
    )
    worker_backlog: str = Field(
        f"sum by ({{worker_label}}) (flink_taskmanager_job_task_operator_pendingRecords{{{_SOURCE}}})",
        description="Records waiting at the source per worker (FLIP-33 pendingRecords of its readers): with the "
        "throughput it gives each worker's share of the input while the job is saturated, where throughput "
        "alone understates the busiest worker's; a job whose readers report no pendingRecords is measured in its "
        "unsaturated seconds only. Needs: pendingRecords.",
    )
    parallelism: str = Field(
        f"max(count by (operator_id) (flink_taskmanager_job_task_operator_numRecordsOut{{{_SOURCE}}}))",
        description="The scale-out: running subtasks of the source (an in-place rescale leaves TaskManagers "
        "registered but idle; in reactive mode it equals the TaskManagers' slots). Needs: numRecordsOut.",
    )
    uptime: str = Field(
        'max(flink_jobmanager_job_uptime{job_name=~"{job}"})',
        description="Job uptime in milliseconds; a reset means the job restarted. Needs: the JobManager's uptime.",
    )
    source_partitions: str = Field(
        'count(count by (topic, partition) ({__name__=~"flink_taskmanager_job_task_operator_.+_topic_partition_'
        f'currentOffset",{_SOURCE}}}))',
        description="How many partitions the sources read: the distinct (topic, partition) labels of the readers' "
        "per-partition offset gauges (Flink's KafkaSource reports KafkaSourceReader.topic.T.partition.P."
        "currentOffset), the highest count over the window; a lower count than one read before is not taken (a topic's "
        "partitions are never taken away). With it the capacity at a scale-out the job never "
        "ran keeps the partitions' granularity (at 5 readers of 12 partitions the busiest reads 3, as at 4); "
        "source_partitions, where set, wins. No series: unknown, no gap. Empty: not read. "
        "Needs: a source that reports per-partition offsets.",
    )
    partition_end_offsets: str = Field(
        "",
        description="Log-end offset of each source partition, one series per 'partition' label (kafka_exporter's "
        "kafka_topic_partition_current_offset of the topic; KAFKA_BROKER_QUERIES). What each partition received "
        "over the window gives the partitions' weights, from which Daedalus reads the skew at scale-outs the job "
        "never ran (without them: from partition_read_offsets while the job keeps up, else from source_partitions, "
        "every partition alike); the keda-lag policy's input. "
        "Empty: not read. Needs: a Kafka source and kafka_exporter scraped.",
    )
    partition_read_offsets: str = Field(
        'max by (partition) ({__name__=~"flink_taskmanager_job_task_operator_.+_topic_partition_currentOffset",'
        f"{_SOURCE}}})",
        description="Offset each source partition is read up to, one series per 'partition' label: the readers' "
        "own per-partition gauges (Flink's KafkaSource reports KafkaSourceReader.topic.T.partition.P.currentOffset), "
        "one topic. Over a round whose backlog stayed within 1 % of the records read, each partition was read as "
        "fast as it received, so what each one's reader advanced weighs it as the log-end offsets would: the "
        "partition weights where partition_end_offsets is not read (a job without kafka_exporter). A round with a "
        "larger backlog, a restart or fewer series than source_partitions counts is not used. No series: not "
        "known, no gap. Empty: not read. Needs: a source that reports per-partition offsets.",
    )
    partition_committed_offsets: str = Field(
        "",
        description="Offset the job's consumer group committed on each source partition, one series per 'partition' "
        "label (kafka_exporter's kafka_consumergroup_current_offset; Flink's KafkaSource commits on each completed "
        "checkpoint): the keda-lag policy's lag against partition_end_offsets. Empty: not read.",
    )
    heap_usage: str = Field(
        "",
        description="Heap used over heap max (0..1) of each TaskManager, one series per 'tm_id' label: the "
        "memory-pressure guard's heap reading (safeguards.memory.heap_usage_threshold; JVM_MEMORY_QUERIES has the "
        "Flink reporter's). Empty: not read. Needs: Status.JVM.Memory.Heap.Used and .Max.",
    )
    gc_time: str = Field(
        "",
        description="Fraction of time (0..1) each TaskManager spent in garbage collection over the window, one "
        "series per 'tm_id' label: the memory-pressure guard's GC reading (safeguards.memory.gc_pressure_threshold; "
        "JVM_MEMORY_QUERIES has the Flink reporter's). Empty: not read. Needs: Status.JVM.GarbageCollector.All.Time "
        "(Flink 1.19 and later).",
    )

    @field_validator("*")
    @classmethod
    def _balanced(cls, query: str, info: ValidationInfo) -> str:
        if info.field_name in OPTIONAL_QUERIES and not query.strip():
            return ""
        return check_query(query)


KAFKA_BROKER_QUERIES: dict[str, str] = {
    "workload": 'sum(rate(kafka_server_brokertopicmetrics_messagesin_total{topic="TOPIC"}[{window}s]))',
    "consumer_lag": 'sum(kafka_consumergroup_lag{consumergroup="GROUP",topic="TOPIC"})',
    "partition_end_offsets": 'max by (partition) (kafka_topic_partition_current_offset{topic="TOPIC"})',
    "partition_committed_offsets": (
        'max by (partition) (kafka_consumergroup_current_offset{consumergroup="GROUP",topic="TOPIC"})'
    ),
}
"""The documented alternative for jobs whose Kafka brokers and consumer groups are scraped too (JMX and
kafka_exporter): arrivals at the topic, the group's total lag, and per partition the log-end and committed
offsets (TOPIC and GROUP to fill in)."""

JVM_MEMORY_QUERIES: dict[str, str] = {
    "heap_usage": "max by (tm_id) (flink_taskmanager_Status_JVM_Memory_Heap_Used"
    " / flink_taskmanager_Status_JVM_Memory_Heap_Max)",
    "gc_time": "max by (tm_id) (rate(flink_taskmanager_Status_JVM_GarbageCollector_All_Time[{window}s])) / 1000",
}
"""The memory-pressure guard's queries on Flink's own Prometheus reporter, the same on Flink 1.19 and later
(1.20, 2.x): each TaskManager's heap used over max, and the rate of the accumulated time all its collectors
spent (the ``All`` group, ms) as a fraction of the time. Before 1.19 there is no ``All`` group: add up the
collectors' own ``..._GarbageCollector_<name>_Time`` series (docs/safeguards.md)."""


LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
"""A Prometheus label name."""


def http_url(value: str) -> str:
    """``value`` without surrounding blanks and with its scheme in lower case if it is an http(s) URL with a host (and a
    port in range, if it has one); else a ValueError saying why. Checked with the settings, not at the first request:
    a malformed URL (``http://[::1``) raised from deep in the HTTP clients. A value read from a Secret made with
    ``echo`` ends in a newline; ``HTTPS://`` is https (the clients compare the scheme as written)."""
    value = value.strip()
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a port out of range or not a number raises here)
    except ValueError as exc:
        raise ValueError(f"not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("not an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("no host in the URL")
    return parts.scheme + value[len(parts.scheme) :]


PROMQL_ESCAPES = frozenset("abfnrtv\\'\"xuU01234567")
"""What may follow a backslash in a PromQL string (Go's escapes): a regular expression's ``\\.`` is written
``\\\\.``."""


REGEX_PLACEHOLDERS = {"{source}": "source_operator", "{job}": "flink_job"}
"""The placeholders :meth:`PrometheusSettings.render` fills with a label setting's regular expression, and the
setting (a field of ``prometheus``)."""


class PrometheusSettings(_Section):
    """Where and how the monitor reads metrics."""

    url: Annotated[str, AfterValidator(http_url)] = Field(
        "http://127.0.0.1:9090", description="Base URL of the Prometheus server (http:// or https://)."
    )
    timeout_s: float = Field(
        10.0,
        gt=0,
        le=300,
        description="Timeout of one Prometheus request, seconds."
        " At most 5 minutes: a request must end within the rounds it serves.",
    )
    step_s: float = Field(
        1.0,
        gt=0,
        le=3600,
        description="Resolution of the range queries, seconds. A coarser step queries less; the analyzer "
        "still reads one sample a second, each point held until the next."
        " At most an hour: a coarser step leaves the analyzer no samples of the window.",
    )
    stale_after_s: float = Field(
        120.0,
        gt=0,
        le=DAY_S,
        description="A series whose newest sample is older than this is a gap, seconds. At most a day (DAY_S).",
    )
    worker_label: str = Field(
        "subtask_index",
        description="Label that names a worker, the unit the scale-out counts: `subtask_index` "
        "(one worker per parallel instance, whatever the slots per TaskManager; Flink's own), or `tm_id` / `pod` "
        "(one worker per TaskManager: right only with one slot each, and what utilization: cpu and the hpa policy "
        "need, CPU being measured per TaskManager).",
    )
    rate_window_s: int = Field(
        60,
        ge=5,
        le=DAY_S,
        description="Window of the rate() and delta() in the queries ({window}), seconds. Samples whose "
        "window reaches back before the job's last restart are dropped from the workload (a restart replays records)."
        " The workload's level (what a forecast of no change holds) is its mean over this window."
        " At most a day (DAY_S): a longer window asks Prometheus for more than it keeps.",
    )
    source_operator: str = Field(
        "Source:.*",
        description="Regular expression of the source operators' names ({source}); Flink names a source "
        "'Source: NAME' and the reporter writes it 'Source:_NAME'.",
    )
    flink_job: str = Field(
        ".*",
        description="Regular expression of the Flink job's name ({job}) for clusters that run several jobs "
        "(the reporter replaces characters such as '-' by '_').",
    )
    queries: PromQLQueries = Field(default_factory=PromQLQueries, description="The PromQL queries.")

    @field_validator("worker_label")
    @classmethod
    def _label_name(cls, label: str) -> str:
        if not LABEL_NAME.fullmatch(label):
            raise ValueError(f"{label!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)")
        return label

    @field_validator(*REGEX_PLACEHOLDERS.values())
    @classmethod
    def _label_regex(cls, pattern: str) -> str:
        # Put inside a double-quoted PromQL string by render(): a quote or a line break would end it there, a
        # backslash PromQL does not know would be refused, and the error would blame the query, not this setting.
        # The expression itself is Prometheus' (Go's RE2) to judge, whose syntax Python's re does not share.
        bad = next((c for c in pattern if c in '"`\n\r'), None)
        if bad is not None:
            raise ValueError(f"{bad!r} cannot stand in the PromQL string this regular expression is put in")
        escapes = re.finditer(r"\\(.?)", pattern, flags=re.DOTALL)
        unknown = next((m.group(0) for m in escapes if m.group(1) not in PROMQL_ESCAPES or not m.group(1)), None)
        if unknown is not None:
            raise ValueError(
                f"'{unknown}' is no escape of the PromQL string this regular expression is put in: "
                f"write '{chr(92) * 2}{unknown[1:]}'"
            )
        return pattern

    def render(self, query: str) -> str:
        """``query`` with its placeholders filled (str.format would choke on PromQL's braces)."""
        rendered = (
            query.replace("{worker_label}", self.worker_label)
            .replace("{window}", str(self.rate_window_s))
            .replace("{step}", f"{self.step_s:g}")
        )
        for placeholder, setting in REGEX_PLACEHOLDERS.items():
            rendered = rendered.replace(placeholder, getattr(self, setting))
        return rendered


ScaleTargetKind = Literal["simulated", "deployment", "statefulset", "flinkdeployment", "flink-rest"]
"""What a scale target is; ``simulated`` is the lab's (its settings tree defaults to it)."""


class ScaleTargetSettings(_Section):
    """What the executor rescales."""

    kind: ScaleTargetKind = Field(
        "deployment",
        description="Scale target type: a TaskManager Deployment or StatefulSet (reactive mode, scale subresource), "
        "a FlinkDeployment (operator), Flink's REST API, or the lab's embedded simulator (perdix simulate; "
        "perdix run refuses it).",
    )
    name: str = Field("flink-taskmanager", description="Name of the Kubernetes object to scale.")
    namespace: str = Field("default", description="Namespace of the scale target, its Events and ConfigMap.")
    kubeconfig: str | None = Field(None, description="Path of a kubeconfig; unset means in-cluster config.")
    rest_url: Annotated[str, AfterValidator(http_url)] = Field(
        "http://127.0.0.1:8081", description="Flink REST endpoint (kind flink-rest; http:// or https://)."
    )
    job: str | None = Field(
        None, description="Flink job name or id (kind flink-rest); unset means the only running job."
    )
    request_timeout_s: float = Field(
        10.0,
        gt=0,
        le=300,
        description="Timeout of one API request, seconds."
        " At most 5 minutes: a request must end within the round that sends it.",
    )
    max_retries: int = Field(
        4,
        ge=0,
        le=100,
        description="Retries of a failed write (409/429/5xx/timeouts)."
        " At most 100: the retries' backoff must end within hours, not hold a round for ever.",
    )
    checkpoint_before_rescale: bool = Field(
        True,
        description="Kind flink-rest: align each rescale with a checkpoint triggered for it "
        "(POST /jobs/{id}/checkpoints, Flink 1.19+), so the restart replays next to nothing. On Flink 1.x the "
        "checkpoint is awaited before the new resource requirements are written (one that fails or takes longer "
        "than checkpoint_wait_s is logged and the rescale goes ahead); on 2.x, whose adaptive scheduler waits for "
        "a checkpoint before it rescales (at most its rescale-trigger.max-delay), it is triggered right after them "
        "and ends that wait.",
    )
    checkpoint_wait_s: float = Field(
        5.0,
        gt=0,
        le=60,
        description="Longest wait for the checkpoint of checkpoint_before_rescale (Flink 1.x), seconds; the job "
        "runs on meanwhile. At most a minute: a rescale must not wait on a checkpoint that cannot complete.",
    )
    recommendation_events: bool = Field(
        True, description="In dry-run, emit a RescaleRecommended Event instead of rescaling."
    )


class KnowledgeSettings(_Section):
    """Where the agent keeps what it learned across restarts."""

    store: Literal["file", "configmap"] = Field("file", description="Knowledge store kind.")
    path: Path = Field(Path("perdix-knowledge.json"), description="Knowledge file (store: file).")
    configmap: str = Field("perdix-knowledge", description="ConfigMap name (store: configmap).")


class TelemetrySettings(_Section):
    """The agent's own logs, metrics and probes."""

    log_format: Literal["json", "console"] = Field("json", description="json for production, console for humans.")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Lowest level logged.")
    metrics_host: str = Field("0.0.0.0", description="Bind address of /metrics, /healthz and /readyz.")
    metrics_port: int = Field(9249, ge=0, le=65535, description="Port of /metrics, /healthz and /readyz (0: off).")
    not_ready_after_failed_loops: int = Field(
        3,
        ge=1,
        le=1_000_000,
        description="/readyz turns not-ready after this many consecutive loops without data."
        " At most a million: a count that could never be reached would keep /readyz ready through any outage.",
    )


class FlinkAutoscalerOptions(_Section):
    """The ``job.autoscaler.*`` options of the ``flink-autoscaler`` policy (``planner.flink_autoscaler``), with the
    Flink Kubernetes Operator's defaults. Only the time constants and the target are exposed: what a
    time-compressed replay must scale, and the knob operators tune."""

    target_utilization: float = Field(
        0.7, gt=0, le=1, description="job.autoscaler.utilization.target: the utilization a new parallelism aims at."
    )
    metrics_window_s: float = Field(
        900.0,
        gt=0,
        le=DAY_S,
        description="job.autoscaler.metrics.window: the metric aggregation window, seconds. At most a day (DAY_S).",
    )
    stabilization_s: float = Field(
        300.0,
        ge=0,
        le=DAY_S,
        description="job.autoscaler.stabilization.interval: no sample counts this long after the job "
        "runs again, seconds."
        " At most a day (DAY_S).",
    )
    catch_up_duration_s: float = Field(
        1800.0,
        ge=0,
        le=DAY_S,
        description="job.autoscaler.catch-up.duration: target time to work a backlog off, seconds "
        "(0: no backlog-based scaling)."
        " At most a day (DAY_S).",
    )
    restart_time_s: float = Field(
        300.0,
        ge=0,
        le=DAY_S,
        description="job.autoscaler.restart.time: expected restart time whose backlog a new "
        "parallelism must catch up too, seconds."
        " At most a day (DAY_S).",
    )
    scale_down_interval_s: float = Field(
        3600.0,
        ge=0,
        le=DAY_S,
        description="job.autoscaler.scale-down.interval: a scale-down waits this long and takes the "
        "highest recommendation of it, seconds (0: at once)."
        " At most a day (DAY_S).",
    )
    backlog_processing_lag_threshold_s: float = Field(
        300.0,
        ge=0,
        le=DAY_S,
        description="job.autoscaler.backlog-processing.lag-threshold: no scale-down above this backlog, "
        "seconds of input."
        " At most a day (DAY_S).",
    )
    observed_tpr_lag_threshold_s: float = Field(
        30.0,
        ge=0,
        le=DAY_S,
        description="job.autoscaler.observed-true-processing-rate.lag-threshold: backlog from which "
        "the observed processing rate is sampled, seconds of input."
        " At most a day (DAY_S).",
    )


class Settings(BaseSettings):
    """Perdix agent settings; CLI flags over PERDIX_* environment over the YAML file over these defaults."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        extra="forbid",
        frozen=True,
        validate_default=True,
        allow_inf_nan=False,
    )

    policy: str = Field(
        "daedalus",
        description=f"Scaling policy that plans each loop: one of {', '.join(registry.production())}.",
    )
    target_recovery_time_s: float = Field(
        300.0,
        gt=0,
        le=DAY_S,
        description="Longest acceptable time from a rescale or failure until the job has caught up, seconds."
        " At most a day (DAY_S): a longer target lets every scale-out qualify.",
    )
    loop_interval_s: float = Field(
        defaults.LOOP_INTERVAL_S,
        gt=0,
        le=DAY_S,
        description="Time between two rounds of the MAPE-K loop, seconds. Unset: 60, or 30 where a rescale is in"
        " place (scale_target.kind flink-rest, or a downtime_rescale_prior_s of at most 2 % of"
        " target_recovery_time_s): a rescale there stops the job for a fraction of a second, and a shorter loop"
        " undoes a wrong decision within half of the minute a running job may fall behind."
        " At most a day (DAY_S): the scheduler's timer holds it, and a round reads back at most five intervals"
        " of metrics.",
    )
    min_parallelism: int = Field(
        1,
        ge=1,
        le=MAX_JOB_PARALLELISM,
        description="Smallest scale-out Perdix may choose. At most Flink's limit on a job's max parallelism (32,768).",
    )
    max_parallelism: int = Field(
        16,
        ge=1,
        le=MAX_JOB_PARALLELISM,
        description="Largest scale-out Perdix may choose. At most Flink's limit on a job's max parallelism (32,768).",
    )
    static_parallelism: int | None = Field(
        None,
        ge=1,
        le=MAX_JOB_PARALLELISM,
        description="Scale-out of the static policy; unset means max_parallelism."
        " At most Flink's limit on a job's max parallelism (32,768).",
    )
    keda_lag_threshold: int = Field(
        defaults.KEDA_LAG_THRESHOLD,
        ge=1,
        le=2**52,
        description="Policy keda-lag: KEDA's lagThreshold, the partitions' lag each "
        "replica is sized for, records (KEDA's own default of 10 suits a consumer of a few records a second; a "
        "Flink worker reads thousands)."
        " At most 2**52: lags are summed in float64, exact only up to 2**53.",
    )
    dry_run: bool = Field(False, description="Plan and log rescales without changing the job.")
    grace_period_s: float = Field(
        defaults.GRACE_PERIOD_S,
        ge=0,
        le=DAY_S,
        description="No new decision this long after a rescale (the job settles), seconds. With "
        "holds: cost and a cheap rescale, the longest: Daedalus waits the rescale's measured downtime and half a "
        "loop. At most a day (DAY_S): a longer hold would keep the loop from acting.",
    )
    recent_rescale_window_s: float = Field(
        defaults.RECENT_RESCALE_WINDOW_S,
        ge=0,
        le=DAY_S,
        description="After a rescale within this window, keep the scale-out while it still carries "
        "the load (Daedalus Algorithm 1, first check), seconds. With holds: cost and a cheap rescale, the longest: "
        "Daedalus keeps it until a one-worker scale-in would have paid for its rescale (at least a loop). "
        "At most a day (DAY_S).",
    )
    scale_down_stabilization_s: float = Field(
        defaults.SCALE_DOWN_STABILIZATION_S,
        ge=0,
        le=DAY_S,
        description="A lower scale-out must qualify this long before Perdix scales in, seconds. With "
        "holds: cost and a cheap rescale, the longest: Daedalus waits until one worker's saving would have paid "
        "for the scale-in's rescale (at least a loop). At most a day (DAY_S): the loop keeps the candidates' history "
        "this long.",
    )
    holds: defaults.Holds = Field(
        defaults.HOLDS,
        description="How Daedalus times its holds: where a rescale is cheap (its measured downtime at most "
        "2 % of target_recovery_time_s, e.g. Flink's in-place rescaling), cost shortens the grace period, the "
        "recent-rescale window and the scale-in stabilization to what this job's rescales cost (their downtime "
        "and the records they replay: about a loop), with the three settings as ceilings; a dear rescale (a "
        "restart) keeps the settings. fixed applies the three settings as they are.",
    )
    forecast_horizon_s: int = Field(
        DEFAULT_FORECASTER.horizon_s,
        ge=60,
        le=DAY_S,
        description="How far ahead the workload is forecast, seconds."
        " At most a day (DAY_S): the forecaster predicts one value a second over it.",
    )
    forecast_window_s: int = Field(
        DEFAULT_FORECASTER.window_s,
        ge=60,
        le=DAY_S,
        description="Workload history the forecaster fits on, seconds."
        " At most a day (DAY_S): the forecaster keeps and fits one sample a second over it."
        " Under 120 s (12 ten-second model steps) no ARIMA is fitted: the line, the level held and the last cycle"
        " forecast.",
    )
    wape_threshold: float = Field(
        DEFAULT_FORECASTER.wape_threshold,
        gt=0,
        le=100,
        description="Forecasts with a WAPE above this are replaced by the linear fallback."
        " At most 100 (a WAPE of 10,000 %): a larger threshold never replaces a forecast, whatever its error.",
    )
    retrain_after_poor_loops: int = Field(
        DEFAULT_FORECASTER.retrain_after,
        ge=1,
        le=1_000_000,
        description="Retrain the forecaster in the background after this many consecutive poor loops."
        " At most a million: a count that could never be reached would never retrain.",
    )
    forecast_update_maxiter: int = Field(
        DEFAULT_FORECASTER.update_maxiter,
        ge=0,
        le=1000,
        description=(
            "Optimiser iterations per loop that re-estimate the ARIMA parameters on the newest window, as "
            "pmdarima's update does (0: keep the last fit's parameters and only filter the new samples)."
            " At most 1,000: the iterations run inside the round."
        ),
    )
    forecast_selection: bool = Field(
        DEFAULT_FORECASTER.select,
        description="Forecast with whichever of the ARIMA model, the linear trend, the last level held and "
        "the last cycle repeated had the lowest WAPE over the recent horizons (false: the model, with the linear "
        "fallback when its WAPE is poor).",
    )
    forecast_quantile: float | None = Field(
        0.8,
        ge=0.5,
        lt=1,
        description="Quantile of the workload's recent rises that decisions plan for: a "
        "scale-in must carry it until the agent can undo it and recover in time with it arriving (its bad case, "
        "with a whole checkpoint interval replayed), a scale-out must carry it while the job recovers (and, while "
        "the workload rises, until the agent can act again); the expected recovery is predicted from "
        "the point forecast. Where a rescale restarts the job, a scale-in that carries the upper bound over the "
        "whole horizon and this quantile of the last hour's workload is taken without the stabilization window. "
        "Higher plans for rarer rises: fewer SLO misses at more worker-hours (0.5: the "
        "typical rise; null: the point forecast alone, and every scale-in waits for the window).",
    )
    forecast_quantile_cheap: float | None = Field(
        0.7,
        ge=0.5,
        lt=1,
        description="Where a rescale is cheap (see holds), the quantile of the recent rises decisions plan for, in "
        "place of forecast_quantile: a rise above it is met by the next loop's rescale, a stop of a second, where "
        "a restart's rescale would stop the job for tens of seconds (null: forecast_quantile; with "
        "forecast_quantile null, the point forecast alone either way).",
    )
    rise_conditioned: bool = Field(
        True,
        description="Where a rescale is cheap (see holds), plan for the rises measured from moments where "
        "the workload stood in the same part "
        "(bottom, middle, top third) of its last half hour's range as now, rather than from every moment: from "
        "the top of a peak, the rises seen from other tops.",
    )
    checkpoint_interval_s: float = Field(
        CHECKPOINT_INTERVAL_S,
        gt=0,
        le=DAY_S,
        description="The job's checkpoint interval: records since the last checkpoint are replayed, seconds."
        " At most a day (DAY_S).",
    )
    downtime_rescale_prior_s: float = Field(
        DOWNTIME_RESCALE_PRIOR_S,
        ge=0,
        le=DAY_S,
        description="Expected downtime of a rescale before any was measured, seconds. At most a day (DAY_S).",
    )
    downtime_failure_prior_s: float = Field(
        DOWNTIME_FAILURE_PRIOR_S,
        ge=0,
        le=DAY_S,
        description="Expected downtime of a failure before any was measured, seconds. At most a day (DAY_S).",
    )
    utilization: Literal["busy", "cpu"] = Field(
        "busy",
        description="What a worker's load is read from: Flink's busy time (prometheus.queries.busy; right "
        "also for jobs that wait on I/O) or the JVM's CPU load (prometheus.queries.cpu).",
    )
    max_cpu: float = Field(
        1.0, gt=0, le=1, description="CPU load (0..1) a worker is allowed to reach; its capacity is read there."
    )
    source_partitions: int | None = Field(
        None,
        ge=1,
        le=MAX_SOURCE_PARTITIONS,
        description="Partitions of the source topic (the most readers that get input); unset: "
        "unknown, except on the simulated target where the simulator's count is used."
        " At most a million: the planner holds a weight per partition.",
    )
    job_name: str = Field("flink-job", description="The job's name in the model registry and the exported history.")
    model_registry: str | None = Field(
        None, description="Model registry (path or URI) the Spark retraining publishes to; unset: no hot reload."
    )
    worker_retention_s: float = Field(
        3600.0,
        ge=0,
        le=30 * DAY_S,
        description="Capacity regressions of workers not seen for this long are forgotten (Deployment pods get new "
        "names on every restart); what they taught stays in the capacity observed per scale-out. At most "
        "4 x max_parallelism workers are kept in any case, the least recently seen forgotten first, seconds."
        " At most 30 days: finite, so that a worker unseen is forgotten at all.",
    )
    capacity_prior_path: Path | None = Field(
        None, description="StreamBed capacity model file used as prior for unobserved scale-outs."
    )
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings, description="Prometheus monitor.")
    scale_target: ScaleTargetSettings = Field(default_factory=ScaleTargetSettings, description="Scale target.")
    flink_autoscaler: FlinkAutoscalerOptions = Field(
        default_factory=FlinkAutoscalerOptions,
        description="Options of the flink-autoscaler policy (its job.autoscaler.* defaults).",
    )
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings, description="Knowledge store.")
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings, description="Logs, metrics, probes.")
    operators: OperatorSettings = Field(
        default_factory=OperatorSettings,
        description="The per-operator policies (ds2 on a per-vertex target, daedalus-per-operator, justin, qescalor).",
    )
    safeguards: SafeguardSettings = Field(
        default_factory=SafeguardSettings,
        description="Memory-pressure guard, blocked periods, ineffective scale-outs, quotas and the reports of the "
        "decisions they veto or limit (docs/safeguards.md).",
    )

    runnable_policies: ClassVar[tuple[str, ...]] = registry.production()
    """Policies this settings tree accepts: what ``perdix run`` runs (the lab widens it)."""
    policy_context: ClassVar[str] = "perdix run"
    refused_policies: ClassVar[dict[str, str]] = {
        name: f"runs only in the lab ({spec.lab_only})" for name, spec in registry.SPECS.items() if spec.lab_only
    }
    """Known policies this tree refuses, with why (the message of the one-line error)."""

    @field_validator("policy")
    @classmethod
    def _runnable_policy(cls, name: str) -> str:
        if name in cls.runnable_policies:
            return name
        choices = ", ".join(cls.runnable_policies)
        if name in cls.refused_policies:
            raise ValueError(f"{name!r} {cls.refused_policies[name]}; {cls.policy_context} takes one of {choices}")
        raise ValueError(f"unknown policy {name!r}; one of {choices}")

    @model_validator(mode="after")
    def _loop_where_rescales_are_in_place(self) -> Settings:
        # Unset, the loop follows what a rescale is expected to cost: in place, a round every 30 s.
        if "loop_interval_s" not in self.model_fields_set and self.rescales_in_place:
            object.__setattr__(self, "loop_interval_s", defaults.IN_PLACE_LOOP_INTERVAL_S)
        return self

    @model_validator(mode="after")
    def _bounds(self) -> Settings:
        if self.min_parallelism > self.max_parallelism:
            raise ValueError(f"min_parallelism ({self.min_parallelism}) > max_parallelism ({self.max_parallelism})")
        if self.static_parallelism is not None and not (
            self.min_parallelism <= self.static_parallelism <= self.max_parallelism
        ):
            raise ValueError(
                f"static_parallelism ({self.static_parallelism}) outside "
                f"[min_parallelism, max_parallelism] = [{self.min_parallelism}, {self.max_parallelism}]"
            )
        return self

    @model_validator(mode="after")
    def _per_vertex_target(self) -> Settings:
        # A per-operator-only policy sets one parallelism per job vertex, which a TaskManager workload's
        # replica count cannot express.
        targets = registry.SPECS[self.policy].targets if self.policy in registry.SPECS else None
        if targets == registry.PER_VERTEX_TARGETS and self.scale_target.kind not in targets:
            raise ValueError(
                f"policy: {self.policy!r} sets the parallelism of each job vertex: scale_target.kind must be one of "
                f"{', '.join(targets)}, not {self.scale_target.kind!r}"
            )
        return self

    @model_validator(mode="after")
    def _keda_reads_offsets(self) -> Settings:
        # KEDA's Kafka scaler sums each partition's lag; without the partitions' offsets it could never act.
        if registry.Signal.PARTITION_OFFSETS not in self.policy_spec.signals or self.scale_target.kind == "simulated":
            return self
        for name in PARTITION_OFFSET_QUERIES:
            if not getattr(self.prometheus.queries, name):
                raise ValueError(
                    f"prometheus.queries.{name}: policy 'keda-lag' reads the lag of each source partition from its "
                    "log-end and committed offsets; set partition_end_offsets and partition_committed_offsets "
                    "(kafka_exporter's, as in KAFKA_BROKER_QUERIES)"
                )
        return self

    @model_validator(mode="after")
    def _memory_guard_reads(self) -> Settings:
        # A threshold without its query would guard nothing; the embedded simulator models no JVM.
        memory = self.safeguards.memory
        if self.scale_target.kind == "simulated":
            return self
        for threshold, query in (("heap_usage_threshold", "heap_usage"), ("gc_pressure_threshold", "gc_time")):
            if getattr(memory, threshold) is not None and not getattr(self.prometheus.queries, query):
                raise ValueError(
                    f"prometheus.queries.{query}: safeguards.memory.{threshold} reads it; set it (Flink's reporter: "
                    f"agent.settings.JVM_MEMORY_QUERIES[{query!r}], docs/safeguards.md)"
                )
        return self

    @model_validator(mode="after")
    def _cpu_per_taskmanager(self) -> Settings:
        # CPU load is a TaskManager's, not a subtask's: its series carry no subtask_index, so the cpu query
        # would answer one unlabelled series and every round would miss the CPU it is asked for. (The embedded
        # simulator reads no Prometheus.)
        if self.reads_cpu and self.prometheus.worker_label == "subtask_index" and self.scale_target.kind != "simulated":
            reader = "utilization: cpu" if self.utilization == "cpu" else "policy: 'hpa'"
            raise ValueError(
                f"prometheus.worker_label: {reader} reads CPU per TaskManager, which subtask_index cannot name: "
                "set it to tm_id (or pod on Kubernetes), with one slot per TaskManager"
            )
        return self

    @property
    def policy_spec(self) -> registry.PolicySpec:
        """The registry's description of ``policy`` (planner.registry)."""
        return registry.spec(self.policy)

    @property
    def per_operator(self) -> bool:
        """True when the round plans one parallelism per job vertex (a per-operator policy on a per-vertex target)."""
        return self.policy_spec.plans_per_vertex(self.scale_target.kind)

    @property
    def rescales_in_place(self) -> bool:
        """True when a rescale is expected to stop the job for a small part of the target recovery time: the
        flink-rest target rescales in place, and elsewhere a rescale-downtime prior that is cheap says so
        (``planner.daedalus.cheap_rescale``)."""
        return self.scale_target.kind == "flink-rest" or cheap_rescale(
            self.downtime_rescale_prior_s, self.target_recovery_time_s
        )

    @property
    def rescales_aligned(self) -> bool:
        """True when the scale target aligns each rescale with a checkpoint triggered for it (flink-rest with
        ``checkpoint_before_rescale``): a rescale replays next to nothing."""
        return self.scale_target.kind == "flink-rest" and self.scale_target.checkpoint_before_rescale

    @property
    def reads_cpu(self) -> bool:
        """True when something reads the workers' CPU: the capacity model (utilization: cpu) or the hpa policy."""
        return self.utilization == "cpu" or registry.Signal.CPU in self.policy_spec.signals

    @property
    def skipped_queries(self) -> frozenset[str]:
        """The utilization query nothing reads (busy time or CPU), which the monitor does not run."""
        wants_busy = self.utilization == "busy" or registry.Signal.BUSY in self.policy_spec.signals
        return frozenset(name for name, wanted in (("cpu", self.reads_cpu), ("busy", wants_busy)) if not wanted)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init arguments) over PERDIX_* environment over the YAML file (:func:`load_settings`'s)."""
        return init_settings, env_settings, SettingsFileSource(settings_cls)


SettingsT = TypeVar("SettingsT", bound=Settings)


@overload
def load_settings(config_file: Path | None = None, overrides: Mapping[str, object] | None = None) -> Settings: ...


@overload
def load_settings(
    config_file: Path | None = None, overrides: Mapping[str, object] | None = None, *, model: type[SettingsT]
) -> SettingsT: ...


def load_settings(
    config_file: Path | None = None,
    overrides: Mapping[str, object] | None = None,
    *,
    model: type[Settings] = Settings,
) -> Settings:
    """Build the settings: defaults, then the YAML file, then PERDIX_* env, then ``overrides`` (CLI flags).

    ``overrides`` may use dotted keys (``{"scale_target.kind": "deployment"}``); a None value is a flag not
    given. Raises :class:`ConfigError` with one readable line when anything is wrong.
    """
    flags = flag_tree(overrides)
    unknown = unknown_environment_variable(model.model_fields)
    if unknown is not None:
        raise ConfigError(unknown)
    try:
        with reading(config_file):
            return model(**flags)
    except ValidationError as exc:
        file = str(config_file) if config_file is not None else None
        raise ConfigError(format_validation_error(exc, file, origin_naming(flags))) from None
    except SettingsError as exc:
        raise ConfigError(env_settings_error(exc, model)) from None


__all__ = [
    "KAFKA_BROKER_QUERIES",
    "ConfigError",
    "OperatorSettings",
    "KnowledgeSettings",
    "PrometheusSettings",
    "PromQLQueries",
    "ScaleTargetSettings",
    "Settings",
    "TelemetrySettings",
    "load_settings",
]
