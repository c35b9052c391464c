"""CapacityModel: skew-aware capacity, sources per scale-out, bad input, persistence; on the simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.capacity import CapacityModel, round_robin_shares
from simulator import SimulatedFlinkJob, Trace
from simulator.config import SimulatorSettings

IDLE = 0.05


def _samples(rate: np.ndarray, capacity: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """CPU = idle + (1 − idle) · rate / capacity with a little noise, as a worker would report."""
    cpu = IDLE + (1 - IDLE) * rate / capacity + 0.002 * rng.standard_normal(rate.size)
    return cpu, rate


def test_two_to_one_skew_bounds_the_job_by_the_hot_worker() -> None:
    # Three workers of 10,000 rec/s each; worker a receives half of the input (2:1 against b and c).
    rng = np.random.default_rng(1)
    job_rate = np.linspace(4000, 12000, 120)
    shares = {"a": 0.5, "b": 0.25, "c": 0.25}
    model = CapacityModel(max_cpu=1.0)
    for worker, share in shares.items():
        cpu, tp = _samples(job_rate * share, 10000.0, rng)
        model.update(worker, cpu, tp)
    model.set_workers(shares)
    for worker in shares:
        assert model.worker_capacity(worker) == pytest.approx(10000.0, rel=0.02)
    assert model.shares() == pytest.approx(shares, rel=1e-6)
    # Worker a saturates at 20,000 rec/s for the job; a naive sum of capacities would say 30,000.
    assert model.capacity_now() == pytest.approx(20000.0, rel=0.02)


def test_capacity_read_at_max_cpu() -> None:
    rng = np.random.default_rng(2)
    model = CapacityModel(max_cpu=0.8)
    cpu, tp = _samples(np.linspace(1000, 8000, 100), 10000.0, rng)
    model.update("w", cpu, tp)
    model.set_workers(["w"])
    # throughput at CPU 0.8 = (0.8 − idle) / (1 − idle) · capacity
    assert model.worker_capacity("w") == pytest.approx((0.8 - IDLE) / (1 - IDLE) * 10000.0, rel=0.02)


def test_bad_samples_are_skipped_counted_and_never_make_a_capacity() -> None:
    model = CapacityModel()
    used = model.update("w", np.array([np.nan, -0.1, 0.5, np.inf]), np.array([100.0, 100.0, -5.0, 100.0]))
    assert used == 0
    assert model.skipped == 4
    model.update("w", np.array([0.5, 0.6]), np.array([100.0]))  # misaligned: all skipped
    assert model.skipped == 6
    model.set_workers(["w"])
    assert model.worker_capacity("w") is None
    assert model.capacity_now() is None
    assert model.capacity_at(4) == (None, "unknown")


def test_flat_cpu_series_falls_back_to_records_per_unit_of_load() -> None:
    """No regression line at a steady load, but the worker still shows its records per unit of load:
    5000 records/s at half load read at full load is about 10 000 (DS2's true processing rate)."""
    model = CapacityModel(min_cpu_std=0.02)
    rng = np.random.default_rng(3)
    model.update("w", 0.5 + 0.003 * rng.standard_normal(120), 5000 + 10 * rng.standard_normal(120))
    capacity = model.worker_capacity("w")
    assert capacity is not None and capacity == pytest.approx(10_000, rel=0.01)


def test_a_steady_load_with_a_noisy_reading_is_not_read_as_a_full_worker() -> None:
    """A worker carrying 700 of its 2,000 records/s at a steady rate, its busy fraction read with the noise of
    a real job (±0.02): a least-squares line of throughput on each second's load is diluted by that noise to a
    slope near zero and read 724 records/s at full load (the job looked full, and a real-Flink run scaled out for
    it). The line is fitted on block means (none from a steady load) and never read below the records per unit
    of load: no worker processes records at no load."""
    rng = np.random.default_rng(3)
    throughput = 700 + 3 * rng.standard_normal(32)
    busy = 0.035 + throughput / 2000 + 0.02 * rng.standard_normal(32)
    model = CapacityModel(max_cpu=1.0)
    model.update("w", busy, throughput)
    model.set_workers(["w"])
    assert model.regressions["w"].slope is None  # one block of a steady load: no line to dilute
    capacity = model.worker_capacity("w")
    # Records per unit of load read at full load: 700 / 0.385, short of 2,000 by the busy floor only.
    assert capacity == pytest.approx(700 / 0.385, rel=0.03)
    assert model.capacity_now() == pytest.approx(capacity)


def test_the_cpu_rule_reads_a_diluted_line_no_lower_than_the_records_per_unit_of_load() -> None:
    """Daedalus' CPU rule (no shares measured yet) reads each worker's line at its expected maximum CPU; the
    same floor holds there: two workers at a steady 700 records/s with a noisy busy fraction are not read
    as carrying little more than that."""
    rng = np.random.default_rng(3)
    model = CapacityModel(max_cpu=1.0)
    for worker in ("a", "b"):
        throughput = 700 + 3 * rng.standard_normal(32)
        model.update(worker, 0.035 + throughput / 2000 + 0.02 * rng.standard_normal(32), throughput)
    model.set_workers(["a", "b"])
    assert all(model.regressions[w].slope is None for w in "ab")
    assert model.capacity_by_cpu() == pytest.approx(2 * 700 / 0.385, rel=0.05)


def _ramp_then_steady(model: CapacityModel, rng: np.random.Generator, steady_minutes: int) -> list[float]:
    """A worker of 30,000 records/s whose busy fraction is 0.2 + 0.8 · rate / 30,000 read with ±0.03 of noise a
    second: ten minutes of a ramp 2,000 -> 20,000/s, then a steady 7,000/s; the capacity read after each minute
    of the steady load, fed a minute (one round) at a time."""

    def feed(rate: np.ndarray) -> None:
        busy = 0.2 + 0.8 * rate / 30_000 + 0.03 * rng.standard_normal(rate.size)
        model.update("w", busy, rate * (1 + 0.01 * rng.standard_normal(rate.size)))

    for minute in range(10):
        feed(np.linspace(2_000 + 1_800 * minute, 2_000 + 1_800 * (minute + 1), 60))
    read = [model.worker_capacity("w") or 0.0]
    for _ in range(steady_minutes):
        feed(np.full(60, 7_000.0))
        read.append(model.worker_capacity("w") or 0.0)
    return read


def test_a_steady_load_leaves_the_capacity_where_the_ramp_put_it() -> None:
    """Nothing changes for an hour: the capacity read at full load converges and holds (within 1 %), near the
    worker's 30,000/s. Fitted on every second instead, the busy fraction's noise is the only spread the steady
    seconds add, each shrinks the slope, and the same hour reads 13 % less (the drift a real job showed)."""
    read = _ramp_then_steady(CapacityModel(max_cpu=1.0), np.random.default_rng(11), 60)
    assert read[0] == pytest.approx(30_000, rel=0.03)
    assert max(read) - min(read) < 0.01 * read[0]
    assert read[-1] == pytest.approx(read[-2], rel=1e-3)  # converged: the last minute moves it by nothing


def test_fitted_on_every_second_the_same_steady_hour_drifts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("models.capacity.LINE_BLOCK_SAMPLES", 1)
    read = _ramp_then_steady(CapacityModel(max_cpu=1.0), np.random.default_rng(11), 60)
    assert read[-1] < 0.92 * read[0]


def test_idle_worker_gives_no_ratio_estimate() -> None:
    """Below RATIO_MIN_LOAD a busy floor dominates: those seconds say nothing about the speed."""
    model = CapacityModel(min_cpu_std=0.02)
    model.update("w", np.full(60, 0.05), np.full(60, 50.0))
    assert model.worker_capacity("w") is None


def _light_steady_job(model: CapacityModel, rounds: int) -> list[float]:
    """Three workers at a steady 6,667 records/s each, about 1.3 % busy: each round's busy fraction (a rate window's
    mean) off by ±0.002 (±15 %), as a real job's at such a load; the job's capacity read after each round."""
    rng = np.random.default_rng(5)
    read = []
    for _ in range(rounds):
        workers = ("tm-1", "tm-2", "tm-3")
        busy = {w: 0.013 + 0.002 * rng.standard_normal() + 0.0003 * rng.standard_normal(30) for w in workers}
        model.observe(busy, {w: 6_667 + 20 * rng.standard_normal(30) for w in workers})
        capacity = model.capacity_now()
        assert capacity is not None
        read.append(capacity)
    return read


def test_a_job_a_few_percent_busy_reads_a_capacity_that_converges() -> None:
    """Below RATIO_MIN_LOAD no worker has a line or a loaded ratio; the job's capacity is read from the records per
    unit of load of every light second so far, so the rounds' noise averages out: the last ten of thirty rounds
    lie within 5 % of each other and within 10 % of the 1.54M records/s the light seconds give. Read from each
    round alone (the CPU rule) they lie 20 % and more apart, as a real job at 1 % busy swung by a third."""
    light = 3 * 6_667 / 0.013
    read = _light_steady_job(CapacityModel(max_cpu=1.0), 30)[-10:]
    assert max(read) - min(read) < 0.05 * min(read)
    assert 0.9 * light < min(read) and max(read) < 1.05 * light
    alone = _light_steady_job(CapacityModel(max_cpu=1.0, min_known_fraction=1.01), 30)[-10:]  # no worker known
    assert max(alone) - min(alone) > 0.2 * min(alone)


def test_ratio_survives_persistence_and_pruning() -> None:
    model = CapacityModel(min_cpu_std=0.02)
    model.update("w", np.full(60, 0.4), np.full(60, 4000.0))
    restored = CapacityModel.from_dict(model.to_dict())
    assert restored.worker_capacity("w") == pytest.approx(10_000)
    restored.prune(now=0, seen=["w"], retention_s=60)
    assert restored.prune(now=120, seen=[], retention_s=60) == ("w",)
    assert "w" not in restored.ratios and restored.worker_capacity("w") is None


def test_light_ratio_survives_persistence_and_gives_way_to_a_loaded_one() -> None:
    model = CapacityModel(min_cpu_std=0.02)
    model.observe({"w": np.full(60, 0.05)}, {"w": np.full(60, 500.0)})
    restored = CapacityModel.from_dict(model.to_dict())
    assert restored.light_ratios == model.light_ratios
    assert restored.worker_capacity("w") is None  # a light second says too little for a worker's own capacity
    assert restored.capacity_now() == pytest.approx(10_000)  # ... and is what a job of light workers reads
    restored.observe({"w": np.full(60, 0.4)}, {"w": np.full(60, 8_000.0)})
    assert restored.capacity_now() == pytest.approx(restored.worker_capacity("w")) and restored.capacity_now() > 20_000
    assert "w" not in restored.light_ratios, "a worker with a loaded ratio keeps no light sums"


def test_a_light_job_reads_the_same_worker_capacities_at_every_scale_out() -> None:
    """Two workers at about 2 % busy, 60/40: the light sums give the job's capacity now, one reader's (no skew:
    the first worker's) and the recovery's profile at a scale-out not run, not the CPU rule's or nothing."""
    model = CapacityModel(max_cpu=1.0, partitions=12)
    model.observe(
        {"taskmanager-0": np.full(60, 0.02), "taskmanager-1": np.full(60, 0.02)},
        {"taskmanager-0": np.full(60, 6_000.0), "taskmanager-1": np.full(60, 4_000.0)},
    )
    assert model.worker_capacity("taskmanager-0") is None  # light seconds alone say too little for a worker
    assert model.capacity_now() == pytest.approx(300_000 / 0.6)
    assert model.capacity_at(1, current=2) == (pytest.approx(300_000), "estimated")
    profile = model.worker_profile(4)
    assert profile is not None and profile[1] == pytest.approx([300_000, 200_000, 250_000, 250_000])
    model.prune(now=0, seen=["taskmanager-0", "taskmanager-1"], retention_s=60)
    model.set_workers([])
    model.prune(now=120, seen=[], retention_s=60)
    assert model.light_ratios == {}


def test_a_light_or_loaded_ratio_beyond_any_job_is_no_capacity() -> None:
    """A stored document is read back: sums whose load all but vanishes (crafted, or one noisy light second) give
    no capacity rather than 10^300 records/s."""
    model = CapacityModel.from_dict(
        {"ratios": {"a": [1.0, 1e-300]}, "light_ratios": {"b": [1.0, 1e-300], "c": [50.0, 0.05]}, "workers": ["a"]}
    )
    assert model.worker_capacity("a") is None
    assert model._light_capacity("b") is None and model._light_capacity("c") is None  # under a loaded second's load


def test_sources_in_order_of_trust() -> None:
    rng = np.random.default_rng(4)
    model = CapacityModel(prior={2: 9000.0, 8: 50000.0})
    assert model.capacity_at(2) == (9000.0, "prior")
    assert model.capacity_at(3) == (None, "unknown")
    for worker in ("w0", "w1", "w2", "w3"):
        cpu, tp = _samples(np.linspace(1000, 8000, 90), 10000.0, rng)
        model.update(worker, cpu, tp)
    model.set_workers(["w0", "w1", "w2", "w3"])
    now = model.capacity_now()
    assert now == pytest.approx(40000.0, rel=0.03)
    model.record_observed(4, now)
    assert model.capacity_at(4) == (now, "observed")
    value, source = model.capacity_at(8, current=4)
    assert source == "estimated", "an estimate beats the prior"
    assert value == pytest.approx(2 * now)
    model.record_observed(8, 61000.0)
    assert model.capacity_at(8) == (61000.0, "observed")
    model.record_observed(5, math.nan)
    assert 5 not in model.observed


def test_estimate_uses_round_robin_skew_of_partition_weights() -> None:
    weights = [2.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0]
    rng = np.random.default_rng(5)
    model = CapacityModel(partition_weights=weights)
    workers = [f"taskmanager-{i}" for i in range(4)]
    shares = round_robin_shares(np.array(weights), 4)
    for worker, share in zip(workers, shares):
        cpu, tp = _samples(np.linspace(4000, 20000, 90) * share, 10000.0, rng)
        model.update(worker, cpu, tp)
    model.set_workers(workers)
    # At 2 workers partitions alternate: worker 0 holds weights 2,1,2,1 = 6/10 of the input.
    value, source = model.capacity_at(2, current=4)
    assert source == "estimated"
    assert value == pytest.approx(10000.0 / 0.6, rel=0.03)
    # At 8 workers the hot partitions have a worker each: 2/10 of the input bounds the job.
    assert model.capacity_at(8, current=4)[0] == pytest.approx(10000.0 / 0.2, rel=0.03)


def test_a_capacity_recorded_before_the_partition_weights_were_known_does_not_outlive_them() -> None:
    """Recorded while saturated and blind to the skew (the CPU rule sums the workers), the value at 2
    overstated the job; once the weights are known, every scale-out is read from them and the lines."""
    weights = [2.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0]
    rng = np.random.default_rng(5)
    model = CapacityModel()
    workers = [f"taskmanager-{i}" for i in range(4)]
    for worker, share in zip(workers, round_robin_shares(np.array(weights), 4)):
        model.update(worker, *_samples(np.linspace(4000, 20000, 90) * share, 10000.0, rng))
    model.set_workers(workers)
    model.record_observed(2, 20000.0)  # two workers' capacities summed: the skew unseen
    assert model.capacity_at(2, current=4) == (20000.0, "observed"), "without the weights it is all there is"
    model.set_partition_weights(weights)
    value, source = model.capacity_at(2, current=4)
    assert source == "observed", "still a scale-out the job has run"
    assert value == pytest.approx(10000.0 / 0.6, rel=0.03), "the hot worker holds 6/10 of the input"


def test_worker_profile_spreads_input_and_capacity_over_the_workers() -> None:
    """What a recovery drains worker by worker: measured shares at the current scale-out, round-robin
    shares of the partition weights at any; its bottleneck is the job's capacity."""
    rng = np.random.default_rng(1)
    shares = {"a": 0.5, "b": 0.25, "c": 0.25}
    model = CapacityModel(max_cpu=1.0)
    for worker, share in shares.items():
        model.update(worker, *_samples(np.linspace(4000, 12000, 120) * share, 10000.0, rng))
    model.set_workers(shares)
    measured, capacities = model.worker_profile(3)  # type: ignore[misc]
    assert measured == pytest.approx([0.5, 0.25, 0.25], rel=1e-6)
    assert float(np.min(capacities / measured)) == pytest.approx(model.capacity_now())
    assert model.worker_profile(2) is None, "neither measured there nor known from partition weights"
    model.set_partition_weights([2.0, 1.0, 1.0, 1.0, 2.0, 1.0])
    by_weights, capacities = model.worker_profile(2)  # type: ignore[misc]
    assert by_weights == pytest.approx([5 / 8, 3 / 8])
    assert float(np.min(capacities / by_weights)) == pytest.approx(model.capacity_at(2, current=3)[0])


def test_with_only_the_partition_count_a_scale_out_not_run_splits_the_partitions_round_robin() -> None:
    """Ten partitions, three workers measured, no partition weights (a real job's monitor reads none): at
    four readers two own three partitions and two own two, each partition alike, on the current workers'
    capacities and their median beyond them; without the count nothing is known there."""
    rng = np.random.default_rng(2)
    model = CapacityModel(max_cpu=1.0, partitions=10)
    for worker, capacity in (("a", 9000.0), ("b", 10000.0), ("c", 11000.0)):
        model.update(worker, *_samples(np.linspace(1000, 6000, 120), capacity, rng))
    model.set_workers(["a", "b", "c"])
    shares, capacities = model.worker_profile(4)  # type: ignore[misc]
    assert shares == pytest.approx([0.3, 0.3, 0.2, 0.2])
    known = [model.worker_capacity(w) for w in ("a", "b", "c")]
    assert capacities == pytest.approx([*known, float(np.median(known))])
    assert model.worker_profile(11) is None, "more readers than partitions: some would own none"
    assert CapacityModel(max_cpu=1.0).worker_profile(4) is None


def test_one_reader_is_estimated_at_its_workers_capacity_whatever_the_skew_at_the_current_scale_out() -> None:
    """Two workers of 10,000 records/s each, the first reading 60 % of the input: the job carries 16,667/s at 2.
    At one reader every partition is that worker's, so 1 is estimated at 10,000/s. Scaled from 2 with the
    partition count (or without it) the skew at 2 was kept and read 8,333/s, a sixth short."""
    rng = np.random.default_rng(6)
    for partitions in (12, None):
        model = CapacityModel(max_cpu=1.0, partitions=partitions)
        for worker, share in (("taskmanager-0", 0.6), ("taskmanager-1", 0.4)):
            model.update(worker, *_samples(np.linspace(4000, 14000, 120) * share, 10000.0, rng))
        model.set_workers(["taskmanager-0", "taskmanager-1"])
        assert model.capacity_now() == pytest.approx(10000.0 / 0.6, rel=0.03)
        value, source = model.capacity_at(1, current=2)
        assert source == "estimated"
        assert value == pytest.approx(model.worker_capacity("taskmanager-0"))
        assert value == pytest.approx(10000.0, rel=0.03)
        model.record_observed(1, 9500.0)
        assert model.capacity_at(1, current=2) == (9500.0, "observed"), "once run, what was measured there"


def test_round_trip_keeps_capacities() -> None:
    rng = np.random.default_rng(6)
    model = CapacityModel(prior={3: 1.0}, partition_weights=[1.0, 2.0, 3.0])
    for worker in ("a", "b"):
        cpu, tp = _samples(np.linspace(1000, 8000, 60), 10000.0, rng)
        model.update(worker, cpu, tp)
    model.set_workers(["a", "b"])
    model.record_observed(2, model.capacity_now())
    copy = CapacityModel.from_dict(model.to_dict())
    assert copy.to_dict() == model.to_dict()
    for n in (1, 2, 3):
        assert copy.capacity_at(n, current=2) == model.capacity_at(n, current=2)
    assert copy.capacity_now() == model.capacity_now()


def test_simulated_job_with_two_to_one_skew_within_three_percent() -> None:
    # Eight partitions on four equal workers, worker 0 receiving twice the others' input.
    config = SimulatorSettings(
        partitions=8,
        partition_weights=(2, 1, 1, 1, 2, 1, 1, 1),
        initial_parallelism=4,
        worker_speed_spread=0.0,
    )
    ramp = Trace("ramp", np.array([0.0, 200.0, 260.0, 400.0]), np.array([10000.0, 10000.0, 30000.0, 30000.0]))
    job = SimulatedFlinkJob(ramp, config)
    job.run_until(260)
    window = job.window(200, 260)  # 60 s of samples while the load ramps
    model = CapacityModel()
    model.observe(window.cpu, window.throughput)
    truth = job.true_capacity(4)
    assert truth == pytest.approx(35000.0)
    assert model.capacity_now() == pytest.approx(truth, rel=0.03)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=20),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=20),
)
def test_garbage_samples_never_raise(cpu: list[float], throughput: list[float]) -> None:
    model = CapacityModel(min_samples=2)
    model.update("w", np.array(cpu), np.array(throughput))
    model.set_workers(["w"])
    value = model.capacity_now()
    assert value is None or (math.isfinite(value) and value > 0)
    model.capacity_at(3)


