"""Contract tests: every Scaler and every KnowledgeStore implementation passes the same cases.

The Kubernetes implementations run through the official client against the loopback fake API, the
others in process; a behaviour the loop relies on must hold for all of them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kubernetes import client as k8s

from agent.execute.kubernetes import Backoff, KubernetesScaler
from agent.knowledge.configmap import KEY, ConfigMapKnowledgeStore
from agent.knowledge.document import SCHEMA_VERSION
from agent.knowledge.file import FileKnowledgeStore
from agent.ports import KnowledgeStore, Scaler
from agent.settings import ScaleTargetSettings
from lab.simulated import SimulatedScaler
from simulator import SimulatedFlinkJob, SimulatorSettings, Trace
from tests.fakes.kube_api import FakeKubeAPI

SCALERS = ["simulated", "deployment", "statefulset", "flinkdeployment"]
NAMES = {"deployment": "flink-taskmanager", "statefulset": "flink-taskmanager-sts", "flinkdeployment": "flink-job"}


@pytest.fixture(params=SCALERS)
def scaler(request: pytest.FixtureRequest, kube_api: FakeKubeAPI, kube_client: k8s.ApiClient) -> Scaler:
    """A scaler whose target runs at 3."""
    kind = request.param
    if kind == "simulated":
        trace = Trace("flat", np.array([0.0, 3600.0]), np.array([1000.0, 1000.0]))
        job = SimulatedFlinkJob(trace, SimulatorSettings(initial_parallelism=3, partitions=12))
        return SimulatedScaler(job)
    target = ScaleTargetSettings(kind=kind, name=NAMES[kind])
    return KubernetesScaler(target, kube_client, None, backoff=Backoff(sleep=lambda s: None, rng=random.Random(0)))


def test_scaler_reports_the_current_scale_out(scaler: Scaler) -> None:
    assert scaler.current_parallelism() == 3


def test_scaler_rescale_is_confirmed_and_visible(scaler: Scaler) -> None:
    result = scaler.rescale(5, reasons=("contract",), dry_run=False)
    assert (result.requested, result.confirmed, result.dry_run) == (5, 5, False)
    assert scaler.current_parallelism() == 5
    result = scaler.rescale(2, reasons=("contract",), dry_run=False)
    assert result.confirmed == 2 and scaler.current_parallelism() == 2


def test_scaler_dry_run_changes_nothing(scaler: Scaler) -> None:
    result = scaler.rescale(7, reasons=("contract",), dry_run=True)
    assert result.dry_run and result.requested == 7
    assert scaler.current_parallelism() == 3


@dataclass
class StoreCase:
    """A store plus the two test-only operations the contract needs on its backing storage."""

    store: KnowledgeStore
    write_raw: Callable[[str], None]
    everything_stored: Callable[[], str]
    reopen: Callable[[], KnowledgeStore]


@pytest.fixture(params=["file", "configmap"])
def store_case(
    request: pytest.FixtureRequest, tmp_path: Path, kube_api: FakeKubeAPI, kube_client: k8s.ApiClient
) -> Iterator[StoreCase]:
    if request.param == "file":
        path = tmp_path / "knowledge.json"

        def everything_file() -> str:
            return "\n".join(p.read_text() for p in sorted(tmp_path.iterdir()) if p.is_file())

        yield StoreCase(FileKnowledgeStore(path), path.write_text, everything_file, lambda: FileKnowledgeStore(path))
        return
    kube_api.add_configmap("perdix-knowledge")

    def make() -> ConfigMapKnowledgeStore:
        return ConfigMapKnowledgeStore(
            kube_client, name="perdix-knowledge", namespace="default", backoff=Backoff(sleep=lambda s: None)
        )

    def write_raw(raw: str) -> None:
        kube_api.touch_configmap("perdix-knowledge", KEY, raw)

    def everything_cm() -> str:
        cm = kube_api.configmap("perdix-knowledge") or {}
        return "\n".join(cm.get("data", {}).values())

    yield StoreCase(make(), write_raw, everything_cm, make)


DOCUMENT: dict[str, Any] = {
    "version": SCHEMA_VERSION,
    "analyzer": {},
    "loop": {"last_rescale_at": 12.0, "recommendations": [[1.5, 2], [2.5, 3]]},
}


def test_store_starts_empty(store_case: StoreCase) -> None:
    assert store_case.store.load() is None


def test_store_round_trips_and_overwrites(store_case: StoreCase) -> None:
    store_case.store.load()
    store_case.store.save(DOCUMENT)
    assert store_case.reopen().load() == DOCUMENT
    newer = {**DOCUMENT, "loop": {"last_rescale_at": 99.0}}
    store_case.store.save(newer)
    assert store_case.reopen().load() == newer


UNUSABLE = [
    "{truncated",
    json.dumps({"version": SCHEMA_VERSION + 5}),
    # Parses, but a field does not fit its schema: a count that is a string, a NaN, an unknown key.
    json.dumps({**DOCUMENT, "loop": {"last_rescale_at": "12"}}),
    '{"version": 1, "analyzer": {}, "loop": {"last_rescale_at": NaN}}',
    json.dumps({**DOCUMENT, "extra": 1}),
]


@pytest.mark.parametrize("raw", UNUSABLE)
def test_store_moves_an_unusable_document_aside_and_never_deletes_it(store_case: StoreCase, raw: str) -> None:
    store_case.write_raw(raw)
    store = store_case.reopen()
    assert store.load() is None
    assert raw in store_case.everything_stored()
    store.save(DOCUMENT)
    assert raw in store_case.everything_stored()
    assert store_case.reopen().load() == DOCUMENT
