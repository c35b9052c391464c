"""The per-vertex queries and the job graph on the real cluster: what the per-operator policies read.

The trace job's split shape with its keyed verifier on RocksDB (job-level configuration: the state
backend, its native metrics with the column family as a label, keyed-state latency tracking), 5000
records/s into a map of two subtasks of 2000/s each. Read through the agent's own VertexMonitor and
FlinkGraphReader, the numbers must say what the job is: the map saturated at the rate the job's own
counters say it carried (its configured rate when the cores are free), the source back-pressured
behind it, only the verifier stateful (live state, managed memory in use, a block-cache hit rate, a
state access latency), and the graph's edges those of the job.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agent.execute.flink_rest import FlinkRestScaler
from agent.operator_settings import OperatorQueries
from agent.per_operator.monitor import FlinkGraphReader, OperatorMonitor, VertexMonitor
from agent.settings import PrometheusSettings, ScaleTargetSettings
from lab.flink import trace_job
from lab.flink.trace_job import TraceJob, TraceJobOptions
from planner.ds2_per_operator import ds2_plan
from planner.types import PlannerConfig
from tests.fixtures.flink import FlinkCluster, poll
from tests.fixtures.prometheus import PrometheusServer

pytestmark = [pytest.mark.e2e, pytest.mark.both_flink_versions]

ROCKSDB_WITH_METRICS = {
    "state.backend.type": "rocksdb",
    "state.backend.rocksdb.metrics.estimate-live-data-size": "true",
    "state.backend.rocksdb.metrics.block-cache-usage": "true",
    "state.backend.rocksdb.metrics.block-cache-hit": "true",
    "state.backend.rocksdb.metrics.block-cache-miss": "true",
    "state.backend.rocksdb.metrics.column-family-as-variable": "true",
    "state.latency-track.keyed-state-enabled": "true",
}
"""Job-level options that make a keyed vertex report what Justin reads (docs/flink-metrics.md, "Per vertex")."""

RATE = 5000.0
CAPACITY = 2000.0


@pytest.fixture(scope="module")
def job(flink_cluster: FlinkCluster) -> Iterator[TraceJob]:
    options = TraceJobOptions(
        job_name="perdix-vertex-metrics",
        shape="split",
        rate_per_s=RATE,
        capacity_per_subtask=CAPACITY,
        seed=5,
        checkpoint_interval_s=1.0,
        parallelism=1,
        cost_parallelism=2,
        end_s=600.0,
    )
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
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-vertices"), flink_cluster.metrics_targets)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def records_in(prometheus: PrometheusServer, job: TraceJob, vertex_id: str, at: float) -> float:
    """The vertex's task-scope ``numRecordsIn`` counters summed over its subtasks at ``at``: the raw counts the
    queries' rates and busy fractions are computed from."""
    series = prometheus.query_at(
        f'sum(flink_taskmanager_job_task_numRecordsIn{{job_id="{job.job_id}",task_id="{vertex_id}"}})', at
    )
    assert series, f"no numRecordsIn of vertex {vertex_id} at {at}"
    return float(series[0]["value"][1])


def test_per_vertex_queries_read_the_real_job(
    flink_cluster: FlinkCluster, job: TraceJob, prometheus: PrometheusServer
) -> None:
    settings = PrometheusSettings(url=prometheus.url, rate_window_s=20, flink_job="perdix_vertex_metrics")
    rest = FlinkRestScaler(ScaleTargetSettings(kind="flink-rest", rest_url=flink_cluster.rest_url, job=job.job_id))
    graph_reader = FlinkGraphReader(rest)
    monitor = OperatorMonitor(VertexMonitor(settings, OperatorQueries()), graph_reader)
    cost_id = next(v.id for v in graph_reader.read().vertices if v.name == "cost")
    # What the map took in by its own counters over the 30 s the queries' windows span (20-s rates over the
    # last 10 s), after its first records and checkpoints: the ground truth the queries are held to.
    poll(
        lambda: prometheus.query(f'flink_taskmanager_job_task_numRecordsIn{{task_id="{cost_id}"}} > 0'),
        timeout_s=60,
        interval_s=1.0,
        what="records into the map",
    )
    time.sleep(5)  # past the first checkpoints
    started = time.time()
    time.sleep(30)
    now = time.time()
    carried = (records_in(prometheus, job, cost_id, now) - records_in(prometheus, job, cost_id, started)) / (
        now - started
    )
    seen = monitor.observe(since=now - 10, now=now)
    assert seen.usable and not seen.gaps, seen.gaps

    graph = seen.graph
    by_name = {v.name: v for v in seen.plan_vertices()}
    source, cost, verify = by_name["Source: log"], by_name["cost"], by_name["verify -> discard: Writer"]
    assert cost.id == cost_id
    assert (source.upstream, cost.upstream, verify.upstream) == ((), (source.id,), (cost.id,))
    assert graph.profile is not None and graph.profile.managed_memory_per_slot_mb > 0

    assert source.metrics and cost.metrics and verify.metrics
    # The map runs flat out, the source waits behind it. A saturated subtask carries the configured rate on
    # an idle machine and less when other processes hold the cores (each record parks for its cost and wakes
    # late): the queries must read what the job carried, and never more than the configured capacity.
    assert cost.metrics.busy_max is not None and cost.metrics.busy_max > 0.95
    assert cost.metrics.records_in_rate == pytest.approx(carried, rel=0.10)
    assert cost.metrics.true_rate_per_subtask == pytest.approx(carried / 2, rel=0.15)
    assert cost.metrics.true_rate_per_subtask <= 1.10 * CAPACITY
    assert source.metrics.backpressure_mean is not None and source.metrics.backpressure_mean > 0.3
    # Only the keyed verifier has state in RocksDB.
    assert not source.metrics.stateful and not cost.metrics.stateful and verify.metrics.stateful
    assert (verify.metrics.state_size_bytes or 0) > 0 and (verify.metrics.managed_memory_used_bytes or 0) > 0
    assert verify.metrics.cache_hit_rate is not None and 0 < verify.metrics.cache_hit_rate <= 1
    assert verify.metrics.state_latency_ms is not None and verify.metrics.state_latency_ms > 0
    # DS2 on what was read: the map needs ceil(5000 / what a subtask carries), 3 or more, so the most it may have; the
    # others 1.
    plan = ds2_plan(seen.plan_vertices(), RATE, PlannerConfig(1, 3, 300))
    assert plan.parallelism == {source.id: 1, cost.id: 3, verify.id: 1}
    print(
        {
            name: (round(v.metrics.true_rate_per_subtask or 0), round(v.metrics.busy_max or 0, 3))
            for name, v in by_name.items()
            if v.metrics
        },
        verify.metrics,
    )
