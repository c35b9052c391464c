"""The per-operator path of the agent: settings, per-vertex monitor, job graph, scalers and the round.

Fakes implement the real interfaces: the canned Prometheus HTTP fake, the Flink REST fake, the
Kubernetes API fake, and recording monitors and scalers for the round itself.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from agent.clock import SimulatedClock
from agent.execute.flink_rest import FlinkRestScaler
from agent.execute.kubernetes import Backoff
from agent.knowledge.file import FileKnowledgeStore
from agent.observation import Observation
from agent.operator_settings import OperatorQueries
from agent.per_operator.execute import (
    OVERRIDES_KEY,
    FlinkDeploymentVertexScaler,
    FlinkRestVertexScaler,
    MemoryResult,
    parse_memory_mb,
)
from agent.loop import Agent
from agent.per_operator.loop import vertex_planning
from agent.per_operator.monitor import FlinkGraphReader, VertexMonitor
from agent.per_operator.observation import GraphVertex, JobGraph, OperatorObservation, VertexSeries
from agent.ports import RescaleResult, ScalerError
from agent.settings import ConfigError, PrometheusSettings, ScaleTargetSettings, Settings, load_settings
from agent.telemetry import Telemetry
from planner.graph import MemoryProfile
from planner.types import ReasonCode
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.prometheus_api import Canned, FakePrometheus
from tests.flink.fake_rest import FakeFlinkRest, FakeJob

SINCE, NOW = 1000.0, 1060.0
SRC, COST, SINK = "a" * 32, "b" * 32, "c" * 32
NAMES = {SRC: "Source: log", COST: "cost", SINK: "verify -> discard: Writer"}


# ---------------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("overrides", "per_operator", "error"),
    [
        ({"policy": "ds2", "scale_target.kind": "flink-rest"}, True, None),
        ({"policy": "ds2", "scale_target.kind": "deployment"}, False, None),  # whole-job DS2 on reactive mode
        ({"policy": "justin", "scale_target.kind": "flinkdeployment"}, True, None),
        ({"policy": "daedalus", "scale_target.kind": "flink-rest"}, False, None),
        ({"policy": "qescalor", "scale_target.kind": "statefulset"}, None, "scale_target.kind must be one of"),
        ({"policy": "justin"}, None, "flink-rest, flinkdeployment"),
        ({"operators.cache_hit_threshold": 1.5}, None, "operators.cache_hit_threshold"),
        ({"operators.queries.busy": "rate(x[1m]"}, None, "operators.queries.busy: malformed PromQL"),
    ],
)
def test_settings_accept_per_operator_policies_only_on_per_vertex_targets(
    overrides: dict[str, Any], per_operator: bool | None, error: str | None
) -> None:
    if error is not None:
        with pytest.raises(ConfigError, match=error):
            load_settings(None, overrides)
        return
    assert load_settings(None, overrides).per_operator is per_operator


# ---------------------------------------------------------------------------------------------- monitor


@pytest.fixture
def fake_prometheus() -> Iterator[FakePrometheus]:
    fake = FakePrometheus().start()
    try:
        yield fake
    finally:
        fake.stop()


def rendered(name: str) -> str:
    return PrometheusSettings().render(getattr(OperatorQueries(), name))


def labels(vertex: str, subtask: int) -> dict[str, str]:
    return {"task_id": vertex, "subtask_index": str(subtask)}


def test_vertex_monitor_splits_series_by_vertex_and_subtask(fake_prometheus: FakePrometheus) -> None:
    fake_prometheus.answers = {
        rendered("records_in"): Canned(
            [
                (labels(SRC, 0), lambda t: 3000.0),
                (labels(COST, 0), lambda t: 1500.0),
                (labels(COST, 1), lambda t: 1500.0),
            ]
        ),
        rendered("records_out"): Canned(
            [
                (labels(SRC, 0), lambda t: 3000.0),
                (labels(COST, 0), lambda t: 1500.0),
                (labels(COST, 1), lambda t: 1500.0),
            ]
        ),
        rendered("busy"): Canned(
            [
                (labels(SRC, 0), lambda t: 0.1),
                (labels(COST, 0), lambda t: 0.75),
                (labels(COST, 1), lambda t: None if t < SINCE + 30 else 0.75),
            ]
        ),
        rendered("state_size"): Canned([]),  # a stateless job: no RocksDB series, not a gap
    }
    monitor = VertexMonitor(PrometheusSettings(url=fake_prometheus.url), OperatorQueries())
    times, series, gaps = monitor.read(since=SINCE, now=NOW)
    assert len(times) == 60 and set(series) == {SRC, COST} and gaps == {}
    cost = series[COST].metrics()
    # Eq. 1/5 over the two subtasks: 1500 / 0.75 each; the NaN head of subtask 1 is left out of its mean.
    assert cost.true_processing_rate == pytest.approx(4000.0) and cost.rated_subtasks == 2
    assert not cost.stateful and series[SRC].metrics().true_rate_per_subtask == pytest.approx(30_000.0)


def test_vertex_monitor_names_a_missing_required_query(fake_prometheus: FakePrometheus) -> None:
    fake_prometheus.answers = {rendered("records_in"): Canned(status=400, error="parse error")}
    errors: list[str] = []
    monitor = VertexMonitor(PrometheusSettings(url=fake_prometheus.url), OperatorQueries(), on_error=errors.append)
    _, series, gaps = monitor.read(since=SINCE, now=NOW)
    assert set(gaps) == {"records_in", "records_out", "busy"} and "rejected" in gaps["records_in"]
    assert "rejected" in errors and series == {}


# ---------------------------------------------------------------------------------------------- job graph


@pytest.fixture
def flink_rest() -> Iterator[FakeFlinkRest]:
    job = FakeJob(vertices={SRC: 1, COST: 2, SINK: 1}, names=NAMES, inputs={COST: (SRC,), SINK: (COST,)})
    fake = FakeFlinkRest(job).start()
    try:
        yield fake
    finally:
        fake.stop()


def rest_scaler(fake: FakeFlinkRest) -> FlinkRestScaler:
    settings = ScaleTargetSettings(kind="flink-rest", rest_url=fake.url, request_timeout_s=2.0)
    return FlinkRestScaler(settings, clock=SimulatedClock(0.0), confirm_timeout_s=5.0, poll_interval_s=0.0)


def test_graph_reader_reads_vertices_edges_and_slot_profile(flink_rest: FakeFlinkRest) -> None:
    graph = FlinkGraphReader(rest_scaler(flink_rest)).read()
    assert [(v.name, v.parallelism, v.upstream) for v in graph.vertices] == [
        ("Source: log", 1, ()),
        ("cost", 2, (SRC,)),
        ("verify -> discard: Writer", 1, (COST,)),
    ]
    assert graph.profile == MemoryProfile(128.0, 1.0) and graph.vertices[1].max_parallelism == 128


def test_flink_rest_vertex_scaler_sets_only_the_named_vertex_in_one_put(flink_rest: FakeFlinkRest) -> None:
    result = FlinkRestVertexScaler(rest_scaler(flink_rest)).rescale_vertices({COST: 3}, reasons=("t",), dry_run=False)
    puts = [w for w in flink_rest.writes() if w[0] == "PUT"]
    assert len(puts) == 1 and result.confirmed == 3
    body = flink_rest.put_bodies[0]
    assert {vid: b["parallelism"]["upperBound"] for vid, b in body.items()} == {SRC: 1, COST: 3, SINK: 1}
    with pytest.raises(ScalerError, match="in place"):
        FlinkRestVertexScaler(rest_scaler(flink_rest)).apply_memory(256.0, reasons=(), dry_run=False)


# ---------------------------------------------------------------------------------------------- FlinkDeployment


@pytest.mark.parametrize(("text", "mb"), [("2048m", 2048.0), ("2g", 2048.0), ("1.5Gi", 1536.0), ("512mb", 512.0)])
def test_parse_memory(text: str, mb: float) -> None:
    assert parse_memory_mb(text) == mb


@pytest.fixture
def kube() -> Iterator[tuple[FakeKubeAPI, k8s.ApiClient]]:
    fake = FakeKubeAPI().start()
    fake.add_flinkdeployment("flink-job", 2)
    configuration = k8s.Configuration()
    configuration.host = fake.url
    api = k8s.ApiClient(configuration)
    try:
        yield fake, api
    finally:
        api.close()
        fake.stop()


def test_flinkdeployment_gets_vertex_overrides_and_enough_job_parallelism(kube: tuple[FakeKubeAPI, Any]) -> None:
    fake, api = kube
    settings = ScaleTargetSettings(kind="flinkdeployment", name="flink-job")
    scaler = FlinkDeploymentVertexScaler(
        settings, api, backoff=Backoff(max_retries=0, sleep=lambda s: None, rng=random.Random(1))
    )
    result = scaler.rescale_vertices({COST: 3}, reasons=("t",), dry_run=False)
    spec = fake.flinkdeployment("flink-job")["spec"]
    assert spec["flinkConfiguration"][OVERRIDES_KEY] == f"{COST}:3"
    assert spec["job"]["parallelism"] == 3 and result.confirmed == 3
    scaler.rescale_vertices({SRC: 1}, reasons=("t",), dry_run=False)
    assert fake.flinkdeployment("flink-job")["spec"]["flinkConfiguration"][OVERRIDES_KEY] == f"{SRC}:1,{COST}:3"


def test_flinkdeployment_memory_moves_managed_and_process_memory_together(kube: tuple[FakeKubeAPI, Any]) -> None:
    fake, api = kube
    scaler = FlinkDeploymentVertexScaler(ScaleTargetSettings(kind="flinkdeployment", name="flink-job"), api)
    first = scaler.apply_memory(256.0, reasons=("justin",), dry_run=False)
    spec = fake.flinkdeployment("flink-job")["spec"]
    # No explicit managed size before: the process grows by the whole new managed memory (2048 + 256).
    assert spec["flinkConfiguration"]["taskmanager.memory.managed.size"] == "256m"
    assert spec["taskManager"]["resource"]["memory"] == "2304m" and first.confirmed_mb == 256.0
    scaler.apply_memory(512.0, reasons=("justin",), dry_run=False)
    assert fake.flinkdeployment("flink-job")["spec"]["taskManager"]["resource"]["memory"] == "2560m"
    before = fake.summary()
    scaler.apply_memory(1024.0, reasons=("justin",), dry_run=True)
    assert fake.summary().get("PATCH", 0) == before.get("PATCH", 0)


# ---------------------------------------------------------------------------------------------- the round


def whole_job_observation(now: float, *, workload: float = 6000.0) -> Observation:
    times = np.arange(now - 60, now)
    flat = np.full(60, 1.0)
    return Observation(
        now=now,
        times=times,
        workload=flat * workload,
        worker_throughput={"tm-0": flat * min(workload, 4000.0)},
        worker_cpu={},
        consumer_lag=flat * 10.0,
        parallelism=1,
        uptime_s=3600.0,
        worker_busy={"tm-0": flat * 0.2},
    )


class WholeJobMonitor:
    def __init__(self, workload: float = 6000.0) -> None:
        self.workload = workload

    def observe(self, *, since: float, now: float) -> Observation:
        return whole_job_observation(now, workload=self.workload)


class SplitJobMonitor:
    """The split shape at 4000/s carried: the map's two subtasks saturated at 2000/s each."""

    def __init__(self, *, stateful_hit: float | None = None, gaps: Mapping[str, str] | None = None) -> None:
        self.parallelism = {SRC: 1, COST: 2, SINK: 1}
        self.stateful_hit = stateful_hit
        self.gaps = dict(gaps or {})

    def observe(self, *, since: float, now: float) -> OperatorObservation:
        times = np.arange(since, now)
        flat = np.ones(len(times))
        graph = JobGraph(
            "j",
            "split",
            (
                GraphVertex(SRC, NAMES[SRC], self.parallelism[SRC]),
                GraphVertex(COST, NAMES[COST], self.parallelism[COST], 128, (SRC,)),
                GraphVertex(SINK, NAMES[SINK], self.parallelism[SINK], 128, (COST,)),
            ),
            MemoryProfile(128.0),
        )
        carried = 4000.0
        series: dict[str, dict[str, dict[str, np.ndarray]]] = {}
        # A stateful sink is busy on its state: DS2 wants a second subtask, Justin memory first (hit rate low).
        sink_busy = 0.9 if self.stateful_hit is not None else 0.5
        for vid, busy, out in ((SRC, 0.1, carried), (COST, 1.0, carried), (SINK, sink_busy, 0.0)):
            p = self.parallelism[vid]
            series[vid] = {
                "records_in": {str(i): flat * carried / p for i in range(p)},
                "records_out": {str(i): flat * out / p for i in range(p)},
                "busy": {str(i): flat * busy for i in range(p)},
            }
        if self.stateful_hit is not None:
            series[SINK]["cache_hit_rate"] = {"0": flat * self.stateful_hit}
            series[SINK]["state_size"] = {"0": flat * 1e9}
        return OperatorObservation(
            now, times, graph, {vid: VertexSeries(vid, s) for vid, s in series.items()}, self.gaps
        )


