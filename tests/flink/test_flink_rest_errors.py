"""Error paths of the flink-rest scaler against a loopback fake of the REST API (no Flink needed, fast).

Each case is one thing a real cluster does not show on demand: a job on the default scheduler, a burst
of 503s, a PUT accepted but never applied, two jobs of the same name, a job that vanished.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from agent.clock import SimulatedClock
from agent.execute.flink_rest import FlinkRestClient, FlinkRestScaler, unreachable_reason
from agent.ports import ScalerError
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


def scaler(
    url: str, *, job: str | None = None, clock: SimulatedClock | None = None, sleeps: list[float] | None = None
) -> FlinkRestScaler:
    """A scaler with instant backoff (sleeps recorded) and a simulated clock for the confirm deadline."""
    settings = ScaleTargetSettings(kind="flink-rest", rest_url=url, job=job, request_timeout_s=2.0, max_retries=3)
    recorded = sleeps if sleeps is not None else []
    client = FlinkRestClient(url, timeout_s=2.0, max_retries=3, sleep=recorded.append)
    return FlinkRestScaler(
        settings, client=client, clock=clock or SimulatedClock(), confirm_timeout_s=30.0, poll_interval_s=1.0
    )


def test_a_rescale_puts_every_vertex_and_measures_downtime_from_the_timestamps(fake: FakeFlinkRest) -> None:
    result = scaler(fake.url).rescale(3, reasons=("up",), dry_run=False)
    assert (result.requested, result.confirmed, result.downtime_s) == (3, 3, 1.5)
    assert fake.put_bodies == [
        {vid: {"parallelism": {"lowerBound": 1, "upperBound": 3}} for vid in ("a" * 32, "b" * 32)}
    ]


def test_the_default_scheduler_is_refused_before_any_write(fake: FakeFlinkRest) -> None:
    fake.jobs[next(iter(fake.jobs))].scheduler = "Default"
    with pytest.raises(ScalerError) as error:
        scaler(fake.url).rescale(3, reasons=(), dry_run=False)
    assert error.value.kind == "not_adaptive" and "jobmanager.scheduler: adaptive" in str(error.value)
    assert fake.writes() == []


def test_without_scheduler_type_the_jobmanager_config_decides(fake: FakeFlinkRest) -> None:
    job = fake.jobs[next(iter(fake.jobs))]
    job.report_scheduler = False
    assert scaler(fake.url).rescale(3, reasons=(), dry_run=False).confirmed == 3
    assert any(path.endswith("/jobmanager/config") for _, path, _ in fake.log)
    job.scheduler = "Default"
    with pytest.raises(ScalerError) as error:
        scaler(fake.url).rescale(2, reasons=(), dry_run=False)
    assert error.value.kind == "not_adaptive"


def test_a_burst_of_503_is_retried_with_capped_backoff(fake: FakeFlinkRest) -> None:
    job_id = next(iter(fake.jobs))
    fake.failures[f"/jobs/{job_id}/resource-requirements"] = 2  # the GET before the PUT fails twice
    sleeps: list[float] = []
    result = scaler(fake.url, sleeps=sleeps).rescale(3, reasons=(), dry_run=False)
    assert result.confirmed == 3
    assert len(sleeps) == 2 and 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0


def test_persistent_503_gives_up_after_max_retries(fake: FakeFlinkRest) -> None:
    fake.failures["/jobs/overview"] = 100
    sleeps: list[float] = []
    with pytest.raises(ScalerError) as error:
        scaler(fake.url, sleeps=sleeps).rescale(3, reasons=(), dry_run=False)
    assert error.value.kind == "server_error" and error.value.retryable
    assert len(sleeps) == 3 and max(sleeps) <= 8.0


def test_a_rescale_that_never_lands_returns_what_was_reached_at_the_deadline(fake: FakeFlinkRest) -> None:
    fake.jobs[next(iter(fake.jobs))].apply_puts = False
    clock = SimulatedClock(start=100.0)
    result = scaler(fake.url, clock=clock).rescale(3, reasons=(), dry_run=False)
    assert (result.requested, result.confirmed, result.downtime_s) == (3, 2, None)
    assert clock.now() >= 130.0, "waited (simulated) until the confirm deadline"
    assert len(fake.put_bodies) == 1


def test_too_few_slots_is_refused_before_any_write(fake: FakeFlinkRest) -> None:
    with pytest.raises(ScalerError) as error:
        scaler(fake.url).rescale(5, reasons=(), dry_run=False)
    assert error.value.kind == "insufficient_slots" and "needs 5 slots" in str(error.value)
    assert fake.writes() == []


def test_two_jobs_of_one_name_are_ambiguous_and_an_id_picks_one() -> None:
    first, second = FakeJob(job_id="1" * 32, name="twin"), FakeJob(job_id="2" * 32, name="twin")
    server = FakeFlinkRest(first, second).start()
    try:
        with pytest.raises(ScalerError) as error:
            scaler(server.url, job="twin").find_job()
        assert error.value.kind == "ambiguous" and "1" * 32 in str(error.value)
        assert scaler(server.url, job="2" * 32).find_job() == "2" * 32
    finally:
        server.stop()


def test_a_job_resubmitted_under_the_same_name_is_found_again(fake: FakeFlinkRest) -> None:
    target = scaler(fake.url, job="fake-job")
    assert target.current_parallelism() == 2
    old = fake.jobs.pop(next(iter(fake.jobs)))
    fake.jobs["f" * 32] = FakeJob(job_id="f" * 32, name=old.name, vertices={"c" * 32: 4})
    assert target.current_parallelism() == 4


def test_a_finished_job_is_not_a_target(fake: FakeFlinkRest) -> None:
    fake.jobs[next(iter(fake.jobs))].state = "CANCELED"
    with pytest.raises(ScalerError) as error:
        scaler(fake.url).rescale(3, reasons=(), dry_run=False)
    assert error.value.kind == "not_found"


def test_dry_run_and_a_rescale_to_the_current_parallelism_write_nothing(fake: FakeFlinkRest) -> None:
    target = scaler(fake.url)
    assert target.rescale(3, reasons=(), dry_run=True).confirmed == 2
    assert target.rescale(2, reasons=(), dry_run=False).confirmed == 2
    assert fake.writes() == []
    with pytest.raises(ScalerError) as error:
        target.rescale(0, reasons=(), dry_run=False)
    assert error.value.kind == "invalid_request"


def test_a_url_that_is_not_the_rest_root_is_one_clear_line(fake: FakeFlinkRest) -> None:
    assert unreachable_reason(ScaleTargetSettings(kind="flink-rest", rest_url=fake.url)) is None
    reason = unreachable_reason(ScaleTargetSettings(kind="flink-rest", rest_url=fake.url + "/wrong"))
    assert reason is not None and "HTTP 404" in reason and "\n" not in reason


def test_it_is_a_scaler(fake: FakeFlinkRest) -> None:
    from agent.ports import Scaler

    assert isinstance(scaler(fake.url), Scaler)


def test_a_bound_left_above_the_running_parallelism_is_lowered_without_waiting(fake: FakeFlinkRest) -> None:
    job = fake.jobs[next(iter(fake.jobs))]
    job.apply_puts = False
    target = scaler(fake.url)
    assert target.rescale(3, reasons=(), dry_run=False).confirmed == 2  # short: the bound is 3, the job runs at 2
    fake.put_bodies.clear()
    result = target.rescale(2, reasons=(), dry_run=False)
    assert (result.confirmed, result.downtime_s) == (2, None)
    assert fake.put_bodies == [{vid: {"parallelism": {"lowerBound": 1, "upperBound": 2}} for vid in job.vertices}]
    assert target.rescale(2, reasons=(), dry_run=False).confirmed == 2
    assert len(fake.put_bodies) == 1, "settled: nothing more to write"


def test_readers_that_finish_without_a_split_do_not_hold_the_rescale(fake: FakeFlinkRest) -> None:
    job = fake.jobs[next(iter(fake.jobs))]
    job.splits = {"a" * 32: 2}  # the source has two splits: at 3 readers one runs, finds none and FINISHES
    clock = SimulatedClock(start=100.0)
    target = scaler(fake.url, clock=clock)
    with capture_logs() as logs:
        result = target.rescale(3, reasons=(), dry_run=False)
        assert target.current_parallelism() == 3  # the next look at the job: the same count is not told again
    assert (result.requested, result.confirmed, result.downtime_s) == (3, 3, 1.5)
    assert clock.now() < 105.0, "confirmed at once, not at the 30-s confirm deadline"
    warned = [e for e in logs if e["event"] == "rescale.subtasks_finished"]
    assert len(warned) == 1 and warned[0]["vertex"] == "Source: src" and warned[0]["finished"] == 1


def test_a_job_wide_rescale_caps_each_vertex_at_its_max_parallelism(fake: FakeFlinkRest) -> None:
    """A non-parallel sink (max parallelism 1) stays at 1 while the rest of the job scales; a vertex named on
    its own above its max, or a scale-out past every vertex's max, is refused before any write."""
    job = fake.jobs[next(iter(fake.jobs))]
    job.vertices["b" * 32], job.max_parallelism["b" * 32] = 1, 1
    result = scaler(fake.url).rescale(3, reasons=("up",), dry_run=False)
    assert (result.requested, result.confirmed) == (3, 3)
    assert fake.put_bodies == [
        {
            "a" * 32: {"parallelism": {"lowerBound": 1, "upperBound": 3}},
            "b" * 32: {"parallelism": {"lowerBound": 1, "upperBound": 1}},
        }
    ]
    writes = len(fake.writes())
    with pytest.raises(ScalerError, match="vertex 'Sink: snk' .* max parallelism 1, below the target 2") as named:
        scaler(fake.url).rescale_vertices({"Sink: snk": 2}, reasons=(), dry_run=False)
    with pytest.raises(ScalerError, match="max parallelism 128 .*below the target 129") as past:
        scaler(fake.url).rescale(129, reasons=(), dry_run=False)
    assert named.value.kind == past.value.kind == "invalid_request"
    assert len(fake.writes()) == writes


