"""A rescale aligned with a checkpoint, against the loopback fake of the REST API (no Flink needed, fast).

The order of the checkpoint and the write on each release line, and the cases a real cluster does not show on
demand: a checkpoint that fails, one that never completes, a trigger the cluster refuses. The real cluster's
side (the checkpoint completes before the restart, the replay it saves) is tested in test_flink_rest_scaler.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from agent.clock import SimulatedClock
from agent.execute.flink_rest import FlinkRestClient, FlinkRestScaler
from agent.settings import ScaleTargetSettings
from tests.flink.fake_rest import FakeFlinkRest, FakeJob


@pytest.fixture
def fake() -> Iterator[FakeFlinkRest]:
    """A fake with one adaptive-scheduler job at parallelism 2."""
    server = FakeFlinkRest().start()
    try:
        yield server
    finally:
        server.stop()


def scaler(url: str, clock: SimulatedClock, *, align: bool = True, wait_s: float = 5.0) -> FlinkRestScaler:
    """A scaler on a simulated clock (the checkpoint's and the confirmation's deadlines pass at once)."""
    settings = ScaleTargetSettings(
        kind="flink-rest",
        rest_url=url,
        request_timeout_s=2.0,
        checkpoint_before_rescale=align,
        checkpoint_wait_s=wait_s,
    )
    client = FlinkRestClient(url, timeout_s=2.0, max_retries=0, sleep=lambda _: None)
    return FlinkRestScaler(settings, client=client, clock=clock, confirm_timeout_s=30.0, poll_interval_s=1.0)


def job_of(fake: FakeFlinkRest) -> FakeJob:
    return next(iter(fake.jobs.values()))


def writes(fake: FakeFlinkRest) -> list[tuple[str, str]]:
    """(method, last path segment or two) of every write, in order."""
    return [(method, path.split("/", 3)[-1]) for method, path, _ in fake.writes()]


def test_on_flink_1_the_checkpoint_completes_before_the_write(fake: FakeFlinkRest) -> None:
    fake.version = "1.20.5"
    result = scaler(fake.url, SimulatedClock()).rescale(3, reasons=("up",), dry_run=False)
    assert result.confirmed == 3
    assert writes(fake) == [("POST", "checkpoints"), ("PUT", "resource-requirements")]
    polled = [i for i, (m, p, _) in enumerate(fake.log) if m == "GET" and "/checkpoints/" in p]
    put = next(i for i, (m, _, _) in enumerate(fake.log) if m == "PUT")
    assert polled and max(polled) < put, "the checkpoint's completion was read before the write"


def test_on_flink_2_the_checkpoint_follows_the_write_without_a_wait(fake: FakeFlinkRest) -> None:
    result = scaler(fake.url, SimulatedClock()).rescale(3, reasons=("up",), dry_run=False)
    assert result.confirmed == 3
    assert writes(fake) == [("PUT", "resource-requirements"), ("POST", "checkpoints")]
    assert not [p for m, p, _ in fake.log if m == "GET" and "/checkpoints/" in p], "2.x's scheduler does the wait"


@pytest.mark.parametrize("version", ["1.20.5", "2.3.0"])
def test_dry_run_and_the_setting_off_trigger_no_checkpoint(fake: FakeFlinkRest, version: str) -> None:
    fake.version = version
    assert scaler(fake.url, SimulatedClock()).rescale(3, reasons=("dry",), dry_run=True).dry_run
    assert fake.writes() == [] and job_of(fake).triggered == []
    scaler(fake.url, SimulatedClock(), align=False).rescale(3, reasons=("up",), dry_run=False)
    assert writes(fake) == [("PUT", "resource-requirements")]


@pytest.mark.parametrize(
    ("checkpoints", "event"),
    [
        ("fail", "rescale.checkpoint_failed"),  # expired, declined: Flink says so in the trigger's status
        ("never", "rescale.checkpoint_slow"),  # back-pressure holds the barrier past the wait
    ],
)
def test_a_checkpoint_that_fails_or_hangs_is_logged_and_the_rescale_goes_ahead(
    fake: FakeFlinkRest, checkpoints: str, event: str
) -> None:
    fake.version = "1.20.5"
    job_of(fake).checkpoints = checkpoints
    clock = SimulatedClock()
    with capture_logs() as logs:
        result = scaler(fake.url, clock, wait_s=3.0).rescale(3, reasons=("up",), dry_run=False)
    assert result.confirmed == 3
    assert writes(fake) == [("POST", "checkpoints"), ("PUT", "resource-requirements")]
    assert [entry["event"] for entry in logs if entry["event"].startswith("rescale.checkpoint")] == [event]
    # The wait is bounded by checkpoint_wait_s on the injected clock: a hang costs 3 s, a failure nothing more.
    assert clock.now() <= 3.0 + 1e-9


def test_a_trigger_the_cluster_refuses_is_logged_and_the_rescale_goes_ahead(fake: FakeFlinkRest) -> None:
    fake.version = "1.20.5"
    fake.failures[f"/jobs/{job_of(fake).job_id}/checkpoints"] = 1  # one 503: tried once, not retried
    with capture_logs() as logs:
        result = scaler(fake.url, SimulatedClock()).rescale(3, reasons=("up",), dry_run=False)
    assert result.confirmed == 3 and job_of(fake).triggered == []
    assert [m for m, p, s in fake.log if p.endswith("/checkpoints")] == ["POST"]
    assert any(entry["event"] == "rescale.checkpoint_failed" for entry in logs)


def test_an_unreadable_version_awaits_the_checkpoint_first(fake: FakeFlinkRest) -> None:
    fake.failures["/config"] = 1
    scaler(fake.url, SimulatedClock()).rescale(3, reasons=("up",), dry_run=False)
    assert writes(fake) == [("POST", "checkpoints"), ("PUT", "resource-requirements")]


def test_an_interrupt_ends_the_wait_for_the_checkpoint_and_the_rescale_goes_ahead(fake: FakeFlinkRest) -> None:
    """SIGTERM while 1.x waits for a checkpoint that hangs: the write is sent at once, and nothing says slow."""
    fake.version = "1.20.5"
    job_of(fake).checkpoints = "never"
    clock = SimulatedClock()
    stopping = scaler(fake.url, clock, wait_s=30.0)
    stopping.interrupt()
    with capture_logs() as logs:
        result = stopping.rescale(3, reasons=("up",), dry_run=False)
    assert writes(fake) == [("POST", "checkpoints"), ("PUT", "resource-requirements")]
    assert clock.now() < 1.0 and not [e for e in logs if e["event"] == "rescale.checkpoint_slow"]
    assert result.requested == 3
