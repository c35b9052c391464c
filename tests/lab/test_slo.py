"""The SLO judgement on hand-made series: episodes, misses, cut-short episodes, kinds."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.slo import Episode, KindCounts, Stop, judge, stops_from

RATE = 100.0
"""Records arriving every second in these cases: the job is behind when its lag exceeds 100."""


def lag_of(pattern: str) -> np.ndarray:
    """``#`` a second behind (lag 250), ``+`` a second with lag but not behind (lag 80), ``.`` caught up."""
    return np.array([{"#": 250.0, "+": 80.0, ".": 0.0}[c] for c in pattern])


@dataclass(frozen=True)
class Case:
    pattern: str
    expected: list[tuple[str, int, int | None, int]]
    """(kind, start, end, length) of every episode."""
    stops: list[Stop] = field(default_factory=list)
    target: float = 3.0
    misses: int = 0
    over: float = 0.0
    cut_short: int = 0


CASES = {
    # Never behind and never stopped: nothing to judge.
    "quiet": Case("..++..+.", []),
    # Behind for two seconds while running: an overload episode within the target.
    "short overload": Case("..##....", [("overload", 2, 4, 2)]),
    # Behind for five seconds: one miss, two seconds over the three-second target.
    "long overload": Case("..#####..", [("overload", 2, 7, 5)], misses=1, over=2.0),
    # A rescale whose backlog is gone the second the job resumes.
    "quick rescale": Case("..##....", [("rescale", 2, 4, 2)], [Stop("rescale", 2, 4)]),
    # Down for three seconds without ever being behind: the episode still lasts until the resume.
    "downtime alone": Case("..+++...", [("rescale", 2, 5, 3)], [Stop("rescale", 2, 5)]),
    # Resumed at 4 but behind until 8: judged on the catch-up, not the resume.
    "slow recovery": Case("..######..", [("failure", 2, 8, 6)], [Stop("failure", 2, 4)], misses=1, over=3.0),
    # A rescale inside an overload episode extends it until the job is caught up after the resume.
    "stop inside overload": Case(".####.....", [("overload", 1, 7, 6)], [Stop("rescale", 3, 7)], misses=1, over=3.0),
    # A stop in the very second the job would have caught up extends the episode too.
    "stop at the catch-up second": Case(
        "..##+.....", [("overload", 2, 6, 4)], [Stop("rescale", 4, 6)], misses=1, over=1.0
    ),
    # A failure during a rescale's recovery: one rescale episode with two stops.
    "failure during recovery": Case(
        ".#######..", [("rescale", 1, 8, 7)], [Stop("rescale", 1, 3), Stop("failure", 5, 6)], target=10.0
    ),
    # Two overloads with a caught-up second between them are two episodes.
    "two episodes": Case("##...###..", [("overload", 0, 2, 2), ("overload", 5, 8, 3)], target=2.0, misses=1, over=1.0),
    # Still behind when the series ends, and not yet for longer than the target: not judged.
    "cut short, not judged": Case("......##", [("overload", 6, None, 2)], cut_short=1),
    # Still behind at the end, already longer than the target: a miss.
    "cut short, missed": Case("...#####", [("overload", 3, None, 5)], misses=1, over=2.0),
    # Still down at the end of the series (no resume yet): cut short.
    "down at the end": Case(".....+++", [("failure", 5, None, 3)], [Stop("failure", 5, None)], cut_short=1),
    # A stop after the last second is not part of this series.
    "stop after the end": Case("....", [], [Stop("rescale", 4, 6)]),
    # A lag of exactly one second of input is not behind.
    "lag equal to the input": Case("..", []),
}


@pytest.mark.parametrize("name", list(CASES))
def test_judgement_of_hand_made_series(name: str) -> None:
    case = CASES[name]
    lag = lag_of(case.pattern)
    if name == "lag equal to the input":
        lag = np.full(2, RATE)
    verdict = judge(lag, np.full(len(lag), RATE), case.stops, target_recovery_time_s=case.target)
    assert [(e.kind, e.start_s, e.end_s, e.length_s) for e in verdict.episodes] == case.expected
    assert verdict.misses == case.misses
    assert verdict.seconds_over_target == case.over
    assert verdict.cut_short == case.cut_short


def test_with_no_input_one_record_of_lag_is_tolerated() -> None:
    # Workload 0: the threshold is one record, so a lag of 1 is fine and a lag of 2 is behind.
    verdict = judge(np.array([1.0, 2.0, 2.0, 0.0]), np.zeros(4), [], target_recovery_time_s=1)
    assert [(e.start_s, e.end_s) for e in verdict.episodes] == [(1, 3)]
    assert verdict.misses == 1


def test_counts_per_kind_and_the_longest_episode() -> None:
    lag = lag_of("#..####.........##########.....##")
    stops = [Stop("rescale", 3, 5), Stop("failure", 10, 12), Stop("rescale", 16, 17)]
    verdict = judge(lag, np.full(len(lag), RATE), stops, target_recovery_time_s=3)
    kinds = [(e.kind, e.length_s) for e in verdict.episodes]
    assert kinds == [("overload", 1), ("rescale", 4), ("failure", 2), ("rescale", 10), ("overload", 2)]
    assert verdict.episodes_by_kind == KindCounts(rescale=2, failure=1, overload=1)  # the last is cut short
    assert verdict.misses_by_kind == KindCounts(rescale=2)
    assert verdict.longest_episode_s == 10
    assert verdict.to_summary()["slo_misses"] == 2
    assert verdict.to_summary()["slo_seconds_over_target"] == 1.0 + 7.0
    missed = verdict.to_summary()["slo_missed_episodes"]
    assert [(e["kind"], e["start_s"], e["end_s"], e["length_s"]) for e in missed] == [
        ("rescale", 3, 7, 4),
        ("rescale", 16, 26, 10),
    ]


