"""The lab cluster's start makes sure every process reports to Prometheus (real Flink, clusters of their own).

A TaskManager can lose its metrics: when the port chosen for its Prometheus reporter is taken before the JVM
binds it, the reporter logs a warning and reports nowhere, the TaskManager runs on, and every scenario
after it waits in vain for its scrape target. The start waits for each reporter and replaces a
TaskManager whose reporter is silent; a silent JobManager fails the start with its port named. Here the
port is taken on purpose, by a socket held open. About twenty seconds with clusters of their own, so they run
in the main suite beside the real-Flink scenarios (scripts/install-flink.sh serialises a first install).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.flink.cluster import FlinkLabError, FlinkProcess, rest_get
from tests.fixtures.flink import FlinkCluster

FAST = {"heartbeat.interval": "1 s", "heartbeat.timeout": "4 s"}


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port held by a listening socket of this process for the whole test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


class TakenPort(FlinkCluster):
    """A cluster that hands ``role`` a reporter port some other socket already holds."""

    def __init__(self, workdir: Path, role: str, port: int, *, taskmanagers: int = 1) -> None:
        super().__init__(workdir, taskmanagers=taskmanagers, extra_config=FAST)
        self.taken_role, self.taken_port = role, port
        self.default_timeout_s = self.reporter_timeout_s

    def _start(self, role: str, script: str, metrics_port: int | None = None) -> FlinkProcess:
        return super()._start(role, script, self.taken_port if role == self.taken_role else metrics_port)

    def await_reporter(self, proc: FlinkProcess) -> bool:
        """The silent reporter is given up on after 3 s; the others keep the default time to answer (on loaded
        cores a JobManager's reporter took longer than 3 s)."""
        self.reporter_timeout_s = 3.0 if proc.role == self.taken_role else self.default_timeout_s
        try:
            return super().await_reporter(proc)
        finally:
            self.reporter_timeout_s = self.default_timeout_s


def test_a_taskmanager_whose_reporter_is_silent_is_replaced(tmp_path: Path, held_port: int) -> None:
    cluster = TakenPort(tmp_path, "taskmanager-0", held_port)
    try:
        cluster.start()
        assert [p.role for p in cluster.processes] == ["jobmanager", "taskmanager-1"]
        assert held_port not in [p.metrics_port for p in cluster.processes]
        assert all(cluster.await_reporter(p) for p in cluster.processes)
        overview = rest_get(f"{cluster.rest_url}/overview")
        assert overview and overview["taskmanagers"] == 1 and overview["slots-total"] == 1, overview
        logs = sorted(path.name for path in (tmp_path / "log").glob("flink-*.log"))
        assert [name.split("-")[1:3] for name in logs] == [
            ["jobmanager", "standalonesession"],
            ["taskmanager", "0"],
            ["taskmanager", "1"],
        ], logs
    finally:
        cluster.stop()


def test_a_silent_jobmanager_reporter_fails_the_start_and_stops_the_cluster(tmp_path: Path, held_port: int) -> None:
    cluster = TakenPort(tmp_path, "jobmanager", held_port, taskmanagers=0)
    with pytest.raises(FlinkLabError, match=f"JobManager's Prometheus reporter does not answer on port {held_port}"):
        cluster.start()
    assert cluster.processes == []
