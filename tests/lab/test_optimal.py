"""The optimal offline schedule: an exact model of the simulator, the DP against brute force, faithfulness."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.optimal import (
    OptimalSettings,
    optimal_schedule,
    predict_schedules,
    replay_schedule,
)
from simulator import SimulatorSettings, Trace, failure_schedule, load_trace
from tests.conftest import TRACES


def trace_of(name: str, points: list[tuple[float, float]]) -> Trace:
    times, rates = zip(*points)
    return Trace(name, np.array(times, dtype=float), np.array(rates, dtype=float))


STEP = trace_of("step", [(0, 30_000), (900, 30_000), (960, 95_000), (2400, 95_000), (2460, 40_000), (3600, 40_000)])
RAMP = trace_of("ramp", [(0, 20_000), (1800, 110_000), (2700, 110_000), (3600, 30_000)])


# ------------------------------------------------------------------------------------ the model is exact


@st.composite
def replays(draw: st.DrawFn) -> tuple[Trace, SimulatorSettings, list[tuple[int, int]], list[int]]:
    points = draw(st.integers(2, 5))
    rates = draw(st.lists(st.floats(0, 60_000), min_size=points, max_size=points))
    gaps = draw(st.lists(st.integers(20, 300), min_size=points - 1, max_size=points - 1))
    times = np.concatenate([[0.0], np.cumsum(gaps)]).astype(float)
    partitions = draw(st.integers(1, 14))
    settings = SimulatorSettings(
        partitions=partitions,
        partition_skew=draw(st.floats(0, 1.5)),
        worker_capacity_rps=draw(st.floats(500, 20_000)),
        checkpoint_interval_s=draw(st.integers(1, 25)),
        initial_parallelism=draw(st.integers(1, partitions)),
        seed=draw(st.integers(0, 2**16)),
        workload_noise=draw(st.floats(0, 0.2)),
        capacity_noise=draw(st.floats(0, 0.05)),
        downtime_jitter=draw(st.floats(0, 0.5)),
        rescale_downtime_base_s=draw(st.floats(0, 40)),
        failure_downtime_base_s=draw(st.floats(0, 20)),
        rescale_aligned=draw(st.booleans()),
    )
    seconds = 400
    asks = draw(st.lists(st.tuples(st.integers(1, seconds - 1), st.integers(1, partitions)), max_size=8))
    failures = draw(st.lists(st.integers(0, seconds - 1), max_size=4))
    schedule = sorted(dict(asks).items())
    return Trace("random", times, np.array(rates)), settings, schedule, failures


@given(replays())
def test_the_model_steps_every_schedule_exactly_as_the_simulated_job(
    replay: tuple[Trace, SimulatorSettings, list[tuple[int, int]], list[int]],
) -> None:
    trace, settings, schedule, failures = replay
    duration = min(400, int(trace.duration_s))
    schedule = [(t, n) for t, n in schedule if t < duration]
    (run,) = predict_schedules(
        trace, settings, [schedule], duration_s=duration, failures=failures, target_recovery_time_s=60
    )
    real = replay_schedule(trace, settings, schedule, duration_s=duration, failures=failures)
    # Every second's lag to the record, the same stops, the same score.
    assert np.array_equal(run.lag, real.window.lag)
    assert np.array_equal(run.workload, real.window.workload)
    assert run.stops == real.stops
    assert run.objective == real.objective(60)
    assert run.judge(60) == real.judge(60)


# ------------------------------------------------------------------------------------ DP vs brute force


@dataclass(frozen=True)
class BruteCase:
    trace: Trace
    loops: int
    scale_outs: tuple[int, int, int]
    failures: tuple[int, ...] = ()
    target_s: float = 120.0


SMALL = SimulatorSettings(partitions=12, initial_parallelism=4, worker_capacity_rps=10_000, checkpoint_interval_s=10)
BRUTE_CASES = {
    # Load doubles mid-way: stay small and run short, or pay a rescale to carry it.
    "step up": BruteCase(
        trace_of("up", [(0, 25_000), (200, 25_000), (230, 60_000), (600, 60_000)]), loops=8, scale_outs=(3, 5, 8)
    ),
    # Load halves: scaling in saves worker-seconds but costs a downtime.
    "step down": BruteCase(
        trace_of("down", [(0, 33_000), (240, 33_000), (260, 12_000), (600, 12_000)]), loops=8, scale_outs=(2, 4, 7)
    ),
    # A spike and two failures, one of them seconds before a boundary (the rescale then lands while down).
    "spike with failures": BruteCase(
        trace_of("spike", [(0, 20_000), (150, 20_000), (180, 70_000), (300, 70_000), (330, 25_000), (600, 25_000)]),
        loops=8,
        scale_outs=(2, 4, 8),
        failures=(175, 296),
        target_s=90.0,
    ),
    # A failure in the very second of a boundary: the rescale decided there comes first, then the failure.
    "failure at a boundary": BruteCase(
        trace_of("flat", [(0, 30_000), (600, 30_000)]),
        loops=8,
        scale_outs=(3, 4, 6),
        failures=(240, 420),
        target_s=60.0,
    ),
    # A ramp beyond what the middle choice carries, with a tight target.
    "ramp": BruteCase(trace_of("ramp", [(0, 10_000), (540, 80_000)]), loops=8, scale_outs=(2, 5, 9), target_s=60.0),
}


@pytest.mark.parametrize("aligned", [False, True], ids=["rescales replay", "rescales aligned"])
@pytest.mark.parametrize("name", list(BRUTE_CASES))
def test_the_dp_finds_the_lexicographic_minimum_of_every_schedule(name: str, aligned: bool) -> None:
    case = BRUTE_CASES[name]
    job = SMALL.model_copy(update={"rescale_aligned": aligned})
    interval = 60
    duration = (case.loops + 1) * interval
    boundaries = [interval * (k + 1) for k in range(case.loops)]
    schedules = [list(zip(boundaries, picks)) for picks in itertools.product(case.scale_outs, repeat=case.loops)]
    runs = predict_schedules(
        case.trace, job, schedules, duration_s=duration, failures=case.failures, target_recovery_time_s=case.target_s
    )
    verdicts = [run.judge(case.target_s) for run in runs]
    # The incremental score of the model is the judgement of its series, for every schedule.
    for run, verdict in zip(runs, verdicts):
        assert (run.objective.misses, run.objective.seconds_over_target) == (
            verdict.misses,
            verdict.seconds_over_target,
        )
    # The optimum is chosen as if an episode left open at the end (and not yet a miss) were one.
    keys = [
        (v.misses + v.cut_short, r.objective.seconds_over_target, r.objective.worker_seconds)
        for r, v in zip(runs, verdicts)
    ]
    best = min(range(len(runs)), key=keys.__getitem__)
    brute = runs[best].objective
    # Not a trivial minimum: some schedules miss more, and the optimum is not simply the cheapest.
    assert len({r.objective.misses for r in runs}) > 1
    assert brute.worker_seconds > min(r.objective.worker_seconds for r in runs)
    for exact in (False, True):
        settings = OptimalSettings(
            loop_interval_s=interval, scale_outs=case.scale_outs, target_recovery_time_s=case.target_s, exact=exact
        )
        found = optimal_schedule(case.trace, job, settings=settings, duration_s=duration, failures=case.failures)
        assert found.chosen_by.key() == keys[best], f"exact={exact}"
        assert found.predicted == brute, f"exact={exact}"
        assert (
            replay_schedule(case.trace, job, found.schedule, duration_s=duration, failures=case.failures).objective(
                case.target_s
            )
            == brute
        )


def test_a_schedule_held_to_a_minimum_is_the_least_of_the_schedules_at_or_above_it() -> None:
    """With the fewest workers allowed per second (a loop runs at no fewer than its highest), the DP finds the
    lexicographic minimum among the schedules that respect it, which costs more than the unconstrained one here."""
    case = BRUTE_CASES["step down"]
    interval, duration = 60, (case.loops + 1) * 60
    boundaries = [interval * (k + 1) for k in range(case.loops)]
    minimum = np.zeros(duration, dtype=np.int64)
    minimum[300:420] = 7  # two loops (from 300 s and 360 s) must run at 7 at least
    minimum[450] = 4  # one second of 4 holds the whole loop from 420 s
    allowed = [[n for n in case.scale_outs if n >= minimum[b : b + interval].max()] for b in boundaries]
    schedules = [list(zip(boundaries, picks)) for picks in itertools.product(*allowed)]
    runs = predict_schedules(case.trace, SMALL, schedules, duration_s=duration, target_recovery_time_s=case.target_s)
    verdicts = [run.judge(case.target_s) for run in runs]
    keys = [
        (v.misses + v.cut_short, r.objective.seconds_over_target, r.objective.worker_seconds)
        for r, v in zip(runs, verdicts)
    ]
    best = min(range(len(runs)), key=keys.__getitem__)
    settings = OptimalSettings(
        loop_interval_s=interval, scale_outs=case.scale_outs, target_recovery_time_s=case.target_s
    )
    free = optimal_schedule(case.trace, SMALL, settings=settings, duration_s=duration)
    held = optimal_schedule(case.trace, SMALL, settings=settings, duration_s=duration, minimum=minimum)
    assert held.predicted == runs[best].objective
    assert dict(held.schedule)[300] == dict(held.schedule)[360] == 7 and dict(held.schedule)[420] >= 4
    assert held.predicted.worker_seconds > free.predicted.worker_seconds
    replayed = replay_schedule(case.trace, SMALL, held.schedule, duration_s=duration)
    assert replayed.objective(case.target_s) == held.predicted


def test_a_minimum_between_or_above_the_choices_holds_the_schedule_at_the_next_choice_up() -> None:
    """The fewest workers allowed is rounded up to a choice: 5 among (2, 4, 7) is 7, and a minimum above every
    choice holds the largest."""
    case = BRUTE_CASES["step down"]
    interval, duration = 60, (case.loops + 1) * 60
    settings = OptimalSettings(
        loop_interval_s=interval, scale_outs=case.scale_outs, target_recovery_time_s=case.target_s
    )
    minimum = np.zeros(duration, dtype=np.int64)
    minimum[120:240] = 5
    minimum[420:] = 99
    held = optimal_schedule(case.trace, SMALL, settings=settings, duration_s=duration, minimum=minimum)
    chosen = dict(held.schedule)
    assert chosen[120] == chosen[180] == 7
    assert all(n == 7 for t, n in chosen.items() if t >= 420)
    assert set(chosen.values()) <= set(case.scale_outs) | {SMALL.initial_parallelism}


def SMALL_TRACE(case: BruteCase) -> Trace:
    return case.trace


# ------------------------------------------------------------------------------------ faithfulness


FAITHFUL_CASES = {
    # The shipped traces, first hour and first two hours, with Poisson failures (1/h, fixed seed).
    "bank_calls 1 h": ("bank_calls", 1.0, 1.0),
    "taylor 1 h": ("taylor", 1.0, 1.0),
    "bank_calls 2 h": ("bank_calls", 2.0, 2.0),
    # Hand-made: a step up and back down, and a ramp to near the largest scale-out's capacity.
    "step": ("step", 1.0, 2.0),
    "ramp": ("ramp", 1.0, 2.0),
}


def load(name: str) -> Trace:
    return {"step": STEP, "ramp": RAMP}.get(name) or load_trace(TRACES / f"{name}.csv")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if "2 h" in n else n for n in FAITHFUL_CASES])
def test_the_replayed_schedule_scores_exactly_what_the_dp_predicts(name: str) -> None:
    trace_name, hours, failures_per_hour = FAITHFUL_CASES[name]
    trace = load(trace_name)
    simulator = SimulatorSettings()
    found = optimal_schedule(trace, simulator, hours=hours, failures_per_hour=failures_per_hour)
    assert found.failures == tuple(failure_schedule(found.duration_s, failures_per_hour, simulator.seed))
    replayed = replay_schedule(trace, simulator, found.schedule, hours=hours, failures_per_hour=failures_per_hour)
    assert replayed.objective(300.0) == found.predicted
    assert replayed.worker_hours == pytest.approx(found.predicted.worker_hours, abs=0)
    assert replayed.accounting.lost == 0
    # Never worse than the simple schedules the DP prunes with.
    assert found.chosen_by.key() <= found.statistics.simple_schedule_score.key()
    assert found.chosen_by.key() >= found.predicted.key()


def test_the_schedule_decides_at_every_loop_boundary_within_the_range() -> None:
    settings = OptimalSettings(min_parallelism=3, max_parallelism=9)
    found = optimal_schedule(STEP, SimulatorSettings(), settings=settings, hours=0.5)
    assert [second for second, _ in found.schedule] == list(range(0, 1800, 60))
    assert found.schedule[0] == (0, SimulatorSettings().initial_parallelism)  # before the first decision
    assert all(3 <= n <= 9 for _, n in found.schedule[1:])
    changes = [(t, n) for (t, n), (_, before) in zip(found.schedule[1:], found.schedule) if n != before]
    assert found.rescales == tuple(changes)
    assert found.to_dict()["predicted_worker_hours"] == round(found.predicted.worker_hours, 3)


def test_the_choices_stop_at_the_partition_count() -> None:
    assert OptimalSettings(max_parallelism=16).choices(partitions=12) == tuple(range(1, 13))
    assert OptimalSettings(scale_outs=(4, 2)).choices(partitions=12) == (2, 4)
    with pytest.raises(ValueError, match="outside"):
        OptimalSettings(scale_outs=(13,)).choices(partitions=12)