def test_a_restart_becomes_a_stop() -> None:
    @dataclass(frozen=True)
    class Restart:
        kind: str
        start_s: int
        downtime_s: int

    assert Stop.from_restart(Restart("failure", 10, 12)) == Stop("failure", 10, 22)
    assert Stop.from_restart(Restart("rescale", 10, 12), resumed=False) == Stop("rescale", 10, None)
    assert stops_from([Restart("failure", 10, 12)], Restart("rescale", 40, 9)) == (
        Stop("failure", 10, 22),
        Stop("rescale", 40, None),
    )
    assert stops_from([]) == ()


def reference(lag: np.ndarray, workload: np.ndarray, stops: list[Stop], target: float) -> list[Episode]:
    """The judgement as a second-by-second automaton (the form the optimal planner runs incrementally)."""
    by_second = {s.start_s: s for s in stops}
    episodes: list[Episode] = []
    current: tuple[str, int, int, int, int] | None = None  # kind, start, earliest end, stops, falling behind
    down_until = -1
    for t in range(len(lag)):
        stop = by_second.get(t)
        if stop is not None:
            resume = len(lag) if stop.resume_s is None else stop.resume_s
            down_until = max(down_until, resume)
            if current is None:
                current = (stop.kind, t, max(t + 1, resume), 1, 0)
            else:
                kind, start, earliest, count, falling = current
                current = (kind, start, max(earliest, resume), count + 1, falling)
        is_behind = lag[t] > max(workload[t], 1.0)
        if current is not None and t >= current[2] and not is_behind:
            episodes.append(Episode(current[0], current[1], t, t - current[1], current[3], current[4]))  # type: ignore[arg-type]
            current = None
        elif current is None and is_behind:
            current = ("overload", t, t + 1, 0, 0)
        # Running (past every downtime), behind, and the lag grew over the second: falling further behind.
        if current is not None and t >= down_until and is_behind and t > 0 and lag[t] > lag[t - 1]:
            current = (*current[:4], current[4] + 1)
    if current is not None:
        episodes.append(Episode(current[0], current[1], None, len(lag) - current[1], current[3], current[4]))  # type: ignore[arg-type]
    return episodes


@st.composite
def replays(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, list[Stop]]:
    length = draw(st.integers(1, 60))
    lag = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 50.0, 150.0]), min_size=length, max_size=length)))
    workload = np.array(draw(st.lists(st.sampled_from([0.0, 100.0]), min_size=length, max_size=length)))
    starts = sorted(draw(st.sets(st.integers(0, length + 3), max_size=5)))
    stops = [
        Stop(draw(st.sampled_from(["rescale", "failure"])), s, draw(st.one_of(st.none(), st.integers(s + 1, s + 15))))
        for s in starts
    ]
    return lag, workload, stops


@given(replays(), st.sampled_from([0.0, 2.0, 5.0]))
def test_judge_agrees_with_the_second_by_second_automaton(
    replay: tuple[np.ndarray, np.ndarray, list[Stop]], target: float
) -> None:
    lag, workload, stops = replay
    # A stop that never resumes must be the last one (the job cannot stop again while down).
    stops = [s for i, s in enumerate(stops) if s.resume_s is not None or i == len(stops) - 1]
    stops = [s for i, s in enumerate(stops) if i == 0 or (stops[i - 1].resume_s or 10**9) <= s.start_s]
    verdict = judge(lag, workload, stops, target_recovery_time_s=target)
    assert list(verdict.episodes) == reference(lag, workload, stops, target)


# ------------------------------------------------------------------ falling further behind

FALLING = [
    # (lag after each second, stops, allowance, misses): workload 100/s, target 100 s (never reached here).
    # Behind and growing for 3 running seconds, allowance 2: under-provisioned, a miss.
    ([0, 150, 200, 250, 300, 0], [], 2.0, 1),
    # The same growth inside a stop's downtime does not count (nothing is read while down).
    ([0, 150, 200, 250, 300, 0], [Stop("rescale", 1, 5)], 2.0, 0),
    # After the resume the backlog shrinks: a recovery, not falling behind.
    ([0, 500, 900, 700, 400, 0], [Stop("failure", 1, 3)], 2.0, 0),
    # Growth while caught up (under one second of input) is no episode at all.
    ([0, 10, 20, 30, 40, 50], [], 0.0, 0),
    # Growth within the allowance: no miss.
    ([0, 150, 200, 250, 0, 0], [], 3.0, 0),
]


@pytest.mark.parametrize(("lag", "stops", "allowance", "misses"), FALLING)
def test_an_episode_in_which_the_running_job_keeps_falling_behind_is_a_miss(
    lag: list[float], stops: list[Stop], allowance: float, misses: int
) -> None:
    verdict = judge(
        np.array(lag, dtype=float),
        np.full(len(lag), 100.0),
        stops,
        target_recovery_time_s=100.0,
        falling_behind_allowance_s=allowance,
    )
    assert verdict.misses == misses
