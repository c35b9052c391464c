"""End to end: `perdix run` against a real Prometheus scraping the simulator exporter, and the fake Kubernetes API.

Real parts: Prometheus 2.42 (Debian), `perdix simulate --serve-metrics` and `perdix run` as
subprocesses, the official kubernetes client inside them talking HTTP to the loopback fake API
(the only fake). The exporter follows the TaskManager Deployment's replicas like Flink reactive mode.

One timeline, two agents, sharing their knowledge through the ConfigMap:
1. a dry-run agent learns the job, sees the workload step up, recommends a larger scale-out
   (RescaleRecommended Events, /metrics) and never writes the scale target; SIGTERM flushes knowledge;
2. a real agent restores that knowledge and scales the Deployment up (PATCH of the scale subresource,
   Rescaled Event); then Prometheus is stopped: no rescale, /readyz turns not ready; Prometheus
   comes back: /readyz ready again; SIGTERM: exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.settings import KAFKA_BROKER_QUERIES
from lab.exporter import CONSUMER_GROUP
from tests.fakes.kube_api import FakeKubeAPI
from tests.fixtures.prometheus import PrometheusServer, free_port, http_get, poll

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
PERDIX = [sys.executable, "-m", "cli"]
TASKMANAGERS = "flink-taskmanager"
INITIAL = 3
STEP_AT_S = 40
"""Simulated second of the workload step (speed 1: wall seconds after the exporter started)."""

SIMULATOR = {
    # A small, quick job: 1000 records/s per worker, short restarts, a CPU signal with enough spread
    # for the per-worker regression to fit within half a minute of one-second samples.
    "partitions": 12,
    "initial_parallelism": INITIAL,
    "worker_capacity_rps": 1000.0,
    "metric_window_s": 2,
    "cpu_noise": 0.04,
    "rescale_downtime_base_s": 2.0,
    "rescale_downtime_per_worker_s": 0.2,
    "failure_downtime_base_s": 2.0,
    "failure_downtime_per_worker_s": 0.1,
    "checkpoint_interval_s": 5,
    "seed": 11,
}


def write_trace(path: Path) -> Path:
    """A ramp from 35 % to 70 % of the initial capacity (CPU spread to learn from), then a step to 150 %."""
    capacity = INITIAL * 1000.0
    rows = [(0, 0.35 * capacity), (STEP_AT_S - 1, 0.7 * capacity), (STEP_AT_S, 1.5 * capacity), (3600, 1.5 * capacity)]
    path.write_text("time_s,rate\n" + "".join(f"{t},{r:.1f}\n" for t, r in rows))
    return path


class Process:
    """A subprocess with its output in a file; stopped by pid."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        handle = log.open("wb")
        self.popen = subprocess.Popen(
            args,
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        handle.close()

    def terminate(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, wait; SIGKILL if it does not stop. Returns the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)
        return int(self.popen.returncode)

    def lines(self) -> list[dict[str, Any]]:
        """The JSON log lines so far."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def tail(self, n: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Fake API, exporter subprocess and Prometheus; everything stopped at the end."""
    fake = FakeKubeAPI().start()
    fake.add_workload("deployments", TASKMANAGERS, INITIAL)
    fake.add_configmap("perdix-knowledge")  # the chart creates it empty
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    exporter_port = free_port()
    exporter_config = tmp_path / "exporter.yaml"
    exporter_config.write_text(
        yaml.safe_dump(
            {
                "simulator": SIMULATOR,
                "scale_target": {"kind": "deployment", "name": TASKMANAGERS, "kubeconfig": str(kubeconfig)},
                "telemetry": {"log_format": "json", "log_level": "info"},
            }
        )
    )
    processes: list[Process] = []
    prometheus = PrometheusServer(tmp_path / "prometheus", [f"127.0.0.1:{exporter_port}"])
    (tmp_path / "prometheus").mkdir()
    started = time.monotonic()
    try:
        exporter = Process(
            [
                *PERDIX,
                "simulate",
                "--trace",
                str(write_trace(tmp_path / "step.csv")),
                "--config",
                str(exporter_config),
                "--serve-metrics",
                f"127.0.0.1:{exporter_port}",
                "--speed",
                "1",
                "--follow-scale-target",
                "--log-format",
                "json",
                "--log-level",
                "info",
            ],
            tmp_path / "exporter.log",
        )
        processes.append(exporter)
        poll(lambda: http_get(f"http://127.0.0.1:{exporter_port}/healthz")[0] == 200, timeout_s=30, what="the exporter")
        prometheus.start()
        yield {
            "fake": fake,
            "kubeconfig": kubeconfig,
            "prometheus": prometheus,
            "tmp": tmp_path,
            "processes": processes,
            "exporter": exporter,
            "started": started,
        }
    finally:
        for process in processes:
            process.terminate(timeout_s=20)
        prometheus.stop()
        fake.stop()
        summary = fake.summary()
        print(f"\ne2e wall time {time.monotonic() - started:.1f} s")
        print("request log summary:\n" + "\n".join(f"  {count:4d}  {key}" for key, count in sorted(summary.items())))


def agent_config(world: dict[str, Any], *, dry_run: bool, port: int, extra: dict[str, Any] | None = None) -> Path:
    settings: dict[str, Any] = {
        "dry_run": dry_run,
        "loop_interval_s": 2,
        "min_parallelism": 1,
        "max_parallelism": 12,
        "target_recovery_time_s": 60,
        "grace_period_s": 15,
        "recent_rescale_window_s": 30,
        "checkpoint_interval_s": 5,
        "downtime_rescale_prior_s": 3,
        "downtime_failure_prior_s": 2,
        "forecast_window_s": 60,
        "forecast_horizon_s": 60,
        "prometheus": {
            "url": world["prometheus"].url,
            "timeout_s": 2,
            "stale_after_s": 10,
            # The default queries on a quick job: rates over 10 s (the simulated restarts take 2-3 s).
            "rate_window_s": 10,
            "worker_label": "pod",
        },
        "scale_target": {
            "kind": "deployment",
            "name": TASKMANAGERS,
            "namespace": "default",
            "kubeconfig": str(world["kubeconfig"]),
            "request_timeout_s": 2,
        },
        "knowledge": {"store": "configmap", "configmap": "perdix-knowledge"},
        "telemetry": {
            "metrics_host": "127.0.0.1",
            "metrics_port": port,
            "not_ready_after_failed_loops": 2,
            "log_format": "json",
            "log_level": "info",
        },
    }
    for key, value in (extra or {}).items():
        settings[key] = {**settings[key], **value} if isinstance(value, dict) else value
    path = world["tmp"] / f"agent-{'dry' if dry_run else 'real'}.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def metric(port: int, name: str) -> float | None:
    status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        return None
    for line in body.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{}"):
            return float(line.rsplit(" ", 1)[1])
    return None


def start_agent(world: dict[str, Any], *, dry_run: bool, extra: dict[str, Any] | None = None) -> tuple[Process, int]:
    port = free_port()
    process = Process(
        [*PERDIX, "run", "--config", str(agent_config(world, dry_run=dry_run, port=port, extra=extra))],
        world["tmp"] / f"agent-{'dry' if dry_run else 'real'}.log",
    )
    world["processes"].append(process)

    def serving() -> bool:
        if process.popen.poll() is not None:
            raise AssertionError(f"perdix run exited with {process.popen.returncode}:\n{process.tail()}")
        return http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200

    poll(serving, timeout_s=60, what="perdix run /healthz")
    return process, port


def test_perdix_run_scales_the_deployment_on_a_step_and_survives_a_prometheus_outage(world: dict[str, Any]) -> None:
    fake: FakeKubeAPI = world["fake"]
    prometheus: PrometheusServer = world["prometheus"]

    # ---- 1. dry-run: recommends, never writes the scale target
    dry, dry_port = start_agent(world, dry_run=True)
    poll(lambda: http_get(f"http://127.0.0.1:{dry_port}/readyz")[0] == 200, timeout_s=30, what="dry-run agent ready")

    def recommended() -> list[dict[str, Any]]:
        return [e for e in fake.events if e["reason"] == "RescaleRecommended"]

    poll(recommended, timeout_s=90, interval_s=0.5, what=f"a RescaleRecommended Event\n{dry.tail()}")
    event = recommended()[0]
    assert event["regarding"]["kind"] == "Deployment" and event["regarding"]["name"] == TASKMANAGERS
    assert event["type"] == "Normal" and f"from {INITIAL} to" in event["note"]
    # The Event goes out during the round, the metrics at its end: poll.
    poll(
        lambda: (metric(dry_port, "perdix_parallelism_recommended") or 0) > INITIAL,
        timeout_s=10,
        what="perdix_parallelism_recommended above the current scale-out",
    )
    assert metric(dry_port, "perdix_parallelism_current") == INITIAL
    assert (metric(dry_port, "perdix_rescale_recommendations_total") or 0) >= 1
    assert metric(dry_port, "perdix_rescales_total") == 0
    assert dry.terminate() == 0, dry.tail()
    assert fake.scale_target_writes() == [], "dry-run wrote the scale target"
    assert fake.replicas("deployments", TASKMANAGERS) == INITIAL
    knowledge = fake.configmap("perdix-knowledge")
    assert knowledge is not None, "the dry-run agent wrote no knowledge ConfigMap"
    flushed = knowledge["data"]["knowledge.json"]
    assert json.loads(flushed)["loop"]["recommendations"], "the dry-run agent's knowledge was not flushed"
    assert any(line.get("event") == "daemon.stopped" and line.get("knowledge_flushed") for line in dry.lines())

    # ---- 2. real agent: restores the knowledge and rescales
    real, port = start_agent(world, dry_run=False)
    assert poll(
        lambda: any(l.get("event") == "knowledge.restored" for l in real.lines()),
        timeout_s=15,
        what="knowledge restored from the ConfigMap",
    )

    def scale_patches() -> list[Any]:
        return [r for r in fake.scale_target_writes() if r.status == 200]

    poll(scale_patches, timeout_s=60, interval_s=0.5, what=f"a PATCH of the scale subresource\n{real.tail()}")
    patch = scale_patches()[0]
    assert (
        patch.method == "PATCH" and patch.path == f"/apis/apps/v1/namespaces/default/deployments/{TASKMANAGERS}/scale"
    )
    new_replicas = patch.body["spec"]["replicas"]
    assert new_replicas > INITIAL
    assert fake.replicas("deployments", TASKMANAGERS) == new_replicas
    rescaled = poll(lambda: [e for e in fake.events if e["reason"] == "Rescaled"], timeout_s=5, what="a Rescaled Event")
    assert f"to {new_replicas}" in rescaled[0]["note"]
    poll(lambda: metric(port, "perdix_rescales_total") == 1, timeout_s=10, what="perdix_rescales_total 1")
    poll(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout_s=30, what="real agent ready")

    # ---- 3. Prometheus down: no rescale, not ready; back: ready again
    writes_before = len(fake.scale_target_writes())
    prometheus.stop()
    poll(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 503, timeout_s=20, what="/readyz not ready")
    status, body = http_get(f"http://127.0.0.1:{port}/readyz")
    assert "without data" in body
    assert (metric(port, 'perdix_round_failures_total{step="monitor"}') or 0) >= 2
    assert (metric(port, 'perdix_monitor_errors_total{kind="unreachable"}') or 0) >= 2
    assert len(fake.scale_target_writes()) == writes_before, "rescaled while Prometheus was down"
    prometheus.start()
    poll(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout_s=40, what="/readyz ready again")
    assert len(fake.scale_target_writes()) == writes_before
    unavailable = [l for l in real.lines() if l.get("event") == "monitor.unavailable"]
    assert len(unavailable) == 1, "one log line per outage, not per round"

    assert real.terminate() == 0, real.tail()
    assert any(l.get("event") == "daemon.stopped" and l.get("knowledge_flushed") for l in real.lines())
    assert time.monotonic() - world["started"] < 180


def test_keda_lag_scales_the_deployment_on_the_partitions_lag_kafka_exporter_reports(world: dict[str, Any]) -> None:
    """The KEDA peer on a real job: kafka_exporter's per-partition offsets (the exporter serves them under its
    names) read through Prometheus with the documented queries; the lag the job builds after the step (from
    the committed offsets, which trail by up to a checkpoint) sizes the Deployment, as KEDA's Kafka scaler
    would. Before this, keda-lag on a real job never read an offset and never acted."""
    fake: FakeKubeAPI = world["fake"]
    queries = {
        name: KAFKA_BROKER_QUERIES[name].replace("TOPIC", "input").replace("GROUP", CONSUMER_GROUP)
        for name in ("partition_end_offsets", "partition_committed_offsets")
    }
    agent, port = start_agent(
        world,
        dry_run=False,
        extra={"policy": "keda-lag", "keda_lag_threshold": 20_000, "prometheus": {"queries": queries}},
    )

    def scale_patches() -> list[Any]:
        return [r for r in fake.scale_target_writes() if r.status == 200]

    poll(scale_patches, timeout_s=120, interval_s=0.5, what=f"a PATCH of the scale subresource\n{agent.tail()}")
    replicas = scale_patches()[0].body["spec"]["replicas"]
    assert replicas > INITIAL
    # Sized by the lag of the twelve partitions (SIMULATOR), in the policy's own words.
    (rescale, *_) = poll(
        lambda: [line for line in agent.lines() if line.get("event") == "rescale"],
        timeout_s=10,
        what="the rescale logged",
    )
    assert rescale["to"] == replicas and any(
        "committed lag" in reason and "over 12 partitions" in reason for reason in rescale["reasons"]
    ), rescale
    # The offsets' only gaps were those of the first rounds, before Prometheus had scraped the exporter.
    gaps = [line for line in agent.lines() if line.get("event") == "monitor.gap" and "partition" in line["series"]]
    assert {line["problem"] for line in gaps} <= {"empty"}, gaps
    assert agent.terminate() == 0, agent.tail()
