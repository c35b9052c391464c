"""PrometheusMonitor against a real Prometheus (Debian package) scraping a tiny loopback exporter every second.

Kept to a few cases sharing one server (module scope): the default queries on real data, a
wrong-shape answer, a query Prometheus rejects at start, and a series that goes stale.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from agent.monitor.prometheus import PrometheusMonitor, check_prometheus
from agent.settings import KAFKA_BROKER_QUERIES, ConfigError, PrometheusSettings, PromQLQueries
from tests.fixtures.prometheus import PrometheusServer, TinyExporter, poll

pytestmark = pytest.mark.e2e

UPTIME = "flink_jobmanager_job_uptime"
PARTITION_RATES = (100.0, 200.0, 300.0, 400.0)
"""Records/s each of the four partitions of the job's Kafka topic receives."""
KAFKA = PromQLQueries(
    **{
        name: KAFKA_BROKER_QUERIES[name].replace("TOPIC", "orders").replace("GROUP", "orders-job")
        for name in ("partition_end_offsets", "partition_committed_offsets")
    }
)
WINDOW_S = 5
"""The queries' rate window in these tests (the smallest allowed: the server runs for seconds)."""


def export_job(exporter: TinyExporter) -> None:
    """The series of a two-TaskManager job under the names and labels of Flink's reporter: 1000 records/s read
    per source subtask (counters), 25 pending each, busy 50 % and 70 % of the time, up for ten minutes."""
    start = time.time()
    for index, (tm, busy) in enumerate((("tm-0", 0.5), ("tm-1", 0.7))):
        task = {
            "job_name": "orders",
            "task_name": "Source:_input____map",
            "task_id": "t0",
            "subtask_index": str(index),
            "tm_id": tm,
            "pod": tm,
        }
        source = {**task, "operator_name": "Source:_input", "operator_id": "op0"}
        exporter.set("flink_taskmanager_job_task_operator_numRecordsOut", lambda t: 1000.0 * (t - start), **source)
        exporter.set("flink_taskmanager_job_task_operator_pendingRecords", 25.0, **source)
        exporter.set(
            "flink_taskmanager_job_task_accumulateBusyTimeMs", lambda t, b=busy: 1000.0 * b * (t - start), **task
        )
        exporter.set(
            "flink_taskmanager_job_task_accumulateIdleTimeMs", lambda t, b=busy: 1000.0 * (1 - b) * (t - start), **task
        )
        exporter.set("flink_taskmanager_job_task_accumulateBackPressuredTimeMs", 0.0, **task)
        exporter.set("flink_taskmanager_Status_JVM_CPU_Load", busy + 0.05, tm_id=tm, pod=tm)
    exporter.set("flink_jobmanager_numRegisteredTaskManagers", 2.0)
    exporter.set(UPTIME, 600_000.0, job_name="orders")
    # kafka_exporter's series of the job's topic (four partitions at 100-400 records/s; the group commits 50
    # behind on three of them, none yet on the fourth) and of another topic the queries must leave out.
    for partition, rate in enumerate(PARTITION_RATES):
        exporter.set(
            "kafka_topic_partition_current_offset",
            lambda t, r=rate: 1e6 + r * (t - start),
            topic="orders",
            partition=str(partition),
        )
        exporter.set("kafka_topic_partition_current_offset", 5.0, topic="audit", partition=str(partition))
        # The job keeps up: each partition's reader (KafkaSource's own gauge) is 10 records behind its end.
        exporter.set(
            "flink_taskmanager_job_task_operator_KafkaSourceReader_topic_partition_currentOffset",
            lambda t, r=rate: 1e6 + r * (t - start) - 10,
            job_name="orders",
            operator_name="Source:_input",
            tm_id=f"tm-{partition % 2}",
            topic="orders",
            partition=str(partition),
        )
        if partition < 3:
            exporter.set(
                "kafka_consumergroup_current_offset",
                lambda t, r=rate: 1e6 + r * (t - start) - 50,
                consumergroup="orders-job",
                topic="orders",
                partition=str(partition),
            )