def _trained(workers: list[str], rng: np.random.Generator) -> CapacityModel:
    model = CapacityModel()
    for worker in workers:
        cpu, tp = _samples(np.linspace(1000, 8000, 60), 10000.0, rng)
        model.update(worker, cpu, tp)
    return model


@pytest.mark.parametrize(
    ("case", "seen_at", "current", "retention_s", "max_workers", "kept"),
    [
        # Each case: when each worker was last seen, the current workers at now=1000, what survives.
        ("unseen past the retention are dropped", {"a": 100, "b": 500, "c": 1000}, ["c"], 600, None, {"b", "c"}),
        ("exactly at the retention is kept", {"a": 400, "c": 1000}, ["c"], 600, None, {"a", "c"}),
        ("current workers stay however old", {"a": 0, "b": 1000}, ["a", "b"], 10, None, {"a", "b"}),
        (
            "the cap drops the least recently seen first",
            {"a": 700, "b": 800, "c": 900, "d": 1000},
            ["d"],
            10_000,
            2,
            {"c", "d"},
        ),
        (
            "the cap never drops a current worker",
            {"a": 100, "b": 200, "c": 1000},
            ["a", "b", "c"],
            10_000,
            1,
            {"a", "b", "c"},
        ),
    ],
)
def test_prune_forgets_workers_unseen_for_the_retention(
    case: str,
    seen_at: dict[str, float],
    current: list[str],
    retention_s: float,
    max_workers: int | None,
    kept: set[str],
) -> None:
    model = _trained(list(seen_at), np.random.default_rng(5))
    for worker, at in seen_at.items():
        model.prune(now=at, seen=[worker], retention_s=1e9)
    model.set_workers(current)
    dropped = model.prune(now=1000, seen=current, retention_s=retention_s, max_workers=max_workers)
    assert set(model.regressions) == kept, case
    assert set(dropped) == set(seen_at) - kept, case
    assert set(model.last_seen) == kept, case


