"""ConfigMapKnowledgeStore through the official client against the fake API: resourceVersion conflicts, move-aside."""

from __future__ import annotations

import json
import random

import pytest
from kubernetes import client as k8s
from structlog.testing import capture_logs

from agent.execute.kubernetes import Backoff
from agent.knowledge.configmap import KEY, ConfigMapKnowledgeStore, KnowledgeStoreError
from agent.knowledge.document import SCHEMA_VERSION, KnowledgeTooLarge
from tests.fakes.kube_api import FakeKubeAPI

DOC = {"version": SCHEMA_VERSION, "analyzer": {}, "loop": {"rescales": [], "recommendations": [[10.0, 3]]}}


def make_store(api: k8s.ApiClient, name: str = "perdix-knowledge", max_retries: int = 4) -> ConfigMapKnowledgeStore:
    return ConfigMapKnowledgeStore(
        api,
        name=name,
        namespace="default",
        backoff=Backoff(max_retries=max_retries, sleep=lambda s: None, rng=random.Random(3)),
    )


def test_fresh_start_creates_the_configmap_and_round_trips(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    store = make_store(kube_client)
    assert store.load() is None
    store.save(DOC)
    assert json.loads(kube_api.configmap("perdix-knowledge")["data"][KEY]) == DOC
    assert make_store(kube_client).load() == DOC


def test_the_chart_s_empty_configmap_is_updated_with_its_resource_version(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> None:
    kube_api.add_configmap("perdix-knowledge")
    store = make_store(kube_client)
    assert store.load() is None
    store.save(DOC)
    second = {**DOC, "loop": {"rescales": [{"at": 60.0, "from": 3, "to": 4}]}}
    store.save(second)
    puts = kube_api.log(method="PUT")
    assert [r.status for r in puts] == [200, 200]
    assert all(r.body["metadata"]["resourceVersion"] for r in puts)
    assert kube_api.log(method="POST") == []  # the Role has no `create`: the chart made it
    assert make_store(kube_client).load() == second


def test_a_concurrent_writer_causes_a_conflict_then_a_reread_and_its_keys_survive(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> None:
    kube_api.add_configmap("perdix-knowledge")
    store = make_store(kube_client)
    store.load()
    store.save(DOC)
    kube_api.touch_configmap("perdix-knowledge", "note", "written by someone else")

    with capture_logs() as logs:
        store.save({**DOC, "loop": {"rescales": [{"at": 60.0, "from": 3, "to": 5}]}})

    assert [r.status for r in kube_api.log(method="PUT")] == [200, 409, 200]
    data = kube_api.configmap("perdix-knowledge")["data"]
    assert data["note"] == "written by someone else"
    assert json.loads(data[KEY])["loop"]["rescales"] == [{"at": 60.0, "from": 3, "to": 5}]
    assert any(e["event"] == "knowledge.conflict" for e in logs)


def test_persistent_conflicts_give_up_after_the_retries(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    kube_api.add_configmap("perdix-knowledge")
    store = make_store(kube_client, max_retries=2)
    store.load()
    kube_api.inject("/configmaps/perdix-knowledge", method="PUT", status=409, times=None)
    with pytest.raises(KnowledgeStoreError, match="perdix-knowledge"):
        store.save(DOC)
    assert len(kube_api.log(method="PUT")) == 3


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ('{"version": 1, "analyzer": {', "truncated JSON"),
        ("not json at all", "corrupt"),
        (json.dumps({"version": SCHEMA_VERSION + 1, "analyzer": {}}), "newer"),
        (json.dumps([1, 2, 3]), "expected a JSON object"),
    ],
)
def test_an_unusable_document_is_moved_aside_never_deleted(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient, raw: str, why: str
) -> None:
    kube_api.add_configmap("perdix-knowledge", {KEY: raw, "other": "kept"})
    store = make_store(kube_client)
    with capture_logs() as logs:
        assert store.load() is None
    data = kube_api.configmap("perdix-knowledge")["data"]
    assert KEY not in data
    assert data["knowledge.bad-0.json"] == raw
    assert data["other"] == "kept"
    (warning,) = [e for e in logs if e["event"] == "knowledge.unusable"]
    assert warning["moved_to"] == "knowledge.bad-0.json"
    store.save(DOC)
    data = kube_api.configmap("perdix-knowledge")["data"]
    assert data["knowledge.bad-0.json"] == raw and json.loads(data[KEY]) == DOC


def test_a_second_bad_document_gets_its_own_key(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    kube_api.add_configmap("perdix-knowledge", {KEY: "bad one", "knowledge.bad-0.json": "older bad one"})
    assert make_store(kube_client).load() is None
    data = kube_api.configmap("perdix-knowledge")["data"]
    assert (data["knowledge.bad-0.json"], data["knowledge.bad-1.json"]) == ("older bad one", "bad one")


def test_a_document_never_loaded_is_kept_aside_before_the_first_save(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> None:
    previous = json.dumps(DOC)
    kube_api.add_configmap("perdix-knowledge", {KEY: previous})
    store = make_store(kube_client, max_retries=0)
    kube_api.inject("/configmaps/perdix-knowledge", method="GET", status=503, times=1)
    with pytest.raises(KnowledgeStoreError):
        store.load()  # the loop starts fresh after this
    store.save({"version": SCHEMA_VERSION, "analyzer": {}, "loop": {}})
    data = kube_api.configmap("perdix-knowledge")["data"]
    assert data["knowledge.aside-0.json"] == previous


def test_forbidden_names_the_configmap_and_the_verb(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    kube_api.inject("/configmaps/perdix-knowledge", method="GET", status=403, times=None)
    with pytest.raises(KnowledgeStoreError) as raised:
        make_store(kube_client).load()
    message = str(raised.value)
    assert "default/perdix-knowledge" in message and "'get'" in message and "\n" not in message
    assert len(kube_api.log(method="GET")) == 1


def test_an_oversized_document_is_refused_before_any_write(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    store = make_store(kube_client)
    with pytest.raises(KnowledgeTooLarge, match="1048576 byte ConfigMap limit") as raised:
        store.save({"version": 1, "blob": "x" * (1024 * 1024 + 1)})
    assert raised.value.size_bytes > raised.value.limit_bytes == 1024 * 1024
    assert [r for r in kube_api.log() if r.is_write] == []


def test_moved_aside_documents_count_against_the_limit(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    # A moved-aside document of 600 KB and a live one of 500 KB do not fit one ConfigMap together.
    kube_api.add_configmap("perdix-knowledge", data={"knowledge.bad-0.json": "y" * 600_000})
    store = make_store(kube_client)
    store.load()
    with pytest.raises(KnowledgeTooLarge, match="the ConfigMap with this document would hold"):
        store.save({"version": 1, "blob": "x" * 500_000})
    assert kube_api.log(method="PUT") == []
    assert KEY not in kube_api.configmap("perdix-knowledge")["data"]


def test_a_missing_configmap_that_may_not_be_created_says_so(kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> None:
    kube_api.inject("/configmaps", method="POST", status=403, times=None)
    store = make_store(kube_client)
    assert store.load() is None
    with pytest.raises(KnowledgeStoreError, match="does not exist and may not be created"):
        store.save(DOC)
    assert len(kube_api.log(method="POST")) == 1


def test_a_bad_document_with_no_key_left_to_move_it_to_stops_the_agent_and_stays(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> None:
    """A document nested past the parser, beside a thousand moved-aside ones: neither usable nor movable, so
    loading it is an error naming the ConfigMap (the daemon exits 2 on it), and the document stays as it was."""
    from agent.knowledge.document import KnowledgeUnrecoverable

    raw = "[" * 100_000 + "]" * 100_000
    data = {KEY: raw, **{f"knowledge.bad-{n}.json": "{}" for n in range(1000)}}
    kube_api.add_configmap("perdix-knowledge", data)
    with pytest.raises(KnowledgeUnrecoverable, match="perdix-knowledge.*too many moved-aside.*move or remove it"):
        make_store(kube_client).load()
    assert kube_api.configmap("perdix-knowledge")["data"][KEY] == raw
