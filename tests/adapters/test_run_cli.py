"""`perdix run` start-up checks and the simulator exporter: bad input exits 2 with one line naming the key."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import structlog
import yaml
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from agent.execute.kubernetes import KubernetesScaler
from agent.settings import KAFKA_BROKER_QUERIES, PromQLQueries, ScaleTargetSettings
from cli import app
from lab.exporter import (
    BUSY,
    COMMITTED_OFFSET,
    CONSUMER_GROUP,
    CPU,
    END_OFFSET,
    IDLE,
    PENDING,
    RECORDS_OUT,
    REGISTERED,
    UPTIME,
    ExporterError,
    SimulationExporter,
    parse_address,
)
from simulator import SimulatorSettings, Trace
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.prometheus_api import Canned, FakePrometheus
from tests.fixtures.prometheus import free_port

runner = CliRunner()


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    """The CLI configures structlog for the process, onto the runner's stream that closes after invoke."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def fake_prometheus() -> Iterator[FakePrometheus]:
    fake = FakePrometheus().start()
    try:
        yield fake
    finally:
        fake.stop()


def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def run_with(tmp_path: Path, settings: dict[str, Any]) -> tuple[int, str]:
    config = tmp_path / "perdix.yaml"
    base = {"knowledge": {"path": str(tmp_path / "k.json")}, "telemetry": {"metrics_port": 0, "log_level": "error"}}
    for key, value in base.items():
        settings.setdefault(key, value)
    config.write_text(yaml.safe_dump(settings))
    result = runner.invoke(app, ["run", "--config", str(config)])
    return result.exit_code, result.output


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("perdix: error:")]
    assert len(lines) == 1, output
    return lines[0]


def target(kubeconfig: Path | str) -> dict[str, Any]:
    return {"kind": "deployment", "name": "flink-taskmanager", "kubeconfig": str(kubeconfig)}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # (what is wrong, fragment the one line must contain)
        ("simulated kind", "scale_target.kind: 'simulated'"),
        ("missing kubeconfig", "scale_target.kubeconfig"),
        ("API server down", "does not answer"),
        ("Prometheus down", "prometheus.url: Prometheus at http://127.0.0.1:"),
        (
            "rejected query",
            'prometheus.queries.workload: Prometheus rejected the query: invalid parameter "query": 1:35: parse error',
        ),
        # A regular expression of the settings RE2 refuses: the query is the default, the setting is named.
        (
            "rejected regex",
            'prometheus.queries.workload: Prometheus rejected the query: invalid parameter "query": 1:18: parse '
            "error: error parsing regexp: missing closing ): `^(?:orders()$` (the regular expression may be "
            "prometheus.flink_job 'orders(')",
        ),
        ("port taken", "telemetry.metrics_port: cannot listen on 127.0.0.1:"),
    ],
)
def test_run_start_up_problems_exit_2_with_one_line(
    tmp_path: Path, kube_api: FakeKubeAPI, kubeconfig: Path, fake_prometheus: FakePrometheus, case: str, expected: str
) -> None:
    settings: dict[str, Any] = {
        "scale_target": target(kubeconfig),
        "prometheus": {"url": fake_prometheus.url, "timeout_s": 1},
    }
    holder = None
    if case == "simulated kind":
        settings["scale_target"] = {"kind": "simulated"}
    elif case == "missing kubeconfig":
        settings["scale_target"] = target(tmp_path / "no-such-kubeconfig")
    elif case == "API server down":
        down = FakeKubeAPI().start()
        config = down.write_kubeconfig(tmp_path / "down-kubeconfig")
        down.stop()
        settings["scale_target"] = {**target(config), "request_timeout_s": 1}
    elif case == "Prometheus down":
        settings["prometheus"]["url"] = closed_url()
    elif case == "rejected query":
        bad = 'sum(kafka_messages{topic="input"}) by'
        settings["prometheus"]["queries"] = {"workload": bad}
        fake_prometheus.answers[bad] = Canned(
            status=400, error='invalid parameter "query": 1:35: parse error: unexpected end of input'
        )
    elif case == "rejected regex":
        query = 'sum(rate(records{job_name=~"{job}"}[1m]))'
        settings["prometheus"].update(flink_job="orders(", queries={"workload": query})
        fake_prometheus.answers[query.replace("{job}", "orders(")] = Canned(
            status=400,
            error='invalid parameter "query": 1:18: parse error: error parsing regexp: missing closing ): '
            "`^(?:orders()$`",
        )
    elif case == "port taken":
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        settings["telemetry"] = {
            "metrics_host": "127.0.0.1",
            "metrics_port": holder.getsockname()[1],
            "log_level": "error",
        }
    try:
        code, output = run_with(tmp_path, settings)
    finally:
        if holder is not None:
            holder.close()
    assert code == 2, output
    assert expected in one_error_line(output)
    assert kube_api.scale_target_writes() == []
    assert not (tmp_path / "k.json").exists()  # a start that failed writes no knowledge