def test_pruning_keeps_the_observed_capacities_and_survives_a_restore() -> None:
    model = _trained(["old-1", "old-2"], np.random.default_rng(6))
    model.set_workers(["old-1", "old-2"])
    model.record_observed(2, 19_000.0)
    model.prune(now=0, seen=["old-1", "old-2"], retention_s=60)
    # A restart of the Deployment: new pods, the old ones never come back.
    new = _trained(["new-1", "new-2", "new-3"], np.random.default_rng(7))
    for worker, regression in new.regressions.items():
        model.regressions[worker] = regression
    model.set_workers(["new-1", "new-2", "new-3"])
    assert model.prune(now=30, seen=model.workers, retention_s=60) == ()
    restored = CapacityModel.from_dict(model.to_dict())
    assert restored.last_seen == model.last_seen
    assert set(restored.prune(now=100, seen=restored.workers, retention_s=60)) == {"old-1", "old-2"}
    assert restored.capacity_at(2) == (19_000.0, "observed")
    # A document written before workers had times: they start their retention at the first prune.
    state = model.to_dict()
    del state["last_seen"]
    legacy = CapacityModel.from_dict(state)
    assert legacy.prune(now=100, seen=legacy.workers, retention_s=60) == ()
    assert set(legacy.prune(now=161, seen=legacy.workers, retention_s=60)) == {"old-1", "old-2"}


