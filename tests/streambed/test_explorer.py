"""Resource Explorer: surrogate fits, model selection per family, Bayesian search, inverse query."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.streambed import (
    FAMILIES,
    BudgetMeasurement,
    ExplorerSettings,
    ResourceExplorer,
    Surrogate,
    UnreachableRate,
    expected_improvement,
    extrapolation_rmse,
    fit_surrogate,
    loocv_rmse,
    select_surrogate,
)
from models.streambed.explorer import Family, Selection

TRUTH = {
    "linear": Surrogate("linear", 2.0, 14_000.0, -20_000.0),
    "logarithmic": Surrogate("logarithmic", 3_000.0, 60_000.0, 1_000.0),
    "sqrt": Surrogate("sqrt", 300.0, 50_000.0, -30_000.0),
}
SLOTS = list(range(3, 17))
MEMORY = [1024.0, 2048.0, 4096.0]


def sample(truth: Surrogate, seed: int, noise: float = 0.01, count: int = 12) -> list[BudgetMeasurement]:
    rng = np.random.default_rng(seed)
    # Spread over the task-slot range, as the explorer's corners and search spread them.
    slots = np.linspace(3, 16, count).round().astype(int)
    memory = rng.choice(MEMORY, size=count)
    capacity = truth.predict(slots, memory) * (1 + noise * rng.standard_normal(count))
    return [BudgetMeasurement(int(t), float(m), float(c)) for t, m, c in zip(slots, memory, capacity)]


@pytest.mark.parametrize("selection", ["loocv", "extrapolation"])
@pytest.mark.parametrize("family", FAMILIES)
def test_picks_the_family_the_data_were_drawn_from(family: Family, selection: Selection) -> None:
    picked = [select_surrogate(sample(TRUTH[family], seed), selection).surrogate.family for seed in range(10)]
    assert picked.count(family) >= 9, picked


@pytest.mark.parametrize("family", FAMILIES)
def test_noise_free_data_are_fitted_exactly(family: str) -> None:
    truth = TRUTH[family]
    observations = sample(truth, seed=1, noise=0.0)
    fitted = fit_surrogate(family, observations)  # type: ignore[arg-type]
    assert fitted.memory_slope == pytest.approx(truth.memory_slope, rel=1e-6)
    assert fitted.slots_slope == pytest.approx(truth.slots_slope, rel=1e-6)
    assert fitted.intercept == pytest.approx(truth.intercept, rel=1e-6, abs=1e-6)
    assert loocv_rmse(family, observations) == pytest.approx(0.0, abs=1e-6)  # type: ignore[arg-type]
    assert extrapolation_rmse(family, observations) == pytest.approx(0.0, abs=1e-6)  # type: ignore[arg-type]


def test_loocv_matches_a_direct_leave_one_out_computation() -> None:
    observations = sample(TRUTH["sqrt"], seed=4, noise=0.05, count=8)
    errors = []
    for i, left_out in enumerate(observations):
        model = fit_surrogate("sqrt", observations[:i] + observations[i + 1 :])
        errors.append(model.capacity_at(left_out.task_slots, left_out.memory_mb) - left_out.capacity)
    assert loocv_rmse("sqrt", observations) == pytest.approx(math.sqrt(np.mean(np.square(errors))))
    assert loocv_rmse("sqrt", observations[:2]) == math.inf


def test_a_single_memory_profile_still_fits_over_task_slots() -> None:
    observations = [BudgetMeasurement(t, 2048.0, 1000.0 * t + 500.0) for t in (3, 5, 8, 13)]
    model = fit_surrogate("linear", observations)
    assert model.capacity_at(20, 2048.0) == pytest.approx(20_500.0)


@given(
    slope=st.floats(10.0, 1e5),
    intercept=st.floats(-1e5, 1e5),
    rate=st.floats(1.0, 1e7),
    family=st.sampled_from(FAMILIES),
)
def test_the_inverse_query_returns_the_fewest_slots_reaching_110_percent(
    slope: float, intercept: float, rate: float, family: str
) -> None:
    model = Surrogate(family, 0.0, slope, intercept)  # type: ignore[arg-type]
    try:
        slots = model.task_slots_for(rate, 2048.0, min_slots=3, max_slots=10_000_000)
    except UnreachableRate:
        assert model.capacity_at(10_000_000, 2048.0) < 1.1 * rate
        return
    assert model.capacity_at(slots, 2048.0) >= 1.1 * rate
    assert slots == 3 or model.capacity_at(slots - 1, 2048.0) < 1.1 * rate


def test_a_surrogate_that_does_not_grow_cannot_reach_a_higher_rate() -> None:
    flat = Surrogate("linear", 0.0, -1.0, 1000.0)
    with pytest.raises(UnreachableRate, match="does not grow"):
        flat.task_slots_for(5000.0, 1024.0)
    assert flat.task_slots_for(100.0, 1024.0) == 1


def test_expected_improvement_prefers_low_mean_and_high_uncertainty() -> None:
    gain = expected_improvement(np.array([1.0, 0.5, 1.0]), np.array([0.1, 0.1, 1.0]), best=1.0, xi=0.0)
    assert gain[1] > gain[0] and gain[2] > gain[0]
    assert np.all(gain >= 0)


def drive(explorer: ResourceExplorer, truth: Surrogate, seed: int = 0) -> list[tuple[int, float]]:
    rng = np.random.default_rng(seed)
    asked = []
    while not explorer.finished:
        slots, memory = explorer.ask()
        asked.append((slots, memory))
        explorer.tell(slots, memory, truth.capacity_at(slots, memory) * (1 + 0.02 * rng.standard_normal()))
    return asked


def test_the_search_starts_at_the_corners_and_spreads_over_fresh_budgets() -> None:
    explorer = ResourceExplorer(SLOTS, MEMORY, ExplorerSettings(stop_increase=math.inf, max_measurements=12))
    asked = drive(explorer, TRUTH["linear"])
    assert asked[:4] == [(3, 1024.0), (3, 4096.0), (16, 1024.0), (16, 4096.0)]
    assert len(asked) == 12 and len(set(asked)) == 12
    assert explorer.stop_reason == "reached 12 measurements"
    assert explorer.choice().surrogate.family == "linear"


def test_the_search_stops_when_the_cost_rises_after_the_minimum_count() -> None:
    explorer = ResourceExplorer(SLOTS, MEMORY, ExplorerSettings(min_after_bootstrap=3))
    drive(explorer, TRUTH["sqrt"], seed=3)
    assert len(explorer.observations) >= 7
    assert explorer.stop_reason is not None
    if len(explorer.observations) < 20:
        assert "rose" in explorer.stop_reason
        assert explorer.costs[-1] > 1.1 * explorer.costs[-2]
    with pytest.raises(RuntimeError, match="stopped"):
        explorer.ask()


def test_a_grid_of_fewer_budgets_than_measurements_repeats_budgets() -> None:
    explorer = ResourceExplorer([3, 4], [2048.0], ExplorerSettings(stop_increase=math.inf, max_measurements=5))
    asked = drive(explorer, TRUTH["linear"])
    assert len(asked) == 5 and set(asked) == {(3, 2048.0), (4, 2048.0)}


def test_bad_search_spaces_and_observations_are_rejected() -> None:
    with pytest.raises(ValueError, match="search space"):
        ResourceExplorer([], MEMORY)
    with pytest.raises(ValueError, match="capacity"):
        BudgetMeasurement(3, 1024.0, math.nan)
    with pytest.raises(ValueError, match="at least 3"):
        select_surrogate([BudgetMeasurement(3, 1024.0, 1.0)])
    with pytest.raises(ValueError, match="unknown surrogate family"):
        fit_surrogate("cubic", [BudgetMeasurement(3, 1024.0, 1.0)])  # type: ignore[arg-type]


def test_two_budgets_cannot_tell_the_families_apart_and_keep_the_line() -> None:
    # 1 and 2 slots at one memory profile, measured with noise: every family draws a line through the
    # two budgets, so whichever scores best only does so by noise; the linear one is kept.
    observations = [
        BudgetMeasurement(1, 900.0, 1944.0),
        BudgetMeasurement(2, 900.0, 3901.0),
        BudgetMeasurement(1, 900.0, 1979.0),
    ]
    choice = select_surrogate(observations)
    assert choice.identifiable is False and choice.surrogate.family == "linear"
    assert choice.surrogate.capacity_at(4, 900.0) == pytest.approx(3901.0 + 2 * (3901.0 - (1944.0 + 1979.0) / 2))
    # A third budget shows the bend.
    bent = [*observations, BudgetMeasurement(3, 900.0, 4790.0), BudgetMeasurement(4, 900.0, 5530.0)]
    assert select_surrogate(bent).identifiable is True
