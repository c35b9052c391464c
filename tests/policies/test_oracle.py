"""The oracle: true recovery time by hand and the smallest sufficient scale-out."""

from __future__ import annotations

import math

import numpy as np

from lab.oracle import true_recovery_time
from planner import OraclePolicy
from planner.oracle import oracle_lookahead_s
from tests.policies.conftest import CONFIG, snapshot


def test_true_recovery_time_by_hand() -> None:
    # 10 records/s arrive, 20/s can be processed. Stop for 5 s with 50 records to replay:
    # backlog 0 + 50 + 5 * 10 = 100 at restart, shrinking by 10/s until it is down to one
    # second of input (10): 9 s after the restart, 14 s after the stop.
    future = np.full(100, 10.0)
    assert true_recovery_time(future=future, capacity=20.0, downtime_s=5, lag_now=0.0, replay_records=50) == 14.0


def test_true_recovery_never_ends_without_spare_capacity() -> None:
    future = np.full(100, 10.0)
    assert math.isinf(true_recovery_time(future=future, capacity=10.0, downtime_s=5, lag_now=0, replay_records=50))


def _future(base: float, peak: float, at: int, length: int = 900) -> np.ndarray:
    values = np.full(length, base)
    values[at] = peak
    return values


def test_oracle_carries_the_true_peak_within_its_lookahead() -> None:
    assert oracle_lookahead_s(CONFIG) == 120 + 300  # the grace period, then the target
    capacities = {n: 10_000.0 * n for n in range(1, 17)}
    recovery = {n: 100.0 for n in range(1, 17)}
    # A 35k peak 300 s ahead needs 4 workers (40k); one 600 s ahead is past the lookahead: 3 suffice.
    near = snapshot(current=8, forecast=_future(25_000, 35_000, 300), capacities=capacities, recovery_times=recovery)
    far = snapshot(current=8, forecast=_future(25_000, 35_000, 600), capacities=capacities, recovery_times=recovery)
    assert OraclePolicy().decide(near, CONFIG).target_parallelism == 4
    assert OraclePolicy().decide(far, CONFIG).target_parallelism == 3


def test_oracle_skips_scale_outs_that_recover_too_slowly() -> None:
    capacities = {n: 10_000.0 * n for n in range(1, 17)}
    recovery = {n: (400.0 if n < 6 else 120.0) for n in range(1, 17)}
    plan = snapshot(current=8, forecast=np.full(900, 25_000.0), capacities=capacities, recovery_times=recovery)
    decision = OraclePolicy().decide(plan, CONFIG)
    assert decision.target_parallelism == 6
    assert any("recovery 400 s > target 300 s" in reason for reason in decision.reasons)


def test_oracle_scales_in_at_once_but_not_in_the_grace_period() -> None:
    capacities = {n: 10_000.0 * n for n in range(1, 17)}
    recovery = {n: 100.0 for n in range(1, 17)}
    plan = snapshot(current=8, forecast=np.full(900, 15_000.0), capacities=capacities, recovery_times=recovery)
    assert OraclePolicy().decide(plan, CONFIG).target_parallelism == 2
    held = snapshot(
        current=8,
        forecast=np.full(900, 15_000.0),
        capacities=capacities,
        recovery_times=recovery,
        last_rescale_at=10_000.0 - 60,
    )
    assert OraclePolicy().decide(held, CONFIG).target_parallelism == 8


def test_an_oracle_replay_rescales_without_a_failed_step(tmp_path) -> None:
    # The loop hands every analyzer the scaler's measured downtime after a rescale; the oracle's
    # analyzer once lacked the argument and every rescale round ended in a failed execute step.
    from lab.replay import replay
    from lab.settings import load_lab_settings
    from simulator import load_trace

    path = tmp_path / "step.csv"
    path.write_text("time_s,rate\n0,20000\n599,20000\n600,60000\n1800,60000\n")
    settings = load_lab_settings(None, {"policy": "oracle", "telemetry.log_level": "error"})
    result = replay(load_trace(path), settings, hours=0.5)
    assert result.summary["rescales"] >= 1
    assert [r.skipped for r in result.rounds if r.skipped and "failed" in r.skipped] == []