def test_a_start_that_fails_at_the_probe_server_logs_no_stop_and_writes_no_knowledge(
    tmp_path: Path, kube_api: FakeKubeAPI, kubeconfig: Path, fake_prometheus: FakePrometheus
) -> None:
    """At the default log level: the knowledge file was flushed, and ``daemon.stopped`` logged, for a daemon that
    never ran a round."""
    settings: dict[str, Any] = {
        "scale_target": target(kubeconfig),
        "prometheus": {"url": fake_prometheus.url, "timeout_s": 1},
        "telemetry": {"metrics_host": "999.1.1.1", "metrics_port": free_port(), "log_level": "info"},
    }
    code, output = run_with(tmp_path, settings)
    assert code == 2, output
    assert "telemetry.metrics_port: cannot listen on 999.1.1.1:" in one_error_line(output)
    assert "daemon.stopped" not in output
    assert not (tmp_path / "k.json").exists()


def test_run_reports_a_missing_target_once_at_start_and_keeps_going(
    tmp_path: Path, kube_api: FakeKubeAPI, kubeconfig: Path, fake_prometheus: FakePrometheus
) -> None:
    from agent.clock import SimulatedClock
    from agent.daemon import build_parts
    from agent.settings import load_settings

    settings = load_settings(
        None,
        {
            "scale_target": {**target(kubeconfig), "name": "renamed-taskmanager"},
            "prometheus": {"url": fake_prometheus.url},
            "knowledge": {"path": str(tmp_path / "k.json")},
        },
    )
    parts = build_parts(settings, clock=SimulatedClock(1.0))  # no StartupError: the object may appear later
    (warning,) = [e for e in kube_api.events if e["type"] == "Warning"]
    assert "renamed-taskmanager" in warning["note"] and "does not exist" in warning["note"]
    assert parts.scaler.current_parallelism() is None


# ------------------------------------------------------------------ the exporter


def exporter(speed: float = 1.0, **kwargs: Any) -> SimulationExporter:
    trace = Trace("flat", np.array([0.0, 3600.0]), np.array([2000.0, 2000.0]))
    config = SimulatorSettings(initial_parallelism=3, partitions=6, worker_capacity_rps=1000.0, workload_noise=0.0)
    return SimulationExporter(trace, config, speed=speed, **kwargs)