def test_the_reachable_scale_out_is_what_the_free_slots_and_max_parallelism_hold(fake: FakeFlinkRest) -> None:
    target = scaler(fake.url)
    assert target.reachable_parallelism(16) == 4, "the fake cluster's 4 slots, the job's own 2 among them"
    assert target.reachable_parallelism(3) == 3, "never above what the loop may plan"
    job = fake.jobs[next(iter(fake.jobs))]
    job.max_parallelism = {vid: 3 for vid in job.vertices}
    assert target.reachable_parallelism(16) == 3, "nor above the job's max parallelism"
    job.max_parallelism = {}
    job.slots_total = 8
    job.slot_groups = {"b" * 32: "sink"}  # two slot-sharing groups: two slots per scale-out step
    assert target.reachable_parallelism(16) == 4
    assert fake.writes() == []


def test_slots_other_jobs_need_are_not_reachable_and_an_unreadable_cluster_is_unknown() -> None:
    ours = FakeJob(job_id="1" * 32, name="ours", slots_total=8)
    other = FakeJob(job_id="2" * 32, name="other", slots_total=8, vertices={"c" * 32: 3})
    server = FakeFlinkRest(ours, other).start()
    try:
        target = scaler(server.url, job="ours")
        assert target.reachable_parallelism(16) == 5
        other.vertices = {"c" * 32: 8}
        assert target.reachable_parallelism(16) == 2, "never below what the job runs at"
        server.failures["/overview"] = 100
        with pytest.raises(ScalerError):
            target.reachable_parallelism(16)
    finally:
        server.stop()


