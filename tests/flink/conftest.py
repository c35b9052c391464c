"""The real Flink cluster (session scope, shared by the modules here), and the recording proxy in front of it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.flink import FlinkCluster, flink_cluster  # noqa: F401  (fixture)
from tests.flink.proxy import RecordingProxy


@pytest.fixture
def proxy(flink_cluster: FlinkCluster) -> Iterator[RecordingProxy]:  # noqa: F811  (the fixture above)
    """A recording proxy in front of the cluster's REST API: what the agent talks to instead of the JobManager."""
    recording = RecordingProxy(flink_cluster.rest_url).start()
    try:
        yield recording
    finally:
        recording.stop()