def test_capacity_now_reads_input_shares_from_partition_weights_when_the_busiest_worker_saturates() -> None:
    """A saturated worker's throughput understates its input; shares measured from throughput would
    call it 'equal' and overstate the job. The partition weights give the true shares: 3 of 4
    partitions' records land on worker a (weights 0.5, 0.1, 0.25, 0.15 round-robin over 2 readers),
    so the job carries capacity_a / 0.75."""
    model = CapacityModel(min_cpu_std=0.02)
    for worker in ("a", "b"):
        model.update(worker, np.full(60, 1.0), np.full(60, 6000.0))
    model.set_workers(["a", "b"])
    model.set_partition_weights([0.5, 0.1, 0.25, 0.15])
    assert model.capacity_by_weights() == pytest.approx(6000.0 / 0.75)
    assert model.capacity_now() == pytest.approx(6000.0 / 0.75)


def test_a_saturated_job_reads_its_input_shares_from_what_read_plus_what_waits() -> None:
    """Both workers saturated at 6,000/s: throughput says 'equal shares' and the CPU rule sums them to
    12,000/s. Worker a's backlog grows 3,000 records a second, b's not at all: a receives 9,000/s of
    15,000/s (0.6), so the job carries 6,000 / 0.6 = 10,000/s, whatever the partitions."""
    model = CapacityModel(min_cpu_std=0.02)
    seconds = np.arange(60, dtype=float)
    for worker in ("a", "b"):
        model.update(worker, np.full(60, 1.0), np.full(60, 6000.0))
    model.set_workers(["a", "b"], {"a": 1_000.0 + 3_000.0 * seconds, "b": np.full(60, 500.0)})
    shares = model.shares()
    assert shares == pytest.approx({"a": 0.6, "b": 0.4})
    assert model.capacity_now() == pytest.approx(10_000.0)

    blind = CapacityModel(min_cpu_std=0.02)
    for worker in ("a", "b"):
        blind.update(worker, np.full(60, 1.0), np.full(60, 6000.0))
    blind.set_workers(["a", "b"])
    assert blind.shares() is None
    assert blind.capacity_now() == pytest.approx(12_000.0)


