"""The memory-pressure guard's queries on real Flink (2.3 and 1.20): heap and GC time for every TaskManager.

A real session cluster with Flink's Prometheus reporter, scraped by a real Prometheus, and the test job running
(it allocates, so the collectors run): read through the agent's own PrometheusMonitor with the shipped
JVM_MEMORY_QUERIES, every TaskManager the REST API lists must answer a heap usage in (0, 1) and a GC time in
[0, 1]; the memory pressure the guard judges is the worst of them. The quota reads the TaskManagers' resources
per slot from the same REST API.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

from agent.execute.flink_rest import FlinkRestScaler
from agent.monitor.prometheus import PrometheusMonitor
from agent.safeguards import memory_pressure
from agent.settings import JVM_MEMORY_QUERIES, PrometheusSettings, PromQLQueries, ScaleTargetSettings
from tests.fixtures.flink import FlinkCluster, poll, rest_get
from tests.fixtures.prometheus import PrometheusServer
from tests.flink.conftest import both_flink_versions

pytestmark = [pytest.mark.e2e, both_flink_versions]


@pytest.fixture(scope="module")
def job(flink_cluster: FlinkCluster) -> Iterator[str]:
    job_id = flink_cluster.submit(name="perdix-memory-metrics", parallelism=3, rows_per_second=5000)
    try:
        yield job_id
    finally:
        flink_cluster.cancel(job_id)


@pytest.fixture(scope="module")
def prometheus(flink_cluster: FlinkCluster, job: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-memory"), flink_cluster.metrics_targets)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def test_heap_and_gc_time_of_every_taskmanager(flink_cluster: FlinkCluster, job: str, prometheus: PrometheusServer) -> None:
    queries = PromQLQueries(**JVM_MEMORY_QUERIES)
    settings = PrometheusSettings(url=prometheus.url, rate_window_s=20, queries=queries)
    only_memory = frozenset(name for name in queries.model_dump() if name not in JVM_MEMORY_QUERIES)
    monitor = PrometheusMonitor(settings, skip=only_memory)
    taskmanagers = rest_get(f"{flink_cluster.rest_url}/taskmanagers")["taskmanagers"]
    assert len(taskmanagers) == 3

    def answered() -> bool:
        now = time.time()
        seen = monitor.observe(since=now - 10, now=now)
        return len(seen.taskmanager_heap_usage) == 3 and len(seen.taskmanager_gc_pressure) == 3

    poll(answered, timeout_s=60, interval_s=2.0, what="heap and GC series of three TaskManagers")
    now = time.time()
    seen = monitor.observe(since=now - 10, now=now)
    assert not seen.gaps, seen.gaps
    # One series per TaskManager, named by the reporter's tm_id (the REST id with '.' and '-' written as '_').
    rest_ids = {tm["id"].replace("-", "_").replace(".", "_") for tm in taskmanagers}
    assert set(seen.taskmanager_heap_usage) == rest_ids == set(seen.taskmanager_gc_pressure)
    for taskmanager, heap in seen.taskmanager_heap_usage.items():
        finite = heap[np.isfinite(heap)]
        assert finite.size and ((finite > 0) & (finite < 1)).all(), (taskmanager, heap)
    for taskmanager, gc in seen.taskmanager_gc_pressure.items():
        finite = gc[np.isfinite(gc)]
        assert finite.size and ((finite >= 0) & (finite <= 1)).all(), (taskmanager, gc)
    pressure = memory_pressure(seen)
    assert pressure.heap_taskmanager in rest_ids and 0 < (pressure.heap_usage or 0) < 1
    assert pressure.gc_taskmanager in rest_ids and pressure.gc_pressure is not None and 0 <= pressure.gc_pressure <= 1
    print({tm: round(float(np.nanmean(s)), 3) for tm, s in seen.taskmanager_heap_usage.items()}, pressure)


def test_the_quota_reads_cpu_and_memory_per_slot(flink_cluster: FlinkCluster, job: str) -> None:
    scaler = FlinkRestScaler(ScaleTargetSettings(kind="flink-rest", rest_url=flink_cluster.rest_url, job=job))
    per_slot = scaler.slot_resources()
    taskmanager = rest_get(f"{flink_cluster.rest_url}/taskmanagers")["taskmanagers"][0]
    slots = taskmanager["slotsNumber"]
    assert per_slot is not None and per_slot.cpu == pytest.approx(taskmanager["totalResource"]["cpuCores"] / slots)
    process_mb = taskmanager["memoryConfiguration"]["totalProcessMemory"] / 2**20
    assert per_slot.memory_mb == pytest.approx(process_mb / slots)
    assert 0 < per_slot.cpu and 100 < per_slot.memory_mb < 64 * 1024
