"""Fault matrix, rows 1-3, at the level of the loop: the production parts (``build_parts``: Prometheus
monitor, Kubernetes scaler, Event sink, telemetry) wired into one Agent, against the canned Prometheus
API and the loopback Kubernetes API, on a simulated clock.

- bad Prometheus answers (empty, NaN, stale, slow, 5xx) make the round act on nothing: no decision, no
  write to the scale target; /readyz turns not ready after N such rounds; one log line per state change;
  a partial series is used for what it holds (its holes never read as zeros);
- 409/429/5xx/timeouts on the scale subresource: retries end, the knowledge records no rescale, the
  replicas are untouched;
- a persistent 403: one ``rescale.failed`` line, one Warning Event, one PATCH per round (no storm), and
  the next rescale after the Role is fixed is applied and logged as a recovery.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.clock import SimulatedClock
from agent.daemon import build_parts
from agent.execute.kubernetes import Backoff
from agent.loop import Agent, RoundResult
from agent.settings import Settings, load_settings
from tests.adapters.test_kubernetes_scaler import Sleeps
from tests.adapters.test_prometheus_monitor import healthy, q
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.prometheus_api import Canned, FakePrometheus

START = 1_700_000_000.0
INTERVAL = 10.0
NOT_READY_AFTER = 2


# The canned Prometheus answers in milliseconds; the margin is for a machine busy with other tests. A slow answer
# outlasts it.
PROMETHEUS_TIMEOUT_S = 2.0


def settings_for(tmp_path: Path, prometheus: FakePrometheus, kubeconfig: Path, **overrides: Any) -> Settings:
    """Production settings pointing at the fakes; knowledge in a file so the test can read it."""
    base: dict[str, Any] = {
        "loop_interval_s": INTERVAL,
        "min_parallelism": 1,
        "max_parallelism": 8,
        "prometheus": {
            "url": prometheus.url,
            "timeout_s": PROMETHEUS_TIMEOUT_S,
            "stale_after_s": 30,
            "worker_label": "pod",
        },
        "scale_target": {
            "kind": "deployment",
            "name": "flink-taskmanager",
            "kubeconfig": str(kubeconfig),
            "request_timeout_s": 2,
            "max_retries": 3,
        },
        "knowledge": {"store": "file", "path": str(tmp_path / "knowledge.json")},
        "telemetry": {"not_ready_after_failed_loops": NOT_READY_AFTER},
    }
    base.update(overrides)
    return load_settings(None, base)


def make_agent(settings: Settings, clock: SimulatedClock) -> Agent:
    """The daemon's parts in one Agent; retries sleep on a recorder, not the wall clock."""
    parts = build_parts(settings, clock=clock)
    scaler: Any = parts.scaler
    scaler.backoff = Backoff(max_retries=settings.scale_target.max_retries, sleep=Sleeps(), rng=random.Random(3))
    return Agent(
        settings=settings,
        clock=clock,
        monitor=parts.monitor,
        scaler=parts.scaler,
        knowledge=parts.knowledge,
        events=parts.events,
        telemetry=parts.telemetry,
    )


def rounds(agent: Agent, clock: SimulatedClock, n: int) -> list[RoundResult]:
    """Run n rounds, one loop interval apart."""
    out = []
    for _ in range(n):
        clock.advance(INTERVAL)
        out.append(agent.round())
    return out


def ready(agent: Agent) -> bool:
    return agent.telemetry.readiness()[0]


def events(logs: Sequence[Mapping[str, Any]], *names: str) -> list[str]:
    return [e["event"] for e in logs if e["event"] in names]


# Each bad answer replaces the workload query; the other series stay healthy.
BAD_WORKLOAD = {
    "empty": Canned(),
    "nan": Canned([({}, lambda t: math.nan)]),
    # The newest sample of each window is 7 s old when the round runs (stale_after_s is 5 for this case):
    # a scrape that lags or stopped must not pass its old value off as the current workload.
    "stale": Canned([({}, lambda t: 2000.0 if t % INTERVAL < 4 else None)]),
    "slow": Canned([({}, lambda t: 2000.0)], delay_s=PROMETHEUS_TIMEOUT_S + 1.0),
    "server_error": Canned(status=503, error="overloaded"),
}


