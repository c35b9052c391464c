"""End to end on a real Flink: the real Prometheus scrapes the real cluster, ``perdix run`` rescales the real job.

Parts: the Flink 2.3 session cluster of tests/fixtures/flink.py (adaptive scheduler, three one-slot
TaskManagers, Prometheus reporter per process), the Debian Prometheus scraping the JobManager and
every TaskManager each second, and ``perdix run`` as a subprocess with the Prometheus monitor and the
``flink-rest`` scale target pointed at a recording proxy in front of the REST API, so the test sees
on the wire every request the agent sends. The job starts at parallelism 3; min = max = 2 forces
Perdix to decide a rescale to 2. Every process is stopped by its pid, whatever happens.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.monitor.prometheus import PrometheusMonitor
from agent.settings import PromQLQueries, load_settings
from lab.flink.agent_process import PerdixProcess
from tests.fixtures.flink import FlinkCluster, poll
from tests.fixtures.prometheus import PrometheusServer
from tests.flink.proxy import RecordingProxy

pytestmark = pytest.mark.e2e

JOB_NAME = "perdix-e2e"


@pytest.fixture(scope="module")
def job_id(flink_cluster: FlinkCluster) -> Iterator[str]:
    """The streaming job at parallelism 3 (every slot), cancelled after the module."""
    job = flink_cluster.submit(name=JOB_NAME, parallelism=3, rows_per_second=5000)
    try:
        yield job
    finally:
        flink_cluster.cancel(job)


@pytest.fixture(scope="module")
def prometheus(
    flink_cluster: FlinkCluster, job_id: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    """The real Prometheus scraping the JobManager and the TaskManagers every second, with job series in it."""
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-flink"), flink_cluster.metrics_targets)
    try:
        server.start()
        # A few seconds of every default series, so a range query over the last seconds has no holes.
        server.wait_for("count(flink_taskmanager_Status_JVM_CPU_Load) == 3", timeout_s=60)
        server.wait_for("flink_jobmanager_job_uptime", timeout_s=30)
        # Flink's rate meters start at 0: wait until every source subtask reports a rate.
        first = server.wait_for(
            'count(flink_taskmanager_job_task_numRecordsOutPerSecond{task_name=~"Source.*"} > 0) == 3', timeout_s=60
        )
        poll(lambda: time.time() > float(first[0]["value"][0]) + 6, timeout_s=15, what="six seconds of samples")
        yield server
    finally:
        server.stop()


def agent_settings(prometheus: PrometheusServer, proxy: RecordingProxy, workdir: Path) -> dict[str, Any]:
    """Settings of the agent: Prometheus monitor with tm_id workers, flink-rest target, min = max = 2
    (forces 3 -> 2)."""
    return {
        # The static policy at max_parallelism: Daedalus keeps the current scale-out until it has learned a
        # capacity, which a constant datagen load (flat CPU) does not teach it within a test's minute.
        "policy": "static",
        "loop_interval_s": 3.0,
        "min_parallelism": 2,
        "max_parallelism": 2,
        "grace_period_s": 0.0,
        "recent_rescale_window_s": 0.0,
        "scale_down_stabilization_s": 0.0,
        "forecast_horizon_s": 60,
        "forecast_window_s": 60,
        "checkpoint_interval_s": 5.0,
        "prometheus": {
            "url": prometheus.url,
            "worker_label": "tm_id",
            "timeout_s": 5.0,
        },
        "scale_target": {
            "kind": "flink-rest",
            "rest_url": proxy.url,
            "job": JOB_NAME,
            "request_timeout_s": 5.0,
        },
        "knowledge": {"path": str(workdir / "knowledge.json")},
        "telemetry": {"log_format": "json", "log_level": "info", "metrics_port": 0},
    }


def vertex_parallelism(cluster: FlinkCluster, job_id: str) -> set[tuple[int, int]]:
    """(parallelism, running subtasks) of the job's vertices, straight from the REST API."""
    details = cluster.job(job_id)
    assert details is not None
    return {(v["parallelism"], v["tasks"]["RUNNING"]) for v in details["vertices"]}


def test_default_queries_with_tm_id_read_the_real_job(
    prometheus: PrometheusServer, flink_cluster: FlinkCluster, job_id: str
) -> None:
    settings = load_settings(
        None, {"prometheus.url": prometheus.url, "prometheus.worker_label": "tm_id", "scale_target.kind": "flink-rest"}
    )
    monitor = PrometheusMonitor(settings.prometheus)

    def flowing() -> Any:
        """The last five seconds' observation once every worker's counters show records in each read second: the
        rate of a counter over a window reaching back before a subtask's first record reads 0 there (the meters
        the fixture waits for are per second and start sooner), which is a true reading of a job starting up."""
        now = time.time()
        seen = monitor.observe(since=now - 5, now=now)
        rates = seen.worker_throughput.values()
        return seen if rates and all((t[~_nan(t)] > 0).all() and (~_nan(t)).any() for t in rates) else None

    observation = poll(flowing, timeout_s=60, interval_s=1, what="records in every worker's last five seconds")

    taskmanagers = {tm["id"] for tm in (json.loads(_get(f"{flink_cluster.rest_url}/taskmanagers"))["taskmanagers"])}
    tm_ids = set(observation.worker_throughput)
    assert len(tm_ids) == 3 and set(observation.worker_cpu) == tm_ids
    # The reporter's tm_id is the TaskManager's resource id with characters Prometheus rejects turned into '_'.
    assert tm_ids == {re.sub(r"[^a-zA-Z0-9:_]", "_", tm) for tm in taskmanagers}
    for worker in tm_ids:
        throughput = observation.worker_throughput[worker]
        cpu = observation.worker_cpu[worker]
        assert (throughput[~_nan(throughput)] > 0).all() and (~_nan(throughput)).any()
        assert ((cpu[~_nan(cpu)] > 0) & (cpu[~_nan(cpu)] <= 1)).all() and (~_nan(cpu)).any()
    assert observation.parallelism == 3 == max(p for p, _ in vertex_parallelism(flink_cluster, job_id))
    details = flink_cluster.job(job_id)
    assert details is not None
    running_s = (details["now"] - details["timestamps"]["RUNNING"]) / 1000
    assert observation.uptime_s is not None and 0 < observation.uptime_s <= running_s + 2
    # The datagen source reports no pendingRecords: the lag and per-worker backlog queries are named gaps, never
    # zeros, and the default workload is what the sources read (no backlog growth to add), the same counters
    # the per-worker throughput sums.
    assert set(observation.gaps) == {"consumer_lag", "worker_backlog"}, observation.gaps
    assert observation.worker_backlog == {}
    read = np.sum([observation.worker_throughput[w] for w in tm_ids], axis=0)
    both = np.isfinite(observation.workload) & np.isfinite(read)
    assert both.any() and np.allclose(observation.workload[both], read[both], rtol=1e-9)
    assert (observation.workload[both] > 0).all()  # (a 60-s rate of a job up for seconds: below its 5,000/s yet)
    # The default scale-out is the running source subtasks (the trace job's tests cover a source with a backlog).
    running = prometheus.query(settings.prometheus.render(PromQLQueries().parallelism))
    assert running[0]["value"][1] == "3"