@pytest.fixture(scope="module")
def scraped(prometheus: PrometheusServer, tiny_exporter: TinyExporter) -> float:
    """Wait until Prometheus holds a few seconds of every series; return the time of the first sample."""
    export_job(tiny_exporter)
    first = prometheus.wait_for(UPTIME, timeout_s=30)
    first_at = float(first[0]["value"][0])
    poll(lambda: time.time() > first_at + WINDOW_S + 4, timeout_s=20, what="a rate window and four seconds of samples")
    return first_at + WINDOW_S


def test_default_queries_on_real_prometheus_fill_one_grid_without_gaps(
    prometheus: PrometheusServer, scraped: float
) -> None:
    # Every default, and CPU not asked for (as with utilization: busy): a worker is a source subtask.
    monitor = PrometheusMonitor(PrometheusSettings(url=prometheus.url, rate_window_s=WINDOW_S), skip=frozenset({"cpu"}))
    since = math.ceil(scraped) + 1.0
    now = time.time()
    obs = monitor.observe(since=since, now=now)

    assert dict(obs.gaps) == {}, obs.gaps
    assert obs.times[0] == since and np.all(np.diff(obs.times) == 1.0) and obs.times[-1] < now
    np.testing.assert_allclose(obs.workload, 2000.0, rtol=0.03)  # reads plus a flat backlog
    np.testing.assert_allclose(obs.consumer_lag, 50.0)
    assert set(obs.worker_throughput) == set(obs.worker_busy) == {"0", "1"} and obs.worker_cpu == {}
    np.testing.assert_allclose(obs.worker_throughput["0"], 1000.0, rtol=0.03)
    np.testing.assert_allclose(obs.worker_busy["1"], 0.7, rtol=0.03)
    assert obs.parallelism == 2 and obs.uptime_s == 600.0 and obs.usable

    # Workers named by TaskManager read CPU, a TaskManager's metric, beside the rest.
    by_taskmanager = PrometheusMonitor(
        PrometheusSettings(url=prometheus.url, rate_window_s=WINDOW_S, worker_label="tm_id")
    )
    obs = by_taskmanager.observe(since=since, now=now)
    assert dict(obs.gaps) == {}, obs.gaps
    assert set(obs.worker_throughput) == set(obs.worker_cpu) == {"tm-0", "tm-1"}
    np.testing.assert_allclose(obs.worker_cpu["tm-1"], 0.75)


def test_kafka_exporters_partition_offsets_give_each_partitions_offsets_and_what_it_received(
    prometheus: PrometheusServer, scraped: float
) -> None:
    """The documented kafka_exporter queries read, per partition in order, the log-end offset and the group's
    committed one (None where it has committed none), and the ends at the window's start: what each partition
    received over the window is in proportion to its rate (the weights Daedalus reads the skew from)."""
    monitor = PrometheusMonitor(
        PrometheusSettings(url=prometheus.url, rate_window_s=WINDOW_S, queries=KAFKA), skip=frozenset({"cpu"})
    )
    since = math.ceil(scraped) + 1.0
    obs = monitor.observe(since=since, now=time.time())
    assert dict(obs.gaps) == {}, obs.gaps
    assert obs.partition_offsets is not None and obs.partition_ends_since is not None
    assert [committed is None for _, committed in obs.partition_offsets] == [False, False, False, True]
    # (the exporter computes the two offsets a few microseconds apart, at 100-300 records/s)
    assert all(abs(end - committed - 50) <= 1 for end, committed in obs.partition_offsets[:3] if committed is not None)
    received = np.asarray([end for end, _ in obs.partition_offsets]) - np.asarray(obs.partition_ends_since)
    assert received.min() > 0
    np.testing.assert_allclose(received / received.sum(), np.asarray(PARTITION_RATES) / sum(PARTITION_RATES), atol=0.02)

    # Left empty (the default), nothing is read and nothing is a gap.
    plain = PrometheusMonitor(PrometheusSettings(url=prometheus.url, rate_window_s=WINDOW_S), skip=frozenset({"cpu"}))
    plain_obs = plain.observe(since=since, now=time.time())
    assert plain_obs.partition_offsets is None and "partition_end_offsets" not in plain_obs.gaps


