"""Fixtures of the adapter tests: the fake Kubernetes API and a real Prometheus (as plain imports)."""

from tests.fixtures.k8s import kube_api, kube_client, kubeconfig  # noqa: F401
from tests.fixtures.prometheus import prometheus, tiny_exporter  # noqa: F401
