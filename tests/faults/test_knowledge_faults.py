"""Fault matrix, row 9: corrupt, truncated or future-version knowledge, through the Agent's start-up.

The store contract (tests/adapters/test_contracts.py) covers documents the store itself rejects
(truncated JSON, a newer version). Here the whole restart path runs over both real stores (file and
ConfigMap on the loopback API), including a document the store accepts but the models cannot restore
(a hand edit, a bug): it too is moved aside and logged before the first save could overwrite it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from agent.clock import SimulatedClock
from agent.knowledge.configmap import KEY, MAX_BYTES, ConfigMapKnowledgeStore
from agent.knowledge.document import SCHEMA_VERSION
from agent.loop import Agent, RoundStatus
from agent.rescales import Rescale, RescaleHistory
from agent.telemetry import Telemetry
from lab.replay import Replay
from lab.settings import load_lab_settings
from simulator import Trace
from tests.adapters.test_contracts import StoreCase, store_case  # noqa: F401  (the contract's store fixture)
from tests.fakes.kube_api import FakeKubeAPI

BAD = {
    "truncated": '{"version": 1, "analyzer": {"capacity": {"obs',
    "not an object": "[1, 2, 3]",
    "future version": json.dumps({"version": SCHEMA_VERSION + 1, "analyzer": {}, "loop": {}}),
    "unrestorable models": json.dumps({"version": SCHEMA_VERSION, "analyzer": {"capacity": {"oops": 1}}, "loop": {}}),
}


def agent_on(store: Any) -> tuple[Agent, Replay]:
    """An agent on a short replayed job whose knowledge lives in ``store``."""
    settings = load_lab_settings(None, {"simulator.initial_parallelism": 4, "max_parallelism": 8})
    flat = Trace("flat", np.array([0.0, 1800.0]), np.array([30_000.0, 30_000.0]))
    run = Replay(flat, settings, hours=0.5, knowledge=store)
    return run.agent, run


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_knowledge_is_moved_aside_logged_and_the_agent_starts_fresh(store_case: StoreCase, case: str) -> None:  # noqa: F811
    raw = BAD[case]
    store_case.write_raw(raw)
    with capture_logs() as logs:
        agent, run = agent_on(store_case.reopen())
    names = [e["event"] for e in logs]
    assert "knowledge.unusable" in names, names
    (unusable,) = [e for e in logs if e["event"] == "knowledge.unusable"]
    assert unusable["moved_to"] and unusable["reason"]
    assert agent.last_rescale_at is None and agent.rescales.to_list() == []
    assert "knowledge.restored" not in names

    run.run(until_s=180)  # rounds save the fresh knowledge over the main key
    stored = store_case.everything_stored()
    assert raw in stored, "the bad document was deleted"
    fresh = store_case.reopen().load()
    assert fresh is not None and fresh["version"] == SCHEMA_VERSION and fresh["loop"]["last_round_at"] == 180


def test_a_good_document_is_restored_not_moved(store_case: StoreCase) -> None:  # noqa: F811
    agent, run = agent_on(store_case.store)
    run.run(until_s=300)
    with capture_logs() as logs:
        restarted = Agent(
            settings=agent.settings,
            clock=SimulatedClock(300.0),
            monitor=run.monitor,
            scaler=run.scaler,
            knowledge=store_case.reopen(),
        )
    assert [e["event"] for e in logs] == ["knowledge.restored"]
    assert restarted.last_round_at == 300


class RecordedEvents:
    """EventSink that keeps what it was asked to emit."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []

    def emit(self, *, reason: str, message: str, type_: str = "Normal") -> None:
        self.emitted.append((reason, type_, message))


def test_a_document_over_the_configmap_limit_is_an_event_and_a_metric_and_the_last_good_one_stays(
    kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> None:
    store = ConfigMapKnowledgeStore(kube_client, name="perdix-knowledge", namespace="default")
    agent, run = agent_on(store)
    agent.events = sink = RecordedEvents()
    agent.telemetry = Telemetry(registry := CollectorRegistry())
    run.run(until_s=300)
    good = kube_api.configmap("perdix-knowledge")["data"][KEY]
    puts = len(kube_api.log(method="PUT"))

    # Whatever makes it grow (here 500 rescale records with long reasons), the document outgrows 1 MiB.
    agent.rescales = RescaleHistory(
        [Rescale(at=0.0, from_parallelism=4, to_parallelism=5, reasons=("x" * 3000,))] * 500
    )
    with capture_logs() as logs:
        run.run(until_s=600)
    grown = run.rounds[-5:]
    assert all(r.outcome.status is RoundStatus.COMPLETED for r in grown)  # the loop goes on
    assert [r.knowledge.failure if r.knowledge else None for r in grown] == ["too_large"] * 5
    assert kube_api.configmap("perdix-knowledge")["data"][KEY] == good  # the last good document stays
    assert len(kube_api.log(method="PUT")) == puts  # nothing oversize was even sent
    assert [(reason, type_) for reason, type_, _ in sink.emitted] == [("KnowledgeNotSaved", "Warning")]
    assert "1048576 byte ConfigMap limit" in sink.emitted[0][2]
    assert registry.get_sample_value("perdix_knowledge_save_failures_total", {"kind": "too_large"}) == 5
    assert (registry.get_sample_value("perdix_knowledge_bytes") or 0) > MAX_BYTES
    assert [e["kind"] for e in logs if e["event"] == "knowledge.save_failed"] == ["too_large"] * 5

    agent.rescales = RescaleHistory()
    with capture_logs() as logs:
        run.run(until_s=660)
    assert "knowledge.save_recovered" in [e["event"] for e in logs]
    assert json.loads(kube_api.configmap("perdix-knowledge")["data"][KEY])["loop"]["last_round_at"] == 660
    assert (registry.get_sample_value("perdix_knowledge_bytes") or 0) < MAX_BYTES
