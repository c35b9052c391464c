"""The real Flink cluster (session scope, shared by the modules here) and the Prometheus fixtures."""

from tests.fixtures.flink import flink_cluster  # noqa: F401  (fixture)