def test_input_shares_skip_a_stop_and_fall_back_without_every_workers_backlog() -> None:
    """A stop inside the round (no samples while down) rolls the read positions back: the backlogs jump by
    the replay, which is not input. Only the stretch after it counts; a worker without a backlog series,
    or a backlog that fell by more than was read, leaves the round to the unsaturated seconds."""
    cpu, throughput = np.full(60, 0.5), np.full(60, 1000.0)
    backlog_a = np.concatenate([np.zeros(20), np.full(10, np.nan), 90_000.0 + 1000.0 * np.arange(30)])
    backlog_b = np.concatenate([np.zeros(20), np.full(10, np.nan), np.full(30, 10_000.0)])
    model = CapacityModel(min_cpu_std=0.0)
    for worker in ("a", "b"):
        model.update(worker, cpu, throughput)
    model.set_workers(["a", "b"], {"a": backlog_a, "b": backlog_b})
    # After the stop: a received 1,000 + 1,000 records/s, b 1,000/s (the 80,000-record jump is replay).
    assert model.shares() == pytest.approx({"a": 2 / 3, "b": 1 / 3})

    for backlogs in ({"a": backlog_a}, {"a": np.full(60, 10_000.0), "b": 10_000.0 - 2_000.0 * np.arange(60)}):
        fallback = CapacityModel(min_cpu_std=0.0)
        for worker in ("a", "b"):
            fallback.update(worker, cpu, throughput)
        fallback.set_workers(["a", "b"], backlogs)
        assert fallback.shares() == pytest.approx({"a": 0.5, "b": 0.5})  # the unsaturated throughput's shares


