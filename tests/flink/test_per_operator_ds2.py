"""``perdix run`` with the per-operator DS2 against the real Flink cluster: the costly vertex alone scales out.

The trace job's split shape (source | rebalance | costly map | hash | verifier), three vertices at
parallelism 1 on the three one-slot TaskManagers, produces 5000 records/s while one map subtask carries
2000/s: the map is the bottleneck, the source and the verifier idle behind its backpressure.
``perdix run`` (policy ds2, target flink-rest through a recording proxy) reads every vertex from
Prometheus and the job graph from the REST API, and must set the map to 3 subtasks and leave the
source and the verifier at 1, in one ``PUT /jobs/{id}/resource-requirements``. Production stops at
50 s; once the job has drained, every produced record was verified exactly once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.flink import trace_job
from lab.flink.agent_process import PerdixProcess
from lab.flink.trace_job import TraceJob, TraceJobOptions
from tests.fixtures.flink import FlinkCluster, poll
from tests.fixtures.prometheus import PrometheusServer
from tests.flink.proxy import RecordingProxy
from tests.flink.test_trace_source import wait_until
from tests.flink.test_vertex_metrics import ROCKSDB_WITH_METRICS

pytestmark = pytest.mark.e2e

JOB_NAME = "perdix-ds2-split"
RATE = 5000.0
CAPACITY = 2000.0
END_S = 50.0


@pytest.fixture(scope="module")
def job(flink_cluster: FlinkCluster) -> Iterator[TraceJob]:
    """The split trace job, every vertex at 1, production from now until END_S."""
    options = TraceJobOptions(
        job_name=JOB_NAME,
        shape="split",
        rate_per_s=RATE,
        capacity_per_subtask=CAPACITY,
        seed=3,
        checkpoint_interval_s=1.0,
        parallelism=1,
        end_s=END_S,
        epoch_ms=int(time.time() * 1000) + 2000,
    )
    # The keyed verifier on RocksDB with its metrics: the per-vertex state queries answer too.
    submitted = trace_job.submit(
        flink_cluster.rest_url,
        options,
        jar=trace_job.build_jar(home=flink_cluster.home),
        flink_configuration=ROCKSDB_WITH_METRICS,
    )
    try:
        yield submitted
    finally:
        flink_cluster.cancel(submitted.job_id)


@pytest.fixture(scope="module")
def prometheus(
    flink_cluster: FlinkCluster, job: TraceJob, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    """The real Prometheus scraping every process of the cluster each second."""
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-ds2"), flink_cluster.metrics_targets)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def settings(prometheus: PrometheusServer, proxy: RecordingProxy, workdir: Path) -> dict[str, Any]:
    """DS2 per operator on flink-rest: short windows and warm-up so one decision lands within seconds."""
    return {
        "policy": "ds2",
        "loop_interval_s": 3.0,
        "min_parallelism": 1,
        "max_parallelism": 3,
        "grace_period_s": 0.0,
        "recent_rescale_window_s": 0.0,
        "scale_down_stabilization_s": 0.0,
        "checkpoint_interval_s": 1.0,
        "downtime_rescale_prior_s": 2.0,
        "prometheus": {
            "url": prometheus.url,
            "worker_label": "tm_id",
            "timeout_s": 5.0,
            "rate_window_s": 10,
            "flink_job": JOB_NAME.replace("-", "_"),
        },
        "operators": {"warm_up_s": 12.0},
        "scale_target": {"kind": "flink-rest", "rest_url": proxy.url, "job": JOB_NAME, "request_timeout_s": 5.0},
        "knowledge": {"path": str(workdir / "knowledge.json")},
        "telemetry": {"log_format": "json", "log_level": "info", "metrics_port": 0},
    }


def vertices(cluster: FlinkCluster, job_id: str) -> dict[str, tuple[int, int]]:
    details = cluster.job(job_id) or {}
    return {v["name"]: (v["parallelism"], v["tasks"]["RUNNING"]) for v in details.get("vertices") or []}


def test_ds2_scales_the_costly_vertex_alone_in_one_put_and_loses_nothing(
    flink_cluster: FlinkCluster,
    job: TraceJob,
    prometheus: PrometheusServer,
    proxy: RecordingProxy,
    tmp_path: Path,
) -> None:
    started = time.time()
    assert vertices(flink_cluster, job.job_id) == {
        "Source: log": (1, 1),
        "cost": (1, 1),
        "verify -> discard: Writer": (1, 1),
    }
    with PerdixProcess(tmp_path, settings(prometheus, proxy, tmp_path), dry_run=False) as agent:
        rescale = agent.wait_for(lambda e: e.get("event") == "rescale", timeout_s=90, what="a per-vertex rescale")
        plan = next(e for e in agent.events() if e.get("event") == "operators.plan" and e.get("code") == "scale-out")
        code = agent.stop()
    assert code == 0, agent.tail()
    print("ds2:", "; ".join(plan["reasons"]))
    print(
        f"plan: {plan['current']} -> {plan['planned']}; rescale {rescale['vertices']} "
        f"downtime {rescale['downtime_s']} s, {time.time() - started:.0f} s after start"
    )
    assert rescale["vertices"] == {"cost": [1, 3]}, rescale
    assert vertices(flink_cluster, job.job_id) == {
        "Source: log": (1, 1),
        "cost": (3, 3),
        "verify -> discard: Writer": (1, 1),
    }
    puts = [(method, path) for method, path, status in proxy.writes() if status == 200]
    assert puts == [("PUT", f"/jobs/{job.job_id}/resource-requirements")], proxy.writes()

    wait_until(flink_cluster, job, job.options.epoch_ms / 1000 + END_S)  # type: ignore[operator]
    expected = job.schedule().produced_all(job.options.epoch_ms + int(END_S * 1000) + 1)  # type: ignore[operator]

    def drained() -> trace_job.JobCounts | None:
        counts = trace_job.read_counts(flink_cluster.rest_url, job.job_id)
        return counts if counts.pending == 0 and counts.verified == expected else None

    counts = poll(drained, timeout_s=60, interval_s=1.0, what=f"{expected} records verified")
    assert (counts.ahead, counts.duplicates, counts.lost) == (0, 0, 0), counts
    knowledge = json.loads(agent.knowledge.read_text())
    assert [r["vertices"] for r in knowledge["loop"]["rescales"] if not r["dry_run"]] == [{"cost": [1, 3]}]
    print(f"verified {counts.verified} of {expected}; {time.time() - started:.0f} s")