def test_the_round_s_read_of_the_slots_is_tried_once_and_writes_keep_their_retries(fake: FakeFlinkRest) -> None:
    sleeps: list[float] = []
    target = scaler(fake.url, sleeps=sleeps)
    target.client.timeout_s = 5.0
    fake.failures["/overview"] = 1
    with pytest.raises(ScalerError):
        target.reachable_parallelism(16)
    assert sleeps == [], "one 503, no retry, no backoff"
    assert target.client.max_retries == 3 and target.client.timeout_s == 5.0, "the client's own settings back"
    assert target.reachable_parallelism(16) == 4
    fake.failures["/overview"] = 1  # the rescale's own slot check still retries
    assert target.rescale(3, reasons=(), dry_run=False).confirmed == 3 and len(sleeps) == 1


def test_a_job_of_uneven_vertices_is_never_capped_below_what_it_runs_at(fake: FakeFlinkRest) -> None:
    # 6 + 2 in two slot-sharing groups hold 8 of 10 slots; 6 for every vertex would need 12.
    job = fake.jobs[next(iter(fake.jobs))]
    job.vertices, job.slot_groups, job.slots_total = {"a" * 32: 6, "b" * 32: 2}, {"b" * 32: "sink"}, 10
    assert scaler(fake.url).reachable_parallelism(16) == 6