def test_the_readers_partition_offsets_give_what_each_partition_was_read(
    prometheus: PrometheusServer, scraped: float
) -> None:
    """The default queries read the KafkaSource readers' per-partition offsets (two TaskManagers' readers, two
    partitions each): what each partition was read over the window is in proportion to what it received."""
    monitor = PrometheusMonitor(PrometheusSettings(url=prometheus.url, rate_window_s=WINDOW_S), skip=frozenset({"cpu"}))
    obs = monitor.observe(since=math.ceil(scraped) + 1.0, now=time.time())
    assert dict(obs.gaps) == {}, obs.gaps
    assert obs.partition_reads is not None and obs.source_partitions == len(PARTITION_RATES)
    read = np.asarray([end - start for start, end in obs.partition_reads], dtype=float)
    assert read.min() > 0
    np.testing.assert_allclose(read / read.sum(), np.asarray(PARTITION_RATES) / sum(PARTITION_RATES), atol=0.02)


def test_partition_series_without_the_partition_label_are_a_wrong_shape_gap(
    prometheus: PrometheusServer, scraped: float
) -> None:
    queries = PromQLQueries(partition_end_offsets="max by (topic) (kafka_topic_partition_current_offset)")
    monitor = PrometheusMonitor(PrometheusSettings(url=prometheus.url, rate_window_s=WINDOW_S, queries=queries))
    now = time.time()
    obs = monitor.observe(since=now - 3, now=now)
    assert obs.gaps["partition_end_offsets"].startswith("wrong shape"), obs.gaps
    assert obs.partition_offsets is None and obs.usable


def test_a_worker_label_the_series_do_not_carry_is_a_wrong_shape_gap(
    prometheus: PrometheusServer, scraped: float
) -> None:
    monitor = PrometheusMonitor(PrometheusSettings(url=prometheus.url, worker_label="host", rate_window_s=WINDOW_S))
    now = time.time()
    obs = monitor.observe(since=now - 3, now=now)
    assert obs.gaps["throughput"].startswith("wrong shape") and "'host'" in obs.gaps["throughput"]
    assert obs.worker_throughput == {} and not obs.usable
    assert obs.parallelism == 2


def test_start_check_accepts_the_defaults_and_names_a_query_prometheus_rejects(prometheus: PrometheusServer) -> None:
    check_prometheus(PrometheusSettings(url=prometheus.url))
    bad = PromQLQueries(
        consumer_lag="sum(flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_records_lag_max) by"
    )
    with pytest.raises(ConfigError) as raised:
        check_prometheus(PrometheusSettings(url=prometheus.url, queries=bad))
    assert str(raised.value).startswith("prometheus.queries.consumer_lag: Prometheus rejected the query")


def test_a_series_that_stops_is_stale_never_its_last_value(
    prometheus: PrometheusServer, tiny_exporter: TinyExporter, scraped: float
) -> None:
    since = time.time() - 3
    tiny_exporter.remove(UPTIME)
    try:
        # Prometheus writes a staleness marker on the first scrape without the series.
        poll(lambda: not prometheus.query(UPTIME), timeout_s=10, what="the uptime series to go stale")
        removed_at = time.time()
        poll(lambda: time.time() > removed_at + 1.5, timeout_s=5, what="the newest sample to age")
        monitor = PrometheusMonitor(PrometheusSettings(url=prometheus.url, stale_after_s=1.0))
        obs = monitor.observe(since=since, now=time.time())
        assert obs.gaps["uptime"].startswith("stale"), obs.gaps
        assert obs.uptime_s is None
        assert obs.parallelism == 2
    finally:
        tiny_exporter.set(UPTIME, 600_000.0)
