"""Daedalus's holds priced by what a rescale of this job costs (``holds: cost``) against the fixed ones."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from planner import DaedalusPolicy, PlanInput, PlannerConfig, daedalus
from planner.daedalus import (
    Holds,
    break_even_s,
    cannot_catch_up,
    cheap_rescale,
    drain_s,
    holds,
    rescale_cost_ws,
    stabilization_s,
)
from planner.history import Recommendations
from planner.types import Decision, ReasonCode

POLICY = DaedalusPolicy()
CONFIG = PlannerConfig(min_parallelism=1, max_parallelism=10, target_recovery_time_s=300)
FIXED = dataclasses.replace(CONFIG, holds="fixed")
NOW = 10_000.0


def plan(
    *,
    current: int = 8,
    workload: float = 25_000,
    forecast: float | list[float] = 25_000,
    downtime: float | None = 1.4,
    replay: float | None = 125_000,
    last_rescale_at: float | None = None,
    history: tuple[tuple[float, int], ...] = (),
    recovery: float = 60.0,
    rescale_recovery: float | None = None,
) -> PlanInput:
    values = np.full(900, float(forecast)) if isinstance(forecast, (int, float)) else np.asarray(forecast, dtype=float)
    return PlanInput(
        now=NOW,
        current_parallelism=current,
        workload_avg=workload,
        forecast=values,
        consumer_lag=0.0,
        capacities={n: 10_000.0 * n for n in range(1, 11)},
        recovery_times={n: recovery for n in range(1, 11)},
        rescale_recoveries={} if rescale_recovery is None else {n: rescale_recovery for n in range(1, 11)},
        last_rescale_at=last_rescale_at,
        recent_recommendations=Recommendations(history),
        rescale_downtimes={} if downtime is None else {n: downtime for n in range(1, 11)},
        replay_records=replay,
    )


def recovering_plan(workload: float, previous: float, lag: float, **changes: Any) -> PlanInput:
    """4 workers (40,000/s) recovering ``lag`` records at ``workload``/s, from ``previous``/s over the loop before;
    ``changes`` are set on the PlanInput."""
    at_rate = plan(current=4, workload=workload, forecast=workload)
    return dataclasses.replace(at_rate, workload_previous=previous, consumer_lag=lag, recovering=True, **changes)


def scale_in_before_a_rise(rise_at: int, **changes: float | None) -> Decision:
    """The decision at 8 workers and 25,000/s with 3 wanted over the last two rounds, the forecast rising to 45,000/s
    after ``rise_at`` seconds, a failure at any scale-out recovering in 200 s and a rescale to it in 20 s;
    ``changes`` are passed to :func:`plan`."""
    forecast = [25_000.0] * rise_at + [45_000.0] * (900 - rise_at)
    history = ((NOW - 120, 3), (NOW - 60, 3))
    settings: dict[str, Any] = {"recovery": 200.0, "rescale_recovery": 20.0, **changes}
    return POLICY.decide(plan(forecast=forecast, history=history, **settings), CONFIG)


def test_a_rescale_costs_its_downtime_on_the_larger_scale_out_and_the_replay_at_the_new_one() -> None:
    # 8 workers held through 1.4 s, and 125,000 records replayed at 3 workers' 30,000/s: 3 workers for 4.2 s.
    assert rescale_cost_ws(plan(), 3) == pytest.approx(8 * 1.4 + 3 * 125_000 / 30_000)
    assert break_even_s(plan(), 3) == pytest.approx((8 * 1.4 + 12.5) / 5)
    assert rescale_cost_ws(plan(downtime=None), 3) is None
    assert break_even_s(plan(), 8) is None


def test_cheap_rescales_shorten_the_holds_to_a_loop_and_costly_ones_keep_the_settings() -> None:
    cheap = holds(plan(downtime=1.4), CONFIG)
    assert cheap.priced and cheap.grace_s == pytest.approx(1.4 + 30) and cheap.recent_rescale_window_s == 60
    assert stabilization_s(plan(downtime=1.4), CONFIG, 7) == 60
    slow = plan(downtime=5.0, replay=2_000_000)  # cheap, with a long checkpoint interval's replay
    assert holds(slow, CONFIG).recent_rescale_window_s == pytest.approx(8 * 5 + 7 * 2_000_000 / 70_000)
    assert stabilization_s(slow, CONFIG, 4) == stabilization_s(slow, CONFIG, 7) == pytest.approx(8 * 5 + 200)
    restart = plan(downtime=22.0)  # a restart of 8 workers, 10 s + 1.5 s a worker: dear, the settings hold
    assert not cheap_rescale(22.0, 300.0) and cheap_rescale(6.0, 300.0) and not cheap_rescale(None, 300.0)
    assert holds(restart, CONFIG) == Holds(120, 300, False)
    assert stabilization_s(restart, CONFIG, 4) == 300


@pytest.mark.parametrize(
    "priced", [(), ("grace",), ("recent",), ("stabilization",), ("grace", "recent", "stabilization")]
)
def test_where_a_rescale_is_dear_the_holds_named_follow_from_its_cost_and_the_others_keep_the_settings(
    priced: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HOLDS_PRICED_DEAR`` names the holds a dear rescale prices as a cheap one does: the grace its downtime and
    half a loop, the recent-rescale window until a one-worker scale-in pays for its rescale, the stabilization until
    one worker's saving pays for the scale-in's; where a rescale is cheap every hold is priced whatever it names."""
    monkeypatch.setattr(daedalus, "HOLDS_PRICED_DEAR", frozenset(priced))
    restart = plan(downtime=22.0)  # a restart of 8 workers: 22 s, dear
    timed = holds(restart, CONFIG)
    assert timed.grace_s == pytest.approx(22.0 + 30 if "grace" in priced else 120)
    # A one-worker scale-in from 8: 8 workers through 22 s, and 125,000 records at 7 workers' 70,000/s.
    recent = 8 * 22.0 + 7 * 125_000 / 70_000
    assert timed.recent_rescale_window_s == pytest.approx(recent if "recent" in priced else 300)
    assert timed.priced == bool({"grace", "recent"} & set(priced))
    assert stabilization_s(restart, CONFIG, 4) == pytest.approx(
        8 * 22.0 + 4 * 125_000 / 40_000 if "stabilization" in priced else 300
    )
    cheap = holds(plan(downtime=1.4), CONFIG)
    assert (cheap.grace_s, cheap.recent_rescale_window_s, cheap.priced) == (pytest.approx(31.4), 60, True)
    assert stabilization_s(plan(downtime=1.4), CONFIG, 7) == 60


