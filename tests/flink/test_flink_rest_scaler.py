"""The flink-rest scaler against a real Flink session cluster on loopback (adaptive scheduler, 3 slots), on 2.3
and 1.20.

One cluster and one job for the module; each test leaves the job running. Every read-back here goes
through the fixture's own REST reads, not through the scaler, so a scaler that lies fails.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.execute.flink_rest import FlinkRestClient, FlinkRestScaler, unreachable_reason
from agent.ports import ScalerError
from agent.settings import ScaleTargetSettings
from tests.fixtures.flink import FlinkCluster, flink_release, free_port, poll, rest_get
from tests.flink.proxy import RecordingProxy

pytestmark = [pytest.mark.e2e, pytest.mark.both_flink_versions]

JOB_NAME = "perdix-scaler-test"


@pytest.fixture(scope="module")
def job_id(flink_cluster: FlinkCluster) -> Iterator[str]:
    """The streaming job, submitted at parallelism 2 and cancelled after the module."""
    job = flink_cluster.submit(name=JOB_NAME, parallelism=2)
    try:
        yield job
    finally:
        flink_cluster.cancel(job)


def scaler_for(url: str, job: str | None = JOB_NAME, **options: Any) -> FlinkRestScaler:
    """A scaler polling fast (the cluster's job details are fresh every 200 ms); ``options``: scale_target keys."""
    settings = ScaleTargetSettings(kind="flink-rest", rest_url=url, job=job, request_timeout_s=5.0, **options)
    return FlinkRestScaler(settings, confirm_timeout_s=90.0, poll_interval_s=0.2)


def vertex_parallelism(cluster: FlinkCluster, job_id: str) -> dict[str, tuple[int, int]]:
    """(parallelism, running subtasks) of every vertex, read straight from the REST API."""
    details = cluster.job(job_id)
    assert details is not None
    return {v["name"]: (v["parallelism"], v["tasks"]["RUNNING"]) for v in details["vertices"]}


def test_finds_the_job_by_name_by_id_and_alone(flink_cluster: FlinkCluster, job_id: str) -> None:
    assert scaler_for(flink_cluster.rest_url).find_job() == job_id
    assert scaler_for(flink_cluster.rest_url, job=job_id).find_job() == job_id
    assert scaler_for(flink_cluster.rest_url, job=None).find_job() == job_id
    assert scaler_for(flink_cluster.rest_url).current_parallelism() == 2


def test_an_unknown_job_is_not_found_and_names_the_running_ones(flink_cluster: FlinkCluster, job_id: str) -> None:
    scaler = scaler_for(flink_cluster.rest_url, job="no-such-job")
    with pytest.raises(ScalerError) as error:
        scaler.rescale(3, reasons=("test",), dry_run=False)
    assert error.value.kind == "not_found"
    assert JOB_NAME in str(error.value) and job_id in str(error.value)
    assert scaler.current_parallelism() is None
    assert all(r.method == "GET" for r in scaler.requests)


def test_dry_run_sends_no_write(flink_cluster: FlinkCluster, job_id: str, proxy: RecordingProxy) -> None:
    scaler = scaler_for(proxy.url, checkpoint_before_rescale=True)  # nor the checkpoint of an aligned rescale
    result = scaler.rescale(3, reasons=("dry",), dry_run=True)
    assert result.dry_run and result.requested == 3 and result.confirmed == 2
    assert proxy.log, "the proxy saw the scaler's reads"
    assert proxy.writes() == []
    assert {p for p, _ in vertex_parallelism(flink_cluster, job_id).values()} == {2}


def test_rescales_up_and_down_in_place_and_measures_the_downtime(
    flink_cluster: FlinkCluster, job_id: str, proxy: RecordingProxy
) -> None:
    scaler = scaler_for(proxy.url)
    asked_at = time.time()
    up = scaler.rescale(3, reasons=("up",), dry_run=False)
    assert (up.requested, up.confirmed, up.dry_run) == (3, 3, False)
    assert set(vertex_parallelism(flink_cluster, job_id).values()) == {(3, 3)}
    assert up.downtime_s is not None and 0 < up.downtime_s < 60
    # When every task ran again: after the request, before the answer (one clock: the JobManager's is this machine's).
    assert up.resumed_at is not None and asked_at - 1 <= up.resumed_at <= time.time() + 1
    # The checkpoint of the rescale (checkpoint_before_rescale, on by default): awaited before the PUT on 1.x,
    # triggered right after it on 2.x, whose scheduler waits for it.
    writes = [(m, p.rsplit("/", 1)[-1]) for m, p, _ in proxy.writes()]
    expected = [("PUT", "resource-requirements"), ("POST", "checkpoints")]
    assert writes == (expected if flink_cluster.version.startswith("2.") else expected[::-1])

    down_at = time.monotonic()
    down = scaler.rescale(1, reasons=("down",), dry_run=False)
    assert (down.confirmed, set(vertex_parallelism(flink_cluster, job_id).values())) == (1, {(1, 1)})
    # Right after the scale-out: Flink's cooldown after a rescale (30 s by default) is off on the test cluster, under
    # the key of its release (1.20: scaling-interval.min, 2.x: executing.cooldown-after-rescaling).
    assert time.monotonic() - down_at < 25, f"the scale-in waited out a cooldown on Flink {flink_cluster.version}"
    assert down.downtime_s is not None and 0 < down.downtime_s < 60
    # In place: the same job, no resubmission.
    assert scaler.find_job() == job_id
    requirements = scaler.resource_requirements()
    assert {r["parallelism"]["upperBound"] for r in requirements.values()} == {1}

    again = scaler.rescale(1, reasons=("same",), dry_run=False)
    assert again.confirmed == 1 and again.downtime_s is None
    assert len(proxy.writes()) == 4, "a rescale to the current parallelism writes nothing (nor checkpoints)"


def test_per_vertex_rescale_changes_only_the_named_vertex(flink_cluster: FlinkCluster, job_id: str) -> None:
    scaler = scaler_for(flink_cluster.rest_url)
    names = sorted(scaler.vertex_parallelism())
    aggregate = next(name for name in names if name.startswith("GroupAggregate"))
    source = next(name for name in names if name.startswith("Source"))
    before = vertex_parallelism(flink_cluster, job_id)[source][0]
    result = scaler.rescale_vertices({aggregate: 2}, reasons=("per-vertex",), dry_run=False)
    after = vertex_parallelism(flink_cluster, job_id)
    assert after[aggregate] == (2, 2)
    assert after[source] == (before, before)
    assert result.confirmed == max(2, before)
    with pytest.raises(ScalerError) as error:
        scaler.rescale_vertices({"no-such-vertex": 2}, reasons=(), dry_run=False)
    assert error.value.kind == "invalid_request" and aggregate in str(error.value)


def test_too_few_slots_is_refused_before_any_write(
    flink_cluster: FlinkCluster, job_id: str, proxy: RecordingProxy
) -> None:
    scaler = scaler_for(proxy.url)
    before = vertex_parallelism(flink_cluster, job_id)
    with pytest.raises(ScalerError) as error:
        scaler.rescale(flink_cluster.taskmanagers + 1, reasons=("too far",), dry_run=False)
    assert error.value.kind == "insufficient_slots"
    assert "needs 4 slots" in str(error.value) and "3 slots" in str(error.value)
    assert proxy.writes() == []
    assert vertex_parallelism(flink_cluster, job_id) == before


def test_an_unreachable_rest_url_is_one_line_at_start_and_a_gap_later() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    reason = unreachable_reason(ScaleTargetSettings(kind="flink-rest", rest_url=url, request_timeout_s=1.0))
    assert reason is not None and "\n" not in reason
    assert reason.startswith(f"scale_target.rest_url ({url})")
    settings = ScaleTargetSettings(kind="flink-rest", rest_url=url, request_timeout_s=1.0, max_retries=0)
    assert FlinkRestScaler(settings).current_parallelism() is None


def test_a_live_cluster_is_reachable(flink_cluster: FlinkCluster) -> None:
    assert unreachable_reason(ScaleTargetSettings(kind="flink-rest", rest_url=flink_cluster.rest_url)) is None


def test_the_cluster_runs_the_release_under_test(flink_cluster: FlinkCluster, flink_version: str) -> None:
    config = rest_get(f"{flink_cluster.rest_url}/config") or {}
    assert config.get("flink-version") == flink_release(flink_version).version == flink_cluster.version


def test_the_scheduler_is_read_where_the_release_reports_it(flink_cluster: FlinkCluster, job_id: str) -> None:
    """2.x names the scheduler in /jobs/{id} (``schedulerType``); 1.20 does not, and the scaler reads the job's
    ``jobmanager.scheduler`` from /jobs/{id}/jobmanager/config before a write instead."""
    scaler = scaler_for(flink_cluster.rest_url)
    status = scaler.job_state()
    current = status.parallelism
    assert current is not None
    assert scaler.rescale(current, reasons=("same",), dry_run=False).confirmed == current  # checks, no restart
    config_reads = [r.path for r in scaler.requests if r.path.endswith("/jobmanager/config")]
    if int(flink_cluster.version.split(".")[0]) >= 2:
        assert (status.scheduler, config_reads) == ("Adaptive", [])
    else:
        assert (status.scheduler, config_reads) == (None, [f"/jobs/{job_id}/jobmanager/config"])


class TimedWrites(FlinkRestClient):
    """A client that notes when it sends each PUT (Unix ms; the JobManager runs on this machine's clock)."""

    def __init__(self, url: str) -> None:
        super().__init__(url, timeout_s=5.0)
        self.put_at_ms: list[float] = []

    def put(self, path: str, body: Any) -> Any:
        self.put_at_ms.append(time.time() * 1000)
        return super().put(path, body)


def restored_checkpoint(cluster: FlinkCluster, job_id: str) -> dict[str, Any]:
    """The history entry of the checkpoint the running execution graph restored (stats are cached ~1 s)."""

    def read() -> dict[str, Any] | None:
        stats = rest_get(f"{cluster.rest_url}/jobs/{job_id}/checkpoints") or {}
        restored = (stats.get("latest") or {}).get("restored") or {}
        return next((h for h in stats.get("history") or [] if h.get("id") == restored.get("id")), None)

    return poll(read, timeout_s=10, what="the restored checkpoint in the statistics")


def test_an_aligned_rescale_restarts_from_a_checkpoint_taken_for_it(flink_cluster: FlinkCluster, job_id: str) -> None:
    """The restart resumes from a checkpoint that completed after the decision, so it replays at most that
    checkpoint's own duration: the one triggered for the rescale, or on 2.x a periodic one already in flight when
    it was asked for (the adaptive scheduler rescales on the first checkpoint to complete after the write)."""
    client = TimedWrites(flink_cluster.rest_url)
    settings = ScaleTargetSettings(kind="flink-rest", rest_url=flink_cluster.rest_url, job=job_id)
    scaler = FlinkRestScaler(settings, client=client, confirm_timeout_s=90.0, poll_interval_s=0.2)
    current = scaler.current_parallelism()
    target = 1 if current != 1 else 2
    asked_ms = time.time() * 1000
    assert scaler.rescale(target, reasons=("aligned",), dry_run=False).confirmed == target
    restored = restored_checkpoint(flink_cluster, job_id)
    assert restored["status"] == "COMPLETED" and restored["latest_ack_timestamp"] >= asked_ms, (restored, asked_ms)
    [put_ms] = client.put_at_ms
    if flink_cluster.version.startswith("1."):
        # 1.x rescales on the write: the scaler's own checkpoint, triggered after the decision, completed (every
        # subtask acknowledged) before the write was sent.
        assert restored["trigger_timestamp"] >= asked_ms, (restored, asked_ms)
        assert restored["latest_ack_timestamp"] <= put_ms, (restored, put_ms)
    else:
        # 2.x: the scheduler held the rescale until a checkpoint completed after the write.
        assert restored["latest_ack_timestamp"] >= put_ms, (restored, put_ms)
    paths = [r.path for r in scaler.requests if r.method != "GET"]
    assert paths.count(f"/jobs/{job_id}/checkpoints") == 1


def test_a_checkpoint_that_misses_its_bound_is_logged_and_the_rescale_goes_ahead(
    flink_cluster: FlinkCluster, job_id: str
) -> None:
    """No checkpoint is triggered and completed within a millisecond: the aligner gives up at its bound (the
    trigger's request timing out, or the wait for its completion), says so, and the rescale happens."""
    client = TimedWrites(flink_cluster.rest_url)
    settings = ScaleTargetSettings(
        kind="flink-rest", rest_url=flink_cluster.rest_url, job=job_id, checkpoint_wait_s=0.001
    )
    scaler = FlinkRestScaler(settings, client=client, confirm_timeout_s=90.0, poll_interval_s=0.2)
    target = 1 if scaler.current_parallelism() != 1 else 2
    with capture_logs() as logs:
        started_ms = time.time() * 1000
        assert scaler.rescale(target, reasons=("bounded",), dry_run=False).confirmed == target
    events = [e["event"] for e in logs if e["event"].startswith("rescale.checkpoint")]
    if flink_cluster.version.startswith("1."):
        assert events in (["rescale.checkpoint_slow"], ["rescale.checkpoint_failed"]), events
        # The write followed at once: the reads before it and the bound, far from a checkpoint interval.
        assert client.put_at_ms[0] - started_ms < 1000, client.put_at_ms[0] - started_ms
    # With room to complete, a trigger answers the id of a checkpoint the cluster lists as completed.
    patient = scaler_for(flink_cluster.rest_url, job=job_id, checkpoint_wait_s=20.0)
    completed = patient.aligner.checkpoint(job_id, wait=True)
    assert completed is not None
    url = f"{flink_cluster.rest_url}/jobs/{job_id}/checkpoints/details/{completed}"
    poll(lambda: (rest_get(url) or {}).get("status") == "COMPLETED", timeout_s=10, what=f"checkpoint {completed}")
