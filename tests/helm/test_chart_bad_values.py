"""Bad values make `helm template` and `helm lint` fail with a message that names the key."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helm.chart import run_helm

# (id, values, --set-string flags, words the error must contain)
BAD_VALUES: list[tuple[str, dict[str, Any], list[str], list[str]]] = [
    # Negative and zero recovery targets are meaningless.
    (
        "negative-recovery-time",
        {"perdix": {"targetRecoveryTimeSeconds": -5}},
        [],
        ["perdix.targetRecoveryTimeSeconds", "greater than 0"],
    ),
    ("zero-recovery-time", {"perdix": {"targetRecoveryTimeSeconds": 0}}, [], ["perdix.targetRecoveryTimeSeconds"]),
    # Wrong types, as a values file and as --set-string would deliver them.
    ("string-max-parallelism", {}, ["perdix.maxParallelism=lots"], ["perdix.maxParallelism", "integer"]),
    ("fractional-parallelism", {"perdix": {"minParallelism": 1.5}}, [], ["perdix.minParallelism", "integer"]),
    ("string-dry-run", {}, ["perdix.dryRun=yes"], ["perdix.dryRun", "boolean"]),
    ("list-for-prometheus", {"perdix": {"prometheus": ["http://x"]}}, [], ["perdix.prometheus", "object"]),
    # Unknown keys at every level: a typo must not be silently ignored.
    ("unknown-perdix-key", {"perdix": {"targetRecoveryTime": 300}}, [], ["targetRecoveryTime", "not allowed"]),
    ("unknown-nested-key", {"perdix": {"prometheus": {"queries": {"lag": "sum(x)"}}}}, [], ["lag", "not allowed"]),
    ("unknown-top-level-key", {"replicaCount": 2}, [], ["replicaCount", "not allowed"]),
    # Ranges and enums.
    ("max-cpu-above-one", {"perdix": {"maxCpu": 1.5}}, [], ["perdix.maxCpu"]),
    ("short-forecast-horizon", {"perdix": {"forecastHorizonSeconds": 30}}, [], ["perdix.forecastHorizonSeconds"]),
    ("unknown-policy", {"perdix": {"policy": "greedy"}}, [], ["perdix.policy"]),
    # A policy that runs only in the lab, and per-operator policies without a per-vertex target: perdix run
    # would refuse them at start.
    ("lab-only-policy-oracle", {"perdix": {"policy": "oracle"}}, [], ["perdix.policy"]),
    (
        "per-operator-policy-on-a-deployment",
        {"perdix": {"policy": "justin"}},
        [],
        ["perdix.policy", "mode rest or flinkDeployment"],
    ),
    (
        "per-operator-policy-on-a-statefulset",
        {
            "mode": "taskManagers",
            "perdix": {"policy": "qescalor", "scaleTarget": {"kind": "statefulset", "name": "orders-tm"}},
        },
        [],
        ["perdix.policy", "flink-rest or flinkdeployment"],
    ),
    (
        "bad-cache-threshold",
        {"perdix": {"operators": {"cacheHitThreshold": 2}}},
        [],
        ["perdix.operators.cacheHitThreshold"],
    ),
    ("empty-vertex-query", {"perdix": {"operators": {"queries": {"busy": ""}}}}, [], ["perdix.operators.queries.busy"]),
    ("unknown-mode", {"mode": "yarn"}, [], ["mode", "application"]),
    ("old-standalone-mode", {"mode": "standalone"}, [], ["mode"]),
    ("simulated-target-in-chart", {"perdix": {"scaleTarget": {"kind": "simulated"}}}, [], ["perdix.scaleTarget.kind"]),
    ("port-out-of-range", {"perdix": {"telemetry": {"metricsPort": 70000}}}, [], ["perdix.telemetry.metricsPort"]),
    ("metrics-port-off", {"perdix": {"telemetry": {"metricsPort": 0}}}, [], ["perdix.telemetry.metricsPort"]),
    ("empty-query", {"perdix": {"prometheus": {"queries": {"cpu": ""}}}}, [], ["perdix.prometheus.queries.cpu"]),
    ("relative-knowledge-path", {"perdix": {"knowledge": {"path": "knowledge.json"}}}, [], ["perdix.knowledge.path"]),
    (
        "missing-limits",
        {"resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": None}},
        [],
        ["resources", "limits"],
    ),
    # Relations between keys, checked by the templates.
    (
        "min-above-max",
        {"perdix": {"minParallelism": 9, "maxParallelism": 4}},
        [],
        ["perdix.minParallelism", "perdix.maxParallelism"],
    ),
    ("static-outside-bounds", {"perdix": {"staticParallelism": 40}}, [], ["perdix.staticParallelism"]),
    (
        "initial-replicas-above-max",
        {"application": {"taskManager": {"replicas": 30}}},
        [],
        ["application.taskManager.replicas"],
    ),
    # Each mode's required values, and a scale target kind of another mode.
    (
        "flinkdeployment-without-name",
        {"mode": "flinkDeployment"},
        [],
        ["perdix.scaleTarget.name is required in mode flinkDeployment", "FlinkDeployment"],
    ),
    (
        "taskmanagers-without-kind",
        {"mode": "taskManagers", "perdix": {"scaleTarget": {"name": "ads-tm"}}},
        [],
        ["perdix.scaleTarget.kind (empty) must be deployment or statefulset in mode taskManagers"],
    ),
    (
        "taskmanagers-without-name",
        {"mode": "taskManagers", "perdix": {"scaleTarget": {"kind": "statefulset"}}},
        [],
        ["perdix.scaleTarget.name is required in mode taskManagers", "StatefulSet"],
    ),
    (
        "taskmanagers-flinkdeployment",
        {"mode": "taskManagers", "perdix": {"scaleTarget": {"kind": "flinkdeployment", "name": "x"}}},
        [],
        ["perdix.scaleTarget.kind (flinkdeployment) must be deployment or statefulset in mode taskManagers"],
    ),
    ("rest-without-url", {"mode": "rest"}, [], ["perdix.scaleTarget.restUrl is required in mode rest"]),
    (
        "rest-at-loopback",
        {"mode": "rest", "perdix": {"scaleTarget": {"restUrl": "http://127.0.0.1:8081"}}},
        [],
        ["perdix.scaleTarget.restUrl (http://127.0.0.1:8081) is Perdix's own pod in mode rest"],
    ),
    (
        "rest-with-a-deployment",
        {"mode": "rest", "perdix": {"scaleTarget": {"kind": "deployment", "restUrl": "http://jm:8081"}}},
        [],
        ["perdix.scaleTarget.kind (deployment) does not go with mode rest", "set mode taskManagers"],
    ),
    (
        "flinkdeployment-kind-in-application",
        {"perdix": {"scaleTarget": {"kind": "flinkdeployment"}}},
        [],
        ["perdix.scaleTarget.kind (flinkdeployment) does not go with mode application", "set mode flinkDeployment"],
    ),
    (
        "flink-rest-kind-in-flinkdeployment",
        {"mode": "flinkDeployment", "perdix": {"scaleTarget": {"kind": "flink-rest", "name": "x"}}},
        [],
        ["perdix.scaleTarget.kind (flink-rest) does not go with mode flinkDeployment", "set mode rest"],
    ),
    (
        "rest-url-not-http",
        {"mode": "rest", "perdix": {"scaleTarget": {"restUrl": "jm:8081"}}},
        [],
        ["perdix.scaleTarget.restUrl"],
    ),
    # CPU is a TaskManager's: workers named by subtask cannot carry it (perdix run refuses the same at start).
    ("hpa-with-subtask-workers", {"perdix": {"policy": "hpa"}}, [], ["perdix.prometheus.workerLabel", "set it to pod"]),
    # KEDA's Kafka scaler reads each partition's lag: without kafka_exporter's offsets it could never act.
    # What perdix run would refuse at start, named by the chart instead of a pod that crash-loops.
    (
        "heap-threshold-without-its-query",
        {"perdix": {"safeguards": {"memory": {"heapUsageThreshold": 0.9}}}},
        [],
        ["perdix.prometheus.queries.heapUsage", "perdix.safeguards.memory.heapUsageThreshold reads it"],
    ),
    (
        "gc-threshold-without-its-query",
        {"perdix": {"safeguards": {"memory": {"gcPressureThreshold": 0.2}}}},
        [],
        ["perdix.prometheus.queries.gcTime", "gcPressureThreshold reads it"],
    ),
    (
        "quote-in-the-job-regex",
        {"perdix": {"prometheus": {"flinkJob": 'orders"} or vector(1) #'}}},
        [],
        ["perdix.prometheus.flinkJob", "double quote"],
    ),
    (
        "unknown-escape-in-the-source-regex",
        {"perdix": {"prometheus": {"sourceOperator": r"Source:\.orders"}}},
        [],
        ["perdix.prometheus.sourceOperator", "a backslash must start an escape"],
    ),
    # A URL the agent's settings refuse (the IPv6 address is not closed) fails the chart, not the pod's start.
    (
        "prometheus-url-without-a-host",
        {"perdix": {"prometheus": {"url": "http://[::1:9090"}}},
        [],
        ["perdix.prometheus.url"],
    ),
    (
        "prometheus-url-port-out-of-range",
        {"perdix": {"prometheus": {"url": "http://prometheus:65536"}}},
        [],
        ["perdix.prometheus.url"],
    ),
    (
        "rest-url-of-no-host",
        {"mode": "rest", "perdix": {"scaleTarget": {"restUrl": "http:///jobs"}}},
        [],
        ["perdix.scaleTarget.restUrl"],
    ),
    (
        "keda-lag-without-offsets",
        {"perdix": {"policy": "keda-lag"}},
        [],
        ["perdix.prometheus.queries.partitionEndOffsets", "keda-lag"],
    ),
    (
        "keda-lag-without-committed-offsets",
        {
            "perdix": {
                "policy": "keda-lag",
                "prometheus": {"queries": {"partitionEndOffsets": "max by (partition) (x)"}},
            }
        },
        [],
        ["perdix.prometheus.queries.partitionCommittedOffsets", "keda-lag"],
    ),
    (
        "cpu-with-subtask-workers",
        {"perdix": {"utilization": "cpu"}},
        [],
        ["perdix.prometheus.workerLabel", "perdix.utilization cpu"],
    ),
    (
        "application-other-target",
        {"perdix": {"scaleTarget": {"name": "someone-elses"}}},
        [],
        ["perdix.scaleTarget.name", "mode taskManagers"],
    ),
    (
        "application-other-namespace",
        {"perdix": {"scaleTarget": {"namespace": "other"}}},
        [],
        ["perdix.scaleTarget.namespace"],
    ),
    (
        "application-statefulset",
        {"perdix": {"scaleTarget": {"kind": "statefulset"}}},
        [],
        ["perdix.scaleTarget.kind", "mode application"],
    ),
    (
        "port-clash-in-jobmanager-pod",
        {"perdix": {"telemetry": {"metricsPort": 9250}}},
        [],
        ["application.prometheusReporterPort", "perdix.telemetry.metricsPort"],
    ),
    (
        "no-job-class",
        {"application": {"job": {"className": ""}}},
        [],
        ["application.job.className is required in mode application"],
    ),
    (
        "no-flink-image-tag",
        {"application": {"image": {"tag": ""}}},
        [],
        ["application.image.tag is required in mode application"],
    ),
    (
        "monitor-interval-not-a-duration",
        {"podMonitor": {"enabled": True, "interval": "15"}},
        [],
        ["podMonitor.interval"],
    ),
    ("existing-sa-without-name", {"serviceAccount": {"create": False}}, [], ["serviceAccount.name"]),
]


@pytest.mark.parametrize(
    ("values", "set_strings", "words"), [case[1:] for case in BAD_VALUES], ids=[case[0] for case in BAD_VALUES]
)
def test_template_rejects_bad_values(values: dict[str, Any], set_strings: list[str], words: list[str]) -> None:
    result = run_helm("template", values=values, set_strings=set_strings)
    assert result.returncode != 0, f"helm template accepted {values or set_strings}"
    for word in words:
        assert word in result.stderr, f"{word!r} not in: {result.stderr}"
    assert "panic" not in result.stderr and "goroutine" not in result.stderr


@pytest.mark.parametrize("case_id", ["negative-recovery-time", "unknown-perdix-key", "string-max-parallelism"])
def test_lint_rejects_values_the_schema_forbids(case_id: str) -> None:
    _, values, set_strings, words = next(case for case in BAD_VALUES if case[0] == case_id)
    result = run_helm("lint", values=values, set_strings=set_strings)
    assert result.returncode != 0
    for word in words:
        assert word in result.stdout + result.stderr


@pytest.mark.parametrize("case_id", ["min-above-max", "flinkdeployment-without-name"])
def test_lint_reports_relations_between_keys(case_id: str) -> None:
    """helm lint runs templates in lint mode, where `fail` is reported as an INFO line, not an error;
    `helm template` and `helm install` (tested above) are the gate for these."""
    _, values, set_strings, words = next(case for case in BAD_VALUES if case[0] == case_id)
    result = run_helm("lint", values=values, set_strings=set_strings)
    output = result.stdout + result.stderr
    assert "Fail: " in output
    for word in words:
        assert word in output


def test_kubernetes_older_than_supported_is_rejected() -> None:
    result = run_helm("template", extra=["--kube-version", "1.29.0"])
    assert result.returncode != 0 and "kubeVersion" in result.stderr