@pytest.mark.parametrize("fault", sorted(BAD_WORKLOAD) + ["every_query_fails"])
def test_bad_prometheus_answers_act_on_nothing_and_flip_readiness_once(
    tmp_path: Path, fake_prometheus: FakePrometheus, kube_api: FakeKubeAPI, kubeconfig: Path, fault: str
) -> None:
    clock = SimulatedClock(START)
    # The static policy wants 6 workers whenever it gets to decide: any decision would write the target.
    stale_after = {"stale_after_s": 5} if fault == "stale" else {}
    settings = settings_for(tmp_path, fake_prometheus, kubeconfig, policy="static", static_parallelism=6)
    settings = settings.model_copy(update={"prometheus": settings.prometheus.model_copy(update=stale_after)})
    agent = make_agent(settings, clock)
    healthy(fake_prometheus)
    first = rounds(agent, clock, 1)[0]
    assert first.decision is not None and first.rescaled_to == 6, "the control round must act"
    assert ready(agent)
    writes_before = len(kube_api.scale_target_writes())

    if fault == "every_query_fails":
        fake_prometheus.answers = {}
        fake_prometheus.otherwise = Canned(status=500, error="boom")
    else:
        fake_prometheus.answers[q("workload")] = BAD_WORKLOAD[fault]
    with capture_logs() as logs:
        bad = rounds(agent, clock, 5)
    assert all(r.decision is None and r.skipped for r in bad), [r.skipped for r in bad]
    assert len(kube_api.scale_target_writes()) == writes_before, "rescaled on bad data"
    assert not ready(agent)
    assert agent.telemetry.readiness()[1].startswith("not ready: 5 round(s) without data")
    assert events(logs, "readiness.not_ready") == ["readiness.not_ready"], "one line per state change"
    problems = [e for e in logs if e["event"] in ("monitor.gap", "monitor.unavailable")]
    assert len(problems) == 1, f"one monitor line per outage, not per round: {problems}"
    assert events(logs, "rescale", "rescale.failed") == []

    healthy(fake_prometheus)
    with capture_logs() as logs:
        back = rounds(agent, clock, 3)
    assert back[0].decision is not None
    assert ready(agent)
    assert events(logs, "readiness.ready") == ["readiness.ready"]
    assert events(logs, "monitor.recovered") == ["monitor.recovered"]


