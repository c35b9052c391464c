"""Where Daedalus's worker-hours above the failure-robust floor go (``benchmarks.bench_excess``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.loop import RoundResult
from benchmarks.bench_excess import refused_by, STATES, excess, state_of
from lab.corpus import CorpusTrace
from planner.types import Decision, ReasonCode, decided, keep


@pytest.mark.parametrize(
    ("decision", "state"),
    [
        (keep(9, ReasonCode.GRACE, "in the grace period"), "guard: grace"),
        (keep(9, ReasonCode.RECOVERING, "recovering"), "guard: recovering"),
        (keep(9, ReasonCode.UNKNOWN_DATA, "workload unknown"), "guard: other"),
        (decided(9, 9, 7, ["7: carries the peak"]), "stabilizing"),
        (decided(9, 8, 7, ["7: carries the peak"]), "stabilizing"),
        (decided(9, 7, 7, ["7: carries the peak"]), "scale in"),
        (decided(9, 12, 12, ["12: carries the peak"]), "scale out"),
        (decided(9, 9, 9, ["8: recovery 320 s > target 300 s", "9: current scale-out qualifies"]), "keep: search"),
        (
            keep(9, ReasonCode.KEEP, "rescaled recently and 9 still carries the average", acted=True),
            "keep: recent rescale",
        ),
        (Decision.whole_job(14, 14, ("no scale-out meets the target",), ReasonCode.NO_CANDIDATE), "no candidate"),
        (None, "guard: other"),
    ],
)
def test_each_round_is_put_under_what_it_left_the_job_in(decision: Decision | None, state: str) -> None:
    assert state in STATES
    assert state_of(RoundResult(now=60.0, decision=decision)) == state


@pytest.mark.parametrize(
    ("reasons", "check"),
    [
        (
            (
                "7: the workload 30,000/s climbed from 20,000/s over the loop before: no scale-in on a rising workload",
                "8: current scale-out qualifies (recovery 40 s)",
            ),
            "rising: climbed",
        ),
        (("7: capacity 70,000/s < the forecast peak 72,000/s of its 180 s hold",), "hold peak"),
        (("7: recovery 420 s > target 300 s",), "recovery"),
        (("7: saves 10 worker-s over 10 s, not more than its rescale cost (12 worker-s)",), "unpaid"),
        (("8: current scale-out qualifies (recovery 40 s)",), "at the minimum"),
    ],
)
def test_a_kept_round_is_put_under_the_check_that_refused_one_worker_fewer(
    reasons: tuple[str, ...], check: str
) -> None:
    decision = Decision.whole_job(8, 8, reasons, ReasonCode.KEEP, acted=True)
    assert refused_by(RoundResult(now=60.0, decision=decision)) == check


def test_the_states_share_out_every_worker_hour_above_the_floor(tmp_path: Path) -> None:
    """An hour of a workload that halves after 20 minutes: the states add up to Daedalus's worker-hours less
    the floor's, the fall is met by a wait in the stabilization window, and only the first loop has no round."""
    path = tmp_path / "fall.csv"
    path.write_text("time_s,rate\n0,90000\n1199,90000\n1200,40000\n3600,40000\n")
    name, used, floor, by_state, by_check = excess(CorpusTrace("fall", "steps", "dev", path, "test", "test"), 1.0, None)
    assert name == "fall" and used > floor > 0
    assert sum(by_state.values()) == pytest.approx(used - floor, abs=1e-9)
    assert sum(by_check.values()) == pytest.approx(by_state["keep: search"], abs=1e-9)
    assert by_state["stabilizing"] > 0, by_state
    assert abs(by_state["before the first round"]) <= 60 * 16 / 3600
