"""The rise envelope: how far the workload rises within a lead time, from its own history."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.forecast import envelope as envelope_module
from models.forecast.envelope import RiseEnvelope


def test_a_flat_workload_rises_by_nothing() -> None:
    envelope = RiseEnvelope(quantile=0.95)
    envelope.update(np.full(3600, 1000.0))
    assert envelope.ratio(600) == 1.0
    assert envelope.upper(np.full(900, 900.0), 1000.0) == pytest.approx(np.full(900, 1000.0))


def test_steps_set_the_tail_and_the_quantile_chooses_how_much_of_it() -> None:
    """A workload that doubles for ten minutes once an hour: within 5 minutes it doubles from a
    small share of moments, so the 0.95 quantile sees the doubling and the median does not."""
    hour = np.concatenate([np.full(3000, 1000.0), np.full(600, 2000.0)])
    high, typical = RiseEnvelope(quantile=0.95), RiseEnvelope(quantile=0.5)
    for envelope in (high, typical):
        envelope.update(np.tile(hour, 2))
    assert high.ratio(300) == pytest.approx(2.0)
    assert typical.ratio(300) == 1.0
    assert high.ratio(10) <= high.ratio(300), "a rise within a short lead is within a longer one too"


def test_too_little_history_plans_for_the_forecast_alone() -> None:
    envelope = RiseEnvelope()
    envelope.update(np.full(50, 1000.0))
    forecast = np.linspace(1000, 1500, 900)
    assert envelope.upper(forecast, 1000.0) == pytest.approx(forecast)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.floats(0, 1e6), st.just(float("nan"))), max_size=2000), st.floats(0.5, 0.99))
def test_the_upper_forecast_is_never_below_the_forecast(samples: list[float], quantile: float) -> None:
    envelope = RiseEnvelope(quantile=quantile)
    envelope.update(np.asarray(samples))
    forecast = np.linspace(0, 5000, 300)
    upper = envelope.upper(forecast, 1000.0)
    assert np.all(upper >= forecast) and np.all(upper >= 1000.0)
    ratios = [envelope.ratio(lead) for lead in (10, 60, 300, 900)]
    assert ratios == sorted(ratios) and ratios[0] >= 1.0


def test_the_history_survives_a_restart() -> None:
    envelope = RiseEnvelope(quantile=0.9)
    envelope.update(np.linspace(1000, 4000, 3600))
    restored = RiseEnvelope(quantile=0.9)
    restored.restore(envelope.to_dict())
    assert restored.ratio(600) == pytest.approx(envelope.ratio(600), rel=1e-3)


def test_one_step_in_a_short_history_is_no_distribution_of_rises() -> None:
    """Three minutes with one step 700 -> 3000/s: from every moment of the minute before it the step lies
    within 60 s, so a quantile of those windows would plan a 4x rise for ever after. Fewer than ten
    leads of history measure nothing; ten steps over a longer history do."""
    short = RiseEnvelope(quantile=0.8)
    short.update(np.concatenate([np.full(90, 700.0), np.full(90, 3000.0)]))
    assert short.ratio(60) == 1.0
    cycles = RiseEnvelope(quantile=0.8)
    cycles.update(np.tile(np.concatenate([np.full(60, 700.0), np.full(60, 3000.0)]), 10))
    assert cycles.ratio(60) > 2.0


def _cycles() -> np.ndarray:
    """Two hours of a workload cycling every 20 minutes between 1,000 and 3,000/s, a little noise on it."""
    t = np.arange(7200)
    rng = np.random.default_rng(5)
    return 2000 + 1000 * np.sin(2 * np.pi * t / 1200) + 20 * rng.standard_normal(t.size)


def test_from_the_top_of_its_range_the_conditioned_envelope_expects_the_rises_of_other_tops() -> None:
    """Unconditional, the rises from every moment (the troughs' climbs among them) are expected from the
    peak too; conditioned on the top third of the last half hour's range, those from other tops: less."""
    plain, conditioned = RiseEnvelope(quantile=0.8), RiseEnvelope(quantile=0.8, conditioned=True)
    for envelope in (plain, conditioned):
        envelope.update(_cycles())
    top, bottom = 2990.0, 1010.0
    assert conditioned.ratio(180, top) < plain.ratio(180, top)
    assert conditioned.ratio(180, top) < 1.15 < plain.ratio(180, top)
    assert conditioned.ratio(180, bottom) >= plain.ratio(180, bottom)
    assert plain.ratio(180, top) == plain.ratio(180)  # unconditioned: the level changes nothing
    assert np.all(conditioned.upper(np.full(900, 2900.0), top) <= plain.upper(np.full(900, 2900.0), top))


def test_a_call_may_ask_for_another_quantile_than_the_envelopes_own() -> None:
    """The agent asks one envelope for two quantiles (where a rescale is cheap and where it is dear): the rises at
    a quantile asked for are those of an envelope built at it, conditioned or not, and each quantile's ratios are
    kept apart from the other's."""
    envelope, low = RiseEnvelope(quantile=0.9, conditioned=True), RiseEnvelope(quantile=0.6, conditioned=True)
    for each in (envelope, low):
        each.update(_cycles())
    forecast = np.full(900, 1500.0)
    own = {level: envelope.upper(forecast, level) for level in (1010.0, 2000.0, 2990.0)}
    for level, high in own.items():
        asked = envelope.upper(forecast, level, quantile=0.6)
        assert asked == pytest.approx(low.upper(forecast, level))
        assert np.all(asked <= high)
        assert envelope.upper(forecast, level) == pytest.approx(high), "the own quantile's ratios are untouched"
    assert np.any(envelope.upper(forecast, 1010.0, quantile=0.6) < own[1010.0]), "a lower quantile, a lower bound"
    plain = envelope.upper(forecast, 1010.0, conditioned=False, quantile=0.6)
    assert plain == pytest.approx(low.upper(forecast, 1010.0, conditioned=False))
    with pytest.raises(ValueError, match="quantile"):
        envelope.upper(forecast, 1010.0, quantile=1.0)


def test_a_part_of_the_range_without_history_at_a_lead_takes_the_unconditional_ratio() -> None:
    """Half an hour of history: the long leads have too few windows from the top third alone."""
    conditioned = RiseEnvelope(quantile=0.8, conditioned=True)
    plain = RiseEnvelope(quantile=0.8)
    for envelope in (plain, conditioned):
        envelope.update(_cycles()[:2400])
    assert conditioned.ratio(900, 2990.0) == plain.ratio(900)
    leads = [conditioned.ratio(lead, 2990.0) for lead in (10, 60, 300, 600, 900)]
    assert leads == sorted(leads), "a rise within a short lead is within a longer one too"


@pytest.mark.parametrize("mean_s", [10, 60])
def test_the_conditioned_rises_of_longer_means_leave_out_bursts_shorter_than_them(
    mean_s: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 12,000/s workload with a 20-s burst to 30,000/s every five minutes: the highest 10-s mean within two
    minutes is a burst from two moments in five, the highest 60-s mean a third of one. Conditioned rises of
    60-s means (:data:`models.forecast.envelope.CONDITIONED_MEAN_S`) see the burst's share of a minute; the
    unconditioned envelope stays on 10-s levels whatever the setting (docs/research/experiments.md,
    experiment 20)."""
    monkeypatch.setattr(envelope_module, "CONDITIONED_MEAN_S", mean_s)
    period = np.full(300, 12_000.0)
    period[140:160] = 30_000.0
    rng = np.random.default_rng(3)
    samples = np.tile(period, 24) + 100 * rng.standard_normal(300 * 24)
    conditioned, plain = RiseEnvelope(quantile=0.8, conditioned=True), RiseEnvelope(quantile=0.8)
    for envelope in (conditioned, plain):
        envelope.update(samples)
    assert plain.ratio(120) > 2.0
    if mean_s == 10:
        assert conditioned.ratio(120, 12_000.0) > 2.0
    else:
        assert 1.2 < conditioned.ratio(120, 12_000.0) < 1.6, conditioned.ratio(120, 12_000.0)
    assert plain.ratio(120, 12_000.0) == plain.ratio(120)


@pytest.mark.parametrize(("rise_mean_s", "conditioned_mean_s"), [(10, 10), (60, 10), (10, 60), (60, 60)])
def test_the_unconditioned_rises_are_of_their_own_means_whichever_table_is_read_first(
    rise_mean_s: int, conditioned_mean_s: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same bursty workload: the unconditioned ratio (:data:`models.forecast.envelope.RISE_MEAN_S`) is the same
    whether a conditioned table (its own means, :data:`~models.forecast.envelope.CONDITIONED_MEAN_S`) was read before
    it or not, and rises of 60-s means see a 20-s burst's share of a minute (docs/research/experiments.md,
    experiment 57)."""
    monkeypatch.setattr(envelope_module, "RISE_MEAN_S", rise_mean_s)
    monkeypatch.setattr(envelope_module, "CONDITIONED_MEAN_S", conditioned_mean_s)
    period = np.full(300, 12_000.0)
    period[140:160] = 30_000.0
    samples = np.tile(period, 24) + 100 * np.random.default_rng(3).standard_normal(300 * 24)
    first_conditioned, alone = RiseEnvelope(quantile=0.8, conditioned=True), RiseEnvelope(quantile=0.8)
    for envelope in (first_conditioned, alone):
        envelope.update(samples)
    first_conditioned.ratio(120, 12_000.0)  # fills the conditioned table, and the unconditioned one where they agree
    assert first_conditioned.ratio(120) == alone.ratio(120)
    assert (alone.ratio(120) > 2.0) == (rise_mean_s == 10)


def test_the_highest_rise_is_the_steepest_the_history_shows_at_each_lead_measured() -> None:
    """One doubling within an hour of a flat workload: the highest rise within any lead is 2 where the quantiles see
    none; a lead the history holds too few windows of (ten of it: 450 s and longer in an hour) is absent, and none
    is measured before ten levels."""
    envelope = RiseEnvelope(quantile=0.8)
    envelope.update(np.concatenate([np.full(3000, 1000.0), np.full(600, 2000.0)]))
    highest = envelope.highest()
    assert envelope.ratio(300) == 1.0
    assert list(highest) == [lead for lead in envelope_module.LEADS_S if lead <= 300]
    assert all(ratio == pytest.approx(2.0) for ratio in highest.values())
    short = RiseEnvelope()
    short.update(np.linspace(1000.0, 1300.0, 200))  # 20 levels: the 10-s lead alone
    assert list(short.highest()) == [10]
    assert short.highest()[10] == pytest.approx(1 + 15 / 1000, rel=0.01)
    young = RiseEnvelope()
    young.update(np.full(90, 1000.0))
    assert young.highest() == {}