def scrape(sim: SimulationExporter) -> dict[str, list[tuple[dict[str, str], float]]]:
    from prometheus_client import generate_latest

    text = generate_latest(sim.registry).decode()
    return {f.name: [(s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def test_exporter_serves_what_the_default_queries_read_with_counts_per_wall_second() -> None:
    sim = exporter(speed=4.0)
    with sim._lock:
        sim.job.run_until(120)
    families = scrape(sim)
    assert {RECORDS_OUT, PENDING, BUSY, IDLE, CPU, REGISTERED, UPTIME} <= set(families)
    queries = PromQLQueries()
    for name in (RECORDS_OUT, PENDING, BUSY, IDLE, UPTIME):
        assert any(name in q for q in queries.model_dump().values()), f"{name} is not what a default query reads"
    # Counters of this attempt: the records each source subtask read, their sum what the job read.
    records = families[RECORDS_OUT]
    pods = {labels["pod"] for labels, _ in records}
    assert len(pods) == 3 and all(labels["operator_name"].startswith("Source:_") for labels, _ in records)
    assert all(labels["tm_id"] == labels["pod"] for labels, _ in records)
    read = sim.job.accounting.processed
    assert sum(v for _, v in records) == pytest.approx(read, rel=0.01)
    assert sum(v for _, v in families[PENDING]) == pytest.approx(sim.job.accounting.lag, abs=1e-6)
    # Busy plus idle time add up to the attempt's wall time (119 simulated s at 4x).
    for (_labels, busy), (_, idle) in zip(sorted(families[BUSY], key=str), sorted(families[IDLE], key=str)):
        assert busy + idle == pytest.approx(119 / 4 * 1000.0, rel=0.02)
    assert {labels["pod"] for labels, _ in families[CPU]} == pods
    assert families[REGISTERED][0][1] == 3
    assert families[UPTIME][0][1] == pytest.approx(119 / 4 * 1000.0)


def test_exporter_starts_new_series_at_a_restart_and_none_while_down() -> None:
    sim = exporter(speed=1.0)
    with sim._lock:
        sim.job.run_until(60)
    first = {labels["task_attempt_num"] for labels, _ in scrape(sim)[RECORDS_OUT]}
    with sim._lock:
        sim.job.rescale(2)
        sim.job.step()
    assert RECORDS_OUT not in scrape(sim) or not scrape(sim)[RECORDS_OUT], "no task series while the job is down"
    with sim._lock:
        sim.job.run_until(200)
    after = scrape(sim)[RECORDS_OUT]
    assert len(after) == 2 and {labels["task_attempt_num"] for labels, _ in after}.isdisjoint(first)


def test_exporter_serves_kafka_exporters_partition_offsets_while_the_job_runs_and_while_it_is_down() -> None:
    sim = exporter(speed=1.0)
    with sim._lock:
        sim.job.run_until(60)
    families = scrape(sim)
    ends = {int(labels["partition"]): value for labels, value in families[END_OFFSET]}
    committed = {int(labels["partition"]): value for labels, value in families[COMMITTED_OFFSET]}
    assert sorted(ends) == sorted(committed) == list(range(6))
    assert [ends[p] for p in range(6)] == sim.job.end_offsets.tolist()
    assert [committed[p] for p in range(6)] == sim.job.committed_offsets.tolist()
    assert all(committed[p] <= ends[p] for p in ends) and sum(ends.values()) > 0
    assert {labels["consumergroup"] for labels, _ in families[COMMITTED_OFFSET]} == {CONSUMER_GROUP}
    # The documented queries read exactly these names and labels.
    assert END_OFFSET in KAFKA_BROKER_QUERIES["partition_end_offsets"]
    assert COMMITTED_OFFSET in KAFKA_BROKER_QUERIES["partition_committed_offsets"]
    with sim._lock:
        sim.job.rescale(2)
        sim.job.step()
    down = scrape(sim)
    assert len(down[END_OFFSET]) == 6, "the brokers serve the offsets while the job is down"


def test_exporter_follows_the_scale_target_like_reactive_mode(kube_api: FakeKubeAPI, kube_client: Any) -> None:
    follow = KubernetesScaler(ScaleTargetSettings(kind="deployment", name="flink-taskmanager"), kube_client)
    sim = exporter(follow=follow)
    sim._follow_once()
    assert sim.job.target_parallelism == 3
    kube_api.set_replicas("deployments", "flink-taskmanager", 5)
    sim._follow_once()
    assert sim.job.target_parallelism == 5
    with sim._lock:
        sim.job.run_until(60)
    assert scrape(sim)[REGISTERED][0][1] == 5
    assert kube_api.scale_target_writes() == [], "the exporter only reads the target"


@pytest.mark.parametrize("bad", ["9100", "localhost:", ":9100", "host:99999", "host:port"])
def test_exporter_address_errors_name_the_flag(bad: str) -> None:
    with pytest.raises(ExporterError, match="--serve-metrics"):
        parse_address(bad)


def test_simulate_serve_metrics_bad_address_exits_2(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("time_s,rate\n0,10\n60,10\n")
    result = runner.invoke(app, ["simulate", "--trace", str(trace), "--serve-metrics", "nowhere"])
    assert result.exit_code == 2 and "--serve-metrics: expected HOST:PORT" in one_error_line(result.output)
