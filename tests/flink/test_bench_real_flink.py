"""The real-Flink benchmark's settings per policy (no cluster: what ``perdix run`` is given)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from agent.loop import policy_for
from agent.settings import Settings
from benchmarks.bench_real_flink import Setup, failure_ready_slot_seconds, ideal_slot_seconds


def setup(compress: float) -> Setup:
    return Setup(Path("traces/taylor.csv"), compress, 10.0, 4, 1000.0, 12, 1.0, 7, 1.0, {1: 1000.0})


def test_the_flink_autoscaler_runs_compressed_like_the_agent() -> None:
    knobs = setup(15.0).policy_knobs("flink-autoscaler")
    settings = Settings(policy="flink-autoscaler", **knobs)
    options = policy_for(settings).core.settings  # type: ignore[attr-defined]
    # Its windows, delays and thresholds, and its 15-s reconcile, are 15 times shorter, like Perdix's own.
    assert options.metrics_window_s == 60 and options.stabilization_s == 20 and options.scale_down_interval_s == 240
    assert options.catch_up_duration_s == 120 and options.restart_time_s == 20
    assert options.backlog_processing_lag_threshold_s == 20 and options.observed_tpr_lag_threshold_s == 2
    assert settings.loop_interval_s == 1.0 and settings.target_recovery_time_s == 20


def test_other_policies_get_the_agents_time_constants_only() -> None:
    knobs = setup(10.0).policy_knobs("daedalus")
    assert "flink_autoscaler" not in knobs
    assert knobs == setup(10.0).time_knobs() and knobs["loop_interval_s"] == 3.0  # the flink-rest target's 30 s


def test_a_loop_of_its_own_is_compressed_like_the_default_one_and_leaves_the_others() -> None:
    shipped = setup(6.0)
    sixty = Setup(Path("traces/taylor.csv"), 6.0, 10.0, 4, 1000.0, 12, 1.0, 7, 1.0, {1: 1000.0}, 60.0)
    assert shipped.time_knobs()["loop_interval_s"] == 5.0 and sixty.time_knobs()["loop_interval_s"] == 10.0
    assert {k: v for k, v in sixty.time_knobs().items() if k != "loop_interval_s"} == {
        k: v for k, v in shipped.time_knobs().items() if k != "loop_interval_s"
    }


def test_the_failure_ready_ideal_adds_a_slot_where_the_spare_capacity_cannot_work_off_a_failure() -> None:
    # Capacities in steps of the replay's peak: a slot more carries a peak with 1 % to spare, which would take far
    # longer than the target (50 s at 6x) to work off a failure's backlog; three times the peak recovers at once.
    base = Setup(Path("traces/taylor.csv"), 6.0, 5.0, 3, 1000.0, 12, 1.0, 7, 0.03, {1: 1.0})
    peak = float(base.workload().max())
    tight = replace(base, capacities={1: 0.5 * peak, 2: 1.01 * peak, 3: 3.0 * peak})
    ideal, slots = ideal_slot_seconds(tight)
    ready, ready_slots = failure_ready_slot_seconds(tight)
    assert np.all(ready_slots >= slots) and ready > ideal
    at_peak = int(np.argmax(tight.workload()))
    assert slots[at_peak] == 2 and ready_slots[at_peak] == 3
    roomy = replace(base, capacities={1: 3.0 * peak, 2: 6.0 * peak})
    assert failure_ready_slot_seconds(roomy)[0] == ideal_slot_seconds(roomy)[0] == roomy.production_s


def test_a_bad_trace_or_capacities_file_exits_2_before_any_cluster_starts(tmp_path: Path) -> None:
    caps = tmp_path / "capacities.json"
    caps.write_text('{"capacity": 3}')
    for args, named in (
        (["--trace", str(tmp_path / "missing.csv")], "--trace"),
        (["--trace", "traces/taylor.csv", "--capacities", str(caps)], f"--capacities {caps}"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_real_flink", *args, "--out", str(tmp_path / "out")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert named in done.stderr.splitlines()[-1] and "cluster" not in done.stdout
