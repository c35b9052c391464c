"""RecentWorkload: a running model and a candidate scored on the same window, origins, horizon and step."""

from __future__ import annotations

import numpy as np
import pytest

from models.forecast.scoring import RecentWorkload, ScoringSpec, step_means
from tests.fakes.forecasters import ScaledPersistence, feed

SPEC = ScoringSpec(horizon_s=900, step_s=60, origin_every_s=300, warmup_s=900, span_s=1800, min_origins=3)
T0 = 1_794_999_960.0  # an epoch second on a whole minute


def run_loops(recent: RecentWorkload, model: object, series: np.ndarray, *, start_s: float = T0) -> None:
    """Feed ``series`` loop by loop, recording the model's forecast after each loop (as the analyzer does)."""
    feed(recent, model, series, start_s=start_s)


def steady(seconds: int, level: float = 1000.0) -> np.ndarray:
    return np.full(seconds, level)


def test_an_exact_model_scores_zero_and_a_biased_one_its_bias() -> None:
    for factor, expected in ((1.0, 0.0), (1.1, 0.1), (0.8, 0.2)):
        recent = RecentWorkload(SPEC)
        model = ScaledPersistence(factor).fit(np.array([1000.0]))
        run_loops(recent, model, steady(SPEC.window_s))
        score = recent.score_issued(model)
        assert score is not None and score.wape == pytest.approx(expected)
        assert (score.horizon_s, score.step_s) == (900, 60)


def test_replaying_the_running_model_reproduces_its_issued_score() -> None:
    # Like with like, checked: the same model replayed over the window scores exactly what it issued.
    rng = np.random.default_rng(3)
    series = 1000.0 + 200.0 * np.sin(np.arange(SPEC.window_s) / 600.0) + 20.0 * rng.standard_normal(SPEC.window_s)
    recent = RecentWorkload(SPEC)
    running = ScaledPersistence(1.05).fit(series[:1])
    run_loops(recent, running, series)
    issued = recent.score_issued(running)
    assert issued is not None and len(issued.origins) == 7  # every 300 s from 900 s to 2,700 s
    assert np.diff(issued.origins).min() >= SPEC.origin_every_s
    replayed = recent.score_replay(lambda next_s: ScaledPersistence(1.05), issued.origins)
    assert replayed is not None
    assert replayed.origins == issued.origins
    assert replayed.wape == pytest.approx(issued.wape, rel=1e-12)
    better = recent.score_replay(lambda next_s: ScaledPersistence(1.0), issued.origins)
    assert better is not None and better.wape < issued.wape


def test_only_the_current_model_s_forecasts_count() -> None:
    recent = RecentWorkload(SPEC)
    old, new = ScaledPersistence(1.5).fit(np.array([1000.0])), ScaledPersistence(1.0).fit(np.array([1000.0]))
    run_loops(recent, old, steady(2400))
    run_loops(recent, new, steady(1200), start_s=T0 + 2400)
    # The new model issued forecasts only in the last 20 minutes: five of them have their whole horizon.
    assert recent.score_issued(new) is None
    score_old = recent.score_issued(old)
    assert score_old is not None and score_old.wape == pytest.approx(0.5)


def test_too_few_origins_is_no_score() -> None:
    recent = RecentWorkload(SPEC)
    model = ScaledPersistence(1.0).fit(np.array([1000.0]))
    run_loops(recent, model, steady(SPEC.warmup_s + SPEC.horizon_s + 2 * SPEC.origin_every_s - 60))
    assert recent.score_issued(model) is None  # two origins so far
    run_loops(recent, model, steady(60), start_s=T0 + SPEC.warmup_s + SPEC.horizon_s + 2 * SPEC.origin_every_s - 60)
    score = recent.score_issued(model)
    assert score is not None and len(score.origins) == 3


def test_gaps_are_left_out_of_both_scores() -> None:
    series = steady(SPEC.window_s)
    series[2000:2300] = np.nan  # five minutes the monitor could not read
    recent = RecentWorkload(SPEC)
    running = ScaledPersistence(1.2).fit(series[:1])
    run_loops(recent, running, series)
    issued = recent.score_issued(running)
    replayed = recent.score_replay(lambda next_s: ScaledPersistence(1.2), issued.origins if issued else ())
    assert issued is not None and replayed is not None
    assert issued.wape == pytest.approx(0.2) and replayed.wape == pytest.approx(0.2)


def test_the_window_keeps_an_hour_and_a_long_gap_starts_it_over() -> None:
    recent = RecentWorkload(SPEC)
    model = ScaledPersistence(1.0).fit(np.array([1000.0]))
    run_loops(recent, model, steady(2 * SPEC.window_s))
    assert recent.last(10**6).size == SPEC.window_s == 3600
    assert recent.end_s == T0 + 2 * SPEC.window_s
    # A second sent again overwrites, never duplicates.
    recent.extend(np.array([T0 + 2 * SPEC.window_s - 1]), np.array([5.0]))
    assert recent.last(1)[0] == 5.0 and recent.last(10**6).size == SPEC.window_s
    recent.extend(np.array([T0 + 5 * SPEC.window_s]), np.array([7.0]))
    assert recent.last(10**6).tolist() == [7.0]
    assert recent.score_issued(model) is None


def test_step_means_skip_gaps() -> None:
    values = np.array([1.0, 3.0, np.nan, np.nan, 5.0, np.nan])
    assert step_means(values, 2, 3).tolist()[0] == 2.0
    assert np.isnan(step_means(values, 2, 3)[1])
    assert step_means(values, 2, 3)[2] == 5.0


def test_spec_checks_its_units() -> None:
    with pytest.raises(ValueError, match="multiples"):
        ScoringSpec(horizon_s=90, step_s=60)
    assert ScoringSpec().window_s == 3600


@pytest.mark.parametrize(
    ("horizon", "step"), [(900, 60), (60, 60), (1800, 60), (86_400, 60), (90, 45), (150, 50), (61, 1)]
)
def test_any_horizon_the_settings_accept_gets_a_spec_whose_step_divides_it(horizon: int, step: int) -> None:
    """The agent's forecast horizon may be any whole number of seconds from 60 (a time-compressed replay sets
    150): its scoring steps divide it and the warm-up, at most the default minute."""
    spec = ScoringSpec.for_horizon(horizon)
    assert (spec.horizon_s, spec.step_s) == (horizon, step)
    assert spec.horizon_s % spec.step_s == 0 and spec.warmup_s % spec.step_s == 0