class RecordingVertexScaler:
    def __init__(self, monitor: SplitJobMonitor, *, memory_applies: bool = False) -> None:
        self.monitor = monitor
        self.memory_applies = memory_applies
        self.calls: list[tuple[dict[str, int], bool]] = []
        self.memory: list[float] = []

    def rescale_vertices(self, targets: Mapping[str, int], *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        self.calls.append((dict(targets), dry_run))
        if not dry_run:
            self.monitor.parallelism.update(targets)
        return RescaleResult(
            requested=max(targets.values()),
            confirmed=max(self.monitor.parallelism.values()),
            dry_run=dry_run,
            downtime_s=None if dry_run else 0.5,
        )

    def apply_memory(
        self, managed_memory_per_slot_mb: float, *, reasons: tuple[str, ...], dry_run: bool
    ) -> MemoryResult:
        self.memory.append(managed_memory_per_slot_mb)
        return MemoryResult(managed_memory_per_slot_mb, managed_memory_per_slot_mb, dry_run)


class Events:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str]] = []

    def emit(self, *, reason: str, message: str, type_: str = "Normal") -> None:
        self.emitted.append((reason, message))


class NoScaler:
    def current_parallelism(self) -> int | None:
        return 1

    def rescale(self, target: int, *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        raise AssertionError("the per-operator round never rescales the whole job")


class SlotBound(NoScaler):
    """A session cluster whose free slots run the job at ``slots`` subtasks a vertex at most (reads recorded)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.asked: list[int] = []

    def reachable_parallelism(self, upper: int) -> int | None:
        self.asked.append(upper)
        return min(upper, self.slots)


def agent_for(
    tmp_path: Path,
    policy: str,
    monitor: SplitJobMonitor,
    *,
    dry_run: bool = False,
    memory_applies: bool = False,
    kind: str = "flink-rest",
    job_scaler: NoScaler | None = None,
) -> tuple[Agent, RecordingVertexScaler, Events]:
    settings = Settings(
        policy=policy,
        dry_run=dry_run,
        loop_interval_s=60.0,
        grace_period_s=0.0,
        max_parallelism=8,
        scale_target=ScaleTargetSettings(kind=kind),  # type: ignore[arg-type]
        knowledge={"path": tmp_path / "k.json"},  # type: ignore[arg-type]
    )
    scaler = RecordingVertexScaler(monitor, memory_applies=memory_applies)
    events = Events()
    telemetry = Telemetry(CollectorRegistry())
    agent = Agent(
        settings=settings,
        clock=SimulatedClock(NOW),
        monitor=WholeJobMonitor(),
        scaler=job_scaler or NoScaler(),
        knowledge=FileKnowledgeStore(tmp_path / "k.json"),
        events=events,
        telemetry=telemetry,
        planning=vertex_planning(settings, monitor=monitor, scaler=scaler, registry=telemetry.registry),  # type: ignore[arg-type]
    )
    return agent, scaler, events


def test_ds2_round_rescales_the_costly_vertex_alone_in_one_write(tmp_path: Path) -> None:
    monitor = SplitJobMonitor()
    agent, scaler, _ = agent_for(tmp_path, "ds2", monitor)
    with capture_logs() as logs:
        result = agent.round()
    assert result.skipped is None and scaler.calls == [({COST: 3}, False)]
    assert result.decision is not None and result.decision.code is ReasonCode.SCALE_OUT
    record = agent.rescales.to_list()[-1]
    assert record["vertices"] == {"cost": [2, 3]} and record["downtime_s"] == 0.5
    plan = next(e for e in logs if e["event"] == "operators.plan")
    assert "cost=3" in plan["planned"] and "cost=2" in plan["current"]
    # The per-vertex gauges on the agent's registry.
    registry = agent.telemetry.registry  # type: ignore[union-attr]
    assert registry.get_sample_value("perdix_vertex_parallelism_recommended", {"vertex": "cost"}) == 3.0
    # The knowledge keeps the per-vertex rescale and the loop's state.
    assert agent.document()["loop"]["rescales"][-1]["vertices"] == {"cost": [2, 3]}


def test_every_vertex_is_planned_within_the_slots_the_cluster_has_free(tmp_path: Path) -> None:
    # The round above wants the costly vertex at 3; on a cluster with room for 2 a vertex it stays at 2.
    monitor = SplitJobMonitor()
    bound = SlotBound(2)
    agent, scaler, _ = agent_for(tmp_path, "ds2", monitor, job_scaler=bound)
    with capture_logs() as logs:
        result = agent.round()
    assert bound.asked == [8], "asked with the configured max_parallelism"
    assert all(max(targets.values()) <= 2 for targets, _ in scaler.calls), scaler.calls
    assert monitor.parallelism[COST] == 2 and result.decision is not None
    capped = [e for e in logs if e["event"] == "planner.capped"]
    assert len(capped) == 1 and capped[0]["max_parallelism"] == 2 and capped[0]["configured"] == 8
    # With the slots back the same round rescales the vertex to 3.
    bound.slots = 8
    agent.clock.advance(60.0)  # type: ignore[attr-defined]
    with capture_logs() as logs:
        agent.round()
    assert scaler.calls[-1] == ({COST: 3}, False) and [
        e["event"] for e in logs if e["event"].startswith("planner.")
    ] == ["planner.uncapped"]


def test_dry_run_logs_the_per_vertex_plan_and_writes_nothing(tmp_path: Path) -> None:
    monitor = SplitJobMonitor()
    agent, scaler, _ = agent_for(tmp_path, "ds2", monitor, dry_run=True)
    with capture_logs() as logs:
        agent.round()
    assert scaler.calls == [({COST: 3}, True)] and monitor.parallelism[COST] == 2
    dry = next(e for e in logs if e["event"] == "rescale.dry_run")
    assert dry["vertices"] == {"cost": [2, 3]} and agent.last_rescale_at is None


def test_a_round_without_vertex_series_plans_nothing(tmp_path: Path) -> None:
    monitor = SplitJobMonitor(gaps={"busy": "rejected: bad query"})
    agent, scaler, _ = agent_for(tmp_path, "ds2", monitor)
    result = agent.round()
    assert result.skipped is not None and "operators.busy" in result.skipped and scaler.calls == []


@pytest.mark.parametrize(("applies", "kind"), [(False, "flink-rest"), (True, "flinkdeployment")])
def test_justin_memory_is_applied_on_a_flinkdeployment_and_recommended_on_flink_rest(
    tmp_path: Path, applies: bool, kind: str
) -> None:
    monitor = SplitJobMonitor(stateful_hit=0.4)
    agent, scaler, events = agent_for(tmp_path, "justin", monitor, memory_applies=applies, kind=kind)
    with capture_logs() as logs:
        agent.round()
    if applies:
        # Memory instead of a second sink subtask: level 1, 256 MB per slot.
        assert scaler.memory == [256.0] and (COST, 3) in scaler.calls[0][0].items()
        assert SINK not in scaler.calls[0][0]
        assert any(e["event"] == "memory.applied" for e in logs)
    else:
        # Memory cannot change: DS2's second sink subtask goes ahead, memory is recommended.
        assert scaler.memory == [] and scaler.calls[0][0] == {COST: 3, SINK: 2}
        recommended = next(e for e in logs if e["event"] == "memory.recommended")
        assert recommended["managed_memory_per_slot_mb"] >= 128.0
        assert [reason for reason, _ in events.emitted] == ["MemoryRecommended"]
        registry = agent.telemetry.registry  # type: ignore[union-attr]
        assert not math.isnan(registry.get_sample_value("perdix_memory_recommended_mb") or math.nan)


def test_qescalor_recommends_a_profile_and_applies_its_parallelism(tmp_path: Path) -> None:
    monitor = SplitJobMonitor()
    agent, scaler, events = agent_for(tmp_path, "qescalor", monitor)
    # The forecaster's answer is pinned (a flat 6000/s): the test is about QEScalor, not the ARIMA.
    agent.analyzer.forecaster.step = lambda samples, smear_s=0: _flat_forecast()  # type: ignore[method-assign]
    with capture_logs() as logs:
        agent.round()
    assert scaler.calls and scaler.calls[0][0].get(COST) == 3
    assert any(e["event"] == "profile.recommended" for e in logs)
    assert "ProfileRecommended" in [reason for reason, _ in events.emitted]


def _flat_forecast() -> Any:
    from models.forecast import Forecast

    return Forecast(np.full(900, 6000.0), "linear", None)


def test_a_per_vertex_rescale_survives_a_restart(tmp_path: Path) -> None:
    """The knowledge document's schema reads the per-vertex record; the restarted agent keeps it."""
    monitor = SplitJobMonitor()
    agent, _, _ = agent_for(tmp_path, "ds2", monitor)
    agent.round()
    assert agent.rescales.to_list()[-1]["vertices"] == {"cost": [2, 3]}
    with capture_logs() as logs:
        restarted, _, _ = agent_for(tmp_path, "ds2", monitor)
    assert "knowledge.restored" in [e["event"] for e in logs], logs
    assert restarted.rescales.to_list()[-1]["vertices"] == {"cost": [2, 3]}


class AbsurdVertexMonitor(SplitJobMonitor):
    """The split job with one per-subtask series no job can report."""

    def __init__(self, query: str, value: float) -> None:
        super().__init__()
        self.query, self.value = query, value

    def observe(self, *, since: float, now: float) -> OperatorObservation:
        seen = super().observe(since=since, now=now)
        for _subtask, values in seen.vertices[COST].series[self.query].items():
            values[:] = self.value  # type: ignore[index]
        return seen


@pytest.mark.parametrize(
    ("query", "value"), [("busy", 5.0), ("busy", -0.5), ("records_in", -1000.0), ("records_out", float("inf"))]
)
def test_an_absurd_per_subtask_reading_is_a_gap_and_no_vertex_is_rescaled(
    tmp_path: Path, query: str, value: float
) -> None:
    monitor = AbsurdVertexMonitor(query, value)
    agent, scaler, _ = agent_for(tmp_path, "ds2", monitor)
    result = agent.round()
    assert scaler.calls == [], f"{query}={value} rescaled a vertex"
    assert result.skipped is not None and query in result.skipped, result.skipped
