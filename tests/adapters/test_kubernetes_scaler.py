"""KubernetesScaler and KubernetesEventSink through the official client against the loopback fake API."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client as k8s
from structlog.testing import capture_logs

from agent.clock import SimulatedClock
from agent.execute.kubernetes import (
    Backoff,
    KubeConfigError,
    KubernetesEventSink,
    KubernetesScaler,
    TargetRef,
    api_client,
)
from agent.ports import ScalerError
from agent.settings import ScaleTargetSettings
from tests.fakes.kube_api import FakeKubeAPI

TARGETS = {
    # kind: (object name in the kube_api fixture, path of the object written, how to read it from the fake)
    "deployment": ("flink-taskmanager", "/deployments/flink-taskmanager/scale"),
    "statefulset": ("flink-taskmanager-sts", "/statefulsets/flink-taskmanager-sts/scale"),
    "flinkdeployment": ("flink-job", "/flinkdeployments/flink-job"),
}


def stored(fake: FakeKubeAPI, kind: str) -> int:
    """The scale-out the fake holds for the target."""
    if kind == "flinkdeployment":
        return int(fake.flinkdeployment("flink-job")["spec"]["job"]["parallelism"])
    name = TARGETS[kind][0]
    return fake.replicas(f"{kind}s", name)


class Sleeps:
    """Records the backoff sleeps instead of sleeping."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def make_scaler(
    api: k8s.ApiClient,
    kind: str = "deployment",
    *,
    sleeps: Sleeps | None = None,
    clock: SimulatedClock | None = None,
    **settings: object,
) -> tuple[KubernetesScaler, KubernetesEventSink]:
    target = ScaleTargetSettings(kind=kind, name=TARGETS[kind][0], **settings)  # type: ignore[arg-type]
    sink = KubernetesEventSink(api, TargetRef.from_settings(target), clock=clock or SimulatedClock(1_700_000_000.0))
    backoff = Backoff(max_retries=target.max_retries, sleep=sleeps or Sleeps(), rng=random.Random(1))
    return KubernetesScaler(target, api, sink, backoff=backoff), sink


@pytest.mark.parametrize("kind", list(TARGETS))
def test_rescale_patches_the_documented_field_reads_it_back_and_leaves_a_rescaled_event(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient, kind: str
) -> None:
    scaler, _ = make_scaler(kube_client, kind)
    assert scaler.current_parallelism() == 3

    result = scaler.rescale(5, reasons=("workload 9000/s exceeds capacity at 3",), dry_run=False)

    assert (result.requested, result.confirmed, result.dry_run) == (5, 5, False)
    assert stored(kube_api, kind) == 5
    writes = kube_api.scale_target_writes()
    assert len(writes) == 1
    write = writes[0]
    assert write.method == "PATCH" and write.path.endswith(TARGETS[kind][1])
    assert write.content_type == "application/merge-patch+json"
    expected = {"spec": {"job": {"parallelism": 5}}} if kind == "flinkdeployment" else {"spec": {"replicas": 5}}
    assert write.body == expected
    # Read back after the write: the last request to the target is a GET that followed the PATCH.
    target_requests = kube_api.log(path_contains=TARGETS[kind][1])
    assert [r.method for r in target_requests][-2:] == ["PATCH", "GET"]

    (event,) = kube_api.events
    assert event["reason"] == "Rescaled" and event["type"] == "Normal"
    assert event["regarding"]["kind"] == TargetRef.from_settings(ScaleTargetSettings(kind=kind)).object_kind
    assert event["regarding"]["name"] == TARGETS[kind][0]
    assert event["regarding"].get("uid"), "the Event should point at the object's uid once it was read"
    assert "from 3 to 5" in event["note"] and "exceeds capacity" in event["note"]


@pytest.mark.parametrize(
    ("status", "retry_after", "kind"),
    [
        (409, None, "conflict"),  # someone else wrote the object meanwhile
        (429, 3, "throttled"),  # API priority and fairness: wait at least Retry-After (capped)
        (500, None, "server_error"),
        (503, None, "server_error"),
        (504, None, "server_error"),
    ],
)
def test_transient_failures_are_retried_with_capped_jittered_backoff(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient, status: int, retry_after: int | None, kind: str
) -> None:
    sleeps = Sleeps()
    scaler, _ = make_scaler(kube_client, sleeps=sleeps)
    kube_api.inject("/scale", method="PATCH", status=status, retry_after=retry_after, times=3)

    result = scaler.rescale(6, reasons=("r",), dry_run=False)

    assert result.confirmed == 6
    patches = kube_api.log(method="PATCH")
    assert [r.status for r in patches] == [status, status, status, 200]
    assert len(sleeps.calls) == 3
    backoff = scaler.backoff
    for attempt, slept in enumerate(sleeps.calls):
        ceiling = min(backoff.cap_s, backoff.base_s * 2**attempt)
        floor = ceiling / 2 if retry_after is None else max(ceiling / 2, min(backoff.cap_s, retry_after))
        assert floor <= slept <= max(ceiling, floor)