def test_a_simulated_job_overloaded_from_its_first_second_is_measured_at_its_bottleneck() -> None:
    """The first round of a job that never had an unsaturated second (the workload above its capacity from
    the start, every worker saturated, worker 0 receiving twice the others' input): its capacity is the
    hot worker's 14,000/s over its 0.4 share, 35,000/s, not the 56,000/s all four read together."""
    config = SimulatorSettings(
        partitions=8,
        partition_weights=(2, 1, 1, 1, 2, 1, 1, 1),
        initial_parallelism=4,
        worker_speed_spread=0.0,
    )
    job = SimulatedFlinkJob(Trace("over", np.array([0.0, 400.0]), np.array([80_000.0, 80_000.0])), config)
    job.run_until(60)
    window = job.window(0, 60)
    assert min(float(np.min(cpu[10:])) for cpu in window.cpu.values()) > 0.95
    model = CapacityModel()
    model.observe(window.cpu, window.throughput, window.backlog)
    assert job.true_capacity(4) == pytest.approx(35_000.0)
    assert model.capacity_now() == pytest.approx(35_000.0, rel=0.03)
    blind = CapacityModel()
    blind.observe(window.cpu, window.throughput)
    assert blind.capacity_now() == pytest.approx(56_000.0, rel=0.03)


