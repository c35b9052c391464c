"""The safeguards on real Flink (2.3 and 1.20): the memory guard's series, and ``perdix run`` held or capped by them.

A real session cluster with Flink's Prometheus reporter, scraped by a real Prometheus, and the test job running
at parallelism 3 (it allocates, so the collectors run). Read through the agent's own PrometheusMonitor with the
shipped JVM_MEMORY_QUERIES, every TaskManager the REST API lists must answer a heap usage in (0, 1) and a GC time
in [0, 1]; the memory pressure the guard judges is the worst of them. The quota reads the TaskManagers'
resources per slot from the same REST API. Then ``perdix run`` on the flink-rest target, behind a recording
proxy, with a policy that wants 2: a heap threshold below the real heap usage and a blocked period around now
each hold it (no write reaches Flink), and a slot quota of 2 under a policy that wants 3 plans 2 and rescales.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.execute.flink_rest import FlinkRestScaler
from agent.monitor.prometheus import PrometheusMonitor
from agent.safeguards import memory_pressure
from agent.settings import JVM_MEMORY_QUERIES, PrometheusSettings, PromQLQueries, ScaleTargetSettings
from lab.flink.agent_process import PerdixProcess
from tests.fixtures.flink import FlinkCluster, poll, rest_get
from tests.fixtures.prometheus import PrometheusServer
from tests.flink.conftest import both_flink_versions
from tests.flink.proxy import RecordingProxy

pytestmark = [pytest.mark.e2e, both_flink_versions]

JOB_NAME = "perdix-memory-metrics"


@pytest.fixture(scope="module")
def job(flink_cluster: FlinkCluster) -> Iterator[str]:
    job_id = flink_cluster.submit(name=JOB_NAME, parallelism=3, rows_per_second=5000)
    try:
        yield job_id
    finally:
        flink_cluster.cancel(job_id)


@pytest.fixture(scope="module")
def prometheus(
    flink_cluster: FlinkCluster, job: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-memory"), flink_cluster.metrics_targets)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def test_heap_and_gc_time_of_every_taskmanager(
    flink_cluster: FlinkCluster, job: str, prometheus: PrometheusServer
) -> None:
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


def agent_settings(
    prometheus: PrometheusServer, proxy: RecordingProxy, workdir: Path, **safeguards: Any
) -> dict[str, Any]:
    """``perdix run`` on the flink-rest target with the static policy at 2 (the job runs at 3) and ``safeguards``."""
    return {
        "policy": "static",
        "loop_interval_s": 3.0,
        "min_parallelism": 1,
        "max_parallelism": 3,
        "static_parallelism": 2,
        "grace_period_s": 0.0,
        "recent_rescale_window_s": 0.0,
        "scale_down_stabilization_s": 0.0,
        "forecast_horizon_s": 60,
        "forecast_window_s": 60,
        "checkpoint_interval_s": 5.0,
        "prometheus": {
            "url": prometheus.url,
            "timeout_s": 5.0,
            "rate_window_s": 20,
            "queries": dict(JVM_MEMORY_QUERIES),
        },
        "scale_target": {"kind": "flink-rest", "rest_url": proxy.url, "job": JOB_NAME, "request_timeout_s": 5.0},
        "knowledge": {"path": str(workdir / "knowledge.json")},
        "telemetry": {"log_format": "json", "log_level": "info", "metrics_port": 0},
        "safeguards": {"reports": {"interval_s": 3600.0}, **safeguards},
    }


def running_at(flink_cluster: FlinkCluster, job_id: str) -> set[int]:
    details = flink_cluster.job(job_id)
    assert details is not None
    return {v["parallelism"] for v in details["vertices"]}


def held_rounds(agent: PerdixProcess, code: str) -> dict[str, Any]:
    """Wait for the report of ``code`` and two more rounds held by it; the report."""
    report = agent.wait_for(
        lambda e: e.get("event") == "decision.vetoed" and e.get("code") == code,
        timeout_s=90,
        what=f"a decision vetoed by {code}",
    )
    rounds = 0

    def held(event: dict[str, Any]) -> bool:
        nonlocal rounds
        if (
            event.get("event") == "loop"
            and event.get("code") == "vetoed"
            and event.get("timestamp", "") > report["timestamp"]
        ):
            rounds += 1
        return rounds >= 2

    agent.wait_for(held, timeout_s=30, what="two more held rounds")
    return report


def test_perdix_run_holds_a_scale_in_while_the_heap_is_above_its_threshold(
    flink_cluster: FlinkCluster, job: str, prometheus: PrometheusServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    # The TaskManagers' heaps are some 10 % full: a threshold of 1 % is exceeded on every round.
    settings = agent_settings(prometheus, proxy, tmp_path, memory={"heap_usage_threshold": 0.01})
    with PerdixProcess(tmp_path, settings, dry_run=False) as agent:
        report = held_rounds(agent, "memory-pressure")
        code = agent.stop()
    assert code == 0, agent.tail()
    assert (report["from"], report["to"]) == (3, 2) and 0.01 < report["heap_usage"] < 1, report
    assert report["taskmanager"] and report["heap_usage_threshold"] == 0.01
    assert proxy.writes() == [] and running_at(flink_cluster, job) == {3}


def test_perdix_run_holds_a_rescale_within_a_blocked_period(
    flink_cluster: FlinkCluster, job: str, prometheus: PrometheusServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    period = f"{(now - timedelta(minutes=30)):%H:%M}-{(now + timedelta(minutes=30)):%H:%M}"
    settings = agent_settings(prometheus, proxy, tmp_path, blocked_periods={"periods": [period], "time_zone": "UTC"})
    with PerdixProcess(tmp_path, settings, dry_run=False) as agent:
        report = held_rounds(agent, "blocked-period")
        code = agent.stop()
    assert code == 0, agent.tail()
    assert report["period"] == period and (report["from"], report["to"]) == (3, 2), report
    assert proxy.writes() == [] and running_at(flink_cluster, job) == {3}


def test_perdix_run_plans_within_the_slot_quota(
    flink_cluster: FlinkCluster, job: str, prometheus: PrometheusServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    # The static policy wants max_parallelism (3, what the job runs at); the quota allows 2 slots.
    settings = agent_settings(prometheus, proxy, tmp_path, quota={"slots": 2})
    settings["static_parallelism"] = None
    with PerdixProcess(tmp_path, settings, dry_run=False) as agent:
        capped = agent.wait_for(lambda e: e.get("event") == "planner.capped", timeout_s=60, what="the quota's cap")
        rescale = agent.wait_for(lambda e: e.get("event") == "rescale", timeout_s=90, what="a rescale")
        code = agent.stop()
    assert code == 0, agent.tail()
    assert capped["max_parallelism"] == 2 and "quota" in capped["error"]
    assert (rescale["from"], rescale["to"], rescale["confirmed"]) == (3, 2, 2)
    assert running_at(flink_cluster, job) == {2}
