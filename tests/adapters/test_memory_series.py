"""The memory guard's series through the Prometheus monitor: one per TaskManager, absurd values no reading,
empty queries never read and never a gap."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from agent.monitor.prometheus import PrometheusMonitor
from agent.settings import JVM_MEMORY_QUERIES, PrometheusSettings, PromQLQueries
from tests.fakes.prometheus_api import Canned, FakePrometheus

SINCE, NOW = 1000.0, 1060.0


@pytest.fixture
def fake_prometheus() -> Iterator[FakePrometheus]:
    fake = FakePrometheus().start()
    try:
        yield fake
    finally:
        fake.stop()


def healthy(fake: FakePrometheus, settings: PrometheusSettings, **memory: Canned) -> None:
    """A job of two workers, and the memory series given."""
    queries = settings.queries
    fake.answers = {
        settings.render(queries.workload): Canned([({}, lambda t: 2000.0)]),
        settings.render(queries.throughput): Canned(
            [({"pod": "a"}, lambda t: 1000.0), ({"pod": "b"}, lambda t: 1000.0)]
        ),
        settings.render(queries.busy): Canned([({"pod": "a"}, lambda t: 0.4), ({"pod": "b"}, lambda t: 0.5)]),
        settings.render(queries.parallelism): Canned([({}, lambda t: 2.0)]),
        settings.render(queries.uptime): Canned([({}, lambda t: 600_000.0)]),
    }
    for name, canned in memory.items():
        fake.answers[settings.render(getattr(queries, name))] = canned


def settings_for(fake: FakePrometheus, **queries: str) -> PrometheusSettings:
    return PrometheusSettings(url=fake.url, worker_label="pod", queries=PromQLQueries(**queries))


def test_heap_and_gc_per_taskmanager(fake_prometheus: FakePrometheus) -> None:
    settings = settings_for(fake_prometheus, **JVM_MEMORY_QUERIES)
    healthy(
        fake_prometheus,
        settings,
        heap_usage=Canned([({"tm_id": "tm_1"}, lambda t: 0.5), ({"tm_id": "tm_2"}, lambda t: 0.97)]),
        gc_time=Canned([({"tm_id": "tm_1"}, lambda t: 0.02), ({"tm_id": "tm_2"}, lambda t: 0.4)]),
    )
    seen = PrometheusMonitor(settings, skip=frozenset({"cpu"})).observe(since=SINCE, now=NOW)
    assert set(seen.taskmanager_heap_usage) == set(seen.taskmanager_gc_pressure) == {"tm_1", "tm_2"}
    np.testing.assert_array_equal(seen.taskmanager_heap_usage["tm_2"], np.full(60, 0.97))
    np.testing.assert_array_equal(seen.taskmanager_gc_pressure["tm_2"], np.full(60, 0.4))
    assert seen.usable and "heap_usage" not in seen.gaps and "gc_time" not in seen.gaps


def test_values_outside_zero_to_one_are_no_reading_and_a_missing_label_is_a_gap(
    fake_prometheus: FakePrometheus,
) -> None:
    settings = settings_for(fake_prometheus, **JVM_MEMORY_QUERIES)
    healthy(
        fake_prometheus,
        settings,
        heap_usage=Canned(
            [({"tm_id": "tm_1"}, lambda t: 7.0 if t < 1030 else 0.6), ({"tm_id": "tm_2"}, lambda t: -1.0)]
        ),
        gc_time=Canned([({"host": "x"}, lambda t: 0.1)]),
    )
    seen = PrometheusMonitor(settings, skip=frozenset({"cpu"})).observe(since=SINCE, now=NOW)
    heap = seen.taskmanager_heap_usage["tm_1"]
    assert np.isnan(heap[:30]).all() and (heap[30:] == 0.6).all()
    assert "tm_2" not in seen.taskmanager_heap_usage  # never a value in 0..1
    assert seen.taskmanager_gc_pressure == {} and "tm_id" in seen.gaps["gc_time"]
    assert seen.usable, "a memory gap does not take the round's data away"


def test_empty_memory_queries_are_not_read_and_never_a_gap(fake_prometheus: FakePrometheus) -> None:
    settings = settings_for(fake_prometheus)
    healthy(fake_prometheus, settings)
    seen = PrometheusMonitor(settings, skip=frozenset({"cpu"})).observe(since=SINCE, now=NOW)
    assert seen.taskmanager_heap_usage == {} and seen.taskmanager_gc_pressure == {}
    assert not set(seen.gaps) & {"heap_usage", "gc_time"}
    asked = {params.get("query") for _, params in fake_prometheus.requests}
    assert not any("JVM" in (query or "") for query in asked)