def test_fixed_holds_and_an_unknown_cost_keep_the_settings() -> None:
    for inp, config in ((plan(), FIXED), (plan(downtime=None), CONFIG)):
        timed = holds(inp, config)
        assert (timed.grace_s, timed.recent_rescale_window_s, timed.priced) == (120, 300, False)
        assert stabilization_s(inp, config, 4) == 300


def test_a_cheap_rescale_decides_again_at_the_next_loop_a_costly_one_waits_out_the_grace() -> None:
    cheap = POLICY.decide(plan(workload=75_000, forecast=75_000, last_rescale_at=NOW - 60), CONFIG)
    assert cheap.code is not ReasonCode.GRACE
    costly = POLICY.decide(plan(workload=75_000, forecast=75_000, downtime=40.0, last_rescale_at=NOW - 60), CONFIG)
    assert costly.code is ReasonCode.GRACE
    assert (
        POLICY.decide(plan(workload=75_000, forecast=75_000, last_rescale_at=NOW - 60), FIXED).code is ReasonCode.GRACE
    )


def test_a_scale_in_wanted_for_two_loops_is_taken_when_rescales_are_cheap() -> None:
    history = ((NOW - 120, 3), (NOW - 60, 3))
    cheap = POLICY.decide(plan(history=history), CONFIG)
    assert cheap.target_parallelism == 3 and cheap.code is ReasonCode.SCALE_IN
    fixed = POLICY.decide(plan(history=history), FIXED)
    assert fixed.target_parallelism == 8 and fixed.desired_parallelism == 3


def test_a_scale_in_the_forecast_undoes_before_it_pays_is_not_taken() -> None:
    # 7 workers carry 65,000/s through the 180-s hold, but the forecast passes their 70,000/s at 250 s: one
    # worker saved for 250 s does not pay the rescale in and the one back, each 8 workers stopped for 5 s and
    # 2,000,000 records replayed (a minute's checkpoint interval).
    forecast = [65_000.0] * 250 + [75_000.0] * 650
    history = tuple((NOW - 600 + 60 * i, 7) for i in range(11))
    inp = plan(forecast=forecast, workload=65_000, downtime=5.0, replay=2_000_000, history=history)
    decision = POLICY.decide(inp, CONFIG)
    assert decision.target_parallelism == 8
    assert any("not more than its rescale and the one back" in r for r in decision.reasons)
    assert POLICY.decide(inp, FIXED).target_parallelism == 7
    later = plan(
        forecast=[65_000.0] * 500 + [75_000.0] * 400, workload=65_000, downtime=5.0, replay=2_000_000, history=history
    )
    assert POLICY.decide(later, CONFIG).target_parallelism == 7  # 500 s of one worker pays for both


def test_a_cheap_scale_out_carries_its_hold_a_costly_one_the_horizons_peak() -> None:
    # 3 workers (30,000/s) fall short of 35,000/s; the forecast stays there for 400 s, then doubles. A scale-out
    # that costs a second carries the 180-s hold (4 workers); a restart's carries the horizon's peak (8).
    forecast = [35_000.0] * 400 + [75_000.0] * 500
    cheap = POLICY.decide(plan(current=3, workload=35_000, forecast=forecast), CONFIG)
    assert cheap.target_parallelism == 4 and cheap.code is ReasonCode.SCALE_OUT
    assert any("4: carries the peak 35,000/s of its 180 s hold" in r for r in cheap.reasons)
    costly = POLICY.decide(plan(current=3, workload=35_000, forecast=forecast, downtime=22.0), CONFIG)
    assert costly.target_parallelism == 8
    assert POLICY.decide(plan(current=3, workload=35_000, forecast=forecast), FIXED).target_parallelism == 8


