"""PrometheusMonitor against a canned fake of the Prometheus HTTP API (KEDA style: a real HTTP test server).

Each case is one kind of bad answer and what must come out: NaN gaps named in Observation.gaps, never
zeros; MonitorError when Prometheus itself fails; one log line per state change.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator

import numpy as np
import pytest
from structlog.testing import capture_logs

from agent.monitor.prometheus import PrometheusMonitor, _partition_offsets, _partition_reads, check_prometheus
from agent.ports import MonitorError
from agent.settings import ConfigError, PrometheusSettings, PromQLQueries
from tests.fakes.prometheus_api import Canned, FakePrometheus

SINCE, NOW = 1000.0, 1060.0
GRID = np.arange(SINCE, NOW)


@pytest.fixture
def fake_prometheus() -> Iterator[FakePrometheus]:
    fake = FakePrometheus().start()
    try:
        yield fake
    finally:
        fake.stop()


def q(name: str, worker_label: str = "pod", **settings: object) -> str:
    return PrometheusSettings(worker_label=worker_label, **settings).render(getattr(PromQLQueries(), name))  # type: ignore[arg-type]


def healthy(fake: FakePrometheus) -> None:
    """A job of two TaskManagers at 1000 records/s each, lag 50, uptime 10 min."""
    fake.answers = {
        q("workload"): Canned([({}, lambda t: 2000.0)]),
        q("throughput"): Canned([({"pod": "tm-0"}, lambda t: 1000.0), ({"pod": "tm-1"}, lambda t: 1000.0)]),
        q("cpu"): Canned([({"pod": "tm-0"}, lambda t: 0.5), ({"pod": "tm-1"}, lambda t: 0.6)]),
        q("busy"): Canned([({"pod": "tm-0"}, lambda t: 0.4), ({"pod": "tm-1"}, lambda t: 0.45)]),
        q("consumer_lag"): Canned([({}, lambda t: 50.0)]),
        q("worker_backlog"): Canned([({"pod": "tm-0"}, lambda t: 20.0), ({"pod": "tm-1"}, lambda t: 30.0)]),
        q("parallelism"): Canned([({}, lambda t: 2.0)]),
        q("uptime"): Canned([({}, lambda t: 600_000.0)]),
    }


def monitor_for(fake: FakePrometheus, errors: list[str] | None = None, **settings: object) -> PrometheusMonitor:
    config = PrometheusSettings(url=fake.url, **{"worker_label": "pod", **settings})  # type: ignore[arg-type]
    return PrometheusMonitor(config, on_error=errors.append if errors is not None else None)


def test_a_healthy_answer_lands_on_one_grid_with_no_gaps(fake_prometheus: FakePrometheus) -> None:
    healthy(fake_prometheus)
    obs = monitor_for(fake_prometheus).observe(since=SINCE, now=NOW)
    np.testing.assert_array_equal(obs.times, GRID)
    np.testing.assert_array_equal(obs.workload, np.full(60, 2000.0))
    assert set(obs.worker_throughput) == set(obs.worker_cpu) == {"tm-0", "tm-1"}
    np.testing.assert_array_equal(obs.worker_cpu["tm-1"], np.full(60, 0.6))
    np.testing.assert_array_equal(obs.worker_busy["tm-1"], np.full(60, 0.45))
    np.testing.assert_array_equal(obs.worker_backlog["tm-1"], np.full(60, 30.0))
    assert obs.parallelism == 2 and obs.uptime_s == 600.0 and obs.latest_lag == 50.0
    assert obs.source_partitions is None, "no per-partition gauges: the count is unknown"
    assert obs.partition_reads is None, "nor what each partition was read: not known, and no gap"
    assert dict(obs.gaps) == {} and obs.usable
    assert obs.rate_window_s == 60.0, "the window its rates were taken over: a step spreads over it"
    ranges = [p for path, p in fake_prometheus.requests if path == "/api/v1/query_range"]
    assert {(p["start"], p["end"], p["step"]) for p in ranges} == {("1000", "1059", "1")}


def test_consecutive_windows_neither_overlap_nor_leave_holes(fake_prometheus: FakePrometheus) -> None:
    healthy(fake_prometheus)
    monitor = monitor_for(fake_prometheus)
    first = monitor.observe(since=1000.0, now=1030.5)
    second = monitor.observe(since=1030.5, now=1060.0)
    np.testing.assert_array_equal(np.concatenate([first.times, second.times]), GRID)


@pytest.mark.parametrize(
    ("answer", "gap", "problem"),
    [
        # (what Prometheus answers for the workload query, expected gap prefix, counted problem kind)
        (Canned([]), "empty", "empty"),  # no series at all
        (Canned([({}, lambda t: math.nan)]), "empty", "empty"),  # a series of NaN
        (Canned([({}, lambda t: 2000.0 if t < 1040 else None)]), "partial", "partial"),  # stops mid-window
        (Canned([({"topic": "a"}, lambda t: 1.0), ({"topic": "b"}, lambda t: 2.0)]), "wrong shape", "wrong_shape"),
        (Canned(status=400, error='parse error at char 5: unexpected "}"'), "rejected", "rejected"),
        (Canned(status=503, error="overloaded"), "server_error", "server_error"),
    ],
)
def test_bad_workload_answers_become_named_nan_gaps(
    fake_prometheus: FakePrometheus, answer: Canned, gap: str, problem: str
) -> None:
    healthy(fake_prometheus)
    fake_prometheus.answers[q("workload")] = answer
    errors: list[str] = []
    obs = monitor_for(fake_prometheus, errors).observe(since=SINCE, now=NOW)
    assert obs.gaps["workload"].startswith(gap)
    assert problem in errors
    assert not np.any(obs.workload == 0.0), "a gap must never read as zero"
    if problem == "partial":
        assert np.isfinite(obs.workload[:40]).all() and np.isnan(obs.workload[40:]).all()
        assert obs.usable
    else:
        assert np.isnan(obs.workload).all() and not obs.usable
    assert obs.parallelism == 2, "the other series are unaffected"


def test_a_stale_series_is_a_gap_not_old_data(fake_prometheus: FakePrometheus) -> None:
    healthy(fake_prometheus)
    fake_prometheus.answers[q("parallelism")] = Canned([({}, lambda t: 2.0 if t < 1010 else None)])
    obs = monitor_for(fake_prometheus, stale_after_s=30.0).observe(since=SINCE, now=NOW)
    assert obs.gaps["parallelism"].startswith("stale")
    assert obs.parallelism is None and not obs.usable


def test_per_worker_series_missing_the_worker_label_are_logged_once_per_query(fake_prometheus: FakePrometheus) -> None:
    healthy(fake_prometheus)
    fake_prometheus.answers[q("throughput")] = Canned([({"instance": "10.0.0.1:9249"}, lambda t: 1000.0)])
    monitor = monitor_for(fake_prometheus)
    with capture_logs() as logs:
        for _ in range(3):
            obs = monitor.observe(since=SINCE, now=NOW)
            assert obs.gaps["throughput"].startswith("wrong shape") and "'pod'" in obs.gaps["throughput"]
            assert obs.worker_throughput == {} and not obs.usable
    gaps = [e for e in logs if e["event"] == "monitor.gap"]
    assert len(gaps) == 1 and gaps[0]["series"] == "throughput" and gaps[0]["log_level"] == "warning"

    healthy(fake_prometheus)
    with capture_logs() as logs:
        assert monitor.observe(since=SINCE, now=NOW).usable
        monitor.observe(since=SINCE, now=NOW)
    assert [e["event"] for e in logs] == ["monitor.recovered"]


def test_the_worker_label_is_configurable(fake_prometheus: FakePrometheus) -> None:
    healthy(fake_prometheus)
    fake_prometheus.answers[q("throughput", "tm_id")] = Canned([({"tm_id": "a"}, lambda t: 10.0)])
    fake_prometheus.answers[q("cpu", "tm_id")] = Canned([({"tm_id": "a"}, lambda t: 0.1)])
    obs = monitor_for(fake_prometheus, worker_label="tm_id").observe(since=SINCE, now=NOW)
    assert set(obs.worker_throughput) == {"a"} and "gaps" not in obs.gaps


def test_a_worker_removed_by_a_scale_in_does_not_count_as_current(fake_prometheus: FakePrometheus) -> None:
    healthy(fake_prometheus)
    fake_prometheus.answers[q("throughput")] = Canned(
        [({"pod": "tm-0"}, lambda t: 1000.0), ({"pod": "tm-1"}, lambda t: 1000.0 if t < 1030 else None)]
    )
    obs = monitor_for(fake_prometheus).observe(since=SINCE, now=NOW)
    assert set(obs.worker_throughput) == {"tm-0"}
    assert set(obs.worker_cpu) == {"tm-0"}


def test_every_query_failing_raises(fake_prometheus: FakePrometheus) -> None:
    fake_prometheus.answers = {q(name): Canned(status=500, error="boom") for name in PromQLQueries.model_fields}
    with pytest.raises(MonitorError, match="every Prometheus query failed"):
        monitor_for(fake_prometheus).observe(since=SINCE, now=NOW)


def test_a_slow_prometheus_times_out_into_a_monitor_error(fake_prometheus: FakePrometheus) -> None:
    healthy(fake_prometheus)
    fake_prometheus.answers[q("workload")].delay_s = 1.0
    errors: list[str] = []
    with pytest.raises(MonitorError, match="timed out after 0.2 s"):
        monitor_for(fake_prometheus, errors, timeout_s=0.2).observe(since=SINCE, now=NOW)
    assert errors == ["timeout"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_down_prometheus_raises_and_logs_once_per_outage() -> None:
    monitor = PrometheusMonitor(PrometheusSettings(url=f"http://127.0.0.1:{closed_port()}", timeout_s=1.0))
    with capture_logs() as logs:
        for _ in range(3):
            with pytest.raises(MonitorError, match="not reachable"):
                monitor.observe(since=SINCE, now=NOW)
    assert [e["event"] for e in logs] == ["monitor.unavailable"]


def test_start_check_gives_one_line_for_an_unreachable_url_and_names_a_rejected_query(
    fake_prometheus: FakePrometheus,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(MonitorError) as raised:
        check_prometheus(PrometheusSettings(url=url, timeout_s=1.0))
    assert (
        str(raised.value).startswith("prometheus.url: ") and url in str(raised.value) and "\n" not in str(raised.value)
    )

    healthy(fake_prometheus)
    check_prometheus(PrometheusSettings(url=fake_prometheus.url))  # all queries accepted
    fake_prometheus.answers[q("consumer_lag")] = Canned(status=400, error="1:5: parse error: unexpected <by>")
    with pytest.raises(ConfigError) as config_error:
        check_prometheus(PrometheusSettings(url=fake_prometheus.url))
    assert str(config_error.value).startswith("prometheus.queries.consumer_lag: ") and "parse error" in str(
        config_error.value
    )


def test_rate_samples_whose_window_reaches_back_before_a_restart_are_not_settled(
    fake_prometheus: FakePrometheus,
) -> None:
    # The job restarted at 1030 (uptime 0 there): with a 20 s rate window the workload, throughput and
    # busy samples of 1030..1049 cover a restart (replayed records, new series): the models skip them.
    healthy(fake_prometheus)
    for name in ("workload", "throughput", "busy"):
        fake_prometheus.answers[q(name, rate_window_s=20)] = fake_prometheus.answers[q(name)]
    fake_prometheus.answers[q("uptime")] = Canned(
        [({}, lambda t: 600_000.0 + (t - 1000) * 1000 if t < 1030 else (t - 1030) * 1000.0)]
    )
    obs = monitor_for(fake_prometheus, rate_window_s=20).observe(since=SINCE, now=NOW)
    young = (GRID >= 1030) & (GRID < 1050)
    assert obs.rates_settled is not None and (obs.rates_settled == ~young).all()
    for series in (obs.workload, obs.worker_throughput["tm-0"], obs.worker_busy["tm-0"]):
        assert np.isfinite(series).all(), "the round keeps every sample (the planner's average, readiness)"
        settled = obs.settled(series)
        assert np.isnan(settled[young]).all() and np.isfinite(settled[~young]).all()
    assert "workload" not in obs.gaps and obs.usable, "a restart window is not a monitor problem"


def test_the_samples_before_the_scrape_that_shows_a_restart_are_not_settled_either(
    fake_prometheus: FakePrometheus,
) -> None:
    # Scrapes every 10 s; the job restarts at 1032 and the scrape at 1040 is the first to say so (uptime 8 s):
    # the grid's 1032..1039 still hold the 1030 scrape's old uptime while their rates already read the stop.
    healthy(fake_prometheus)
    for name in ("workload", "throughput", "busy"):
        fake_prometheus.answers[q(name, rate_window_s=20)] = fake_prometheus.answers[q(name)]

    def uptime_ms(t: float) -> float:
        scraped = 10.0 * (t // 10.0)
        return 600_000.0 + (scraped - 1000.0) * 1000.0 if scraped < 1032 else (scraped - 1032.0) * 1000.0

    fake_prometheus.answers[q("uptime")] = Canned([({}, uptime_ms)])
    obs = monitor_for(fake_prometheus, rate_window_s=20).observe(since=SINCE, now=NOW)
    assert obs.rates_settled is not None
    unsettled = GRID[~obs.rates_settled]
    assert unsettled.min() == 1032 and unsettled.max() == 1059 and unsettled.size == 28, unsettled
    # The uptime samples date the restart: the scrape that shows it exactly, the samples held after it later.
    assert obs.uptime is not None and obs.restarted_since(SINCE) == 1032.0


def test_a_skipped_query_is_never_sent(fake_prometheus: FakePrometheus) -> None:
    healthy(fake_prometheus)
    config = PrometheusSettings(url=fake_prometheus.url, worker_label="pod")
    obs = PrometheusMonitor(config, skip=frozenset({"cpu"})).observe(since=SINCE, now=NOW)
    sent = {p["query"] for path, p in fake_prometheus.requests if path == "/api/v1/query_range"}
    assert q("cpu") not in sent and q("busy") in sent
    assert obs.worker_cpu == {} and set(obs.worker_busy) == {"tm-0", "tm-1"} and obs.usable


def test_a_coarse_step_is_handed_on_at_one_sample_a_second(fake_prometheus: FakePrometheus) -> None:
    """``step_s: 15`` queries a point every 15 s; the analyzer counts seconds, so each point is held."""
    healthy(fake_prometheus)
    fake_prometheus.answers[q("workload", step_s=15.0)] = Canned([({}, lambda t: t)])  # the value names its time
    fake_prometheus.answers[q("consumer_lag", step_s=15.0)] = Canned([({}, lambda t: 50.0)])
    monitor = monitor_for(fake_prometheus, step_s=15.0)
    first = monitor.observe(since=1003.0, now=1061.5)
    second = monitor.observe(since=1061.5, now=1120.0)
    np.testing.assert_array_equal(np.concatenate([first.times, second.times]), np.arange(1003.0, 1120.0))
    # Each second holds the newest point at or before it, the window's first seconds the point before ``since``.
    expected = 15.0 * np.floor(np.arange(1003.0, 1120.0) / 15.0)
    np.testing.assert_array_equal(np.concatenate([first.workload, second.workload]), expected)
    assert first.step_s == 1.0 and first.worker_throughput["tm-0"].size == first.times.size
    assert first.rates_settled is not None and first.rates_settled.all() and first.usable
    ranges = [p for path, p in fake_prometheus.requests if path == "/api/v1/query_range"]
    assert {(p["start"], p["end"], p["step"]) for p in ranges} == {("990", "1050", "15"), ("1050", "1110", "15")}


def test_a_coarse_step_keeps_gaps_as_gaps(fake_prometheus: FakePrometheus) -> None:
    healthy(fake_prometheus)
    fake_prometheus.answers[q("workload", step_s=15.0)] = Canned([({}, lambda t: 2000.0 if t < 1030 else None)])
    obs = monitor_for(fake_prometheus, step_s=15.0).observe(since=SINCE, now=NOW)
    assert obs.times.size == 60  # points at 990 (before since), 1005, 1020, then none from 1035 on
    assert np.isfinite(obs.workload[:35]).all() and np.isnan(obs.workload[35:]).all()
    assert obs.gaps["workload"].startswith("partial")


def test_partition_offsets_are_read_over_the_same_stretch_for_every_partition() -> None:
    """Partition 1's first scrape came a point later and partition 0's last a point earlier: what each received
    is counted between the first and the last points both have, so neither gets a longer stretch."""
    nan = float("nan")
    ends = {1: np.array([nan, 110.0, 120.0, 130.0]), 0: np.array([0.0, 10.0, 20.0, nan])}
    offsets, since, span = _partition_offsets(ends, {0: np.array([0.0, 5.0, 15.0, 15.0])}, 15.0)
    assert offsets == ((20, 15), (120, None))  # in partition order; partition 1's group committed nothing
    assert since == (10, 110) and span == 15.0, "one step apart, on a grid of 15-s steps"
    assert _partition_offsets({}, {}, 1.0) == (None, None, None)
    # The committed offsets of the same point as the ends; kafka_exporter's -1 (never committed) is none.
    committed = {0: np.array([0.0, 5.0, 15.0, 18.0]), 1: np.array([-1.0, -1.0, -1.0, -1.0])}
    assert _partition_offsets(ends, committed, 1.0)[0] == ((20, 15), (120, None))
    # No point both have: each one's last offset, and no stretch to weigh the partitions by.
    assert _partition_offsets({0: np.array([1.0, nan]), 1: np.array([nan, 2.0])}, {}, 1.0) == (
        ((1, None), (2, None)),
        None,
        None,
    )


def test_the_readers_offsets_are_read_over_the_same_stretch_for_every_partition(
    fake_prometheus: FakePrometheus,
) -> None:
    """Partition 1's reader went unscraped for the window's first points (a rescale moved it): what each
    partition was read is counted between the first and the last points both have."""
    nan = float("nan")
    reads = {1: np.array([nan, 110.0, 120.0, 130.0]), 0: np.array([0.0, 10.0, 20.0, nan])}
    assert _partition_reads(reads, 5.0) == (((10, 20), (110, 120)), 5.0)
    assert _partition_reads({0: np.array([1.0, nan]), 1: np.array([nan, 2.0])}, 1.0) == (None, None)
    assert _partition_reads({}, 1.0) == (None, None)

    healthy(fake_prometheus)
    fake_prometheus.answers[q("partition_read_offsets")] = Canned(
        [({"partition": str(p)}, lambda t, r=rate: r * t) for p, rate in enumerate((100.0, 300.0))]
    )
    obs = monitor_for(fake_prometheus).observe(since=SINCE, now=NOW)
    assert "partition_read_offsets" not in obs.gaps and obs.partition_reads is not None
    (start0, end0), (start1, end1) = obs.partition_reads
    assert (end1 - start1) == 3 * (end0 - start0) > 0
    # The stretch from the window's first point to its last: 59 s of a 60-point window, read at 100/s.
    assert obs.partition_reads_span_s == 59.0 and end0 - start0 == 100 * 59


def test_the_partition_count_is_the_most_the_window_read(fake_prometheus: FakePrometheus) -> None:
    # A rescale's restart leaves some readers without their partitions for a few scrapes: the count dips.
    healthy(fake_prometheus)
    fake_prometheus.answers[q("source_partitions")] = Canned([({}, lambda t: 7.0 if 1020 <= t < 1030 else 12.0)])
    obs = monitor_for(fake_prometheus).observe(since=SINCE, now=NOW)
    assert obs.source_partitions == 12 and "source_partitions" not in obs.gaps


@pytest.mark.parametrize(
    ("series", "problem"),
    [
        ([({}, lambda t: 0.5)], "absurd"),
        ([({}, lambda t: 2e6)], "absurd"),
        ([({}, lambda t: 1e300)], "absurd"),
        ([({"topic": "a"}, lambda t: 4.0), ({"topic": "b"}, lambda t: 8.0)], "wrong shape"),
    ],
)
def test_a_partition_count_that_is_no_count_is_a_gap_and_no_reading(
    fake_prometheus: FakePrometheus, series: list[tuple[dict[str, str], object]], problem: str
) -> None:
    healthy(fake_prometheus)
    fake_prometheus.answers[q("source_partitions")] = Canned(series)  # type: ignore[arg-type]
    obs = monitor_for(fake_prometheus).observe(since=SINCE, now=NOW)
    assert obs.source_partitions is None
    assert obs.gaps["source_partitions"].startswith(problem), obs.gaps
    assert obs.usable, "the count's gap takes none of the round's data away"
