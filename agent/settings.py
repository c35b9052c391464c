"""One typed settings tree for the agent: defaults < YAML file < PERDIX_* environment < CLI flags.

Every knob an operator can turn lives here, with its unit in its name and a description; the Helm
chart renders its values into the YAML this module reads, key for key. Bad values fail at start
with one line naming the key (see :func:`load_settings` and :class:`ConfigError`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar, overload

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from planner import LAB_ONLY_POLICIES, PRODUCTION_POLICIES

ENV_PREFIX = "PERDIX_"
ENV_NESTED_DELIMITER = "__"


class ConfigError(Exception):
    """Configuration that cannot run; its message is the one line the CLI prints before exit 2."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class PromQLQueries(_Section):
    """PromQL queries the Prometheus monitor runs; defaults fit the Flink Prometheus reporter and Kafka."""

    workload: str = Field(
        'sum(kafka_server_brokertopicmetrics_messagesinpersec_oneminuterate{topic="input"})',
        description="Records/s arriving at the source (the workload).",
    )
    throughput: str = Field(
        'sum(flink_taskmanager_job_task_numRecordsOutPerSecond{task_name=~"Source.*"}) by ({worker_label})',
        description="Records/s leaving the source per worker; `{worker_label}` is replaced by prometheus.worker_label.",
    )
    cpu: str = Field(
        "avg(avg_over_time(flink_taskmanager_Status_JVM_CPU_Load[1m])) by ({worker_label})",
        description="CPU load (0..1) per worker, a one-minute moving average.",
    )
    consumer_lag: str = Field(
        "sum(flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_records_lag_max)",
        description="Records available at the source but not yet processed.",
    )
    parallelism: str = Field(
        "max(flink_jobmanager_numRegisteredTaskManagers)",
        description="Number of registered TaskManagers (the scale-out in reactive mode). With scale_target.kind "
        "flink-rest the default is the job's running source subtasks instead (see FLINK_REST_PARALLELISM_QUERY).",
    )
    uptime: str = Field(
        "max(flink_jobmanager_job_uptime)",
        description="Job uptime in milliseconds; a reset means the job restarted.",
    )

    @field_validator("*")
    @classmethod
    def _balanced(cls, query: str) -> str:
        if not query.strip():
            raise ValueError("query is empty")
        for open_, close in ("()", "[]", "{}"):
            if query.count(open_) != query.count(close):
                raise ValueError(f"malformed PromQL: unbalanced {open_!r}")
        return query


FLINK_REST_PARALLELISM_QUERY = (
    'max(count by (task_name) (flink_taskmanager_job_task_numRecordsOutPerSecond{task_name=~"Source.*"}))'
)
"""Default parallelism query of the flink-rest target: an in-place rescale on the adaptive scheduler leaves
TaskManagers registered but idle, so the scale-out is the number of running source subtasks, not of TaskManagers."""


class PrometheusSettings(_Section):
    """Where and how the monitor reads metrics."""

    url: str = Field("http://127.0.0.1:9090", description="Base URL of the Prometheus server.")
    timeout_s: float = Field(10.0, gt=0, description="Timeout of one Prometheus request, seconds.")
    step_s: float = Field(1.0, gt=0, description="Resolution of the range queries, seconds.")
    stale_after_s: float = Field(
        120.0, gt=0, description="A series whose newest sample is older than this is a gap, seconds."
    )
    worker_label: str = Field(
        "pod", description="Label that names a worker: `pod` on Kubernetes, `tm_id` on a standalone cluster."
    )
    queries: PromQLQueries = Field(default_factory=PromQLQueries, description="The PromQL queries.")


class ScaleTargetSettings(_Section):
    """What the executor rescales."""

    kind: Literal["simulated", "deployment", "statefulset", "flinkdeployment", "flink-rest"] = Field(
        "simulated", description="Scale target type: the embedded simulator, a TaskManager Deployment/StatefulSet "
        "(reactive mode, scale subresource), a FlinkDeployment (operator), or Flink's REST API."
    )
    name: str = Field("flink-taskmanager", description="Name of the Kubernetes object to scale.")
    namespace: str = Field("default", description="Namespace of the scale target, its Events and ConfigMap.")
    kubeconfig: str | None = Field(
        None, description="Path of a kubeconfig; unset means in-cluster config."
    )
    rest_url: str = Field("http://127.0.0.1:8081", description="Flink REST endpoint (kind flink-rest).")
    job: str | None = Field(None, description="Flink job name or id (kind flink-rest); unset means the only running job.")
    request_timeout_s: float = Field(10.0, gt=0, description="Timeout of one API request, seconds.")
    max_retries: int = Field(4, ge=0, description="Retries of a failed write (409/429/5xx/timeouts).")
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
        3, ge=1, description="/readyz turns not-ready after this many consecutive loops without data."
    )