def test_retries_stop_at_max_retries_and_nothing_counts_as_applied(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> None:
    sleeps = Sleeps()
    scaler, _ = make_scaler(kube_client, sleeps=sleeps, max_retries=2)
    kube_api.inject("/scale", method="PATCH", status=503, times=None)

    with pytest.raises(ScalerError) as raised:
        scaler.rescale(7, reasons=("r",), dry_run=False)

    assert raised.value.kind == "server_error" and raised.value.retryable
    assert len(kube_api.log(method="PATCH")) == 3  # first try + max_retries
    assert len(sleeps.calls) == 2
    assert kube_api.replicas("deployments", "flink-taskmanager") == 3
    assert [e["reason"] for e in kube_api.events] == []


def test_a_timed_out_write_is_retried(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    scaler, _ = make_scaler(kube_client, request_timeout_s=0.3)
    kube_api.inject("/scale", method="PATCH", delay_s=1.0, status=503, times=1)

    result = scaler.rescale(4, reasons=("r",), dry_run=False)

    assert result.confirmed == 4
    assert len(kube_api.log(method="PATCH")) == 2


def test_a_failed_write_counts_only_if_the_read_back_shows_it(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> None:
    scaler, _ = make_scaler(kube_client, max_retries=0)
    # A gateway timeout after the write landed: the read-back shows the new value, so it counts.
    kube_api.inject("/scale", method="PATCH", status=504, apply=True, times=1)
    assert scaler.rescale(4, reasons=("r",), dry_run=False).confirmed == 4
    assert [e["reason"] for e in kube_api.events] == ["Rescaled"]

    # The same answer when the write did not land: nothing counts, the error reaches the loop.
    kube_api.inject("/scale", method="PATCH", status=504, times=1)
    with pytest.raises(ScalerError) as raised:
        scaler.rescale(6, reasons=("r",), dry_run=False)
    assert raised.value.kind == "server_error"
    assert kube_api.replicas("deployments", "flink-taskmanager") == 4
    assert [e["reason"] for e in kube_api.events] == ["Rescaled"]


@pytest.mark.parametrize(
    ("kind", "status", "error_kind", "must_name"),
    [
        ("deployment", 403, "forbidden", ["'patch'", "deployments/scale", "flink-taskmanager", "default"]),
        ("statefulset", 403, "forbidden", ["'patch'", "statefulsets/scale", "flink-taskmanager-sts"]),
        ("flinkdeployment", 403, "forbidden", ["'patch'", "flinkdeployments.flink.apache.org", "flink-job"]),
        ("deployment", 404, "not_found", ["Deployment/flink-taskmanager", "does not exist"]),
        ("flinkdeployment", 404, "not_found", ["FlinkDeployment/flink-job", "does not exist"]),
    ],
)
def test_403_and_404_are_not_retried_and_reported_once(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient, kind: str, status: int, error_kind: str, must_name: list[str]
) -> None:
    scaler, _ = make_scaler(kube_client, kind)
    kube_api.inject(TARGETS[kind][1], method="PATCH", status=status, times=None)

    with capture_logs() as logs:
        for _ in range(3):  # three rounds in a row hit the same wall
            with pytest.raises(ScalerError) as raised:
                scaler.rescale(5, reasons=("r",), dry_run=False)
            assert raised.value.kind == error_kind and not raised.value.retryable
            for fragment in must_name:
                assert fragment in str(raised.value)

    assert len(kube_api.log(method="PATCH")) == 3, "one request per round, no retry storm"
    reports = [entry for entry in logs if entry["event"] == "scale_target.unusable"]
    assert len(reports) == 1 and reports[0]["log_level"] == "error"
    warnings = [e for e in kube_api.events if e["type"] == "Warning"]
    assert len(warnings) == 1 and warnings[0]["reason"] == "RescaleFailed"
    assert must_name[0].strip("'") in warnings[0]["note"] or must_name[0] in warnings[0]["note"]


def test_a_missing_target_is_reported_on_read(kube_api: FakeKubeAPI, tmp_path: Path) -> None:
    api = api_client(ScaleTargetSettings(kind="deployment", kubeconfig=str(kube_api.write_kubeconfig(tmp_path / "kc"))))
    target = ScaleTargetSettings(kind="deployment", name="no-such-taskmanager")
    scaler = KubernetesScaler(target, api, None, backoff=Backoff(sleep=Sleeps()))
    assert scaler.current_parallelism() is None
    with pytest.raises(ScalerError) as raised:
        scaler.rescale(2, reasons=(), dry_run=False)
    assert raised.value.kind == "not_found" and "no-such-taskmanager" in str(raised.value)
    assert kube_api.scale_target_writes() == []


@pytest.mark.parametrize(
    ("status", "kind", "reported"),
    [
        (None, None, False),  # answered: nothing to say
        (503, "server_error", False),  # one attempt, no retry: the caller decides
        (403, "forbidden", True),  # the operator may fix it while the agent runs: reported now, once
        (401, "unauthorized", False),  # the caller cannot start: left to it
    ],
)
def test_the_start_up_probe_reads_once_and_reports_a_missing_permission(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient, status: int | None, kind: str | None, reported: bool
) -> None:
    scaler, _ = make_scaler(kube_client)
    if status is not None:
        kube_api.inject(TARGETS["deployment"][1], method="GET", status=status, times=None)

    with capture_logs() as logs:
        failure = scaler.probe()

    assert (failure.kind if failure else None) == kind
    assert len(kube_api.log(method="GET")) == 1
    assert any(entry["event"] == "scale_target.unusable" for entry in logs) is reported
    assert any(e["type"] == "Warning" for e in kube_api.events) is reported
    assert scaler.api_host.startswith("http://127.0.0.1")


@pytest.mark.parametrize("kind", list(TARGETS))
def test_dry_run_never_writes_the_target_and_leaves_a_recommendation(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient, kind: str
) -> None:
    scaler, _ = make_scaler(kube_client, kind)
    result = scaler.rescale(8, reasons=("forecast peak 120000/s",), dry_run=True)

    assert result.dry_run and result.requested == 8 and result.confirmed == 3
    assert kube_api.scale_target_writes() == []
    assert stored(kube_api, kind) == 3
    (event,) = kube_api.events
    assert event["reason"] == "RescaleRecommended" and event["action"] == "Recommend"
    assert "from 3 to 8" in event["note"] and "forecast peak" in event["note"]


def test_dry_run_recommendation_events_can_be_switched_off(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    scaler, _ = make_scaler(kube_client, recommendation_events=False)
    scaler.rescale(8, reasons=(), dry_run=True)
    assert kube_api.events == []
    assert [r for r in kube_api.log() if r.is_write] == []


def test_a_write_the_target_ignores_is_not_confirmed(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    kube_api.freeze("/deployments/flink-taskmanager/scale")
    scaler, _ = make_scaler(kube_client)
    result = scaler.rescale(9, reasons=(), dry_run=False)
    assert result.confirmed == 3
    (event,) = kube_api.events
    assert event["reason"] == "RescaleFailed" and event["type"] == "Warning" and "read back 3" in event["note"]


def test_events_are_unique_valid_and_survive_a_whole_second_timestamp(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> None:
    clock = SimulatedClock(1_700_000_000.0)  # microsecond 0: isoformat() would drop the fraction
    sink = KubernetesEventSink(kube_client, TargetRef("deployment", "flink-taskmanager", "default"), clock=clock)
    sink.emit(reason="Rescaled", message="a")
    sink.emit(reason="Rescaled", message="b" * 5000)  # same instant, note longer than the API allows
    events = kube_api.events
    assert [e["note"][:1] for e in events] == ["a", "b"]
    assert len({e["metadata"]["name"] for e in events}) == 2
    assert all(len(e["note"]) <= 1024 for e in events)
    assert all(r.status == 201 for r in kube_api.log(method="POST"))


def test_event_failures_are_logged_once_and_never_raised(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    sink = KubernetesEventSink(
        kube_client, TargetRef("deployment", "flink-taskmanager", "default"), clock=SimulatedClock(5.5)
    )
    kube_api.inject("/events", status=403, times=2)
    with capture_logs() as logs:
        sink.emit(reason="Rescaled", message="x")
        sink.emit(reason="Rescaled", message="y")
        sink.emit(reason="Rescaled", message="z")
    failed = [e for e in logs if e["event"] == "event.failed"]
    assert len(failed) == 1 and "events.k8s.io/events" in failed[0]["error"]
    assert [e["event"] for e in logs].count("event.recovered") == 1
    assert [e["note"] for e in kube_api.events] == ["z"]


def test_kube_config_problems_are_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(KubeConfigError) as raised:
        api_client(ScaleTargetSettings(kind="deployment", kubeconfig=str(missing)))
    assert str(missing) in str(raised.value) and "\n" not in str(raised.value)
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    with pytest.raises(KubeConfigError) as raised:
        api_client(ScaleTargetSettings(kind="deployment", kubeconfig=str(broken)))
    assert "\n" not in str(raised.value)
    with pytest.raises(KubeConfigError) as raised:
        api_client(ScaleTargetSettings(kind="deployment"))  # no service account here
    assert "in-cluster" in str(raised.value)


def test_non_kubernetes_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="scale_target.kind"):
        TargetRef.from_settings(ScaleTargetSettings(kind="simulated"))


@given(
    attempt=st.integers(0, 20),
    base=st.floats(0.01, 5),
    cap=st.floats(0.1, 60),
    retry_after=st.none() | st.floats(0, 600),
    seed=st.integers(0, 2**32),
)
def test_backoff_delay_is_jittered_exponential_and_capped(
    attempt: int, base: float, cap: float, retry_after: float | None, seed: int
) -> None:
    backoff = Backoff(base_s=base, cap_s=cap, rng=random.Random(seed))
    delay = backoff.delay(attempt, retry_after)
    ceiling = min(cap, base * 2**attempt)
    assert delay <= max(ceiling, cap if retry_after is not None else ceiling) + 1e-9
    assert delay <= cap + 1e-9
    assert delay >= ceiling / 2 - 1e-9
    if retry_after is not None:
        assert delay >= min(cap, retry_after) - 1e-9
