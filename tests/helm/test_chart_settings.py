"""Chart values <-> agent settings, one to one: rendered by the real helm, loaded by the real loader."""

from __future__ import annotations

import json
import re
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import yaml
from pydantic import BaseModel

from agent.settings import Settings, load_settings
from tests.helm.chart import CHART, render, settings_yaml

# The simulator section only drives `perdix simulate`; a production chart does not expose it.
NOT_IN_CHART = {"simulator"}

# Where the chart's defaults deliberately differ from the agent's, and why (the values.yaml comments
# say the same to operators).
CHART_DEFAULTS_DIFFER = {
    "dry_run": "installing never rescales a job before someone looked at the recommendations",
    "prometheus.url": "127.0.0.1 cannot reach Prometheus from inside a pod",
    "knowledge.store": "a file on an emptyDir would be lost with the pod",
    "knowledge.path": "the file lives on the chart's emptyDir",
    "knowledge.configmap": "named after the release",
    "scale_target.name": "the chart's TaskManager Deployment",
    "scale_target.namespace": "the release namespace",
}

# Settings whose chart value defaults to null, which the chart leaves out of the settings file so the agent picks its
# own default (values.yaml says which); a value set is rendered like any other.
AGENT_DECIDES_WHEN_NULL = {
    "loop_interval_s": "30 s where a rescale is in place (mode rest), 60 s elsewhere",
}

