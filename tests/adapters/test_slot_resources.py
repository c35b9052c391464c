"""What one task slot takes, as each scale target reports it (the quotas read it): FlinkDeployment, Deployment."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from agent.execute.kubernetes import KubernetesScaler, memory_mb
from agent.ports import ResourceReporter, ScalerError
from agent.settings import ScaleTargetSettings
from planner.safeguards import SlotResources
from tests.fakes.kube_api import FakeKubeAPI


@pytest.mark.parametrize(
    ("value", "mb"),
    [
        ("2048m", 2048.0),  # Flink's syntax: binary units
        ("2g", 2048.0),
        ("2Gi", 2048.0),  # a Kubernetes quantity
        ("1536Mi", 1536.0),
        (2**30, 1024.0),  # bytes
        ("lots", None),
        ("2 parsecs", None),
        (None, None),
        (-5, None),
        (True, None),
    ],
)
def test_memory_sizes_in_both_syntaxes(value: object, mb: float | None) -> None:
    assert memory_mb(value) == mb


def test_a_flinkdeployment_reports_its_taskmanager_resources_per_slot(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    scaler = KubernetesScaler(ScaleTargetSettings(kind="flinkdeployment", name="flink-job"), kube_client)
    assert isinstance(scaler, ResourceReporter)
    assert scaler.slot_resources() == SlotResources(cpu=1.0, memory_mb=2048.0)  # one slot by default
    kube_api.update_flinkdeployment_spec("flink-job", {
        "taskManager": {"resource": {"cpu": 2, "memory": "4g"}},
        "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "4"},
    })
    assert scaler.slot_resources() == SlotResources(cpu=0.5, memory_mb=1024.0)
    kube_api.update_flinkdeployment_spec("flink-job", {"flinkConfiguration": {"taskmanager.numberOfTaskSlots": "four"}})
    with pytest.raises(ScalerError, match="numberOfTaskSlots"):
        scaler.slot_resources()


def test_a_taskmanager_deployment_reports_none(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    scaler = KubernetesScaler(ScaleTargetSettings(kind="deployment", name="flink-taskmanager"), kube_client)
    assert scaler.slot_resources() is None