def test_input_shares_count_each_sample_over_the_monitors_step_and_end_at_the_last_known_sample() -> None:
    """Samples 5 s apart (prometheus.step_s 5): each worker reads 1,000/s, a's backlog grows 5,000 records a
    sample (another 1,000/s), b's not: a receives 2/3. The round's last two samples are a gap (a scrape
    missed): the stretch ends before them."""
    model = CapacityModel(min_cpu_std=0.0)
    for worker in ("a", "b"):
        model.update(worker, np.full(12, 1.0), np.full(12, 1000.0))
    grown = np.concatenate([5_000.0 * np.arange(10), [np.nan, np.nan]])
    model.set_workers(
        ["a", "b"], {"a": grown, "b": np.concatenate([np.full(10, 300.0), [np.nan, np.nan]])}, sample_s=5.0
    )
    assert model.shares() == pytest.approx({"a": 2 / 3, "b": 1 / 3})


def test_set_prior_takes_the_positive_capacities_as_the_prior() -> None:
    """A prior given at start replaces the model's (a restored one stored without): non-positive, NaN or
    non-numeric capacities are left out, as the constructor leaves them out."""
    model = CapacityModel(prior={1: 50.0})
    model.set_prior({2: 100.0, 3: -1.0, 4: float("nan"), 5: 0.0})
    assert model.prior == {2: 100.0}
    assert model.capacity_at(2) == (100.0, "prior")
    assert model.capacity_at(1) == (None, "unknown")


