"""The conformal bound over the agent's own forecast errors (models/forecast/conformal.py)."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from models.forecast.conformal import LEADS_S, MIN_SCORES, ForecastErrors, conformal_quantile, peak_mean

HORIZON = 900
LOOP = 60


def feed(errors: ForecastErrors, workload: np.ndarray, forecast_of, *, part=lambda minute: 1, start_s: int = 0) -> None:  # type: ignore[no-untyped-def]
    """A loop at a time from ``start_s``, as the agent does: the loop's seconds, then a forecast of the seconds
    after them."""
    for minute in range(len(workload) // LOOP):
        start = minute * LOOP
        times = np.arange(start_s + start, start_s + start + LOOP, dtype=float)
        errors.update(times, workload[start : start + LOOP])
        errors.record(float(start_s + start + LOOP), forecast_of(start + LOOP), part=part(minute))


def test_no_bound_before_the_shortest_lead_has_enough_scored_forecasts() -> None:
    errors = ForecastErrors(quantile=0.8)
    workload = np.full(LOOP * (MIN_SCORES - 1), 1000.0)
    feed(errors, workload, lambda _: np.full(HORIZON, 1000.0))
    assert errors.upper(np.full(HORIZON, 1000.0)) is None
    feed(errors, np.full(LOOP * 2, 1000.0), lambda _: np.full(HORIZON, 1000.0), start_s=workload.size)
    assert errors.upper(np.full(HORIZON, 1000.0)) is not None


def test_a_forecast_that_is_right_gives_a_bound_at_the_forecast() -> None:
    errors = ForecastErrors(quantile=0.8)
    feed(errors, np.full(LOOP * 120, 1000.0), lambda _: np.full(HORIZON, 1000.0))
    bound = errors.upper(np.full(HORIZON, 1000.0))
    assert bound is not None and np.allclose(bound, 1000.0)


def test_a_descent_the_forecast_follows_is_planned_as_a_descent() -> None:
    """Where the rise envelope sees the workload's past rises and plans for them from any level, the
    conformal bound plans for the forecast's peak plus how far forecasts like it were exceeded: a
    forecast that tracks a falling workload well keeps the bound near it."""
    workload = np.linspace(10_000.0, 1_000.0, LOOP * 150)
    errors = ForecastErrors(quantile=0.8)
    feed(errors, workload, lambda t: np.interp(np.arange(t, t + HORIZON), np.arange(workload.size), workload))
    later = np.full(HORIZON, 1000.0)
    bound = errors.upper(later)
    assert bound is not None
    assert bound.max() <= 1.01 * 1000.0


def test_a_forecast_that_lags_a_rise_has_its_lag_measured_and_added() -> None:
    """The forecast holds the last level while the workload climbs 1 % a minute: at lead L the workload is
    (1.01)^(L/60) above it, and the bound says so."""
    workload = 1000.0 * 1.01 ** (np.arange(LOOP * 150) / LOOP)
    errors = ForecastErrors(quantile=0.8)
    feed(errors, workload, lambda t: np.full(HORIZON, workload[t - LOOP : t].mean()))
    level = workload[-LOOP:].mean()
    bound = errors.upper(np.full(HORIZON, level))
    assert bound is not None
    for lead in (60, 300, 900):
        expected = 1.01 ** (lead / LOOP)
        assert expected * 0.98 <= bound[lead - 1] / level <= expected * 1.03, (lead, bound[lead - 1] / level)


def test_the_bound_covers_the_realised_peak_at_its_stated_rate() -> None:
    """Calibration: a noisy workload and a forecast of its mean; over fresh forecasts the bound at each lead
    covers the realised peak about as often as the quantile says (split conformal: at least q, and not much more
    with two hours of scores)."""
    rng = np.random.default_rng(3)
    quantile = 0.8
    errors = ForecastErrors(quantile=quantile)
    steps = rng.normal(0.0, 150.0, size=LOOP * 600 // 10).repeat(10)  # 10-s blocks of noise
    workload = 5000.0 + steps
    flat = np.full(HORIZON, 5000.0)
    covered = {lead: [] for lead in (10, 60, 300)}
    for minute in range(len(workload) // LOOP - HORIZON // LOOP):
        start = minute * LOOP
        errors.update(np.arange(start, start + LOOP, dtype=float), workload[start : start + LOOP])
        origin = start + LOOP
        bound = errors.upper(flat, part=1)
        if bound is not None and minute > 180:
            for lead in covered:
                realised = peak_mean(workload[origin : origin + lead])
                covered[lead].append(realised <= bound[lead - 1])
        errors.record(float(origin), flat, part=1)
    for lead, hits in covered.items():
        rate = float(np.mean(hits))
        assert quantile - 0.07 <= rate <= quantile + 0.1, (lead, rate, len(hits))


def test_each_part_of_the_range_has_its_own_errors_once_it_has_enough() -> None:
    """Forecasts made from the top of the range were exceeded by 20 %, those from the bottom never: each part
    gets its own quantile (the other part's errors do not pull it)."""
    errors = ForecastErrors(quantile=0.8)
    workload = np.full(LOOP * 120, 1000.0)
    feed(
        errors,
        workload,
        lambda t: np.full(HORIZON, 1000.0 if (t // LOOP) % 2 else 1000.0 / 1.2),
        part=lambda m: 2 * (m % 2),
    )
    top, bottom = errors.ratios(part=2), errors.ratios(part=0)
    assert abs(top[60] - 1.2) < 1e-9 and abs(bottom[60] - 1.0) < 1e-9, (top, bottom)
    # A part without enough scores takes the pooled quantile.
    assert errors.ratios(part=1)[60] == errors.ratios()[60]


def test_gaps_and_resent_seconds_are_placed_by_their_times() -> None:
    errors = ForecastErrors(quantile=0.8)
    errors.record(0.0, np.full(HORIZON, 100.0), part=1)
    errors.update(np.arange(0, 30, dtype=float), np.full(30, 100.0))
    errors.update(np.arange(20, 60, dtype=float), np.where(np.arange(20, 60) < 40, np.nan, 150.0))  # resent, gapped
    scores = {lead: list(errors._scores[lead]) for lead in (10, 30, 60)}  # noqa: SLF001
    assert scores[10] == [(1, 1.0)] and scores[30] == [(1, 1.0)] and scores[60] == [(1, 1.5)], scores


def test_the_scores_survive_a_restart_and_a_bad_document_is_left_out() -> None:
    errors = ForecastErrors(quantile=0.8)
    feed(errors, np.full(LOOP * 60, 1000.0), lambda _: np.full(HORIZON, 900.0))
    document = json.loads(json.dumps(errors.to_dict()))
    restored = ForecastErrors(quantile=0.8)
    restored.restore(document)
    assert restored.ratios() and restored.ratios() == {lead: round(r, 4) for lead, r in errors.ratios().items()}
    restored.restore({"scores": {"60": [[1, "x"], [1, -2.0], [1]], "abc": [[1, 1.0]], "7": [[1, 1.0]]}})
    assert restored.ratios() == {}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=200),
    st.floats(0.5, 0.99),
)
def test_the_conformal_quantile_covers_at_least_its_share_of_the_scores(values: list[float], q: float) -> None:
    bound = conformal_quantile(np.asarray(values), q)
    share = np.mean(np.asarray(values) <= bound)
    assert share >= min(1.0, q) - 1e-9 or bound == max(values)


def test_every_lead_is_scored_in_order() -> None:
    assert list(LEADS_S) == sorted(LEADS_S) and LEADS_S[-1] <= HORIZON
