"""Configuration Optimizer (BIDS2 MILP): matches brute force on small DAGs, clear errors otherwise."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.streambed import (
    InfeasibleBudget,
    OperatorRate,
    bound_rate,
    optimize_configuration,
    rates_from_measurement,
)
from simulator.dag import DagTestbed


def compositions(total: int, parts: int, upper: list[int]) -> list[tuple[int, ...]]:
    """Every split of ``total`` slots into ``parts`` operators with 1 <= p_i <= upper_i."""
    return [split for split in itertools.product(*(range(1, u + 1) for u in upper)) if sum(split) == total]


operator_rates = st.builds(
    OperatorRate,
    name=st.just("op"),
    true_rate=st.floats(100.0, 1e6),
    input_ratio=st.one_of(st.just(0.0), st.floats(0.01, 5.0)),
    max_parallelism=st.one_of(st.none(), st.integers(1, 6)),
)


@given(rates=st.lists(operator_rates, min_size=1, max_size=4), slots=st.integers(1, 12))
def test_the_milp_reaches_the_brute_force_optimum(rates: list[OperatorRate], slots: int) -> None:
    if all(r.input_ratio == 0 for r in rates):
        rates = [OperatorRate("op", rates[0].true_rate, 1.0, rates[0].max_parallelism), *rates[1:]]
    upper = [min(slots, r.max_parallelism or slots) for r in rates]
    splits = compositions(slots, len(rates), upper)
    if not splits:
        with pytest.raises(InfeasibleBudget):
            optimize_configuration(rates, slots)
        return
    best = max(bound_rate(rates, split) for split in splits)
    configuration = optimize_configuration(rates, slots)
    assert configuration.task_slots == slots
    assert all(1 <= p <= u for p, u in zip(configuration.parallelism, upper))
    assert configuration.predicted_rate == pytest.approx(best, rel=1e-6)
    assert configuration.predicted_rate == pytest.approx(bound_rate(rates, configuration.parallelism))


def test_a_pipeline_gets_slots_in_proportion_to_its_load() -> None:
    rates = [OperatorRate("map", 80_000, 1.0), OperatorRate("window", 14_000, 0.8), OperatorRate("sink", 500_000, 0.04)]
    configuration = optimize_configuration(rates, 16)
    assert configuration.parallelism == (3, 12, 1)
    assert configuration.predicted_rate == pytest.approx(min(3 * 80_000, 12 * 14_000 / 0.8))


def test_leftover_slots_go_to_the_heaviest_operator() -> None:
    # Two operators are enough for the bound; the third slot cannot raise it and goes to the heavier one.
    rates = [OperatorRate("light", 1000.0, 1.0), OperatorRate("heavy", 600.0, 1.0)]
    assert optimize_configuration(rates, 3).parallelism == (1, 2)
    assert optimize_configuration(rates, 5).parallelism == (2, 3)


@pytest.mark.parametrize(
    ("rates", "slots", "message"),
    [
        ([OperatorRate("a", 1.0, 1.0), OperatorRate("b", 1.0, 1.0)], 1, "below the 2 operators"),
        ([OperatorRate("a", 1.0, 1.0, max_parallelism=2)], 3, "max parallelism"),
    ],
)
def test_an_infeasible_budget_is_a_clear_error(rates: list[OperatorRate], slots: int, message: str) -> None:
    with pytest.raises(InfeasibleBudget, match=message):
        optimize_configuration(rates, slots)


def test_bad_rates_are_rejected() -> None:
    with pytest.raises(ValueError, match="true_rate"):
        OperatorRate("a", 0.0, 1.0)
    with pytest.raises(ValueError, match="input_ratio"):
        OperatorRate("a", 1.0, -1.0)
    with pytest.raises(ValueError, match="no operators"):
        optimize_configuration([], 3)


def test_rates_measured_on_the_testbed_balance_a_larger_budget() -> None:
    testbed = DagTestbed()
    run = testbed.deploy((1, 1, 1), 4096)
    run.set_rate(None)
    run.advance(120)
    rates = rates_from_measurement(run.measure(60))
    assert [r.name for r in rates] == list(testbed.operator_names)
    assert rates[0].input_ratio == pytest.approx(1.0, rel=0.01)
    assert rates[1].input_ratio == pytest.approx(0.8, rel=0.01)
    configuration = optimize_configuration(rates, 12)
    # The chosen split is within 2 % of the best split by the testbed's own analytic capacity.
    best = max(testbed.true_capacity(split, 4096) for split in compositions(12, 3, [10, 10, 10]))
    assert testbed.true_capacity(configuration.parallelism, 4096) >= 0.98 * best
