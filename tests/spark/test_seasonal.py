"""The seasonal forecaster: its profile against numpy, its time keeping, and artifacts of every residual model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.forecast.seasonal import DAY_S, SeasonalForecaster, residual_models
from tests.spark.conftest import daily_workload

START_S = 1_793_404_800.0  # 2026-11-01T00:00Z


@given(
    days=st.integers(1, 3),
    start_minute=st.integers(0, 1439),
    seed=st.integers(0, 10_000),
)
def test_profile_is_the_mean_per_slot_of_the_day(days: int, start_minute: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.uniform(0, 1000, size=days * 1440)
    start = START_S + 60 * start_minute
    model = SeasonalForecaster(residual="naive", step_s=60, profile_bin_s=900).fit(y, start_s=start)
    slots = ((start + 60 * np.arange(y.size)) % DAY_S // 900).astype(int)
    for slot in range(96):
        assert model.profile[slot] == pytest.approx(y[slots == slot].mean(), rel=1e-12)


def test_a_repeating_day_is_forecast_exactly_at_any_later_time() -> None:
    day = np.repeat(np.linspace(100, 1000, 96), 15)  # constant within each 15-min slot
    model = SeasonalForecaster(residual="naive").fit(np.tile(day, 2), start_s=START_S)
    model.update(day[:600])  # ten more hours of the same pattern
    assert np.allclose(model.predict(90), day[600:690])
    model.align(START_S + 5 * DAY_S + 3600 * 20)  # after a reload at 20:00 five days later
    assert np.allclose(model.predict(15), day[1200:1215])


@pytest.mark.parametrize("residual", sorted(residual_models()))
def test_every_residual_model_survives_the_artifact_round_trip(residual: str) -> None:
    y = daily_workload(2, seed=4, level=2000.0)
    model = SeasonalForecaster(residual=residual, residual_window_s=3600).fit(y, start_s=START_S)
    restored = SeasonalForecaster.from_dict(model.to_dict())
    assert np.allclose(restored.predict(15), model.predict(15), rtol=1e-6)
    fresh = daily_workload(0.05, seed=5, level=2000.0)
    model.update(fresh)
    restored.update(fresh)
    forecast = model.predict(15)
    assert np.allclose(restored.predict(15), forecast, rtol=1e-6)
    assert np.all(np.isfinite(forecast)) and np.all(forecast >= 0)
    # A 15-min forecast of a daily sine with 5 % noise stays within a fifth of the level.
    assert np.all(
        np.abs(forecast - 2000.0 * (1 + 0.5 * np.sin(2 * np.pi * (2 * DAY_S + 72 * 60 + 60 * np.arange(15)) / DAY_S)))
        < 400
    )


def test_bad_states_and_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown residual model"):
        SeasonalForecaster(residual="prophet")
    with pytest.raises(ValueError, match="step_s"):
        SeasonalForecaster(step_s=7)
    state = SeasonalForecaster().fit(np.ones(1440), start_s=START_S).to_dict()
    with pytest.raises(ValueError, match="profile"):
        SeasonalForecaster.from_dict({**state, "profile": [1.0, 2.0]})
    with pytest.raises(ValueError, match="finite"):
        SeasonalForecaster().fit(np.array([1.0, np.nan]))