class Settings(BaseSettings):
    """Perdix agent settings; CLI flags over PERDIX_* environment over the YAML file over these defaults."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        extra="forbid",
        frozen=True,
        validate_default=True,
    )

    policy: str = Field(
        "daedalus",
        description=f"Scaling policy that plans each loop: one of {', '.join(PRODUCTION_POLICIES)}.",
    )
    target_recovery_time_s: float = Field(
        300.0, gt=0, description="Longest acceptable time from a rescale or failure until the job has caught up, seconds."
    )
    loop_interval_s: float = Field(60.0, gt=0, description="Time between two rounds of the MAPE-K loop, seconds.")
    min_parallelism: int = Field(1, ge=1, description="Smallest scale-out Perdix may choose.")
    max_parallelism: int = Field(16, ge=1, description="Largest scale-out Perdix may choose.")
    static_parallelism: int | None = Field(
        None, ge=1, description="Scale-out of the static policy; unset means max_parallelism."
    )
    dry_run: bool = Field(False, description="Plan and log rescales without changing the job.")
    grace_period_s: float = Field(
        180.0, ge=0, description="No new decision this long after a rescale (the job settles), seconds."
    )
    recent_rescale_window_s: float = Field(
        600.0, ge=0, description="After a rescale within this window, keep the scale-out while it still carries "
        "the load (Daedalus Algorithm 1, first check), seconds."
    )
    scale_down_stabilization_s: float = Field(
        600.0, ge=0, description="A lower scale-out must qualify this long before Perdix scales in, seconds."
    )
    forecast_horizon_s: int = Field(900, ge=60, description="How far ahead the workload is forecast, seconds.")
    forecast_window_s: int = Field(900, ge=60, description="Workload history the forecaster fits on, seconds.")
    wape_threshold: float = Field(
        0.25, gt=0, description="Forecasts with a WAPE above this are replaced by the linear fallback."
    )
    retrain_after_poor_loops: int = Field(
        15, ge=1, description="Retrain the forecaster in the background after this many consecutive poor loops."
    )
    forecast_update_maxiter: int = Field(
        10,
        ge=0,
        description=(
            "Optimiser iterations per loop that re-estimate the ARIMA parameters on the newest window, as "
            "pmdarima's update does (0: keep the last fit's parameters and only filter the new samples)."
        ),
    )
    checkpoint_interval_s: float = Field(
        10.0, gt=0, description="The job's checkpoint interval: records since the last checkpoint are replayed, seconds."
    )
    downtime_rescale_prior_s: float = Field(
        30.0, ge=0, description="Expected downtime of a rescale before any was measured, seconds."
    )
    downtime_failure_prior_s: float = Field(
        15.0, ge=0, description="Expected downtime of a failure before any was measured, seconds."
    )
    max_cpu: float = Field(
        1.0, gt=0, le=1, description="CPU load (0..1) a worker is allowed to reach; its capacity is read there."
    )
    source_partitions: int | None = Field(
        None, ge=1, description="Partitions of the source topic (the most readers that get input); unset: "
        "unknown, except on the simulated target where the simulator's count is used."
    )
    job_name: str = Field("flink-job", description="The job's name in the model registry and the exported history.")
    model_registry: str | None = Field(
        None, description="Model registry (path or URI) the Spark retraining publishes to; unset: no hot reload."
    )
    worker_retention_s: float = Field(
        3600.0,
        ge=0,
        description="Capacity regressions of workers not seen for this long are forgotten (Deployment pods get new "
        "names on every restart); what they taught stays in the capacity observed per scale-out. At most "
        "4 x max_parallelism workers are kept in any case, the least recently seen forgotten first, seconds.",
    )
    capacity_prior_path: Path | None = Field(
        None, description="StreamBed capacity model file used as prior for unobserved scale-outs."
    )
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings, description="Prometheus monitor.")
    scale_target: ScaleTargetSettings = Field(default_factory=ScaleTargetSettings, description="Scale target.")
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings, description="Knowledge store.")
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings, description="Logs, metrics, probes.")

    runnable_policies: ClassVar[tuple[str, ...]] = PRODUCTION_POLICIES
    """Policies this settings tree accepts: what ``perdix run`` runs (the lab widens it)."""
    policy_context: ClassVar[str] = "perdix run"
    refused_policies: ClassVar[dict[str, str]] = {
        name: f"runs only in the lab ({reason})" for name, reason in LAB_ONLY_POLICIES.items()
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

    @model_validator(mode="before")
    @classmethod
    def _flink_rest_parallelism(cls, data: Any) -> Any:
        """On the flink-rest target, default the parallelism query to the running source subtasks."""
        if not isinstance(data, dict):
            return data
        target = data.get("scale_target")
        kind = target.get("kind") if isinstance(target, dict) else getattr(target, "kind", None)
        prometheus = data.get("prometheus") or {}
        if kind != "flink-rest" or not isinstance(prometheus, dict):
            return data
        queries = prometheus.get("queries") or {}
        if not isinstance(queries, dict) or "parallelism" in queries:
            return data  # set explicitly: taken as given
        return {**data, "prometheus": {**prometheus, "queries": {**queries, "parallelism": FLINK_REST_PARALLELISM_QUERY}}}

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

    @property
    def partitions(self) -> int | None:
        """Source partitions, when the operator set them."""
        return self.source_partitions

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Flags arrive as init kwargs; the YAML file is merged into them below the environment
        # by load_settings, so only init and env sources are needed here.
        return init_settings, env_settings


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config file must hold a mapping of settings, not {type(data).__name__}")
    return data


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _strip_env_covered(data: dict[str, Any], prefix: str = ENV_PREFIX) -> dict[str, Any]:
    """Drop from the file's data every leaf that an environment variable overrides."""
    env_names = {name.upper() for name in os.environ}
    out: dict[str, Any] = {}
    for key, value in data.items():
        env_name = f"{prefix}{key}".upper()
        if env_name in env_names:
            continue
        if isinstance(value, dict):
            out[key] = _strip_env_covered(value, env_name + ENV_NESTED_DELIMITER)
        else:
            out[key] = value
    return out


