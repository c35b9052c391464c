"""Fault matrix end to end: `perdix run` against the real Prometheus scraping the simulator exporter and the
loopback Kubernetes API (the e2e world of tests/e2e, one timeline, shared processes).

1. The Role lacks `patch` on the scale subresource (403 on every PATCH): an agent on the static policy
   (it wants 6 workers from its first round, so the test need not wait for the workload step) tries
   once per round, logs `rescale.failed` and `scale_target.unusable` once, leaves one Warning Event,
   never changes the replicas.
2. The Role is fixed: the next round rescales, logs `rescale.recovered`.
3. The agent is killed with SIGKILL right after the rescale and restarted (Daedalus this time): it
   restores the knowledge from the ConfigMap and does not rescale again inside the grace period.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml

from tests.e2e.test_run_kubernetes import (  # noqa: F401  (world is the e2e fixture)
    INITIAL,
    PERDIX,
    TASKMANAGERS,
    Process,
    agent_config,
    metric,
    world,
)
from tests.fakes.kube_api import FakeKubeAPI
from tests.fixtures.prometheus import free_port, http_get, poll

STATIC = 6
GRACE_S = 15.0
"""grace_period_s of the e2e agent settings."""


def start(world: dict[str, Any], name: str, **overrides: Any) -> tuple[Process, int]:  # noqa: F811
    """`perdix run` with the e2e agent settings (not dry-run) plus ``overrides``; serving /healthz."""
    port = free_port()
    settings = yaml.safe_load(agent_config(world, dry_run=False, port=port).read_text())
    assert settings["grace_period_s"] == GRACE_S
    path = world["tmp"] / f"agent-{name}.yaml"
    path.write_text(yaml.safe_dump({**settings, **overrides}))
    process = Process([*PERDIX, "run", "--config", str(path)], world["tmp"] / f"agent-{name}.log")
    world["processes"].append(process)

    def serving() -> bool:
        if process.popen.poll() is not None:
            raise AssertionError(f"perdix run exited with {process.popen.returncode}:\n{process.tail()}")
        return http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200

    poll(serving, timeout_s=60, what="perdix run /healthz")
    return process, port


pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def events(process: Any, name: str) -> list[dict[str, Any]]:
    return [line for line in process.lines() if line.get("event") == name]


def test_forbidden_then_fixed_then_killed_mid_run(world: dict[str, Any]) -> None:  # noqa: F811
    fake: FakeKubeAPI = world["fake"]
    fake.inject("/scale", method="PATCH", status=403, times=None)
    agent, port = start(world, "static", policy="static", static_parallelism=STATIC)

    def patches(status: int | None = None) -> list[Any]:
        return [r for r in fake.log(method="PATCH", path_contains="/scale") if status is None or r.status == status]

    # ---- 1. forbidden: one attempt per round, one log line, one Event
    poll(lambda: len(patches(403)) >= 3, timeout_s=60, interval_s=0.5, what=f"three forbidden PATCHes\n{agent.tail()}")
    failed_rounds = metric(port, 'perdix_round_failures_total{step="execute"}') or 0
    assert len(patches(403)) <= failed_rounds + 1, "more PATCHes than rounds: a retry storm"
    assert len(events(agent, "rescale.failed")) == 1, "one line per state change, not per round"
    (unusable,) = events(agent, "scale_target.unusable")
    assert unusable["kind"] == "forbidden" and "'patch'" in unusable["error"]
    warnings = [e for e in fake.events if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == ["RescaleFailed"]
    assert "deployments/scale" in warnings[0]["note"] and TASKMANAGERS in warnings[0]["note"]
    assert fake.replicas("deployments", TASKMANAGERS) == INITIAL
    # Counted per request; the fake logs a request before the agent counts it: allow the one in flight.
    assert (metric(port, 'perdix_executor_errors_total{kind="forbidden"}') or 0) >= len(patches(403)) - 1

    # ---- 2. the Role is fixed: the next round rescales
    fake.clear_faults()
    (applied,) = poll(lambda: patches(200), timeout_s=20, interval_s=0.2, what="the rescale after the fix")
    applied_at = time.monotonic()
    poll(lambda: events(agent, "rescale"), timeout_s=10, interval_s=0.1, what="the rescale log line")
    assert events(agent, "rescale.recovered")[0]["was"] == "forbidden"
    replicas = applied.body["spec"]["replicas"]
    assert replicas == STATIC and fake.replicas("deployments", TASKMANAGERS) == STATIC

    # ---- 3. SIGKILL right after the rescale, restart: knowledge restored, no second rescale in the grace period
    agent.popen.kill()
    agent.popen.wait(timeout=10)
    restarted, port2 = start(world, "restarted")
    poll(lambda: events(restarted, "knowledge.restored"), timeout_s=15, what="knowledge restored from the ConfigMap")
    poll(lambda: http_get(f"http://127.0.0.1:{port2}/readyz")[0] == 200, timeout_s=30, what="the restarted agent ready")
    remaining = applied_at + GRACE_S - time.monotonic()
    if remaining > 0:
        rounds_before = metric(port2, 'perdix_rounds_total{outcome="data"}') or 0
        poll(
            lambda: (metric(port2, 'perdix_rounds_total{outcome="data"}') or 0) >= rounds_before + remaining // 2,
            timeout_s=remaining + 10,
            what="the restarted agent's rounds through the grace period",
        )
    assert patches(200) == [applied], "a second rescale inside the grace period after the restart"
    assert fake.replicas("deployments", TASKMANAGERS) == replicas
    assert restarted.terminate() == 0, restarted.tail()
