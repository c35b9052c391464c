"""Values sets the chart is rendered with, and what each must produce (written out, not derived)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.helm.chart import DEFAULT_EXAMPLE, EXAMPLE_OF_MODE


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
    expected_rules: frozenset[tuple[str, str, str, str]] | None  # None: no Role at all
    example: str | None = DEFAULT_EXAMPLE

    def render_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of chart.render / run_helm for this case."""
        return {"values": self.values, "release": self.release, "namespace": self.namespace, "example": self.example}


def rules(scale: tuple[str, str, str] | None, knowledge_configmap: str | None) -> frozenset[tuple[str, str, str, str]]:
    """The least-privilege rule set as (apiGroup, resource, resourceName or '*', verb) tuples.

    ``scale`` None: no Kubernetes scale target (Flink's REST API), so no Events either.
    """
    out: set[tuple[str, str, str, str]] = set()
    if scale is not None:
        group, resource, name = scale
        out |= {(group, resource, name, verb) for verb in ("get", "patch")}
        out |= {(g, "events", "*", verb) for g in ("events.k8s.io", "") for verb in ("create", "patch")}
    if knowledge_configmap is not None:
        out |= {("", "configmaps", knowledge_configmap, verb) for verb in ("get", "update")}
    return frozenset(out)


CASES = [
    # The application example: reactive Flink cluster running the trace-source job, dry-run, knowledge in a ConfigMap.
    Case(
        id="application-example",
        values={},
        release="perdix",
        namespace="flink",
        mode="application",
        target_kind="deployment",
        target_name="perdix-taskmanager",
        target_namespace="flink",
        service_account="perdix",
        knowledge_configmap="perdix-knowledge",
        expected_rules=rules(("apps", "deployments/scale", "perdix-taskmanager"), "perdix-knowledge"),
    ),
    # Acting for real: dry-run off, file knowledge, dashboard, shared checkpoints, extra Flink config,
    # a capacity prior mounted from a ConfigMap, both Prometheus-Operator monitors; release name without
    # "perdix" gets a prefix.
    Case(
        id="application-acting-file-store",
        values={
            "perdix": {
                "dryRun": False,
                "targetRecoveryTimeSeconds": 120,
                "minParallelism": 2,
                "maxParallelism": 24,
                "capacityPriorPath": "/etc/perdix/prior/capacity.json",
                "knowledge": {"store": "file", "path": "/var/lib/perdix/state/knowledge.json"},
            },
            "application": {
                "image": {"repository": "registry.example.com/orders-job", "tag": "1.4.2", "pullPolicy": "Always"},
                "job": {"className": "com.example.orders.OrdersJob", "args": ["--error-rate", "0.0", "--sleep", "2"]},
                "taskManager": {"replicas": 4},
                "checkpoints": {"dir": "file:///flink-checkpoints/orders", "claimName": "flink-checkpoints"},
                "config": {"restart-strategy.type": "exponential-delay", "state.backend.type": "rocksdb"},
            },
            "grafanaDashboard": {"enabled": True, "namespace": "monitoring"},
            "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
            "podMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
            # Colliding keys: the chart's selector labels and scrape annotations must win.
            "podLabels": {"team": "orders", "app.kubernetes.io/component": "mine"},
            "podAnnotations": {"prometheus.io/port": "1234", "owner": "orders-team"},
            "extraVolumes": [{"name": "prior", "configMap": {"name": "orders-capacity-prior"}}],
            "extraVolumeMounts": [{"name": "prior", "mountPath": "/etc/perdix/prior", "readOnly": True}],
        },
        release="orders",
        namespace="streaming",
        mode="application",
        target_kind="deployment",
        target_name="orders-perdix-taskmanager",
        target_namespace="streaming",
        service_account="orders-perdix",
        knowledge_configmap=None,
        expected_rules=rules(("apps", "deployments/scale", "orders-perdix-taskmanager"), None),
    ),
    # An existing ServiceAccount the platform team manages; the chart still creates the Role.
    Case(
        id="application-existing-serviceaccount",
        values={"serviceAccount": {"create": False, "name": "flink-autoscaler"}, "fullnameOverride": "clicks"},
        release="clicks-prod",
        namespace="clicks",
        mode="application",
        target_kind="deployment",
        target_name="clicks-taskmanager",
        target_namespace="clicks",
        service_account="flink-autoscaler",
        knowledge_configmap="clicks-knowledge",
        expected_rules=rules(("apps", "deployments/scale", "clicks-taskmanager"), "clicks-knowledge"),
    ),
    # The flinkDeployment example: Perdix in its own Deployment scales the operator's FlinkDeployment.
    Case(
        id="flinkdeployment-example",
        values={},
        example=EXAMPLE_OF_MODE["flinkDeployment"],
        release="payments-perdix",
        namespace="payments",
        mode="flinkDeployment",
        target_kind="flinkdeployment",
        target_name="payments",
        target_namespace="payments",
        service_account="payments-perdix",
        knowledge_configmap="payments-perdix-knowledge",
        expected_rules=rules(("flink.apache.org", "flinkdeployments", "payments"), "payments-perdix-knowledge"),
    ),
    # The taskManagers example: a TaskManager StatefulSet the user runs (no operator).
    Case(
        id="taskmanagers-example",
        values={},
        example=EXAMPLE_OF_MODE["taskManagers"],
        release="ads-perdix",
        namespace="ads",
        mode="taskManagers",
        target_kind="statefulset",
        target_name="ads-taskmanager",
        target_namespace="ads",
        service_account="ads-perdix",
        knowledge_configmap="ads-perdix-knowledge",
        expected_rules=rules(("apps", "statefulsets/scale", "ads-taskmanager"), "ads-perdix-knowledge"),
    ),
    # taskManagers with a Deployment in another namespace, named knowledge ConfigMap, no metrics Service:
    # the Role moves to the target's namespace, the binding names the SA's namespace.
    Case(
        id="taskmanagers-deployment-other-namespace",
        values={
            "mode": "taskManagers",
            "perdix": {
                "scaleTarget": {"kind": "deployment", "name": "ads-taskmanager", "namespace": "ads"},
                "knowledge": {"configmap": "ads-perdix-state"},
                "telemetry": {"metricsPort": 9300},
            },
            "metricsService": {"enabled": False},
        },
        example=None,
        release="perdix",
        namespace="autoscalers",
        mode="taskManagers",
        target_kind="deployment",
        target_name="ads-taskmanager",
        target_namespace="ads",
        service_account="perdix",
        knowledge_configmap="ads-perdix-state",
        expected_rules=rules(("apps", "deployments/scale", "ads-taskmanager"), "ads-perdix-state"),
    ),
    # The rest example: Flink's REST API; the only Kubernetes permission is the knowledge ConfigMap.
    Case(
        id="rest-example",
        values={},
        example=EXAMPLE_OF_MODE["rest"],
        release="clicks-perdix",
        namespace="streaming",
        mode="rest",
        target_kind="flink-rest",
        target_name="",
        target_namespace="streaming",
        service_account="clicks-perdix",
        knowledge_configmap="clicks-perdix-knowledge",
        expected_rules=rules(None, "clicks-perdix-knowledge"),
    ),
    # rest with the knowledge in a file: no Kubernetes API at all, so no Role and no token.
    Case(
        id="rest-file-store-no-kubernetes",
        values={
            "perdix": {"knowledge": {"store": "file", "path": "/var/lib/perdix/knowledge.json"}},
            "podMonitor": {"enabled": True},
        },
        example=EXAMPLE_OF_MODE["rest"],
        release="clicks",
        namespace="streaming",
        mode="rest",
        target_kind="flink-rest",
        target_name="",
        target_namespace="streaming",
        service_account="clicks-perdix",
        knowledge_configmap=None,
        expected_rules=None,
    ),
]


def case_ids() -> list[str]:
    """Test ids of the cases."""
    return [case.id for case in CASES]
