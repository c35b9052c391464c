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
from agent.settings import ConfigError, PrometheusSettings, PromQLQueries
from tests.fixtures.prometheus import PrometheusServer, TinyExporter, poll

pytestmark = pytest.mark.e2e

UPTIME = "flink_jobmanager_job_uptime"


def export_job(exporter: TinyExporter) -> None:
    """The series of a two-TaskManager job, under the names the default queries use."""
    exporter.set("kafka_server_brokertopicmetrics_messagesinpersec_oneminuterate", 2000.0, topic="input")
    for pod, cpu in (("tm-0", 0.5), ("tm-1", 0.7)):
        exporter.set("flink_taskmanager_job_task_numRecordsOutPerSecond", 1000.0, task_name="Source: input", pod=pod)
        exporter.set("flink_taskmanager_Status_JVM_CPU_Load", cpu, pod=pod)
        exporter.set("flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_records_lag_max", 25.0, pod=pod)
    exporter.set("flink_jobmanager_numRegisteredTaskManagers", 2.0)
    exporter.set(UPTIME, 600_000.0)


@pytest.fixture(scope="module")
def scraped(prometheus: PrometheusServer, tiny_exporter: TinyExporter) -> float:
    """Wait until Prometheus holds a few seconds of every series; return the time of the first sample."""
    export_job(tiny_exporter)
    first = prometheus.wait_for(UPTIME, timeout_s=30)
    first_at = float(first[0]["value"][0])
    poll(lambda: time.time() > first_at + 4, timeout_s=10, what="four seconds of samples")
    return first_at


def test_default_queries_on_real_prometheus_fill_one_grid_without_gaps(prometheus: PrometheusServer, scraped: float) -> None:
    monitor = PrometheusMonitor(PrometheusSettings(url=prometheus.url))
    since = math.ceil(scraped) + 1.0
    now = time.time()
    obs = monitor.observe(since=since, now=now)

    assert dict(obs.gaps) == {}, obs.gaps
    assert obs.times[0] == since and np.all(np.diff(obs.times) == 1.0) and obs.times[-1] < now
    np.testing.assert_allclose(obs.workload, 2000.0)
    np.testing.assert_allclose(obs.consumer_lag, 50.0)
    assert set(obs.worker_throughput) == {"tm-0", "tm-1"}
    np.testing.assert_allclose(obs.worker_cpu["tm-1"], 0.7)
    assert obs.parallelism == 2 and obs.uptime_s == 600.0 and obs.usable


def test_a_worker_label_the_series_do_not_carry_is_a_wrong_shape_gap(prometheus: PrometheusServer, scraped: float) -> None:
    monitor = PrometheusMonitor(PrometheusSettings(url=prometheus.url, worker_label="tm_id"))
    now = time.time()
    obs = monitor.observe(since=now - 3, now=now)
    assert obs.gaps["throughput"].startswith("wrong shape") and "'tm_id'" in obs.gaps["throughput"]
    assert obs.worker_throughput == {} and not obs.usable
    assert obs.parallelism == 2


def test_start_check_accepts_the_defaults_and_names_a_query_prometheus_rejects(prometheus: PrometheusServer) -> None:
    check_prometheus(PrometheusSettings(url=prometheus.url))
    bad = PromQLQueries(consumer_lag="sum(flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_records_lag_max) by")
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