def test_one_reading_alone_never_moves_the_partition_weights_and_two_that_agree_do() -> None:
    """An offset that jumped once (an exporter's glitch) puts most of a round's records on one partition; folded into
    the weights it would put that partition's reader at the bottleneck of every scale-out. The weights move on the
    median of the weights and the last two readings: not on the glitch, but on a shift in the keys once it lasts."""
    even = np.full(8, 100.0)
    model = CapacityModel(partitions=8)
    model.observe_partition_records(even)  # the first reading sets them (a cold start reads the skew at once)
    assert model.partition_weights == pytest.approx(np.full(8, 1 / 8))
    glitch = even.copy()
    glitch[0] += 1e6
    model.observe_partition_records(glitch)
    model.observe_partition_records(even)
    assert model.partition_weights == pytest.approx(np.full(8, 1 / 8))

    hot = even.copy()
    hot[0] = 800.0  # a hot key: partition 0 now carries 8/15 of the input, reading after reading
    model.observe_partition_records(hot)
    assert model.partition_weights == pytest.approx(np.full(8, 1 / 8))
    model.observe_partition_records(hot)
    assert model.partition_weights[0] > 1.5 / 8
    for _ in range(20):
        model.observe_partition_records(hot)
    assert model.partition_weights[0] == pytest.approx(800 / 1500, abs=0.01)


@pytest.mark.parametrize(
    ("partitions", "five"),
    [(None, 5 * (3643 / 4 + 4497 / 6) / 2), (24, 4.8 * (3643 / 4 + 4497 / 6) / 2)],
)
def test_a_scale_out_between_two_run_reads_both(partitions: int | None, five: float) -> None:
    """On one-slot TaskManagers sharing two cores a slot carries less as more run: 911/s at 4, 750/s at 6. Scaled
    from 6 alone, 5 reads 6's rate per slot; between 4 and 6, both were run, and 5 reads the rate between theirs
    (with 24 partitions, per evenly loaded reader: 5 readers of 24 are 4.8 of them). Beyond the scale-outs run
    on one side only, the capacity is scaled from the current one as before."""
    model = CapacityModel(partitions=partitions)
    model.record_observed(4, 3643.0)
    model.record_observed(6, 4497.0)
    capacity, source = model.capacity_at(5, current=6)
    assert source == "estimated" and capacity == pytest.approx(five, rel=1e-12)
    alone = CapacityModel(partitions=partitions)
    alone.record_observed(6, 4497.0)
    from_six = 4497.0 * (4.8 / 6 if partitions else 5 / 6)
    assert alone.capacity_at(5, current=6)[0] == pytest.approx(from_six, rel=1e-12)
    assert capacity > from_six
    assert model.capacity_at(3, current=6)[0] == pytest.approx(alone.capacity_at(3, current=6)[0], rel=1e-12)
    assert model.capacity_at(8, current=6)[0] == pytest.approx(alone.capacity_at(8, current=6)[0], rel=1e-12)