# A valid value different from the chart's default for every settings field the chart exposes.
# Rendered in mode taskManagers, where the scale target may be named freely. A settings field missing
# here fails test_table_covers_every_settings_field: add it to the chart, then here.
DISTINCT = {
    "policy": "static",
    "target_recovery_time_s": 450.5,
    "loop_interval_s": 15,
    "min_parallelism": 2,
    "max_parallelism": 40,
    "static_parallelism": 12,
    "keda_lag_threshold": 2500,
    "source_partitions": 48,
    "job_name": "orders",
    "model_registry": "s3a://models/perdix",
    "dry_run": False,
    "grace_period_s": 90,
    "recent_rescale_window_s": 1200,
    "scale_down_stabilization_s": 900,
    "holds": "fixed",
    "forecast_horizon_s": 1800,
    "forecast_window_s": 3600,
    "wape_threshold": 0.4,
    "retrain_after_poor_loops": 30,
    "forecast_update_maxiter": 3,
    "forecast_selection": False,
    "forecast_quantile": 0.9,
    "forecast_quantile_cheap": 0.6,
    "rise_conditioned": False,
    "checkpoint_interval_s": 30,
    "downtime_rescale_prior_s": 45,
    "downtime_failure_prior_s": 20,
    "utilization": "cpu",
    "max_cpu": 0.85,
    "worker_retention_s": 7200,
    "capacity_prior_path": "/etc/perdix/prior/capacity.json",
    "prometheus.url": "http://prometheus.observability.svc:9090",
    "prometheus.timeout_s": 4,
    "prometheus.step_s": 2,
    "prometheus.stale_after_s": 60,
    "prometheus.worker_label": "pod",
    "prometheus.rate_window_s": 30,
    "prometheus.source_operator": "Source:_orders.*",
    "prometheus.flink_job": "orders",
    "prometheus.queries.busy": "max by ({worker_label}) (flink_taskmanager_job_task_busyTimeMsPerSecond) / 1000",
    "prometheus.queries.workload": (
        'sum(kafka_server_brokertopicmetrics_messagesinpersec_oneminuterate{topic="orders"})'
    ),
    "prometheus.queries.throughput": (
        'sum(rate(flink_taskmanager_job_task_numRecordsOut{task_name=~"Source.*"}[1m])) by ({worker_label})'
    ),
    "prometheus.queries.cpu": "max(flink_taskmanager_Status_JVM_CPU_Load) by ({worker_label})",
    "prometheus.queries.consumer_lag": 'sum(kafka_consumergroup_lag{group="orders"})',
    "prometheus.queries.worker_backlog": "sum by ({worker_label}) (flink_taskmanager_job_task_operator_pendingRecords)",
    "prometheus.queries.parallelism": "count(flink_taskmanager_Status_JVM_CPU_Load)",
    "prometheus.queries.uptime": 'max(flink_jobmanager_job_uptime{job_name="orders"})',
    "prometheus.queries.source_partitions": (
        "count(count by (partition) ("
        'flink_taskmanager_job_task_operator_KafkaSourceReader_topic_partition_currentOffset{topic="orders"}))'
    ),
    "prometheus.queries.partition_end_offsets": (
        'max by (partition) (kafka_topic_partition_current_offset{topic="orders"})'
    ),
    "prometheus.queries.partition_read_offsets": (
        "max by (partition) ("
        'flink_taskmanager_job_task_operator_KafkaSourceReader_topic_partition_currentOffset{topic="orders"})'
    ),
    "prometheus.queries.partition_committed_offsets": (
        'max by (partition) (kafka_consumergroup_current_offset{consumergroup="orders-job",topic="orders"})'
    ),
    "prometheus.queries.heap_usage": (
        "max by (tm_id) (flink_taskmanager_Status_JVM_Memory_Heap_Used / flink_taskmanager_Status_JVM_Memory_Heap_Max)"
    ),
    "prometheus.queries.gc_time": (
        "sum by (tm_id) (rate(flink_taskmanager_Status_JVM_GarbageCollector_G1_Young_Generation_Time[1m])) / 1000"
    ),
    "safeguards.memory.heap_usage_threshold": 0.9,
    "safeguards.memory.gc_pressure_threshold": 0.3,
    "safeguards.blocked_periods.periods": ["09:00-09:30", "* 9-16 * * mon-fri"],
    "safeguards.blocked_periods.time_zone": "Europe/Berlin",
    "safeguards.blocked_periods.recovery_scale_out": False,
    "safeguards.effectiveness.enabled": True,
    "safeguards.effectiveness.threshold": 0.2,
    "safeguards.effectiveness.forget_after_s": 7200,
    "safeguards.effectiveness.workload_tolerance": 0.1,
    "safeguards.effectiveness.measure_within_s": 900,
    "safeguards.quota.slots": 32,
    "safeguards.quota.cpu": 16,
    "safeguards.quota.memory_mb": 65536,
    "safeguards.reports.interval_s": 600,
    "safeguards.reports.stabilization": True,
    "scale_target.kind": "statefulset",
    "scale_target.name": "orders-taskmanager",
    "scale_target.namespace": "orders",
    "scale_target.kubeconfig": "/etc/kube/config",
    "scale_target.rest_url": "http://orders-rest:8081",
    "scale_target.job": "orders",
    "scale_target.request_timeout_s": 3,
    "scale_target.max_retries": 7,
    "scale_target.checkpoint_before_rescale": False,
    "scale_target.checkpoint_wait_s": 12.5,
    "scale_target.recommendation_events": False,
    "knowledge.store": "file",
    "knowledge.path": "/var/lib/perdix/orders/knowledge.json",
    "knowledge.configmap": "orders-knowledge",
    "telemetry.log_format": "console",
    "telemetry.log_level": "debug",
    "telemetry.metrics_host": "127.0.0.1",
    "telemetry.metrics_port": 9400,
    "telemetry.not_ready_after_failed_loops": 5,
    "operators.queries.records_in": (
        'sum by (task_id, subtask_index) (rate(flink_taskmanager_job_task_numRecordsIn{job_name="orders"}[1m]))'
    ),
    "operators.queries.records_out": (
        'sum by (task_id, subtask_index) (rate(flink_taskmanager_job_task_numRecordsOut{job_name="orders"}[1m]))'
    ),
    "operators.queries.busy": "max by (task_id, subtask_index) (flink_taskmanager_job_task_busyTimeMsPerSecond) / 1000",
    "operators.queries.backpressure": (
        "max by (task_id, subtask_index) (flink_taskmanager_job_task_backPressuredTimeMsPerSecond) / 1000"
    ),
    "operators.queries.state_size": (
        "sum by (task_id, subtask_index) (flink_taskmanager_job_task_operator_rocksdb_total_sst_files_size)"
    ),
    "operators.queries.managed_memory_used": (
        "max by (task_id, subtask_index) (flink_taskmanager_job_task_operator_rocksdb_block_cache_usage)"
    ),
    "operators.queries.cache_hit_rate": "avg by (task_id, subtask_index) (orders_cache_hit_ratio)",
    "operators.queries.state_latency": 'max by (task_id, subtask_index) (orders_state_latency_ms{quantile="0.99"})',
    "flink_autoscaler.target_utilization": 0.8,
    "flink_autoscaler.metrics_window_s": 600,
    "flink_autoscaler.stabilization_s": 120,
    "flink_autoscaler.catch_up_duration_s": 900,
    "flink_autoscaler.restart_time_s": 60,
    "flink_autoscaler.scale_down_interval_s": 1800,
    "flink_autoscaler.backlog_processing_lag_threshold_s": 120,
    "flink_autoscaler.observed_tpr_lag_threshold_s": 10,
    "operators.warm_up_s": 30,
    "operators.memory_min_mb": 256,
    "operators.memory_max_level": 4,
    "operators.cache_hit_threshold": 0.7,
    "operators.latency_threshold_ms": 2.5,
    "operators.memory_cost_per_gb": 0.25,
    "operators.startup_cost": 1.0,
    "operators.shutdown_cost": 0.5,
}


