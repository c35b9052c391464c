"""Telemetry: metrics of real agent rounds on a fresh registry, readiness transitions, the probe server."""

from __future__ import annotations

import math
import socket

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from agent.observation import Observation
from agent.ports import MonitorError
from agent.telemetry import Telemetry, TelemetryServer
from lab.replay import Replay
from lab.settings import load_lab_settings
from simulator import Trace
from tests.fixtures.prometheus import http_get


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels or None)


class SwitchableMonitor:
    """Wraps a real monitor; while ``down`` it fails like an unreachable Prometheus."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.down = False

    def observe(self, *, since: float, now: float) -> Observation:
        if self.down:
            raise MonitorError("Prometheus at http://127.0.0.1:1 is not reachable (connection refused)")
        return self.inner.observe(since=since, now=now)  # type: ignore[attr-defined]


def step_replay(**overrides: object) -> Replay:
    seconds = 3600
    trace = Trace("step", np.array([0.0, 899.0, 900.0, float(seconds)]), np.array([45_000, 45_000, 95_000, 95_000]))
    # A short forecast window keeps the ARIMA fits (inline in a replay) fast; the metrics do not depend on it.
    settings = load_lab_settings(
        None,
        {
            "simulator.initial_parallelism": 6,
            "max_parallelism": 16,
            "forecast_window_s": 120,
            "forecast_horizon_s": 120,
            **overrides,
        },
    )
    return Replay(trace, settings, hours=0.5)


def test_round_metrics_follow_the_agent_through_a_scale_out() -> None:
    registry = CollectorRegistry()
    telemetry = Telemetry(registry)
    run = step_replay()
    run.agent.telemetry = telemetry
    run.run()

    rounds = len(run.rounds)
    assert sample(registry, "perdix_loop_duration_seconds_count") == rounds
    assert sample(registry, "perdix_rounds_total", outcome="data") == rounds
    executed = [r for r in run.scaler.requests if not r[2]]
    assert executed, "the step should have caused a rescale"
    assert sample(registry, "perdix_rescales_total") == len(executed)
    assert sample(registry, "perdix_rescale_recommendations_total") >= len(executed)
    # Decisions are counted by their code, one per round that planned.
    codes = [r.decision.code.value for r in run.rounds if r.decision is not None]
    for code in set(codes):
        assert sample(registry, "perdix_decisions_total", code=code) == codes.count(code)
    # The step's rescale is counted under its own code (a scale-out, or the fallback's no-candidate when
    # no scale-out recovers within the target).
    rescaled = next(
        r
        for r in run.rounds
        if r.decision is not None
        and r.analysis is not None
        and r.decision.target_parallelism > (r.analysis.parallelism or 0)
    )
    assert rescaled.decision is not None and rescaled.decision.code.value in ("scale-out", "no-candidate")
    assert sample(registry, "perdix_decisions_total", code=rescaled.decision.code.value) >= 1
    last = run.rounds[-1]
    assert sample(registry, "perdix_parallelism_current") == last.analysis.parallelism
    assert sample(registry, "perdix_parallelism_recommended") == last.decision.target_parallelism
    expected_capacity = last.analysis.capacities.get(last.analysis.parallelism)
    capacity = sample(registry, "perdix_capacity")
    if expected_capacity is None:
        assert capacity is not None and math.isnan(capacity), "unknown capacity must read NaN, not 0"
    else:
        assert capacity == pytest.approx(expected_capacity)
    assert sample(registry, "perdix_workload_rate") == pytest.approx(last.analysis.workload_avg)
    assert sample(registry, "perdix_forecast_peak") == pytest.approx(float(np.max(last.analysis.forecast)))
    assert sample(registry, "perdix_ready") == 1
    assert telemetry.readiness() == (True, "ready")


def test_readiness_needs_data_and_drops_after_n_rounds_without_it() -> None:
    registry = CollectorRegistry()
    telemetry = Telemetry(registry, not_ready_after_failed_loops=3)
    run = step_replay(loop_interval_s=30)
    monitor = SwitchableMonitor(run.monitor)
    run.agent.monitor = monitor  # type: ignore[assignment]
    run.agent.telemetry = telemetry
    assert telemetry.readiness()[0] is False, "not ready before any round"

    monitor.down = True
    run.run(until_s=60)  # two rounds without data before ever having data
    ready, reason = telemetry.readiness()
    assert not ready and "without data" in reason

    with capture_logs() as logs:
        monitor.down = False
        run.run(until_s=90)
        assert telemetry.readiness() == (True, "ready")
        monitor.down = True
        run.run(until_s=150)  # two failed rounds: still under the threshold
        assert telemetry.readiness()[0] is True
        run.run(until_s=180)  # the third
        ready, reason = telemetry.readiness()
        assert not ready and "3 round(s) without data" in reason and "monitor failed" in reason
        run.run(until_s=240)  # more failing rounds: no further log line
        monitor.down = False
        run.run(until_s=270)
        assert telemetry.readiness()[0] is True
    changes = [e["event"] for e in logs if e["event"].startswith("readiness.")]
    assert changes == ["readiness.ready", "readiness.not_ready", "readiness.ready"]
    assert sample(registry, "perdix_round_failures_total", step="monitor") == 2 + 5
    assert math.isnan(sample(registry, "perdix_parallelism_current") or 0.0) is False


def test_unknown_values_are_nan_never_zero() -> None:
    registry = CollectorRegistry()
    Telemetry(registry)
    for name in (
        "perdix_parallelism_current",
        "perdix_capacity",
        "perdix_forecast_peak",
        "perdix_recovery_measured_seconds",
    ):
        assert math.isnan(sample(registry, name))


def test_error_counters_by_kind() -> None:
    registry = CollectorRegistry()
    telemetry = Telemetry(registry)
    telemetry.monitor_error("unreachable")
    telemetry.monitor_error("unreachable")
    telemetry.executor_error("forbidden")
    assert sample(registry, "perdix_monitor_errors_total", kind="unreachable") == 2
    assert sample(registry, "perdix_executor_errors_total", kind="forbidden") == 1


def test_probe_server_serves_metrics_health_and_readiness_and_stops_cleanly() -> None:
    telemetry = Telemetry(CollectorRegistry())
    server = TelemetryServer(telemetry, "127.0.0.1", 0).start()
    try:
        status, body = http_get(f"{server.url}/metrics")
        assert status == 200 and "perdix_parallelism_current" in body and "perdix_loop_duration_seconds_bucket" in body
        assert http_get(f"{server.url}/healthz") == (200, "ok\n")
        status, body = http_get(f"{server.url}/readyz")
        assert status == 503 and body.startswith("not ready")
        telemetry.update_readiness(True, None)
        assert http_get(f"{server.url}/readyz") == (200, "ready\n")
        assert http_get(f"{server.url}/nope")[0] == 404
    finally:
        server.stop()
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", server.port)) != 0, "the port should be released"
