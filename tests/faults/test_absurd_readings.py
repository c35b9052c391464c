"""Readings no job can have are gaps, never inputs: a canned Prometheus in each absurd mode makes zero writes.

The production parts (``build_parts``: Prometheus monitor, Kubernetes scaler) run live (not dry-run)
against the canned Prometheus API and the loopback Kubernetes API, whose Deployment runs at 2 like
the healthy answers say. Each mode replaces one series with values a job cannot report; the policy
of each mode is one that reads that series, so the value would move the job if it reached the
planner. A control run with the validation switched off shows that it would, for the modes whose
policy acts on it; with it on, the scale target sees no write, the series is named as a gap, and the
parallelism the planner sees is the scale target's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import agent.loop
from agent.clock import SimulatedClock
from agent.observation import Observation
from tests.adapters.test_prometheus_monitor import healthy, q
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.prometheus_api import Canned, FakePrometheus
from tests.faults.test_round_faults import PROMETHEUS_TIMEOUT_S, START, make_agent, rounds, settings_for


def _two(value: float) -> Canned:
    return Canned([({"pod": "tm-0"}, lambda t: value), ({"pod": "tm-1"}, lambda t: value)])


# mode -> (the query replaced, its absurd answer, the policy that reads it, the gap it must leave)
MODES: dict[str, tuple[str, Canned, str, str]] = {
    "parallelism -2": ("parallelism", Canned([({}, lambda t: -2.0)]), "static", "parallelism"),
    "parallelism 1e308": ("parallelism", Canned([({}, lambda t: 1e308)]), "static", "parallelism"),
    "parallelism NaN": ("parallelism", Canned([({}, lambda t: math.nan)]), "static", "parallelism"),
    "parallelism inf": ("parallelism", Canned([({}, lambda t: math.inf)]), "static", "parallelism"),
    "negative workload": ("workload", Canned([({}, lambda t: -5000.0)]), "flink-autoscaler", "workload"),
    "negative throughput": ("throughput", _two(-1000.0), "flink-autoscaler", "throughput"),
    "throughput 1e300": ("throughput", _two(1e300), "flink-autoscaler", "throughput"),
    "busy 5000 ms/s": ("busy", _two(5.0), "flink-autoscaler", "busy"),
    "busy negative": ("busy", _two(-0.5), "flink-autoscaler", "busy"),
    "cpu 40x": ("cpu", _two(40.0), "hpa", "cpu"),
    "negative lag": ("consumer_lag", Canned([({}, lambda t: -1e6)]), "flink-autoscaler", "consumer_lag"),
    "negative uptime": ("uptime", Canned([({}, lambda t: -600_000.0)]), "flink-autoscaler", "uptime"),
    "workload spikes of 5e11": (
        "workload",
        Canned([({}, lambda t: 5e11 if int(t) % 10 >= 8 else 2000.0)]),
        "daedalus",
        "workload",
    ),
    "lag spikes of 5e17": (
        "consumer_lag",
        Canned([({}, lambda t: 5e17 if int(t) % 10 >= 8 else 50.0)]),
        "flink-autoscaler",
        "consumer_lag",
    ),
}


def _agent(tmp_path: Path, prometheus: FakePrometheus, kube_api: FakeKubeAPI, kubeconfig: Path, policy: str) -> Any:
    kube_api.add_workload("deployments", "flink-taskmanager", 2)
    overrides: dict[str, Any] = {"policy": policy, "dry_run": False, "max_parallelism": 8}
    if policy == "static":
        overrides["static_parallelism"] = 2
    if policy == "flink-autoscaler":
        # A window of three rounds: the peer decides within the test's rounds, as it would over 15 minutes.
        overrides["flink_autoscaler"] = {"metrics_window_s": 30, "stabilization_s": 0}
    return make_agent(settings_for(tmp_path, prometheus, kubeconfig, **overrides), SimulatedClock(START))


def _run_mode(
    tmp_path: Path, prometheus: FakePrometheus, kube_api: FakeKubeAPI, kubeconfig: Path, mode: str
) -> tuple[Any, list[Any], list[dict[str, Any]]]:
    query, answer, policy, _ = MODES[mode]
    agent = _agent(tmp_path, prometheus, kube_api, kubeconfig, policy)
    healthy(prometheus)
    clock = agent.clock
    calm = rounds(agent, clock, 3)
    assert kube_api.scale_target_writes() == [], "the healthy job at 2 must not be rescaled (the control)"
    assert all(r.decision is not None for r in calm)
    prometheus.answers[q(query)] = answer
    with capture_logs() as logs:
        absurd = rounds(agent, clock, 8)
    return agent, absurd, logs


@pytest.mark.parametrize("mode", sorted(MODES))
def test_an_absurd_reading_is_a_gap_and_makes_zero_writes(
    tmp_path: Path, fake_prometheus: FakePrometheus, kube_api: FakeKubeAPI, kubeconfig: Path, mode: str
) -> None:
    _, absurd, logs = _run_mode(tmp_path, fake_prometheus, kube_api, kubeconfig, mode)
    assert kube_api.scale_target_writes() == [], f"{mode}: rescaled on a reading no job can have"
    assert kube_api.replicas("deployments", "flink-taskmanager") == 2
    gap = MODES[mode][3]
    for result in absurd:
        assert result.observation is not None
        assert gap in result.observation.gaps, (mode, dict(result.observation.gaps))
        assert result.observation.parallelism in (2, None)
        if result.analysis is not None:
            assert result.analysis.workload_avg is None or result.analysis.workload_avg >= 0
            assert result.analysis.consumer_lag is None or result.analysis.consumer_lag >= 0
    assert [e["event"] for e in logs].count("rescale") == 0


@pytest.mark.parametrize("mode", ["parallelism -2", "parallelism 1e308"])
def test_the_scale_target_s_parallelism_is_used_and_the_disagreement_logged_once(
    tmp_path: Path, fake_prometheus: FakePrometheus, kube_api: FakeKubeAPI, kubeconfig: Path, mode: str
) -> None:
    _, absurd, logs = _run_mode(tmp_path, fake_prometheus, kube_api, kubeconfig, mode)
    assert all(r.observation is not None and r.observation.parallelism == 2 for r in absurd)
    assert all(r.decision is not None for r in absurd), "with the scale target's count the round has its data"
    disagreements = [e for e in logs if e["event"] == "parallelism.disagree"]
    assert len(disagreements) == 1 and disagreements[0]["scale_target"] == 2, disagreements


def test_a_prometheus_count_the_scale_target_contradicts_yields_to_the_scale_target(
    tmp_path: Path, fake_prometheus: FakePrometheus, kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    """A plausible but wrong count (5 where the Deployment runs 2) does not move the job either."""
    agent = _agent(tmp_path, fake_prometheus, kube_api, kubeconfig, "static")
    healthy(fake_prometheus)
    fake_prometheus.answers[q("parallelism")] = Canned([({}, lambda t: 5.0)])
    with capture_logs() as logs:
        results = rounds(agent, agent.clock, 4)
    assert kube_api.scale_target_writes() == []
    assert all(r.observation is not None and r.observation.parallelism == 2 for r in results)
    assert [e["event"] for e in logs].count("parallelism.disagree") == 1


CONTROL = [
    "parallelism -2",
    "parallelism 1e308",
    "busy 5000 ms/s",
    "cpu 40x",
    "workload spikes of 5e11",
    "lag spikes of 5e17",
]
"""The modes whose policy acts on the value when it gets through (the peers guard themselves against the
others; for those the gap the zero-writes test asserts is what fails without the validation)."""


@pytest.mark.parametrize("mode", CONTROL)
def test_without_the_validation_the_same_readings_would_rescale(
    tmp_path: Path,
    fake_prometheus: FakePrometheus,
    kube_api: FakeKubeAPI,
    kubeconfig: Path,
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control: the modes above are ones the policies act on, so the test above can fail."""

    def unchecked(observation: Observation, bounds: Any = None) -> Observation:
        return observation

    monkeypatch.setattr(agent.loop, "screened", unchecked)
    monkeypatch.setattr(agent.loop.Agent, "_validated", lambda self, observation: observation)
    _run_mode(tmp_path, fake_prometheus, kube_api, kubeconfig, mode)
    assert kube_api.scale_target_writes(), f"{mode}: no policy acted on it even unchecked; the mode proves nothing"


