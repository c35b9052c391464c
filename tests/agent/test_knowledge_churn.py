"""Knowledge stays bounded under pod churn: 1,000+ pod names through the real loop and ConfigMap store.

Two agents replay the same two hours of bank_calls, their workers renamed to fresh Deployment-style
pod names every round (tests/fakes/churn.py): one forgets workers unseen for 10 minutes (and keeps
at most 4 x max_parallelism), the other forgets nothing (the code before pruning). The stored
document of the first stays under 256 KiB while the second's grows past it, and every capacity
estimate of every round agrees within 1 %.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s

import agent.analyze.capacity
from agent.knowledge.configmap import KEY, ConfigMapKnowledgeStore
from agent.knowledge.document import encode_document
from agent.ports import KnowledgeStore
from lab.replay import MemoryKnowledgeStore, Replay
from lab.settings import load_lab_settings
from simulator import load_trace
from tests.conftest import TRACES
from tests.fakes.churn import ChurningMonitor
from tests.fakes.kube_api import FakeKubeAPI
from tests.fixtures.k8s import kube_api, kube_client, kubeconfig  # noqa: F401  (fixtures)

LIMIT_BYTES = 256 * 1024


def churned_run(store: KnowledgeStore, *, retention_s: float) -> tuple[Replay, ChurningMonitor]:
    settings = load_lab_settings(None, {"worker_retention_s": retention_s})
    run = Replay(load_trace(TRACES / "bank_calls.csv"), settings, hours=2, knowledge=store)
    churn = ChurningMonitor(run.monitor)
    run.monitor = run.agent.monitor = churn
    run.run()
    return run, churn


def stored(kube: FakeKubeAPI, configmap: str) -> tuple[int, dict[str, Any]]:
    text = kube.configmap(configmap)["data"][KEY]
    return len(text.encode()), json.loads(text)


def test_a_thousand_pod_names_leave_the_stored_knowledge_bounded_and_the_capacities_unchanged(
    kube_api: FakeKubeAPI,
    kube_client: k8s.ApiClient,
    monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    pruned, churn = churned_run(
        ConfigMapKnowledgeStore(kube_client, name="perdix-knowledge", namespace="default"), retention_s=600.0
    )
    with monkeypatch.context() as patch:
        patch.setattr(agent.analyze.capacity, "WORKERS_KEPT_PER_SCALE_OUT", 10**9)
        reference_store = MemoryKnowledgeStore()
        unpruned, _ = churned_run(reference_store, retention_s=30 * 86400.0)  # the longest allowed: never, in two hours

    assert len(churn.names_seen) >= 1000
    size, document = stored(kube_api, "perdix-knowledge")
    unpruned_document = reference_store.load()
    assert unpruned_document is not None
    unpruned_size = len(encode_document(unpruned_document).encode())
    assert size < LIMIT_BYTES
    assert unpruned_size > LIMIT_BYTES  # what pruning prevents
    kept = document["analyzer"]["capacity"]["regressions"]
    assert len(kept) <= 4 * pruned.settings.max_parallelism
    assert len(unpruned_document["analyzer"]["capacity"]["regressions"]) == len(churn.names_seen)
    # What the forgotten workers taught is still there: the capacity observed per scale-out.
    assert document["analyzer"]["capacity"]["observed"] == unpruned_document["analyzer"]["capacity"]["observed"]

    assert len(pruned.rounds) == len(unpruned.rounds)
    worst = 0.0
    for mine, reference in zip(pruned.rounds, unpruned.rounds):
        assert mine.analysis is not None and reference.analysis is not None
        for n, capacity in reference.analysis.capacities.items():
            ours = mine.analysis.capacities[n]
            assert (ours is None) == (capacity is None), n
            if capacity is not None and ours is not None:
                worst = max(worst, abs(ours - capacity) / capacity)
        assert mine.decision is not None and reference.decision is not None
        assert mine.decision.target_parallelism == reference.decision.target_parallelism
    assert worst <= 0.01
    assert all(r.knowledge is not None and r.knowledge.failure is None for r in pruned.rounds)
    assert max(r.knowledge.size_bytes or 0 for r in pruned.rounds if r.knowledge) < LIMIT_BYTES
