"""The chart's Role is enough for the real adapters, and every permission it grants has a user.

The real KubernetesScaler, KubernetesEventSink and ConfigMapKnowledgeStore, configured from the
settings file the chart renders, run through the official client against a loopback API that
authorizes each request with the rendered Role (tests/helm/rbac_api.py). test_chart_objects checks
the Role is no larger than the least-privilege set; this checks it is not smaller.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from agent.clock import SimulatedClock
from agent.execute.kubernetes import Backoff, KubernetesEventSink, KubernetesScaler, TargetRef
from agent.knowledge.configmap import ConfigMapKnowledgeStore, KnowledgeStoreError
from agent.ports import ScalerError
from agent.settings import Settings, load_settings
from tests.helm.cases import CASES, Case
from tests.helm.chart import find, one, render, settings_yaml
from tests.helm.rbac_api import RbacAPI

INITIAL = 3
# Granted by the chart but unused by the current adapters: core Events (older tooling reads them) and
# `patch` on Events (for Event series). Kept because the least-privilege set names them.
GRANTED_FOR_EVENTS_ONLY = {("", "events", "create"), ("", "events", "patch"), ("events.k8s.io", "events", "patch")}


def no_sleep(_: float) -> None:
    """Backoff sleeps are not needed against a loopback server that never fails transiently."""


def backoff() -> Backoff:
    """Retries without waiting, deterministic jitter."""
    return Backoff(max_retries=2, sleep=no_sleep, rng=random.Random(3))


def load(objects: list[dict[str, Any]], tmp_path: Path) -> Settings:
    """The settings the chart renders, through the agent's loader."""
    path = tmp_path / "perdix.yaml"
    path.write_text(settings_yaml(objects))
    return load_settings(path)


def seed(api: RbacAPI, objects: list[dict[str, Any]], settings: Settings) -> None:
    """Put the scale target and the knowledge ConfigMap into the fake, as the chart or the operator made them."""
    target = settings.scale_target
    meta = {"name": target.name, "namespace": target.namespace}
    if target.kind == "flink-rest":
        pass  # Flink's REST API: nothing on Kubernetes to scale
    elif target.kind == "flinkdeployment":
        api.put(
            "flink.apache.org",
            "flinkdeployments",
            {
                "apiVersion": "flink.apache.org/v1beta1",
                "kind": "FlinkDeployment",
                "metadata": meta,
                "spec": {"job": {"parallelism": INITIAL, "upgradeMode": "savepoint"}},
            },
        )
    else:
        kind = {"deployment": "Deployment", "statefulset": "StatefulSet"}[target.kind]
        rendered = find(objects, kind, target.name)
        obj: dict[str, Any] = (
            rendered[0] if rendered else {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": {}}
        )
        obj["spec"]["replicas"] = INITIAL
        api.put("apps", f"{target.kind}s", obj)
    if settings.knowledge.store == "configmap":
        api.put("", "configmaps", one(objects, "ConfigMap", settings.knowledge.configmap))


# A case without a Role never calls Kubernetes (test_chart_objects checks it renders no token either).
WITH_ROLE = [case for case in CASES if case.expected_rules is not None]


@pytest.fixture(params=WITH_ROLE, ids=[case.id for case in WITH_ROLE])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Case, Settings, RbacAPI, k8s.ApiClient]]:
    """A fake API authorizing with the case's rendered Role, seeded with its objects."""
    case: Case = request.param
    objects = render(**case.render_kwargs())
    settings = load(objects, tmp_path)
    api = RbacAPI(one(objects, "Role")).start()
    seed(api, objects, settings)
    configuration = k8s.Configuration()
    configuration.host = api.url
    client = k8s.ApiClient(configuration)
    try:
        yield case, settings, api, client
    finally:
        client.close()
        api.stop()


def make_scaler(settings: Settings, client: k8s.ApiClient) -> KubernetesScaler:
    """The production scaler and event sink, configured from the rendered settings."""
    sink = KubernetesEventSink(
        client, TargetRef.from_settings(settings.scale_target), clock=SimulatedClock(1_700_000_000.0)
    )
    return KubernetesScaler(settings.scale_target, client, sink, backoff=backoff())


