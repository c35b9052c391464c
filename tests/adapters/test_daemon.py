"""The daemon's schedule and graceful stop, in process with recording parts (the e2e test covers SIGTERM)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from agent.clock import WallClock
from agent.daemon import Daemon, Parts
from agent.observation import Observation
from agent.ports import RescaleResult
from agent.settings import load_settings
from agent.telemetry import Telemetry, TelemetryServer
from lab.replay import MemoryKnowledgeStore
from tests.fixtures.prometheus import http_get


class BlockingMonitor:
    """Returns a small usable observation; the second call blocks until released (a slow round)."""

    def __init__(self) -> None:
        self.calls = 0
        self.in_round = threading.Event()
        self.release = threading.Event()

    def observe(self, *, since: float, now: float) -> Observation:
        self.calls += 1
        if self.calls == 2:
            self.in_round.set()
            self.release.wait(10)
        times = np.arange(np.ceil(since), now)
        flat = np.full(times.size, 100.0)
        return Observation(
            now=now,
            times=times,
            workload=flat,
            worker_throughput={"tm-0": flat},
            worker_cpu={"tm-0": np.full(times.size, 0.2)},
            consumer_lag=np.zeros(times.size),
            parallelism=1,
            uptime_s=1000.0,
        )


class RecordingScaler:
    def __init__(self) -> None:
        self.requests: list[int] = []

    def current_parallelism(self) -> int:
        return 1

    def rescale(self, target: int, *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        self.requests.append(target)
        return RescaleResult(target, target, dry_run)


def test_stop_finishes_the_running_round_then_flushes_knowledge_and_closes_the_port(tmp_path: Path) -> None:
    settings = load_settings(
        None,
        {
            "loop_interval_s": 0.2,
            "scale_target": {"kind": "deployment"},
            "telemetry": {"metrics_host": "127.0.0.1", "metrics_port": 0},
            "max_parallelism": 1,
        },
    )
    monitor = BlockingMonitor()
    knowledge = MemoryKnowledgeStore()
    saves: list[dict[str, Any]] = []
    original_save = knowledge.save

    def save(document: dict[str, Any]) -> None:
        saves.append(document)
        original_save(document)

    knowledge.save = save  # type: ignore[method-assign]
    parts = Parts(
        scaler=RecordingScaler(),
        monitor=monitor,
        knowledge=knowledge,
        events=None,
        telemetry=Telemetry(CollectorRegistry()),
    )
    daemon = Daemon(settings, clock=WallClock(), parts=parts)
    # metrics_port 0 means "off" in the settings; this test binds a free port itself.
    daemon.server = TelemetryServer(parts.telemetry, "127.0.0.1", 0).start()
    daemon.start()
    try:
        assert monitor.in_round.wait(10), "the second round never started"
        assert http_get(f"{daemon.server.url}/healthz")[0] == 200
        stopper = threading.Thread(target=daemon.stop)
        stopper.start()
        stopper.join(0.3)
        assert stopper.is_alive(), "stop() must wait for the running round"
        monitor.release.set()
        stopper.join(10)
        assert not stopper.is_alive()
    finally:
        monitor.release.set()
        daemon.stop()
    assert daemon.rounds == 2, "the running round finished, no new one started"
    assert len(saves) == 2, "the first round saves, the second (under a minute later) leaves it to the flush"
    assert saves[-1]["loop"]["last_round_at"] > saves[0]["loop"]["last_round_at"], "the flush holds the second round"
    assert http_get(f"http://127.0.0.1:{daemon.server.port}/healthz")[0] == 0, "the probe port should be closed"
