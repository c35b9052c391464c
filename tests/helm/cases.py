"""Values sets the chart is rendered with, and what each must produce (written out, not derived)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """One way to install the chart and the scale target, knowledge and Role it must lead to."""

    id: str
    values: dict[str, Any]
    release: str
    namespace: str
    mode: str
    target_kind: str
    target_name: str
    target_namespace: str
    service_account: str
    knowledge_configmap: str | None  # None: file store, no ConfigMap access
    expected_rules: frozenset[tuple[str, str, str, str]]


def rules(
    scale: tuple[str, str, str], knowledge_configmap: str | None
) -> frozenset[tuple[str, str, str, str]]:
    """The least-privilege rule set as (apiGroup, resource, resourceName or '*', verb) tuples."""
    group, resource, name = scale
    out = {(group, resource, name, verb) for verb in ("get", "patch")}
    out |= {(g, "events", "*", verb) for g in ("events.k8s.io", "") for verb in ("create", "patch")}
    if knowledge_configmap is not None:
        out |= {("", "configmaps", knowledge_configmap, verb) for verb in ("get", "update")}
    return frozenset(out)


CASES = [
    # Chart defaults: reactive Flink cluster, dry-run, knowledge in a ConfigMap.
    Case(
        id="standalone-defaults",
        values={},
        release="perdix",
        namespace="flink",
        mode="standalone",
        target_kind="deployment",
        target_name="perdix-taskmanager",
        target_namespace="flink",
        service_account="perdix",
        knowledge_configmap="perdix-knowledge",
        expected_rules=rules(("apps", "deployments/scale", "perdix-taskmanager"), "perdix-knowledge"),
    ),
    # Acting for real: dry-run off, file knowledge, dashboard, shared checkpoints, extra Flink config,
    # a capacity prior mounted from a ConfigMap; release name without "perdix" gets a prefix.
    Case(
        id="standalone-acting-file-store",
        values={
            "perdix": {
                "dryRun": False,
                "targetRecoveryTimeSeconds": 120,
                "minParallelism": 2,
                "maxParallelism": 24,
                "capacityPriorPath": "/etc/perdix/prior/capacity.json",
                "knowledge": {"store": "file", "path": "/var/lib/perdix/state/knowledge.json"},
            },
            "flink": {
                "taskManager": {"replicas": 4},
                "job": {"args": ["--error-rate", "0.0", "--sleep", "2"]},
                "checkpoints": {"dir": "file:///flink-checkpoints/orders", "claimName": "flink-checkpoints"},
                "config": {"restart-strategy.type": "exponential-delay", "state.backend.type": "rocksdb"},
            },
            "grafanaDashboard": {"enabled": True, "namespace": "monitoring"},
            # Colliding keys: the chart's selector labels and scrape annotations must win.
            "podLabels": {"team": "orders", "app.kubernetes.io/component": "mine"},
            "podAnnotations": {"prometheus.io/port": "1234", "owner": "orders-team"},
            "extraVolumes": [{"name": "prior", "configMap": {"name": "orders-capacity-prior"}}],
            "extraVolumeMounts": [{"name": "prior", "mountPath": "/etc/perdix/prior", "readOnly": True}],
        },
        release="orders",
        namespace="streaming",
        mode="standalone",
        target_kind="deployment",
        target_name="orders-perdix-taskmanager",
        target_namespace="streaming",
        service_account="orders-perdix",
        knowledge_configmap=None,
        expected_rules=rules(("apps", "deployments/scale", "orders-perdix-taskmanager"), None),
    ),
    # An existing ServiceAccount the platform team manages; the chart still creates the Role.
    Case(
        id="standalone-existing-serviceaccount",
        values={"serviceAccount": {"create": False, "name": "flink-autoscaler"}, "fullnameOverride": "clicks"},
        release="clicks-prod",
        namespace="clicks",
        mode="standalone",
        target_kind="deployment",
        target_name="clicks-taskmanager",
        target_namespace="clicks",
        service_account="flink-autoscaler",
        knowledge_configmap="clicks-knowledge",
        expected_rules=rules(("apps", "deployments/scale", "clicks-taskmanager"), "clicks-knowledge"),
    ),
    # Flink Kubernetes operator: Perdix in its own Deployment scales the FlinkDeployment.
    Case(
        id="operator-flinkdeployment",
        values={"flink": {"mode": "operator", "operator": {"flinkDeployment": "payments"}}},
        release="payments-perdix",
        namespace="payments",
        mode="operator",
        target_kind="flinkdeployment",
        target_name="payments",
        target_namespace="payments",
        service_account="payments-perdix",
        knowledge_configmap="payments-perdix-knowledge",
        expected_rules=rules(("flink.apache.org", "flinkdeployments", "payments"), "payments-perdix-knowledge"),
    ),
    # Operator mode pointed at a TaskManager StatefulSet in another namespace, named knowledge ConfigMap,
    # no metrics Service: the Role moves to the target's namespace, the binding names the SA's namespace.
    Case(
        id="operator-statefulset-other-namespace",
        values={
            "flink": {"mode": "operator"},
            "perdix": {
                "scaleTarget": {"kind": "statefulset", "name": "ads-taskmanager", "namespace": "ads"},
                "knowledge": {"configmap": "ads-perdix-state"},
                "telemetry": {"metricsPort": 9300},
            },
            "metricsService": {"enabled": False},
        },
        release="perdix",
        namespace="autoscalers",
        mode="operator",
        target_kind="statefulset",
        target_name="ads-taskmanager",
        target_namespace="ads",
        service_account="perdix",
        knowledge_configmap="ads-perdix-state",
        expected_rules=rules(("apps", "statefulsets/scale", "ads-taskmanager"), "ads-perdix-state"),
    ),
]


def case_ids() -> list[str]:
    """Test ids of the cases."""
    return [case.id for case in CASES]