def values_key(settings_key: str) -> str:
    """The chart's spelling of a settings key: camelCase, and a trailing _s spelled Seconds."""
    words = settings_key.split("_")
    if words[-1] == "s" and len(words) > 1:
        words[-1] = "seconds"
    return words[0] + "".join(word.capitalize() for word in words[1:])


def settings_leaves(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Dotted path -> pydantic FieldInfo of every leaf field, recursively (sections excluded)."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        if path in NOT_IN_CHART:
            continue
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.update(settings_leaves(annotation, f"{path}."))
        else:
            out[path] = info
    return out


LEAVES = settings_leaves(Settings)


def get_path(obj: Any, dotted: str) -> Any:
    """Attribute or key lookup along a dotted path."""
    for part in dotted.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


def values_path(settings_path: str) -> list[str]:
    """Key path under `perdix:` in values.yaml for a settings path."""
    return [values_key(part) for part in settings_path.split(".")]


def nest(pairs: dict[str, Any]) -> dict[str, Any]:
    """Build the `perdix:` values tree from settings paths."""
    tree: dict[str, Any] = {}
    for settings_path, value in pairs.items():
        *parents, leaf = values_path(settings_path)
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def values_leaves(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Key paths of every leaf of a values tree."""
    out: set[tuple[str, ...]] = set()
    for key, value in tree.items():
        if isinstance(value, dict):
            out |= values_leaves(value, (*prefix, key))
        else:
            out.add((*prefix, key))
    return out


def schema_leaves(schema: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], dict[str, Any]]:
    """Key path -> schema of every leaf property."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for key, sub in schema["properties"].items():
        if sub.get("type") == "object" and "properties" in sub:
            out.update(schema_leaves(sub, (*prefix, key)))
        else:
            out[(*prefix, key)] = sub
    return out


def load(objects: list[dict[str, Any]], tmp_path: Path) -> Settings:
    """Load the rendered settings file with the agent's loader."""
    path = tmp_path / "perdix.yaml"
    path.write_text(settings_yaml(objects))
    return load_settings(path)


@pytest.fixture(autouse=True)
def no_perdix_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """PERDIX_* variables of the developer's shell must not mask what the chart rendered."""
    import os

    for name in list(os.environ):
        if name.upper().startswith("PERDIX_"):
            monkeypatch.delenv(name)


CHART_VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
CHART_SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def test_table_covers_every_settings_field() -> None:
    assert set(DISTINCT) == set(LEAVES), (
        f"settings fields without a chart value: {sorted(set(LEAVES) - set(DISTINCT))}; "
        f"stale entries: {sorted(set(DISTINCT) - set(LEAVES))}"
    )


def test_every_settings_field_is_reachable_from_values(tmp_path: Path) -> None:
    values = {"mode": "taskManagers", "perdix": nest(DISTINCT)}
    settings = load(render(values=values, namespace="autoscalers", example=None), tmp_path)
    baseline_values = {"mode": "taskManagers", "perdix": {"scaleTarget": {"kind": "deployment", "name": "orders"}}}
    baseline = load(render(values=baseline_values, namespace="autoscalers", example=None), tmp_path)
    for path, wanted in DISTINCT.items():
        got = get_path(settings, path)
        got = str(got) if isinstance(got, Path) else list(got) if isinstance(got, tuple) else got
        assert got == wanted, f"{path}: values gave {wanted!r}, settings hold {got!r}"
        default = get_path(baseline, path)
        default = (
            str(default) if isinstance(default, Path) else list(default) if isinstance(default, tuple) else default
        )
        assert got != default, f"{path}: same as the chart default"


def test_every_values_key_lands_in_settings(tmp_path: Path) -> None:
    chart_keys = values_leaves(CHART_VALUES["perdix"])
    settings_keys = {tuple(values_path(path)) for path in LEAVES}
    assert chart_keys == settings_keys, (
        f"values without a settings field: {sorted(chart_keys - settings_keys)}; "
        f"settings without a value: {sorted(settings_keys - chart_keys)}"
    )
    # And the rendered file holds exactly the settings fields (extra="forbid" rejects the rest), less those left to
    # the agent while null; set, they are rendered.
    rendered = yaml.safe_load(settings_yaml(render()))
    assert values_leaves(rendered) == {tuple(path.split(".")) for path in LEAVES if path not in AGENT_DECIDES_WHEN_NULL}
    for path in AGENT_DECIDES_WHEN_NULL:
        value: Any = CHART_VALUES["perdix"]
        for key in values_path(path):
            value = value[key]
        assert value is None, path
    rendered = yaml.safe_load(settings_yaml(render(sets=["perdix.loopIntervalSeconds=45"])))
    assert rendered["loop_interval_s"] == 45


def test_schema_describes_exactly_the_values() -> None:
    assert set(schema_leaves(CHART_SCHEMA["properties"]["perdix"])) == values_leaves(CHART_VALUES["perdix"])
    assert set(CHART_SCHEMA["properties"]) == set(CHART_VALUES)


def test_the_checked_in_schema_and_values_table_are_what_the_code_generates() -> None:
    """values.schema.json and docs/helm.md's values table are generated from agent/settings.py and
    helm/schema/chart-values.yaml; regenerated here, they must equal the checked-in files."""
    from scripts import gen_helm_schema

    assert (CHART / "values.schema.json").read_text() == gen_helm_schema.render_schema(), (
        "helm/perdix/values.schema.json lags behind agent/settings.py: run `make generate`"
    )
    doc = gen_helm_schema.HELM_DOC.read_text()
    assert doc == gen_helm_schema.render_doc(doc), "docs/helm.md's values table lags behind: run `make generate`"


def test_the_generator_follows_a_new_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A setting added to the tree reaches the schema, typed, bounded and described, with no hand-written part."""
    from pydantic import Field, create_model

    from scripts import gen_helm_schema

    grown = create_model(
        "GrownSettings",
        __base__=Settings,
        drain_timeout_s=(float, Field(45.0, gt=0, le=600, description="How long a drain may take, seconds.")),
    )
    monkeypatch.setattr(gen_helm_schema, "Settings", grown)
    schema = json.loads(gen_helm_schema.render_schema())["properties"]["perdix"]
    assert schema["properties"]["drainTimeoutSeconds"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 600,
        "description": "How long a drain may take, seconds.",
    }
    assert "drainTimeoutSeconds" in schema["required"] and schema["additionalProperties"] is False


def test_the_generator_refuses_an_override_of_a_setting_that_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    from scripts import gen_helm_schema

    with pytest.raises(gen_helm_schema.SchemaError, match="perdix.scaleTarget.restURL is not a setting"):
        gen_helm_schema.perdix_schema({"scaleTarget.restURL": {"minLength": 1}})


def test_chart_defaults_equal_agent_defaults_except_the_documented_ones(tmp_path: Path) -> None:
    # A release named other than "perdix", so names derived from it cannot match by chance.
    settings = load(render(release="orders", namespace="orders"), tmp_path)
    defaults = load_settings()
    differing = {path for path in LEAVES if get_path(settings, path) != get_path(defaults, path)}
    assert differing == set(CHART_DEFAULTS_DIFFER)


def test_set_target_recovery_time(tmp_path: Path) -> None:
    objects = render(sets=["perdix.targetRecoveryTimeSeconds=300", "perdix.dryRun=false"])
    settings = load(objects, tmp_path)
    assert settings.target_recovery_time_s == 300 and settings.dry_run is False
    # --set reads 75.5 as a string (helm parses only integers); --set-json keeps the number.
    fractional = render(extra=["--set-json", "perdix.targetRecoveryTimeSeconds=75.5"])
    assert load(fractional, tmp_path).target_recovery_time_s == 75.5


def _bounds(info: Any) -> list[Any]:
    return [
        item
        for item in info.metadata
        if isinstance(item, annotated_types.Gt | annotated_types.Ge | annotated_types.Le | annotated_types.Lt)
    ]


def _schema_types(annotation: Any) -> set[str]:
    """JSON schema types a settings annotation admits."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set().union(*(_schema_types(arg) for arg in args))
    if typing.get_origin(annotation) is typing.Literal:
        return {"string"}
    if typing.get_origin(annotation) in (tuple, list):
        return {"array"}
    return {
        bool: {"boolean"},
        int: {"integer"},
        float: {"number"},
        str: {"string"},
        Path: {"string"},
        type(None): {"null"},
    }[annotation]


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_schema_is_at_least_as_strict_as_the_settings(path: str) -> None:
    info = LEAVES[path]
    schema = schema_leaves(CHART_SCHEMA["properties"]["perdix"])[tuple(values_path(path))]
    types_ = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    null = {"null"} if path in AGENT_DECIDES_WHEN_NULL else set()
    assert set(types_) == _schema_types(info.annotation) | null, path
    assert schema.get("description"), f"{path}: schema entry without a description"
    for bound in _bounds(info):
        if isinstance(bound, annotated_types.Gt):
            assert (
                schema.get("exclusiveMinimum", float("-inf")) >= bound.gt
                or schema.get("minimum", float("-inf")) > bound.gt
            ), path
        elif isinstance(bound, annotated_types.Ge):
            assert (
                max(schema.get("minimum", float("-inf")), schema.get("exclusiveMinimum", float("-inf"))) >= bound.ge
            ), path
        elif isinstance(bound, annotated_types.Le):
            assert schema.get("maximum", float("inf")) <= bound.le, path
        else:
            assert schema.get("exclusiveMaximum", float("inf")) <= bound.lt, path
    literal = [arg for arg in typing.get_args(info.annotation) if isinstance(arg, str)]
    if typing.get_origin(info.annotation) is typing.Literal:
        # The chart may narrow an enum (and use "" for "the chart decides"), never widen it.
        assert set(schema["enum"]) - {""} <= set(literal), path


@pytest.mark.parametrize(
    "url",
    [
        "http://prometheus:9090",
        "HTTPS://prom.example/api/v1",
        "http://user@prom:9090/x?y=1",
        "http://[::1]:9090",
        "http://p:08081",
        "http://p:65535",
        "http://[::1",
        "http://[::1:9090",
        "http:///jobs",
        "http://p:65536",
        "ftp://p",
        "notaurl",
    ],
)
def test_the_charts_url_patterns_refuse_what_the_settings_refuse(url: str) -> None:
    """One pattern for both URLs (the REST URL may also be empty), and it agrees with ``http_url`` on each case."""
    from agent.settings import http_url

    leaves = schema_leaves(CHART_SCHEMA["properties"]["perdix"])
    pattern = leaves[("prometheus", "url")]["pattern"]
    assert leaves[("scaleTarget", "restUrl")]["pattern"] == "^$|" + pattern
    try:
        http_url(url)
        accepted = True
    except ValueError:
        accepted = False
    assert (re.fullmatch(pattern, url) is not None) == accepted, url


def test_the_charts_promql_escapes_are_the_settings() -> None:
    """The template's check of ``flinkJob``/``sourceOperator`` allows after a backslash what the settings allow."""
    from agent.settings import PROMQL_ESCAPES

    template = (CHART / "templates" / "_helpers.tpl").read_text()
    opening, closing = r"regexMatch `^([^\\]|\\[", "])*$`"
    assert opening in template, "the escape check is gone from _helpers.tpl"
    allowed = template.split(opening, 1)[1].split(closing, 1)[0]  # abfnrtv\\'"xuU0-7
    assert set(allowed.replace("0-7", "01234567").replace("\\\\", "\\")) == set(PROMQL_ESCAPES)


def test_the_policy_enum_is_what_perdix_run_runs() -> None:
    from planner import registry

    schema = schema_leaves(CHART_SCHEMA["properties"]["perdix"])[("policy",)]
    assert schema["enum"] == list(registry.production())


@pytest.mark.parametrize("example", ["flink-deployment", "rest"])
@pytest.mark.parametrize("policy", ["daedalus-per-operator", "justin", "qescalor", "ds2"])
def test_per_operator_policies_render_in_modes_flinkdeployment_and_rest_and_plan_per_vertex(
    tmp_path: Path, policy: str, example: str
) -> None:
    settings = load(render(values={"perdix": {"policy": policy}}, namespace="orders", example=example), tmp_path)
    assert settings.policy == policy and settings.per_operator
    assert settings.scale_target.kind == {"flink-deployment": "flinkdeployment", "rest": "flink-rest"}[example]


def test_keda_lag_renders_with_kafka_exporters_offsets(tmp_path: Path) -> None:
    from agent.settings import KAFKA_BROKER_QUERIES

    queries = {
        "partitionEndOffsets": KAFKA_BROKER_QUERIES["partition_end_offsets"].replace("TOPIC", "orders"),
        "partitionCommittedOffsets": KAFKA_BROKER_QUERIES["partition_committed_offsets"]
        .replace("TOPIC", "orders")
        .replace("GROUP", "orders-job"),
    }
    values = {"perdix": {"policy": "keda-lag", "kedaLagThreshold": 5000, "prometheus": {"queries": queries}}}
    settings = load(render(values=values, namespace="orders"), tmp_path)
    assert settings.policy == "keda-lag" and settings.keda_lag_threshold == 5000
    assert 'topic="orders"' in settings.prometheus.queries.partition_end_offsets
    assert 'consumergroup="orders-job"' in settings.prometheus.queries.partition_committed_offsets
