"""What the Kubernetes targets give the safeguards: what one task slot takes (the quotas read it), and the Event a
vetoed decision leaves on the scale target."""

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


def test_a_flinkdeployment_reports_its_taskmanager_resources_per_slot(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> None:
    scaler = KubernetesScaler(ScaleTargetSettings(kind="flinkdeployment", name="flink-job"), kube_client)
    assert isinstance(scaler, ResourceReporter)
    assert scaler.slot_resources() == SlotResources(cpu=1.0, memory_mb=2048.0)  # one slot by default
    kube_api.update_flinkdeployment_spec(
        "flink-job",
        {
            "taskManager": {"resource": {"cpu": 2, "memory": "4g"}},
            "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "4"},
        },
    )
    assert scaler.slot_resources() == SlotResources(cpu=0.5, memory_mb=1024.0)
    kube_api.update_flinkdeployment_spec("flink-job", {"flinkConfiguration": {"taskmanager.numberOfTaskSlots": "four"}})
    with pytest.raises(ScalerError, match="numberOfTaskSlots"):
        scaler.slot_resources()


def test_a_taskmanager_deployment_reports_none(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    scaler = KubernetesScaler(ScaleTargetSettings(kind="deployment", name="flink-taskmanager"), kube_client)
    assert scaler.slot_resources() is None


def test_a_vetoed_decision_is_a_kubernetes_event_on_the_scale_target(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> None:
    from agent.clock import SimulatedClock
    from agent.execute.kubernetes import KubernetesEventSink, TargetRef
    from agent.safeguards import DecisionReporter
    from planner.safeguards import Finding, SafeguardCode, Verdict

    target = ScaleTargetSettings(kind="flinkdeployment", name="flink-job")
    sink = KubernetesEventSink(kube_client, TargetRef.from_settings(target), clock=SimulatedClock(1_700_000_000.0))
    reporter = DecisionReporter(sink, interval_s=1800.0)
    finding = Finding(
        SafeguardCode.BLOCKED_PERIOD,
        Verdict.VETOED,
        "rescale to 4 held: blocked period '09:00-10:00'",
        {"from": 6, "to": 4, "period": "09:00-10:00"},
    )
    reporter.report((finding,), now=0.0)
    reporter.report((finding,), now=60.0)  # within the interval: no second Event
    [event] = kube_api.events
    assert event["reason"] == "ScalingVetoed" and event["type"] == "Warning"
    assert event["regarding"]["kind"] == "FlinkDeployment" and event["regarding"]["name"] == "flink-job"
    assert event["note"].startswith("[blocked-period] rescale to 4 held") and "period=09:00-10:00" in event["note"]
