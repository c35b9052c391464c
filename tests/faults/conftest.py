"""Fixtures of the fault-matrix tests: the loopback fakes and real Prometheus, as plain imports."""

from collections.abc import Iterator

import pytest

from tests.fakes.prometheus_api import FakePrometheus
from tests.fixtures.k8s import kube_api, kube_client, kubeconfig  # noqa: F401


@pytest.fixture
def fake_prometheus() -> Iterator[FakePrometheus]:
    """A started canned Prometheus HTTP API on loopback."""
    fake = FakePrometheus().start()
    try:
        yield fake
    finally:
        fake.stop()