def test_the_role_lets_perdix_do_its_whole_job(cluster: tuple[Case, Settings, RbacAPI, k8s.ApiClient]) -> None:
    case, settings, api, client = cluster
    if settings.scale_target.kind != "flink-rest":  # Flink's REST API rescales without Kubernetes
        scaler = make_scaler(settings, client)
        assert scaler.current_parallelism() == INITIAL

        recommended = scaler.rescale(INITIAL + 2, reasons=("forecast peak needs 5",), dry_run=True)
        assert recommended.dry_run and recommended.confirmed == INITIAL
        assert not [r for r in api.requests if r.verb == "patch"], "dry-run wrote the scale target"

        done = scaler.rescale(INITIAL + 2, reasons=("forecast peak needs 5",), dry_run=False)
        assert done.confirmed == INITIAL + 2
        assert [event["reason"] for event in api.events] == ["RescaleRecommended", "Rescaled"]
        assert all(event["regarding"]["name"] == settings.scale_target.name for event in api.events)

    if settings.knowledge.store == "configmap":
        store = ConfigMapKnowledgeStore(
            client, name=settings.knowledge.configmap, namespace=settings.scale_target.namespace, backoff=backoff()
        )
        assert store.load() is None  # the chart created it empty
        # Two saves: the second updates the ConfigMap the first wrote (its resourceVersion).
        store.save({"version": 1, "analyzer": {}})
        store.save({"version": 1})
        assert ConfigMapKnowledgeStore(
            client, name=settings.knowledge.configmap, namespace=settings.scale_target.namespace, backoff=backoff()
        ).load() == {"version": 1}
        assert not [r for r in api.requests if r.resource == "configmaps" and r.verb == "create"]

    assert api.denied() == []
    used = {(r.group, r.resource, r.verb) for r in api.requests}
    assert case.expected_rules is not None
    granted = {(group, resource, verb) for (group, resource, _, verb) in case.expected_rules}
    assert used <= granted
    assert granted - used <= GRANTED_FOR_EVENTS_ONLY, (
        f"granted but never used: {granted - used - GRANTED_FOR_EVENTS_ONLY}"
    )


def test_a_role_without_the_scale_rule_is_reported_not_retried(tmp_path: Path) -> None:
    """Control: the fake does enforce the Role; a missing permission is a clear, non-retried error."""
    objects = render()
    settings = load(objects, tmp_path)
    role = one(objects, "Role")
    role["rules"] = [rule for rule in role["rules"] if not any(r.endswith("/scale") for r in rule["resources"])]
    api = RbacAPI(role).start()
    seed(api, objects, settings)
    configuration = k8s.Configuration()
    configuration.host = api.url
    client = k8s.ApiClient(configuration)
    try:
        scaler = make_scaler(settings, client)
        assert scaler.current_parallelism() is None
        with pytest.raises(ScalerError) as failure:
            scaler.rescale(INITIAL + 1, reasons=("test",), dry_run=False)
        assert failure.value.kind == "forbidden"
        assert "deployments/scale" in str(failure.value)
        scale_requests = [r for r in api.requests if r.resource == "deployments/scale"]
        assert scale_requests and not any(r.allowed for r in scale_requests)
        assert len(scale_requests) == 2, "a 403 must not be retried"
    finally:
        client.close()
        api.stop()


def test_a_role_without_the_configmap_rule_names_the_missing_verb(tmp_path: Path) -> None:
    objects = render()
    settings = load(objects, tmp_path)
    role = one(objects, "Role")
    role["rules"] = [rule for rule in role["rules"] if "configmaps" not in rule["resources"]]
    api = RbacAPI(role).start()
    seed(api, objects, settings)
    configuration = k8s.Configuration()
    configuration.host = api.url
    client = k8s.ApiClient(configuration)
    try:
        store = ConfigMapKnowledgeStore(
            client, name=settings.knowledge.configmap, namespace=settings.scale_target.namespace, backoff=backoff()
        )
        with pytest.raises(KnowledgeStoreError, match="'get'"):
            store.load()
    finally:
        client.close()
        api.stop()
