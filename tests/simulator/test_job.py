"""The simulated Flink job: exactly-once accounting, skew, rescale and failure behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator import JobState, SimulatedFlinkJob, SimulatorSettings, Trace, failure_schedule


def flat(rate: float, seconds: float = 100_000.0) -> Trace:
    return Trace("flat", np.array([0.0, seconds]), np.array([rate, rate]))


def config(**overrides: object) -> SimulatorSettings:
    base: dict[str, object] = {"workload_noise": 0.0, "downtime_jitter": 0.0}
    base.update(overrides)
    return SimulatorSettings(**base)  # type: ignore[arg-type]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Trace, SimulatorSettings, list[tuple[int, str, int]]]:
    points = draw(st.integers(2, 6))
    rates = draw(st.lists(st.floats(0, 150_000), min_size=points, max_size=points))
    gaps = draw(st.lists(st.integers(1, 200), min_size=points - 1, max_size=points - 1))
    times = np.concatenate([[0.0], np.cumsum(gaps)]).astype(float)
    partitions = draw(st.integers(1, 40))
    settings = SimulatorSettings(
        partitions=partitions,
        partition_skew=draw(st.floats(0, 2)),
        worker_capacity_rps=draw(st.floats(100, 20_000)),
        checkpoint_interval_s=draw(st.integers(1, 30)),
        initial_parallelism=draw(st.integers(1, partitions)),
        seed=draw(st.integers(0, 2**16)),
        workload_noise=draw(st.floats(0, 0.3)),
        rescale_downtime_base_s=draw(st.floats(0, 20)),
        failure_downtime_base_s=draw(st.floats(0, 20)),
    )
    events = draw(
        st.lists(
            st.tuples(st.integers(0, 400), st.sampled_from(["rescale", "failure"]), st.integers(1, partitions)),
            max_size=8,
        )
    )
    return Trace("random", times, np.array(rates)), settings, sorted(events)


@given(scenarios())
def test_produced_equals_processed_plus_lag_at_every_step(
    scenario: tuple[Trace, SimulatorSettings, list[tuple[int, str, int]]],
) -> None:
    trace, settings, events = scenario
    job = SimulatedFlinkJob(trace, settings)
    pending = list(events)
    committed_before = job.committed_offsets
    for _ in range(450):
        while pending and pending[0][0] <= job.now_s:
            _, kind, n = pending.pop(0)
            if kind == "rescale":
                job.rescale(n)
            else:
                job.fail()
        job.step()
        a = job.accounting
        assert a.produced == a.effective_processed + a.lag
        assert a.lost == 0
        assert a.lag >= 0
        # A checkpoint commits each record once: committed output equals the committed offsets.
        committed = job.committed_offsets
        assert a.committed == int(committed.sum())
        assert np.all(committed >= committed_before)
        assert a.committed <= a.effective_processed
        committed_before = committed


def test_replay_reprocesses_exactly_the_records_since_the_last_checkpoint() -> None:
    job = SimulatedFlinkJob(flat(10_000), config(checkpoint_interval_s=10, initial_parallelism=4))
    job.run_until(25)  # checkpoints at uptime 10 and 20; 5 s of uncommitted progress
    uncommitted = job.accounting.effective_processed - job.accounting.committed
    assert uncommitted > 0
    job.fail()
    assert job.state is JobState.DOWN
    assert job.accounting.replayed == uncommitted
    assert job.accounting.effective_processed == job.accounting.committed
    job.run_until(200)
    assert job.state is JobState.RUNNING
    assert job.restarts[0].kind == "failure"
    assert job.restarts[0].replayed_records == uncommitted
    assert job.accounting.lag < 10_000  # caught up again


def test_downtime_grows_with_parallelism_and_stops_processing() -> None:
    job = SimulatedFlinkJob(flat(5_000), config(initial_parallelism=2))
    job.run_until(20)
    job.rescale(4)
    processed = job.accounting.processed
    expected = 10.0 + 1.5 * 4
    job.run_until(20 + int(expected) - 1)
    assert job.accounting.processed == processed  # nothing processed while down
    job.run_until(300)
    small = job.restarts[-1].downtime_s
    job.rescale(30)
    job.run_until(600)
    large = job.restarts[-1].downtime_s
    assert small == pytest.approx(expected, abs=1)
    assert large > small
    assert job.parallelism == 30


def test_skewed_worker_saturates_first_and_bounds_the_job() -> None:
    # Two workers; partition weights give worker 0 twice the input of worker 1 (2:1 skew).
    weights = (2.0, 1.0) * 6
    settings = config(partitions=12, partition_weights=weights, initial_parallelism=2, worker_speeds=(1.0,))
    capacity = settings.worker_capacity_rps
    job = SimulatedFlinkJob(flat(1.0), settings)
    assert job.shares(2) == pytest.approx([2 / 3, 1 / 3])
    true_capacity = job.true_capacity(2)
    assert true_capacity == pytest.approx(capacity * 1.5)  # worker 0 saturates at 2/3 of 1.5 capacity

    overloaded = SimulatedFlinkJob(flat(true_capacity * 1.2), settings)
    overloaded.run_until(200)
    window = overloaded.window(150, 200)
    cpu0, cpu1 = window.cpu["taskmanager-0"].mean(), window.cpu["taskmanager-1"].mean()
    assert cpu0 > 0.97  # the hot worker is saturated ...
    assert cpu1 < 0.85  # ... while the other still has room
    assert window.throughput["taskmanager-0"].mean() == pytest.approx(capacity, rel=0.02)
    assert np.all(np.diff(window.lag) > 0)  # 20 % above the bound the backlog grows every second

    sustainable = SimulatedFlinkJob(flat(true_capacity * 0.95), settings)
    sustainable.run_until(200)
    assert sustainable.window(150, 200).lag.max() < true_capacity  # 5 % below it the job keeps up


def test_rescale_reassigns_partitions_round_robin() -> None:
    job = SimulatedFlinkJob(
        flat(1.0), config(partitions=6, partition_weights=(3, 1, 1, 1, 1, 1), initial_parallelism=2)
    )
    # At 2 workers worker 0 gets partitions 0, 2, 4 (weight 5/8); at 3, partitions 0 and 3 (weight 4/8).
    assert job.shares(2) == pytest.approx([5 / 8, 3 / 8])
    assert job.shares(3) == pytest.approx([4 / 8, 2 / 8, 2 / 8])


def test_cpu_tracks_load_and_workers_are_heterogeneous() -> None:
    settings = config(initial_parallelism=8, cpu_noise=0.0)
    job = SimulatedFlinkJob(flat(40_000), settings)
    job.run_until(120)
    window = job.window(90, 120)
    assert set(window.cpu) == {f"taskmanager-{i}" for i in range(8)}
    assert len(set(np.round(job.worker_speeds[:8], 6))) == 8
    for worker, cpu in window.cpu.items():
        index = int(worker.rsplit("-", 1)[1])
        busy = window.throughput[worker] / job.worker_capacity[index]
        assert cpu == pytest.approx(settings.cpu_idle + (1 - settings.cpu_idle) * busy, abs=0.01)


def test_parallelism_above_partitions_is_rejected() -> None:
    job = SimulatedFlinkJob(flat(1.0), config(partitions=4, initial_parallelism=2))
    with pytest.raises(ValueError, match="outside"):
        job.rescale(5)


# --------------------------------------------------------------------------- fairness


def noisy(**overrides: object) -> SimulatorSettings:
    """Default noise everywhere (arrivals, capacity, downtime jitter), unlike ``config``."""
    return SimulatorSettings(**overrides)  # type: ignore[arg-type]


def test_arrivals_capacities_and_downtimes_do_not_depend_on_what_the_policy_did() -> None:
    trace = Trace("ramp", np.array([0.0, 900.0]), np.array([20_000.0, 90_000.0]))
    settings = noisy(initial_parallelism=4)
    busy_policy, idle_policy = SimulatedFlinkJob(trace, settings), SimulatedFlinkJob(trace, settings)
    rescales = {60: 6, 120: 9, 300: 4}  # back at 4 workers, like the idle policy, before the failure
    for t in range(600):
        if t in rescales:
            busy_policy.rescale(rescales[t])
        if t == 420:
            busy_policy.fail()
            idle_policy.fail()
        busy_policy.step()
        idle_policy.step()
    # Every policy sees the same records arrive each second ...
    arrived = busy_policy.window(0, 600).workload
    assert np.array_equal(arrived, idle_policy.window(0, 600).workload)
    assert np.array_equal(arrived, busy_policy.environment.workload(0, 600))
    assert busy_policy.accounting.produced == idle_policy.accounting.produced
    # ... the same worker capacities, and the same downtime for the same stop at the same second,
    # although the busy policy made three stops (and drew three downtimes) before it.
    assert np.array_equal(busy_policy.environment.capacities(0, 600), idle_policy.environment.capacities(0, 600))
    assert busy_policy.restarts[-1].downtime_s == idle_policy.restarts[-1].downtime_s
    for restart in busy_policy.restarts:
        assert restart.downtime_s == busy_policy.environment.downtime_s(
            restart.kind, restart.start_s, restart.from_parallelism, restart.to_parallelism
        )


def test_the_downtime_factor_is_keyed_by_seed_kind_and_second() -> None:
    environment = SimulatedFlinkJob(flat(1.0), noisy(downtime_jitter=0.5)).environment
    at_100 = environment.downtime_s("failure", 100, 8, 8)
    assert at_100 == environment.downtime_s("failure", 100, 8, 8)
    drawn = {environment.downtime_s("failure", s, 8, 8) for s in range(100, 140)}
    assert len(drawn) > 5  # a different second draws a different factor
    other_seed = SimulatedFlinkJob(flat(1.0), noisy(downtime_jitter=0.5, seed=8)).environment
    assert [other_seed.downtime_s("failure", s, 8, 8) for s in range(100, 140)] != [
        environment.downtime_s("failure", s, 8, 8) for s in range(100, 140)
    ]


def test_arrivals_are_whole_records_that_add_up_to_the_trace() -> None:
    environment = SimulatedFlinkJob(flat(10_000.5), config()).environment
    arrivals = environment.arrivals(0, 7300)  # crosses two of the one-hour blocks
    assert arrivals.dtype == np.int64 and arrivals.min() >= 0
    # Fractional records carry over, so the total is the trace's integral to within one record per partition.
    assert abs(int(arrivals.sum()) - 10_000.5 * 7300) <= environment.config.partitions
    assert np.array_equal(environment.arrivals(3590, 3610), arrivals[3590:3610])


def test_a_saturated_worker_processes_its_capacity_of_that_second() -> None:
    settings = noisy(initial_parallelism=2, metric_window_s=1, capacity_noise=0.05)
    job = SimulatedFlinkJob(flat(100_000.0), settings)
    job.run_until(50)
    window = job.window(10, 50)
    capacities = job.environment.capacities(10, 50)
    partitions_of_worker_0 = int(np.sum(np.arange(settings.partitions) % 2 == 0))
    # Each partition rounds its share down, so a worker may fall short by one record per partition.
    shortfall = capacities[:, 0] - window.throughput["taskmanager-0"]
    assert np.all((shortfall >= -1e-6) & (shortfall <= partitions_of_worker_0))
    assert np.allclose(window.busy["taskmanager-0"], window.throughput["taskmanager-0"] / capacities[:, 0])


def test_busy_fraction_and_committed_lag_are_recorded() -> None:
    settings = config(initial_parallelism=4, checkpoint_interval_s=10)
    job = SimulatedFlinkJob(flat(30_000.0), settings)
    job.run_until(95)
    job.rescale(2)
    job.run_until(120)
    window = job.window(0, 120)
    assert set(window.busy) == {f"taskmanager-{i}" for i in range(4)}
    for busy in window.busy.values():
        finite = busy[np.isfinite(busy)]
        assert np.all((finite >= 0) & (finite <= 1))
    # Workers 2 and 3 are gone after the restart: their busy fraction is NaN, not zero.
    assert np.all(np.isnan(window.busy["taskmanager-3"][-5:]))
    assert np.all(window.committed_lag >= window.lag)
    assert window.committed_lag[-1] == job.accounting.produced - job.accounting.committed
    # While running at 4 workers the busy fraction is the load over the capacity of each worker.
    share = job.shares(4)[0]
    assert window.busy["taskmanager-0"][60:90].mean() == pytest.approx(
        30_000.0 * share / job.worker_capacity[0], rel=0.02
    )


def test_each_workers_backlog_is_what_waits_in_its_partitions_and_unknown_while_down() -> None:
    """The per-worker backlog (its readers' pendingRecords) adds up to the job's lag every second it runs,
    ends at :meth:`worker_backlogs`, and is NaN while the job is down (no reader reports) and for a worker
    that no longer exists."""
    job = SimulatedFlinkJob(flat(60_000.0), config(initial_parallelism=4, partitions=8))
    job.run_until(40)
    job.rescale(2)
    stop = job.now_s
    job.run_until(120)
    window = job.window(0, 120)
    assert set(window.backlog) == {f"taskmanager-{i}" for i in range(4)}
    down = np.isnan(window.backlog["taskmanager-0"])
    resumed = stop + job.restarts[-1].downtime_s
    assert np.all(down[stop:resumed]) and not np.any(down[:stop]) and not np.any(down[resumed:])
    running = ~down
    total = np.nansum(np.vstack(list(window.backlog.values())), axis=0)
    np.testing.assert_array_equal(total[running], window.lag[running])
    assert np.all(np.isnan(window.backlog["taskmanager-3"][resumed:]))
    np.testing.assert_array_equal([window.backlog[f"taskmanager-{i}"][-1] for i in range(2)], job.worker_backlogs())


def test_a_stop_in_progress_is_visible_until_the_job_resumes() -> None:
    job = SimulatedFlinkJob(flat(1_000.0), config(initial_parallelism=2))
    job.run_until(30)
    assert job.restart_in_progress is None
    job.rescale(3)
    stop = job.restart_in_progress
    assert stop is not None and stop.kind == "rescale" and stop.start_s == 30 and stop.to_parallelism == 3
    job.run_until(30 + stop.downtime_s + 1)
    assert job.restart_in_progress is None
    assert job.restarts[-1] == stop


def test_the_failure_schedule_is_a_seeded_poisson_process() -> None:
    assert failure_schedule(3600, 0.0, 7) == []
    times = failure_schedule(200 * 3600, 1.0, 7)
    assert times == failure_schedule(200 * 3600, 1.0, 7)
    assert times == sorted(times) and 0 <= times[0] and times[-1] < 200 * 3600
    assert 150 <= len(times) <= 250  # about one an hour


def test_a_failure_seed_moves_the_failures_and_nothing_else() -> None:
    """Without a failure seed the instants come from the simulator's seed; with one, only they move: the same
    arrivals, capacities and downtimes face the job (a policy's luck told from its judgement)."""
    base = SimulatorSettings(seed=7)
    moved = SimulatorSettings(seed=7, failure_seed=101)
    assert base.failure_schedule_seed == 7 and moved.failure_schedule_seed == 101
    trace = Trace("flat", np.array([0.0, 7200.0]), np.array([40_000.0, 40_000.0]))
    one, other = SimulatedFlinkJob(trace, base).environment, SimulatedFlinkJob(trace, moved).environment
    assert one.failures(7200, 2.0) == failure_schedule(7200, 2.0, 7)
    assert other.failures(7200, 2.0) == failure_schedule(7200, 2.0, 101) != one.failures(7200, 2.0)
    assert np.array_equal(one.workload(0, 600), other.workload(0, 600))
    assert one.true_capacity(5) == other.true_capacity(5)
    assert one.downtime_s("rescale", 120, 4, 6) == other.downtime_s("rescale", 120, 4, 6)
