"""The simulated Flink job: exactly-once accounting, skew, rescale and failure behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator import JobState, SimulatedFlinkJob, SimulatorSettings, Trace


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
    job = SimulatedFlinkJob(flat(1.0), config(partitions=6, partition_weights=(3, 1, 1, 1, 1, 1), initial_parallelism=2))
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