def test_a_partial_series_is_used_for_what_it_holds_never_as_zeros(
    tmp_path: Path, fake_prometheus: FakePrometheus, kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    clock = SimulatedClock(START)
    agent = make_agent(settings_for(tmp_path, fake_prometheus, kubeconfig, dry_run=True), clock)
    healthy(fake_prometheus)
    rounds(agent, clock, 2)
    # Every other sample missing (a flaky scrape): the mean is that of the samples that exist.
    fake_prometheus.answers[q("workload")] = Canned([({}, lambda t: 2000.0 if int(t) % 2 else None)])
    with capture_logs() as logs:
        partial = rounds(agent, clock, 4)
    for result in partial:
        assert result.observation is not None and result.observation.gaps["workload"].startswith("partial")
        assert result.analysis is not None and result.analysis.workload_avg == pytest.approx(2000.0)
    assert len([e for e in logs if e["event"] == "monitor.gap"]) == 1
    assert ready(agent), "a partial series is data"
    assert kube_api.scale_target_writes() == []


@pytest.mark.parametrize(
    ("status", "delay_s", "kind"),
    [
        (409, 0.0, "conflict"),
        (429, 0.0, "throttled"),
        (500, 0.0, "server_error"),
        (503, 0.0, "server_error"),
        (None, 3.0, "timeout"),
    ],
)
def test_a_rescale_the_api_keeps_refusing_is_never_recorded(
    tmp_path: Path,
    fake_prometheus: FakePrometheus,
    kube_api: FakeKubeAPI,
    kubeconfig: Path,
    status: int | None,
    delay_s: float,
    kind: str,
) -> None:
    clock = SimulatedClock(START)
    settings = settings_for(tmp_path, fake_prometheus, kubeconfig, policy="static", static_parallelism=6)
    if kind == "timeout":  # keep the wall time of the retries short
        settings = settings_for(
            tmp_path,
            fake_prometheus,
            kubeconfig,
            policy="static",
            static_parallelism=6,
            scale_target={**settings.scale_target.model_dump(), "request_timeout_s": 1.0, "max_retries": 1},
        )
    agent = make_agent(settings, clock)
    healthy(fake_prometheus)
    kube_api.inject("/scale", method="PATCH", status=status, delay_s=delay_s, times=None)

    with capture_logs() as logs:
        (result,) = rounds(agent, clock, 1)

    assert result.skipped is not None and result.skipped.startswith("execute failed")
    patches = kube_api.log(method="PATCH", path_contains="/scale")
    assert len(patches) == settings.scale_target.max_retries + 1, "capped retries"
    assert kube_api.replicas("deployments", "flink-taskmanager") == 3, "no half-applied state"
    assert agent.rescales.to_list() == [] and agent.last_rescale_at is None
    saved = agent.knowledge.load()
    assert saved is not None and saved["loop"]["rescales"] == [] and saved["loop"]["last_rescale_at"] is None
    failed = [e for e in logs if e["event"] == "rescale.failed"]
    assert len(failed) == 1 and failed[0]["kind"] == kind
    assert agent.telemetry.executor_errors.labels(kind=kind)._value.get() >= settings.scale_target.max_retries + 1


def test_a_transient_conflict_is_retried_and_only_the_read_back_is_recorded(
    tmp_path: Path, fake_prometheus: FakePrometheus, kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    clock = SimulatedClock(START)
    agent = make_agent(
        settings_for(tmp_path, fake_prometheus, kubeconfig, policy="static", static_parallelism=6), clock
    )
    healthy(fake_prometheus)
    kube_api.inject("/scale", method="PATCH", status=409, times=2)
    (result,) = rounds(agent, clock, 1)
    assert result.rescaled_to == 6
    assert [r.status for r in kube_api.log(method="PATCH", path_contains="/scale")] == [409, 409, 200]
    saved = agent.knowledge.load()
    assert saved is not None
    (record,) = saved["loop"]["rescales"]
    assert record["to"] == 6 and record["confirmed"] == 6 == kube_api.replicas("deployments", "flink-taskmanager")


def test_a_persistent_403_is_one_log_line_and_one_event_then_recovers_when_the_role_is_fixed(
    tmp_path: Path, fake_prometheus: FakePrometheus, kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    clock = SimulatedClock(START)
    agent = make_agent(
        settings_for(tmp_path, fake_prometheus, kubeconfig, policy="static", static_parallelism=6), clock
    )
    healthy(fake_prometheus)
    forbidden = kube_api.inject("/scale", method="PATCH", status=403, times=None)

    with capture_logs() as logs:
        results = rounds(agent, clock, 6)
    assert all(r.skipped == "execute failed: forbidden" for r in results)
    assert len(kube_api.log(method="PATCH", path_contains="/scale")) == 6, "one request per round, no retry storm"
    assert events(logs, "rescale.failed") == ["rescale.failed"], "one line per state change, not per round"
    assert events(logs, "scale_target.unusable") == ["scale_target.unusable"]
    warnings = [e for e in kube_api.events if e["type"] == "Warning"]
    assert len(warnings) == 1 and "'patch'" in warnings[0]["note"] and "flink-taskmanager" in warnings[0]["note"]
    assert agent.rescales.to_list() == []

    kube_api.faults.remove(forbidden)  # the operator fixes the Role
    with capture_logs() as logs:
        (fixed,) = rounds(agent, clock, 1)
    assert fixed.rescaled_to == 6
    assert events(logs, "rescale.recovered", "rescale") == ["rescale.recovered", "rescale"]
