"""SIGTERM during a rescale's confirmation: ``perdix run`` exits within Kubernetes' grace period and the next start
confirms the rescale.

A real ``perdix run`` process against two loopback fakes: the canned Prometheus (a job at 2) and a fake
Flink REST API whose job accepts the resource-requirements PUT but never changes (a confirmation that
would take the whole two-minute timeout). The static policy wants 3, so the first round requests it and
waits. SIGTERM then must end the process within 20 s (Kubernetes kills a pod 30 s after SIGTERM by
default) with the rescale in the knowledge as pending. Flink then finishes the rescale on its own; a
second start reads the job at 3 and records the rescale as confirmed, without requesting it again.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.adapters.test_prometheus_monitor import healthy
from tests.fakes.prometheus_api import FakePrometheus
from tests.flink.fake_rest import FakeFlinkRest, FakeJob

PERDIX = str(Path(".venv/bin/perdix").resolve())
GRACE_S = 20.0


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    fake = FakePrometheus().start()
    healthy(fake)  # the job at 2, well within its capacity
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def flink() -> Iterator[FakeFlinkRest]:
    fake = FakeFlinkRest(FakeJob(apply_puts=False)).start()
    try:
        yield fake
    finally:
        fake.stop()


def _config(tmp_path: Path, prometheus: FakePrometheus, flink: FakeFlinkRest) -> Path:
    config = tmp_path / "perdix.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "policy": "static",
                "static_parallelism": 3,
                "max_parallelism": 4,
                "loop_interval_s": 5,
                "dry_run": False,
                "scale_target": {"kind": "flink-rest", "rest_url": flink.url, "request_timeout_s": 2},
                "prometheus": {"url": prometheus.url, "timeout_s": 1, "worker_label": "pod"},
                "knowledge": {"store": "file", "path": str(tmp_path / "knowledge.json")},
                "telemetry": {"metrics_port": 0, "log_format": "json", "log_level": "info"},
            }
        )
    )
    return config


def _wait_for(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _stop(process: subprocess.Popen[str]) -> tuple[float, list[dict[str, Any]]]:
    """SIGTERM; the seconds until the process ended and its JSON log lines."""
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    took = time.monotonic() - sent
    output = (process.stdout.read() if process.stdout else "") + (process.stderr.read() if process.stderr else "")
    events = []
    for line in output.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return took, events


def _puts(flink: FakeFlinkRest) -> int:
    return len([entry for entry in flink.writes() if entry[1].endswith("/resource-requirements")])


def test_sigterm_during_a_confirmation_exits_in_time_and_the_next_start_confirms_the_rescale(
    tmp_path: Path, prometheus: FakePrometheus, flink: FakeFlinkRest
) -> None:
    config = _config(tmp_path, prometheus, flink)
    knowledge = tmp_path / "knowledge.json"
    first = subprocess.Popen(
        [PERDIX, "run", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    _wait_for(lambda: _puts(flink) == 1 or first.poll() is not None, 60, "the rescale request")
    assert first.poll() is None, "perdix run ended before the rescale"
    time.sleep(2.0)  # well into the confirmation wait (it would last 120 s)
    took, events = _stop(first)
    assert took < GRACE_S, f"took {took:.1f} s to exit after SIGTERM"
    assert first.returncode == 0, events[-5:]
    names = [e.get("event") for e in events]
    assert "rescale.left_pending" in names and "rescale.pending" in names, names
    stored = json.loads(knowledge.read_text())
    (record,) = stored["loop"]["rescales"]
    assert record["pending"] is True and record["to"] == 3 and record["from"] == 2 and record["confirmed"] is None
    assert _puts(flink) == 1

    # Flink finishes the rescale on its side while Perdix is away.
    job = next(iter(flink.jobs.values()))
    with flink.lock:
        job.vertices = {vid: 3 for vid in job.vertices}
        job.created_ms += 60_000
    second = subprocess.Popen(
        [PERDIX, "run", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )

    def settled() -> bool:
        try:
            records = json.loads(knowledge.read_text())["loop"]["rescales"]
        except (OSError, ValueError, KeyError):
            return False
        return bool(records) and records[0].get("pending") is False

    _wait_for(lambda: settled() or second.poll() is not None, 60, "the pending rescale to be confirmed")
    took, events = _stop(second)
    assert took < GRACE_S
    names = [e.get("event") for e in events]
    assert "rescale.confirmed" in names, names
    (record,) = json.loads(knowledge.read_text())["loop"]["rescales"]
    assert record["pending"] is False and record["confirmed"] == 3
    assert _puts(flink) == 1, "the confirmed rescale was requested again"


def test_a_kubernetes_rescale_stops_retrying_once_interrupted(kube_api: Any, kube_client: Any) -> None:
    """The Kubernetes target has no confirmation to wait for, but its retries would outlast the grace period:
    interrupted (SIGTERM) during the backoff, the rescale ends with the request under way."""
    from agent.ports import InterruptibleScaler, ScalerError
    from tests.adapters.test_kubernetes_scaler import Sleeps, make_scaler

    class InterruptingSleeps(Sleeps):
        def __call__(self, seconds: float) -> None:
            super().__call__(seconds)
            scaler.interrupt()  # SIGTERM arrives while the first backoff runs

    sleeps = InterruptingSleeps()
    scaler, _ = make_scaler(kube_client, sleeps=sleeps, max_retries=8)
    assert isinstance(scaler, InterruptibleScaler)
    kube_api.inject("/scale", method="PATCH", status=503, times=None)
    with pytest.raises(ScalerError):
        scaler.rescale(7, reasons=("r",), dry_run=False)
    assert len(kube_api.log(method="PATCH")) == 1, "retried after the interrupt"
    assert len(sleeps.calls) == 1
    assert kube_api.replicas("deployments", "flink-taskmanager") == 3