def format_validation_error(exc: ValidationError, source: str | None = None) -> str:
    """One line per problem: the dotted key, the problem and, where it helps, the bad value."""
    lines = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "settings"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        elif error["type"] not in ("value_error", "assertion_error") and "input" in error:
            value = error["input"]
            if not isinstance(value, dict):
                message = f"{message} (got {value!r})"
        where = f"{source}: " if source else ""
        lines.append(f"{where}{key}: {message}" if key != "settings" else f"{where}{message}")
    return "; ".join(lines)


SettingsT = TypeVar("SettingsT", bound=Settings)


@overload
def load_settings(config_file: Path | None = None, overrides: dict[str, Any] | None = None) -> Settings: ...


@overload
def load_settings(
    config_file: Path | None = None, overrides: dict[str, Any] | None = None, *, model: type[SettingsT]
) -> SettingsT: ...


def load_settings(
    config_file: Path | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    model: type[Settings] = Settings,
) -> Settings:
    """Build the settings: defaults, then the YAML file, then PERDIX_* env, then ``overrides`` (CLI flags).

    ``overrides`` may use dotted keys (``{"scale_target.kind": "deployment"}``). Raises
    :class:`ConfigError` with one readable line when anything is wrong.
    """
    file_data = _read_yaml(config_file) if config_file is not None else {}
    file_data = _strip_env_covered(file_data)
    flag_data: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        node = flag_data
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    try:
        # File values go in as init kwargs under the flags; env sits between them because
        # _strip_env_covered removed the file's leaves the environment sets.
        return model(**_deep_merge(file_data, flag_data))
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, str(config_file) if config_file else None)) from None


__all__ = [
    "FLINK_REST_PARALLELISM_QUERY",
    "ConfigError",
    "KnowledgeSettings",
    "PrometheusSettings",
    "PromQLQueries",
    "ScaleTargetSettings",
    "Settings",
    "TelemetrySettings",
    "load_settings",
]
