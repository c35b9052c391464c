"""The operator-DAG testbed: exactly-once accounting, backpressure, skew, memory and true capacity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.dag import DagJobSpec, DagTestbed, DagTestbedSettings, OperatorSpec, windowed_aggregation_job

TESTBED = DagTestbed()


def quiet(**overrides: object) -> DagTestbedSettings:
    base: dict[str, object] = {"capacity_noise": 0.0, "rate_noise": 0.0, "slot_speed_spread": 0.0}
    base.update(overrides)
    return DagTestbedSettings(**base)  # type: ignore[arg-type]


@given(
    parallelism=st.tuples(st.integers(1, 6), st.integers(1, 12), st.integers(1, 3)),
    memory_mb=st.sampled_from([256.0, 1024.0, 4096.0]),
    phases=st.lists(st.tuples(st.one_of(st.none(), st.floats(0, 400_000)), st.integers(1, 30)), min_size=1, max_size=4),
    seed=st.integers(0, 1000),
)
def test_no_record_is_lost_or_double_counted_at_any_step(
    parallelism: tuple[int, int, int], memory_mb: float, phases: list[tuple[float | None, int]], seed: int
) -> None:
    # One testbed (its key-group weights are drawn once); the run seed varies the noise.
    run = TESTBED.deploy(parallelism, memory_mb, seed=seed)
    for rate, seconds in phases:
        run.set_rate(rate)
        for _ in range(seconds):
            run.step()
            accounting = run.accounting
            assert accounting.lost == 0, accounting
            assert accounting.pending >= 0 and min(accounting.queued) >= 0


def test_a_broken_counter_is_reported_as_lost() -> None:
    run = DagTestbed().deploy((1, 2, 1), 1024)
    run.set_rate(10_000)
    run.advance(20)
    run._ops[1].queue[0] -= 1  # a record vanishes from a queue
    assert run.accounting.lost == 1


def test_saturated_throughput_matches_the_analytic_capacity() -> None:
    testbed = DagTestbed(settings=quiet())
    for parallelism, memory in [((1, 1, 1), 2048.0), ((1, 4, 1), 4096.0), ((2, 8, 1), 512.0)]:
        run = testbed.deploy(parallelism, memory)
        run.set_rate(None)
        run.advance(150)
        achieved = run.measure(60).achieved_rate
        assert achieved == pytest.approx(testbed.true_capacity(parallelism, memory), rel=0.01)


def test_overload_backpressures_the_source_and_the_backlog_grows() -> None:
    testbed = DagTestbed()
    capacity = testbed.true_capacity((1, 4, 1), 2048)
    below, above = testbed.deploy((1, 4, 1), 2048), testbed.deploy((1, 4, 1), 2048)
    below.set_rate(0.9 * capacity)
    above.set_rate(1.1 * capacity)
    below.advance(200)
    above.advance(200)
    calm, loaded = below.measure(60), above.measure(60)
    assert calm.achieved_rate == pytest.approx(0.9 * capacity, rel=0.01)
    assert calm.backpressure == 0.0 and abs(calm.lag_growth) < 0.005 * capacity
    assert loaded.achieved_rate == pytest.approx(capacity, rel=0.02)
    assert loaded.backpressure > 0.5
    assert loaded.lag_growth == pytest.approx(0.1 * capacity, rel=0.2)
    assert above.pending > 100 * 0.05 * capacity


def test_the_busiest_operator_reports_full_busyness_and_ds2_true_rates() -> None:
    testbed = DagTestbed(settings=quiet())
    run = testbed.deploy((1, 1, 1), 4096)
    run.set_rate(None)
    run.advance(120)
    by_name = {op.name: op for op in run.measure(60).operators}
    window = by_name["window-aggregate"]
    assert window.max_busyness > 0.97
    assert by_name["map-filter"].busyness < 0.5
    # True rate = records per busy second: the inverse of the per-record cost when state fits.
    assert by_name["map-filter"].true_rate_per_task == pytest.approx(1e6 / 12.0, rel=0.02)
    assert window.true_rate_per_task == pytest.approx(1e6 / (68.0 + 0.05 * 4.0), rel=0.02)


def test_less_memory_per_slot_lowers_the_window_capacity_by_spilling() -> None:
    testbed = DagTestbed(settings=quiet())
    capacities = [testbed.true_capacity((2, 8, 1), memory) for memory in (256.0, 512.0, 2048.0, 4096.0)]
    assert capacities == sorted(capacities)
    assert capacities[0] < 0.8 * capacities[-1]
    assert capacities[2] == pytest.approx(capacities[3])  # state fits: more memory changes nothing


def test_skewed_keys_make_the_hottest_task_bound_a_keyed_operator() -> None:
    uniform = DagTestbed(
        job=DagJobSpec("uniform", windowed_aggregation_job().operators, key_skew=0.0), settings=quiet()
    )
    skewed = DagTestbed(
        job=DagJobSpec("skewed", windowed_aggregation_job().operators, key_count=2000, key_skew=1.0), settings=quiet()
    )
    for testbed in (uniform, skewed):
        shares = testbed.shares(1, 16)
        assert shares.sum() == pytest.approx(1.0)
    assert skewed.shares(1, 16).max() > 1.3 * uniform.shares(1, 16).max()
    assert skewed.true_capacity((4, 16, 1), 4096) < 0.8 * uniform.true_capacity((4, 16, 1), 4096)


def test_key_groups_are_split_into_contiguous_ranges_like_flink() -> None:
    testbed = DagTestbed(job=DagJobSpec("j", windowed_aggregation_job().operators, key_skew=0.0, max_parallelism=8))
    weights = np.full(8, 1 / 8)
    # 8 key groups on 3 tasks: Flink gives ranges [0,3), [3,6), [6,8).
    from simulator.dag import _key_group_shares

    assert _key_group_shares(weights, 3) == pytest.approx([3 / 8, 3 / 8, 2 / 8])
    with pytest.raises(ValueError, match="max_parallelism"):
        testbed.deploy((1, 9, 1), 1024)


@pytest.mark.parametrize(
    ("parallelism", "memory", "message"),
    [((1, 1), 1024.0, "3 operators"), ((1, 0, 1), 1024.0, "parallelism must be >= 1"), ((1, 1, 1), 0.0, "memory")],
)
def test_bad_deployments_are_rejected_with_a_clear_message(
    parallelism: tuple[int, ...], memory: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        DagTestbed().deploy(parallelism, memory)


def test_bad_operator_specs_are_rejected() -> None:
    with pytest.raises(ValueError, match="cost_us"):
        OperatorSpec("x", cost_us=0.0)
    with pytest.raises(ValueError, match="unique"):
        DagJobSpec("j", (OperatorSpec("a", 1.0), OperatorSpec("a", 1.0)))


def test_runs_are_reproducible_per_seed_and_differ_across_seeds() -> None:
    testbed = DagTestbed()

    def throughput(seed: int) -> float:
        run = testbed.deploy((2, 6, 1), 2048, seed=seed)
        run.set_rate(None)
        run.advance(90)
        return run.measure(60).achieved_rate

    assert throughput(3) == throughput(3)
    assert throughput(3) != throughput(4)