def test_the_default_worker_is_a_subtask(prometheus: PrometheusServer, job_id: str) -> None:
    """With every default the workers are the source's parallel instances (subtask_index), so a TaskManager with
    several slots counts as several workers (tests/flink/test_multi_slot.py runs Perdix on one); busy time is
    read per worker and CPU, a TaskManager's, is not asked for."""
    settings = load_settings(None, {"prometheus.url": prometheus.url, "scale_target.kind": "flink-rest"})
    monitor = PrometheusMonitor(settings.prometheus, skip=settings.skipped_queries)
    now = time.time()
    observation = monitor.observe(since=now - 5, now=now)
    assert set(observation.worker_throughput) == set(observation.worker_busy) == {"0", "1", "2"}, observation.gaps
    assert observation.worker_cpu == {} and observation.parallelism == 3
    for worker, busy in observation.worker_busy.items():
        finite = busy[~_nan(busy)]
        assert finite.size and ((finite >= 0) & (finite <= 1)).all(), (worker, busy)


def test_dry_run_recommends_and_writes_nothing(
    prometheus: PrometheusServer, flink_cluster: FlinkCluster, job_id: str, proxy: RecordingProxy, tmp_path: Path
) -> None:
    settings = agent_settings(prometheus, proxy, tmp_path)
    with PerdixProcess(tmp_path, settings, dry_run=True) as agent:
        recommended = agent.wait_for(
            lambda e: e.get("event") == "rescale.dry_run", timeout_s=60, what="a dry-run rescale"
        )
        code = agent.stop()
    assert code == 0, agent.tail()
    assert (recommended["from"], recommended["to"], recommended["dry_run"]) == (3, 2, True)
    assert proxy.log and proxy.writes() == [], proxy.writes()
    assert vertex_parallelism(flink_cluster, job_id) == {(3, 3)}
    requirements = json.loads(_get(f"{flink_cluster.rest_url}/jobs/{job_id}/resource-requirements"))
    assert {r["parallelism"]["upperBound"] for r in requirements.values()} == {3}
    knowledge = json.loads(agent.knowledge.read_text())
    assert knowledge["loop"]["rescales"] and all(r["dry_run"] for r in knowledge["loop"]["rescales"])
    assert knowledge["loop"]["last_rescale_at"] is None


def test_perdix_rescales_the_real_job_in_place_and_learns_its_downtime(
    prometheus: PrometheusServer, flink_cluster: FlinkCluster, job_id: str, proxy: RecordingProxy, tmp_path: Path
) -> None:
    settings = agent_settings(prometheus, proxy, tmp_path)
    with PerdixProcess(tmp_path, settings, dry_run=False) as agent:
        rescale = agent.wait_for(lambda e: e.get("event") == "rescale", timeout_s=90, what="a rescale")
        # The next rounds read the new parallelism back through Prometheus.
        agent.wait_for(
            lambda e: (
                e.get("event") == "loop" and e.get("parallelism") == 2 and e.get("timestamp", "") > rescale["timestamp"]
            ),
            timeout_s=60,
            what="a round that observes parallelism 2",
        )
        code = agent.stop()
    assert code == 0, agent.tail()
    assert (rescale["from"], rescale["to"], rescale["confirmed"]) == (3, 2, 2)
    assert vertex_parallelism(flink_cluster, job_id) == {(2, 2)}
    puts = [(method, path) for method, path, status in proxy.writes() if status == 200]
    assert puts == [("PUT", f"/jobs/{job_id}/resource-requirements")], proxy.writes()

    knowledge = json.loads(agent.knowledge.read_text())
    applied = [r for r in knowledge["loop"]["rescales"] if not r["dry_run"]]
    assert len(applied) == 1 and applied[0]["confirmed"] == 2
    downtime = applied[0]["downtime_s"]
    assert downtime is not None and 0 < downtime < 60
    # A rescale's downtime is learned under the larger of its two scale-outs (3 -> 2: under 3).
    learned = knowledge["analyzer"]["recovery"]["per_scale_out"]
    larger = max(applied[0]["from"], applied[0]["confirmed"])
    assert any(e["kind"] == "rescale" and e["parallelism"] == larger and e["count"] >= 1 for e in learned), learned


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def _nan(values: Any) -> Any:
    return np.isnan(values)