def test_the_cross_check_reads_the_scale_target_once_and_an_unread_target_leaves_prometheus_count(
    tmp_path: Path, fake_prometheus: FakePrometheus, kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    """An API server answering 503 costs the round one request, not the retries a write is allowed."""
    agent = _agent(tmp_path, fake_prometheus, kube_api, kubeconfig, "static")
    healthy(fake_prometheus)
    rounds(agent, agent.clock, 1)
    kube_api.inject("/deployments/flink-taskmanager/scale", method="GET", status=503, times=None)
    before = len(kube_api.log(method="GET", path_contains="/deployments/flink-taskmanager/scale"))
    results = rounds(agent, agent.clock, 3)
    reads = len(kube_api.log(method="GET", path_contains="/deployments/flink-taskmanager/scale")) - before
    assert reads == 3, f"{reads} reads of the scale target in 3 rounds"
    assert all(r.observation is not None and r.observation.parallelism == 2 for r in results)
    assert all(r.decision is not None for r in results)
    assert kube_api.scale_target_writes() == []


@pytest.mark.parametrize("parallelism", [-2.0, 1e308])
def test_on_flink_rest_an_absurd_parallelism_yields_to_the_rest_api_and_puts_nothing(
    tmp_path: Path, fake_prometheus: FakePrometheus, parallelism: float
) -> None:
    """The reproduction on the flink-rest target: Prometheus says -2 (or 1e308), Flink's REST API says 2; unchecked,
    Daedalus moved the job "into range" (a PUT to 1, or to 4)."""
    from agent.daemon import build_parts
    from agent.loop import Agent
    from agent.settings import load_settings
    from tests.flink.fake_rest import FakeFlinkRest

    flink = FakeFlinkRest().start()
    try:
        settings = load_settings(
            None,
            {
                "policy": "daedalus",
                "max_parallelism": 4,
                "min_parallelism": 1,
                "loop_interval_s": 10,
                "dry_run": False,
                "prometheus": {"url": fake_prometheus.url, "timeout_s": PROMETHEUS_TIMEOUT_S, "worker_label": "pod"},
                "scale_target": {"kind": "flink-rest", "rest_url": flink.url, "request_timeout_s": 2},
                "knowledge": {"store": "file", "path": str(tmp_path / "knowledge.json")},
            },
        )
        healthy(fake_prometheus)
        fake_prometheus.answers[q("parallelism")] = Canned([({}, lambda t: parallelism)])
        clock = SimulatedClock(START)
        parts = build_parts(settings, clock=clock)
        agent_ = Agent(
            settings=settings,
            clock=clock,
            monitor=parts.monitor,
            scaler=parts.scaler,
            knowledge=parts.knowledge,
            telemetry=parts.telemetry,
        )
        results = rounds(agent_, clock, 4)
        assert flink.writes() == [], "PUT on a parallelism no job can have"
        assert all(r.observation is not None and r.observation.parallelism == 2 for r in results)
        assert all(r.decision is not None and not r.decision.rescales_from(2) for r in results)
    finally:
        flink.stop()