@pytest.mark.parametrize("hold_from", ["planned", "scale-in", "rescale"])
def test_a_decisions_hold_starts_from_the_slower_recovery_or_where_cheap_from_the_rescales_own(
    hold_from: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A failure at 3 workers would take 200 s to recover, the rescale to them 20 s; the forecast passes their
    # 30,000/s at 200 s. A hold from the slower recovery (200 s and two loops: 320 s) sees the rise, one from the
    # rescale's own (140 s, where a rescale is cheap and the switch says so) does not; a restart's hold always
    # starts from the slower recovery. docs/research/experiments.md, experiment 20, chose between them.
    monkeypatch.setattr(daedalus, "HOLD_FROM", hold_from)
    cheap = scale_in_before_a_rise(200)
    if hold_from == "planned":
        assert cheap.desired_parallelism == 5
        assert any(
            r.startswith("4: capacity 40,000/s < the forecast peak 45,000/s of its 320 s hold") for r in cheap.reasons
        )
    else:
        assert cheap.target_parallelism == 3 and cheap.code is ReasonCode.SCALE_IN
        assert any(r.startswith("3: carries the forecast peak 25,000/s of its 140 s hold") for r in cheap.reasons)
    unknown = scale_in_before_a_rise(200, rescale_recovery=None)
    assert unknown.desired_parallelism == 5, "without the rescale's own recovery, the slower one"
    assert scale_in_before_a_rise(200, downtime=22.0).desired_parallelism == 5


@pytest.mark.parametrize("where", ["always", "cheap"])
def test_a_scale_out_on_a_climb_carries_the_climb_over_its_hold(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The workload climbed from 20,000/s to 35,000/s over the last loop (250/s a second); the forecast, fitted on
    # the flat before, holds 35,000/s. Where a rescale is cheap and its own recovery (90 s) ends after the next
    # round, the scale-out is sized on its 180-s hold, so on a climb it carries the climb continued over it
    # (35,000 + 250 x 180 = 80,000/s: 9 workers), not 4 workers that the next round must add to again, which
    # it could not while the rescale catches up. A restart's hold is longer (60-s recovery, 120-s grace, a
    # loop): 35,000 + 250 x 240 = 95,000/s, 10 workers; with CLIMB_CARRIED_WHERE "cheap" its forecast decides (4).
    # (With CLIMB_OVER "loop", the default, a cheap scale-out carries the climb a loop ahead whatever its recovery:
    # test_a_cheap_scale_out_carries_the_climb_a_loop_ahead_even_while_its_rescale_catches_up_with_loop.)
    monkeypatch.setattr(daedalus, "CLIMB_OVER", "next round")
    monkeypatch.setattr(daedalus, "CLIMB_CARRIED_WHERE", where)
    slow = plan(current=3, workload=35_000, forecast=35_000, rescale_recovery=90.0)  # recovers after the next round
    climbing = dataclasses.replace(slow, workload_previous=20_000.0)
    decision = POLICY.decide(climbing, CONFIG)
    assert decision.target_parallelism == 9 and decision.code is ReasonCode.SCALE_OUT
    assert any(r.startswith("9: carries the climb continued to 80,000/s of its 180 s hold") for r in decision.reasons)
    steady = dataclasses.replace(climbing, workload_previous=34_000.0)
    assert POLICY.decide(steady, CONFIG).target_parallelism == 4
    costly = dataclasses.replace(
        plan(current=3, workload=35_000, forecast=35_000, downtime=22.0), workload_previous=20_000.0
    )
    dear = POLICY.decide(costly, CONFIG)
    if where == "always":
        assert dear.target_parallelism == 10
        assert any(r.startswith("10: carries the climb continued 240 s ahead to 95,000/s") for r in dear.reasons)
        assert any(r.startswith("9: capacity 90,000/s < the climb continued 240 s ahead") for r in dear.reasons)
    else:
        assert dear.target_parallelism == 4
    steady_dear = dataclasses.replace(costly, workload_previous=34_000.0)
    assert POLICY.decide(steady_dear, CONFIG).target_parallelism == 4


@pytest.mark.parametrize("climb_over", ["loop", "next round", "hold"])
def test_a_cheap_scale_out_that_recovers_within_the_loop_carries_the_climb_to_the_next_round(
    climb_over: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same climb (250/s a second from 35,000/s), but the rescale catches up within the 60-s loop (20 s): the
    # next round reads where the climb went and can add workers again, so the scale-out carries the climb a loop
    # ahead, 35,000 + 250 x 60 = 50,000/s (6 workers, 5 carry 50,000/s without room), not over its 180-s hold.
    monkeypatch.setattr(daedalus, "CLIMB_OVER", climb_over)
    quick = plan(current=3, workload=35_000, forecast=35_000, rescale_recovery=20.0)
    decision = POLICY.decide(dataclasses.replace(quick, workload_previous=20_000.0), CONFIG)
    assert decision.code is ReasonCode.SCALE_OUT
    if climb_over in ("loop", "next round"):
        assert decision.target_parallelism == 6
        assert any(
            r.startswith("6: carries the climb continued 60 s ahead to 50,000/s (it recovers within the loop)")
            for r in decision.reasons
        )
        assert any(r.startswith("5: capacity 50,000/s < the climb continued 60 s ahead") for r in decision.reasons)
    else:
        assert decision.target_parallelism == 9
    # Where the rescale's own recovery is unknown, the planned one (60 s, within the loop) decides.
    unknown = dataclasses.replace(plan(current=3, workload=35_000, forecast=35_000), workload_previous=20_000.0)
    assert POLICY.decide(unknown, CONFIG).target_parallelism == (6 if climb_over in ("loop", "next round") else 9)


@pytest.mark.parametrize("where", ["always", "cheap"])
def test_a_forecast_behind_the_workload_raises_the_scale_ins_bound_instead_of_refusing_it(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The last loop ran at 28,500/s, 9.6 % above the forecast for the next one (26,000/s), which then rises to
    # 28,000/s within the hold: raised by the gap that is 30,692/s, above 3 workers' 30,000/s, so 4.
    monkeypatch.setattr(daedalus, "RISE_GAP_WHERE", where)
    forecast = [26_000.0] * 60 + [28_000.0] * 840
    history = ((NOW - 60, 4),)
    cheap = POLICY.decide(plan(workload=28_500, forecast=forecast, history=history), CONFIG)
    assert cheap.desired_parallelism == 4 and cheap.target_parallelism == 4
    assert any("raised by the gap (x1.096)" in r for r in cheap.reasons)
    assert any(r.startswith("3: capacity 30,000/s < the forecast peak 30,692/s") for r in cheap.reasons)
    # A restart's scale-in is lifted the same way (its 240-s hold sees the same peak), or with RISE_GAP_WHERE
    # "cheap" refused on the gap; a workload that climbed over the loop before as well lifts the scale-ins' bound by
    # the gap and the climb compounded over the hold (CLIMB_ON_SCALE_IN), or refuses them.
    dear = POLICY.decide(plan(workload=28_500, forecast=forecast, history=history, downtime=22.0), CONFIG)
    assert dear.desired_parallelism == (4 if where == "always" else 8)
    assert any("raised by the gap (x1.096)" in r for r in dear.reasons) is (where == "always")
    climbing = dataclasses.replace(
        plan(workload=28_500, forecast=forecast, history=history), workload_previous=24_000.0
    )
    decision = POLICY.decide(climbing, CONFIG)
    assert decision.desired_parallelism == 5, "the climb compounded over the 180-s hold: 47,725/s"
    assert any(r.startswith("4: capacity 40,000/s < the climb compounded to 47,725/s") for r in decision.reasons)
    monkeypatch.setattr(daedalus, "CLIMB_ON_SCALE_IN", "refuse")
    refused = POLICY.decide(climbing, CONFIG)
    assert refused.desired_parallelism == 8
    assert any(r.startswith("3: ") and "no scale-in on a rising workload" in r for r in refused.reasons)
    assert not any("raised by the gap" in r for r in refused.reasons)


CLIMBS = {
    # CLIMB_ON_SCALE_IN: (the scale-in where cheap, at a restart's cost, behind the forecast too; the bound where cheap)
    "refuse": (8, 8, 8, ""),
    "carry": (2, 3, 3, "the climb continued to 19,000/s"),
    "compound": (3, 4, 4, "the climb compounded to 23,480/s"),
}


@pytest.mark.parametrize("where", ["always", "cheap"])
@pytest.mark.parametrize("on_scale_in", list(CLIMBS))
def test_a_climb_far_below_the_capacity_is_carried_by_a_scale_in_or_refuses_it(
    on_scale_in: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """8 workers (80,000/s) after a peak, the workload back at 12,000/s and climbing from 9,000/s over the loop, the
    forecast flat. A scale-in must carry the climb over its hold (where cheap 140 s: a 20-s rescale recovery, a loop, a
    loop; at a restart's cost 240 s: a 60-s recovery, the 120-s grace, a loop). Continued at its rate (50/s a second)
    that is 19,000/s where cheap (2 workers) and 24,000/s at a restart's cost (3); compounded at its ratio (x4/3 a
    60-s loop) 23,480/s (3) and 37,926/s (4). Refused, the job keeps 8 until the climb flattens."""
    monkeypatch.setattr(daedalus, "CLIMB_ON_SCALE_IN", on_scale_in)
    monkeypatch.setattr(daedalus, "CLIMB_ON_SCALE_IN_WHERE", where)
    cheap_in, dear_in, behind_in, bound = CLIMBS[on_scale_in]
    history = ((NOW - 120, 2), (NOW - 60, 2))
    cheap = dataclasses.replace(
        plan(workload=12_000, forecast=12_000, history=history, rescale_recovery=20.0), workload_previous=9_000.0
    )
    decision = POLICY.decide(cheap, CONFIG)
    assert decision.target_parallelism == cheap_in
    if bound:
        assert decision.code is ReasonCode.SCALE_IN
        assert any(r.startswith(f"{cheap_in}: carries {bound} of its 140 s hold") for r in decision.reasons)
    else:
        assert any(r.startswith("2: ") and "no scale-in on a rising workload" in r for r in decision.reasons)
    dear = POLICY.decide(dataclasses.replace(cheap, rescale_downtimes={n: 22.0 for n in range(1, 11)}), CONFIG)
    assert dear.desired_parallelism == (dear_in if where == "always" else 8)
    if bound and where == "always":
        refused = f"{dear_in - 1}: capacity {dear_in - 1}0,000/s < the climb {bound.split()[2]} to"
        assert any(r.startswith(refused) and r.endswith("of its 240 s hold") for r in dear.reasons)
    # Behind the forecast as well as climbing (13,500/s, 12.5 % above the forecast and 50 % above the loop before),
    # the scale-ins are checked against the forecast lifted by the gap and the climb together.
    both = POLICY.decide(dataclasses.replace(cheap, workload_avg=13_500.0), CONFIG)
    assert both.desired_parallelism == behind_in
    assert any("raised by the gap (x1.125)" in r for r in both.reasons) is bool(bound)


def test_a_climb_from_next_to_nothing_refuses_the_scale_ins_without_overflowing() -> None:
    """A loop before read at 1e-300/s (a reading at the edge of what a float holds) makes any workload a climb whose
    ratio compounded over a hold is past every float: the round refuses each scale-in on it and keeps 8."""
    history = ((NOW - 120, 2), (NOW - 60, 2))
    edge = dataclasses.replace(
        plan(workload=12_000, forecast=12_000, history=history, rescale_recovery=20.0), workload_previous=1e-300
    )
    decision = POLICY.decide(edge, CONFIG)
    assert decision.target_parallelism == 8
    assert any(r.startswith("2: capacity 20,000/s < the climb compounded to") for r in decision.reasons)


@pytest.mark.parametrize("by", ["level", "ratio"])
def test_a_forecast_collapsed_to_zero_under_a_flat_workload_is_lifted_by_its_level(
    by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workload held 25,000/s over the last two loops and the forecast, extrapolating a step down, says 0/s: lifted
    by the level it is behind it holds 25,000/s, which 3 workers carry; a ratio to 0/s lifts nothing, and the round
    refuses every scale-in as if the workload rose."""
    monkeypatch.setattr(daedalus, "RISE_GAP_BY", by)
    flat = dataclasses.replace(plan(workload=25_000, forecast=0.0), workload_previous=25_000.0)
    decision = POLICY.decide(flat, CONFIG)
    if by == "level":
        assert decision.desired_parallelism == 3
        assert any("raised by the gap (+25,000/s)" in r for r in decision.reasons)
        assert any(r.startswith("3: carries the forecast peak 25,000/s") for r in decision.reasons)
    else:
        assert decision.desired_parallelism == 8
        assert any(r.startswith("3: ") and "no scale-in on a rising workload" in r for r in decision.reasons)


def test_a_rescale_is_cheap_by_its_stop_against_the_recovery_target_not_against_the_loop() -> None:
    """Half a second in place is cheap whatever the loop (a 1.5-s one too); a restart of one worker, 11.5 s, is not,
    at a loop of ten minutes too; a stop is judged by how much of the target its backlog takes."""
    fast_loop = dataclasses.replace(CONFIG, loop_interval_s=1.5)
    assert holds(plan(downtime=0.5), fast_loop).priced
    assert holds(plan(downtime=0.5), fast_loop).grace_s == pytest.approx(0.5 + 0.75)
    assert not holds(plan(downtime=11.5), dataclasses.replace(CONFIG, loop_interval_s=600.0)).priced
    assert cheap_rescale(0.3, 15.0) and not cheap_rescale(0.5, 15.0)


def test_a_round_without_any_recovery_prediction_keeps_the_scale_out_rather_than_taking_the_largest() -> None:
    """No recent workload to predict from leaves every candidate without a recovery: a gap in the readings, kept
    as one, never the fallback's "no scale-out recovers in time" that takes the largest scale-out."""
    decision = POLICY.decide(dataclasses.replace(plan(), recovery_times={}), CONFIG)
    assert decision.code is ReasonCode.UNKNOWN_DATA and decision.target_parallelism == 8


@pytest.mark.parametrize("wants", ["searched", "kept"])
def test_a_cheap_round_held_after_a_rescale_wants_the_scale_in_the_stabilization_then_takes(
    wants: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rescaled to 8 workers 40 s ago (cheap: the grace of 31.4 s is over, the recent-rescale window of a loop is
    # not), the load fell to 25,000/s: the round keeps 8. With RECENT_WANTS "searched" it wants the 3 the search
    # finds, and the next round, wanting 3 again, takes it; "kept" wants 8, and the next round stabilizes at 8.
    monkeypatch.setattr(daedalus, "RECENT_WANTS", wants)
    held = POLICY.decide(plan(last_rescale_at=NOW - 40), CONFIG)
    assert held.target_parallelism == 8 and held.code is ReasonCode.KEEP
    assert held.reasons[0].startswith("rescaled recently and 8 still carries")
    assert held.desired_parallelism == (3 if wants == "searched" else 8)
    if wants == "searched":
        assert held.reasons[-1].startswith("wanted 3: carries the forecast peak 25,000/s")
    history = ((NOW - 60, 8), (NOW, held.desired_parallelism))  # the rescale's round, then the held one
    later = dataclasses.replace(plan(last_rescale_at=NOW - 40, history=history), now=NOW + 60)
    taken = POLICY.decide(later, CONFIG)
    assert taken.desired_parallelism == 3
    assert taken.target_parallelism == (3 if wants == "searched" else 8)


@pytest.mark.parametrize("where", ["always", "cheap"])
def test_a_dear_round_held_after_a_rescale_wants_the_scale_in_where_recent_wants_applies_always(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rescaled to 8 workers 200 s ago by a restart (a 22-s downtime): the recent-rescale window of 300 s holds the
    # round. With RECENT_WANTS_WHERE "always" it wants the scale-in the search finds, so the stabilization of
    # minutes runs beside the window; "cheap" wants 8, and the stabilization starts after the window.
    monkeypatch.setattr(daedalus, "RECENT_WANTS_WHERE", where)
    dear = POLICY.decide(plan(last_rescale_at=NOW - 200, downtime=22.0), CONFIG)
    assert dear.code is ReasonCode.KEEP and dear.target_parallelism == 8
    assert dear.reasons[0].startswith("rescaled recently and 8 still carries")
    if where == "always":
        assert dear.desired_parallelism == 3
        assert dear.reasons[-1].startswith("wanted 3: carries the forecast peak 25,000/s of its 240 s hold")
    else:
        assert dear.desired_parallelism == 8


@pytest.mark.parametrize("over", ["own", "planned"])
def test_a_cheap_scale_in_carries_the_bound_while_its_own_rescale_recovers_not_a_failures(
    over: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From 8 workers at 25,000/s the forecast rises to 45,000/s after 160 s. A failure at 3 workers (30,000/s) would
    # recover in 200 s, the rescale to them in 20 s; the hold of that scale-in (140 s) ends before the rise. Carried
    # while its own rescale recovers, 3 qualifies; while a failure would recover, 3 and 4 fall short of the rise
    # and 5 is wanted. A restart's scale-in always carries it through the slower recovery.
    monkeypatch.setattr(daedalus, "RECOVERING_OVER", over)
    cheap = scale_in_before_a_rise(160)
    if over == "own":
        assert cheap.target_parallelism == 3 and cheap.code is ReasonCode.SCALE_IN
    else:
        assert cheap.desired_parallelism == 5
        assert "3: capacity 30,000/s < forecast 45,000/s while recovering" in cheap.reasons
    assert scale_in_before_a_rise(160, downtime=22.0).desired_parallelism == 5


def test_where_cheap_the_current_scale_out_carries_the_bound_until_the_next_round() -> None:
    # 3 workers (30,000/s) run at 25,000/s; the upper bound passes their capacity after 100 s, within a failure's
    # 200-s recovery but not within the loop. Where a rescale is cheap they are kept, and a failure's own check is
    # its recovery within the target; a restart's job scales out so a failure there would be carried.
    forecast = [25_000.0] * 100 + [35_000.0] * 800
    cheap = POLICY.decide(plan(current=3, forecast=forecast, recovery=200.0, rescale_recovery=20.0), CONFIG)
    assert cheap.target_parallelism == 3 and cheap.code is ReasonCode.KEEP
    costly = POLICY.decide(plan(current=3, forecast=forecast, recovery=200.0, downtime=22.0), CONFIG)
    assert costly.target_parallelism > 3
    assert any(r.startswith("3: capacity 30,000/s < forecast 35,000/s while recovering") for r in costly.reasons)


def test_a_backlog_drains_while_a_climb_leaves_spare_and_never_once_the_climb_uses_it_up() -> None:
    assert drain_s(0.0, 10_000.0, 50.0) == 0.0
    assert drain_s(1_000_000.0, 10_000.0, 0.0) == pytest.approx(100.0)
    # 10,000/s to spare shrinking by 50/s a second: 10,000 t - 25 t^2 = 600,000 at t = 76.4 s, not 60 s.
    assert drain_s(600_000.0, 10_000.0, 50.0) == pytest.approx((10_000 - (10_000**2 - 2 * 50 * 600_000) ** 0.5) / 50)
    assert drain_s(600_000.0, 10_000.0, 50.0) > 60.0
    # The spare is used up (after 200 s) before a million records are worked off (at most 1,000,000 over 200 s).
    assert math.isinf(drain_s(1_000_001.0, 10_000.0, 50.0))
    assert math.isinf(drain_s(1.0, 0.0, 50.0)) and math.isinf(drain_s(1.0, -5.0, 0.0))


@pytest.mark.parametrize("where", ["cheap", "always", "off"])
def test_a_recovery_on_a_climb_is_judged_against_the_climb_continued_where_it_applies(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 workers (40,000/s) recovering a million records at 30,000/s, which climbed from 25,000/s over the 60-s loop
    # (83/s a second). On the arrivals of now the backlog drains in 100 s, within the 300-s target; with the climb
    # continued the spare is gone after 120 s, 400,000 records short: the guard yields and the search decides.
    monkeypatch.setattr(daedalus, "RECOVERY_UNDER_CLIMB", where)
    recovering = recovering_plan(30_000, 25_000, 1_000_000)
    assert cannot_catch_up(recovering, CONFIG) is (where != "off")
    decision = POLICY.decide(recovering, CONFIG)
    assert (decision.code is ReasonCode.RECOVERING) is (where == "off")
    # Where a rescale is dear (a restart's 22 s) the climb counts only with "always".
    dear = dataclasses.replace(recovering, rescale_downtimes={n: 22.0 for n in range(1, 11)})
    assert cannot_catch_up(dear, CONFIG) is (where == "always")
    # A workload that does not climb (within CLIMB_MARGIN of the loop before) is judged on the arrivals of now.
    steady = dataclasses.replace(recovering, workload_previous=29_000.0)
    assert not cannot_catch_up(steady, CONFIG)
    # No backlog left, but the climb continued passes the capacity before the next round (38,000/s + 133/s a second
    # over 60 s is 46,000/s, above 40,000/s): the agent does not wait for it.
    outrun = dataclasses.replace(recovering, workload_avg=38_000.0, workload_previous=30_000.0, consumer_lag=0.0)
    outrun = dataclasses.replace(outrun, forecast=np.full(900, 38_000.0))
    assert cannot_catch_up(outrun, CONFIG) is (where != "off")


@pytest.mark.parametrize("left_from", ["stop", "now"])
def test_the_recovery_guard_gives_the_backlog_what_is_left_of_the_target_since_the_stop(
    left_from: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 workers (40,000/s) recovering 1.2 million records at a steady 35,000/s: 240 s to work off at 5,000/s to spare.
    # Within the 300-s target counted from now; but the stop was 120 s ago, so 180 s are left and it is late.
    monkeypatch.setattr(daedalus, "RECOVERY_LEFT_FROM", left_from)
    recovering = recovering_plan(35_000, 35_000, 1_200_000, recovering_since=NOW - 120.0)
    assert cannot_catch_up(recovering, CONFIG) is (left_from == "stop")
    assert (POLICY.decide(recovering, CONFIG).code is ReasonCode.RECOVERING) is (left_from == "now")
    # The same backlog 10 s after the stop has 290 s left: the guard holds either way.
    fresh = dataclasses.replace(recovering, recovering_since=NOW - 10.0)
    assert not cannot_catch_up(fresh, CONFIG)
    # A recovery whose start is unknown is given the whole target.
    assert not cannot_catch_up(dataclasses.replace(recovering, recovering_since=None), CONFIG)


@pytest.mark.parametrize("where", ["cheap", "always", "off"])
def test_the_recovery_guard_can_read_the_backlogs_own_drain_where_it_is_slower_than_the_spare(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 workers (40,000/s) recovering 300,000 records at a steady 35,000/s: 60 s at the 5,000/s to spare, but the
    # backlog fell by 800/s over the last loop (its last on the busiest worker): 375 s, past the 300-s target.
    monkeypatch.setattr(daedalus, "RECOVERY_DRAIN_MEASURED", where)
    recovering = recovering_plan(35_000, 35_000, 300_000, backlog_drain=800.0)
    read = where != "off"
    assert cannot_catch_up(recovering, CONFIG) is read
    # A drain faster than the spare does not shorten what the spare says; one that grew the backlog is late.
    assert not cannot_catch_up(dataclasses.replace(recovering, backlog_drain=20_000.0), CONFIG)
    assert cannot_catch_up(dataclasses.replace(recovering, backlog_drain=-50.0), CONFIG) is read
    # Nothing left to work off, under a second of input left (a caught-up job's lag is noise), or no drain measured:
    # the spare alone.
    assert not cannot_catch_up(dataclasses.replace(recovering, consumer_lag=0.0), CONFIG)
    assert not cannot_catch_up(dataclasses.replace(recovering, consumer_lag=30_000.0, backlog_drain=-50.0), CONFIG)
    assert not cannot_catch_up(dataclasses.replace(recovering, backlog_drain=None), CONFIG)
    # Where a rescale is dear (a restart's 22 s) the drain counts only with "always".
    dear = dataclasses.replace(recovering, rescale_downtimes={n: 22.0 for n in range(1, 11)})
    assert cannot_catch_up(dear, CONFIG) is (where == "always")


@pytest.mark.parametrize("climb_over", ["loop", "next round"])
def test_a_cheap_scale_out_carries_the_climb_a_loop_ahead_even_while_its_rescale_catches_up_with_loop(
    climb_over: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 250/s a second from 35,000/s; the rescale catches up in 90 s, past the 60-s loop. A loop ahead is 50,000/s
    # (6 workers); over the 210-s hold (90 s, the 60-s grace or loop, a loop) it is 87,500/s (9 workers).
    monkeypatch.setattr(daedalus, "CLIMB_OVER", climb_over)
    slow = dataclasses.replace(
        plan(current=3, workload=35_000, forecast=35_000, rescale_recovery=90.0), workload_previous=20_000.0
    )
    decision = POLICY.decide(slow, CONFIG)
    assert decision.target_parallelism == (6 if climb_over == "loop" else 9)


@pytest.mark.parametrize("where", ["cheap", "off"])
def test_a_kept_scale_out_must_carry_a_climb_continued_to_the_next_round_where_that_applies(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 5 workers (50,000/s) at 45,000/s, climbing 100/s a second: 51,000/s at the next round.
    monkeypatch.setattr(daedalus, "CURRENT_CARRIES_CLIMB", where)
    climbing = dataclasses.replace(plan(current=5, workload=45_000, forecast=45_000), workload_previous=39_000.0)
    decision = POLICY.decide(climbing, CONFIG)
    if where == "cheap":
        assert decision.target_parallelism == 6
        assert any(
            r.startswith("5: capacity 50,000/s < the climb continued a loop ahead to 51,000/s")
            for r in decision.reasons
        )
    else:
        assert decision.target_parallelism == 5
    # Where a rescale is dear the current scale-out is judged as before.
    dear = dataclasses.replace(climbing, rescale_downtimes={n: 22.0 for n in range(1, 11)})
    assert not any("a loop ahead" in r for r in POLICY.decide(dear, CONFIG).reasons)


@pytest.mark.parametrize("where", ["cheap", "off"])
def test_a_job_rescaled_recently_keeps_its_scale_out_only_while_it_carries_the_climb_to_the_next_round(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rescaled 45 s ago (past the 31-s grace, within the 60-s window) to 6 workers (60,000/s); the workload climbed
    # from 50,000/s to 56,000/s over the loop: 62,000/s at the next round, past the capacity, so the window does not
    # hold it where a kept scale-out carries the climb.
    monkeypatch.setattr(daedalus, "CURRENT_CARRIES_CLIMB", where)
    recent = dataclasses.replace(
        plan(current=6, workload=56_000, forecast=56_000, last_rescale_at=NOW - 45), workload_previous=50_000.0
    )
    decision = POLICY.decide(recent, CONFIG)
    if where == "cheap":
        assert decision.code is ReasonCode.SCALE_OUT and decision.target_parallelism == 7
    else:
        assert decision.target_parallelism == 6 and any("rescaled recently" in r for r in decision.reasons)


@pytest.mark.parametrize("to", ["wish", "highest"])
def test_a_cheap_scale_in_wanted_through_its_window_is_taken_to_this_rounds_wish_where_that_applies(
    to: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 8 workers at 25,000/s, where 3 qualify; the round a loop ago (the one-loop window) wanted 5, a scale-in too.
    # With STABILIZED_TO "wish" the window confirmed the direction and 3 is taken; "highest" takes the 5 wanted.
    monkeypatch.setattr(daedalus, "STABILIZED_TO", to)
    since = {"scale_in_since": NOW - 60}
    inp = dataclasses.replace(plan(history=((NOW - 60, 5),)), policy_state=since)
    decision = POLICY.decide(inp, CONFIG)
    assert decision.desired_parallelism == 3
    if to == "wish":
        assert decision.target_parallelism == 3 and decision.code is ReasonCode.SCALE_IN
        assert decision.reasons[-1] == "scale-in to 3: every round over the last 60 s wanted a scale-in"
        assert decision.policy_state == since
    else:
        assert decision.target_parallelism == 5 and decision.code is ReasonCode.STABILIZED
        assert decision.policy_state is None


@pytest.mark.parametrize(
    "state",
    [
        None,
        {},
        {"scale_in_since": "x"},
        {"scale_in_since": math.nan},
        {"scale_in_since": True},
        {"scale_in_since": NOW + 100},
        {"scale_in_since": NOW - 20},
    ],
)
def test_a_scale_in_not_wanted_through_the_whole_window_takes_the_highest_wanted_and_starts_counting(
    state: dict[str, Any] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No state, one that is not a past time, or one younger than the window (less half a loop for the rounds'
    # jitter): the window has not confirmed the direction, so the highest wanted (5) is taken, and this round's
    # scale-in is remembered from now (or from then).
    monkeypatch.setattr(daedalus, "STABILIZED_TO", "wish")
    inp = dataclasses.replace(plan(history=((NOW - 60, 5),)), policy_state=state)
    decision = POLICY.decide(inp, CONFIG)
    assert decision.target_parallelism == 5
    kept = NOW - 20 if state == {"scale_in_since": NOW - 20} else NOW
    assert decision.policy_state == {"scale_in_since": kept}


def test_a_round_wanting_no_scale_in_forgets_the_direction_and_a_dear_rescale_takes_the_highest_wanted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(daedalus, "STABILIZED_TO", "wish")
    since = {"scale_in_since": NOW - 600}
    busy = dataclasses.replace(plan(workload=75_000, forecast=75_000), policy_state=since)
    kept = POLICY.decide(busy, CONFIG)
    assert kept.desired_parallelism >= 8 and kept.policy_state == {"scale_in_since": None}
    history = ((NOW - 300, 5), (NOW - 60, 5))
    dear = POLICY.decide(dataclasses.replace(plan(downtime=22.0, history=history), policy_state=since), CONFIG)
    assert dear.desired_parallelism == 3 and dear.target_parallelism == 5


@pytest.mark.parametrize(("usual", "target"), [(None, 5), (28_000.0, 3), (38_000.0, 4), (45_000.0, 5)])
def test_a_dear_scale_in_that_carries_the_usual_workload_settles_over_the_horizon_without_the_window(
    usual: float | None, target: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 8 workers at 25,000/s where a rescale stops the job for 22 s: 3 qualify, and the rounds 300 and 200 s ago
    # wanted 5, inside the 300-s window but not the last loop's. A scale-in that also carries where the workload
    # stood for most of the last hour is taken over the horizon at once (3 at 28,000/s, 4 at 38,000/s); above the
    # window's 5, or unknown, the window's is.
    monkeypatch.setattr(daedalus, "SETTLED_OVER_HORIZON", "dear")
    monkeypatch.setattr(daedalus, "SETTLED_CARRIES", "usual")
    history = ((NOW - 300, 5), (NOW - 200, 5))
    inp = dataclasses.replace(plan(downtime=22.0, history=history), workload_usual=usual)
    decision = POLICY.decide(inp, CONFIG)
    assert decision.desired_parallelism == 3 and decision.target_parallelism == target
    if target < 5:
        assert decision.reasons[-1].startswith(f"{target} carries the workload of most of the last hour")
    monkeypatch.setattr(daedalus, "SETTLED_CARRIES", "bound")
    assert POLICY.decide(inp, CONFIG).target_parallelism == 3
    monkeypatch.setattr(daedalus, "SETTLED_OVER_HORIZON", "off")
    assert POLICY.decide(inp, CONFIG).target_parallelism == 5


@pytest.mark.parametrize(
    ("z", "noise", "climbs"), [(None, 0.2, True), (2.0, 0.02, True), (2.0, 0.2, False), (3.0, 0.1, False)]
)
def test_a_climb_must_rise_beyond_the_workloads_own_noise_where_that_applies(
    z: float | None, noise: float, climbs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workload rose 25 % over the loop before (28,000 -> 35,000/s). Against the margin alone (10 %) that is a
    # climb, and a restart's scale-out carries it continued over its 240-s hold (35,000 + 7,000 / 60 x 240 =
    # 63,000/s: 7 workers). With CLIMB_NOISE_Z the rise must also pass z spreads of the workload's loop-to-loop
    # noise: on a calm workload (2 %) the margin still decides; where the minute means move by 10-20 % either way,
    # 25 % is noise and the forecast sizes the scale-out (4).
    monkeypatch.setattr(daedalus, "CLIMB_NOISE_Z", z)
    assert daedalus.climb_margin(noise) == pytest.approx(daedalus.CLIMB_MARGIN if z is None else max(0.1, z * noise))
    assert daedalus.climb_margin(None) == daedalus.CLIMB_MARGIN
    base = plan(current=3, workload=35_000, forecast=35_000, downtime=22.0)
    rose = dataclasses.replace(base, workload_previous=28_000.0, workload_noise=noise)
    decision = POLICY.decide(rose, CONFIG)
    assert decision.code is ReasonCode.SCALE_OUT
    assert decision.target_parallelism == (7 if climbs else 4)
    assert any("climb continued" in r for r in decision.reasons) == climbs
    # A rise past the margin that the noise explains says so among the round's reasons.
    discounted = [r for r in decision.reasons if "spreads of its noise" in r]
    assert bool(discounted) == (not climbs)
    assert all("rose 25 % from 28,000/s" in r for r in discounted)


@pytest.mark.parametrize("reach", ["scale-out", "every"])
def test_a_scale_in_reads_a_climb_against_the_noise_only_where_every_decision_does(
    reach: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same rise of 25 % on a workload whose loop means move by 20 % either way, at 6 workers. A scale-in taken
    # for noise at the foot of a climb is met by a restart late, so where only the scale-outs read the noise the
    # scale-ins read it as a climb against the margin alone and must carry it compounded over their hold (no
    # scale-in); where every decision reads the noise (CLIMB_NOISE_FOR "every", the default), it is noise and the
    # forecast sizes the scale-in (4).
    monkeypatch.setattr(daedalus, "CLIMB_NOISE_Z", 2.0)
    monkeypatch.setattr(daedalus, "CLIMB_NOISE_FOR", reach)
    base = plan(current=6, workload=35_000, forecast=35_000, downtime=22.0)
    rose = dataclasses.replace(base, workload_previous=28_000.0, workload_noise=0.2)
    decision = POLICY.decide(rose, CONFIG)
    assert decision.desired_parallelism == (4 if reach == "every" else 6)
    assert any("climb compounded" in r for r in decision.reasons) == (reach == "scale-out")


@pytest.mark.parametrize(
    ("loops", "reach", "climbs"), [(None, "every", False), (3, "every", True), (3, "scale-out", True)]
)
def test_a_climb_can_be_read_over_several_loops_each_above_the_last(
    loops: int | None, reach: str, climbs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A ramp of 6 % a loop: 33,000 -> 35,000/s over the last loop is no climb past the 10 % margin, but the workload
    # has run above the loop before at each of the last three (29,400/s three loops back: +19 %). At a restart's cost a
    # scale-out sized on the forecast (35,000/s) takes 4 workers; read as a climb over three loops (1,867/s a loop,
    # 31/s a second) continued over its 240-s hold, 35,000 + 31.1 x 240 = 42,470/s: 5.
    monkeypatch.setattr(daedalus, "SUSTAINED_CLIMB_LOOPS", loops)
    monkeypatch.setattr(daedalus, "SUSTAINED_CLIMB_FOR", reach)
    base = plan(current=3, workload=35_000, forecast=35_000, downtime=22.0)
    ramp = dataclasses.replace(base, workload_previous=33_000.0, workload_climb_from=29_400.0)
    decision = POLICY.decide(ramp, CONFIG)
    assert decision.code is ReasonCode.SCALE_OUT
    assert decision.target_parallelism == (5 if climbs else 4)
    assert any("climb continued" in r for r in decision.reasons) == climbs
    # Where the workload rose past the margin over the loop before alone, that loop's climb is the one read.
    steep = dataclasses.replace(ramp, workload_previous=30_000.0)
    assert daedalus._climb(35_000.0, 30_000.0, None, 29_400.0 if loops else None) == (30_000.0, 1)
    assert POLICY.decide(steep, CONFIG).target_parallelism >= decision.target_parallelism


@pytest.mark.parametrize("reach", ["every", "scale-out"])
def test_a_scale_in_reads_a_climb_over_several_loops_only_where_every_decision_does(
    reach: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At 6 workers on the same ramp, the forecast flat at 35,000/s: a scale-in to 4 carries the forecast, but not the
    # climb over three loops compounded over its 240-s hold (6.0 % a loop over four loops: 44,160/s), which 5 does.
    monkeypatch.setattr(daedalus, "SUSTAINED_CLIMB_LOOPS", 3)
    monkeypatch.setattr(daedalus, "SUSTAINED_CLIMB_FOR", reach)
    base = plan(current=6, workload=35_000, forecast=35_000, downtime=22.0)
    ramp = dataclasses.replace(base, workload_previous=33_000.0, workload_climb_from=29_400.0)
    decision = POLICY.decide(ramp, CONFIG)
    assert decision.desired_parallelism == (5 if reach == "every" else 4)
    assert any("over the last 3 loops" in r for r in decision.reasons) == (reach == "every")
    assert any("climb compounded to 44,160/s" in r for r in decision.reasons) == (reach == "every")


@pytest.mark.parametrize(("grows", "climbs"), [(False, True), (True, False)])
def test_a_climb_over_several_loops_can_be_read_against_the_noise_grown_over_them(
    grows: bool, climbs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same ramp (+19 % over three loops) on a workload whose loop-to-loop noise is 5 %: three spreads of one loop's
    # (15 %) call it a climb; grown as a random walk's over three loops (5 % x 1.73 x 3 = 26 %) it is noise.
    monkeypatch.setattr(daedalus, "SUSTAINED_CLIMB_LOOPS", 3)
    monkeypatch.setattr(daedalus, "SUSTAINED_NOISE_GROWS", grows)
    assert (daedalus._climb(35_000.0, 33_000.0, 0.05, 29_400.0) is not None) == climbs
    assert daedalus._climb(35_000.0, 33_000.0, None, 29_400.0) == (29_400.0, 3)  # no noise known: the margin alone


@pytest.mark.parametrize("where", ["dear", "always"])
def test_a_climb_over_several_loops_is_read_where_a_rescale_is_dear_unless_told_everywhere(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where a rescale costs a second the next round resizes a scale-out short of a ramp, so by default only a restart's
    # decisions read the climb over several loops.
    monkeypatch.setattr(daedalus, "SUSTAINED_CLIMB_WHERE", where)
    for downtime, dear in ((22.0, True), (1.4, False)):
        ramp = dataclasses.replace(
            plan(current=3, workload=35_000, forecast=35_000, downtime=downtime),
            workload_previous=33_000.0,
            workload_climb_from=29_400.0,
        )
        read = daedalus._climb_from_for(ramp, CONFIG, scale_in=False)
        assert read == (29_400.0 if dear or where == "always" else None)
