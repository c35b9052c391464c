"""The per-operator policies over a trace on the operator-DAG testbed (lab.dag_replay) and its place in evaluate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lab.dag_replay import DAG_REPLAY_POLICIES, DagReplay, DagReplaySettings, replay_all, sample_profiles, vertex_inputs
from lab.evaluate import dag_replay_policies
from lab.report import render_report
from planner.types import PlannerConfig
from simulator.dag import DagTestbed
from simulator.trace import Trace

STEP = Trace("step", np.array([0.0, 600.0, 660.0, 1800.0]), np.array([40_000.0, 40_000.0, 90_000.0, 90_000.0]))
"""Twenty minutes: 40 000/s for ten minutes, a ramp to 90 000/s, then flat."""


def test_carried_backlog_keeps_the_testbed_accounting_exact() -> None:
    run = DagTestbed().deploy((2, 4, 1), 256.0)
    run.carry_backlog(50_000)
    run.set_rate(30_000)
    run.advance(30)
    assert run.accounting.lost == 0 and run.accounting.produced >= 50_000
    with pytest.raises(ValueError):
        run.carry_backlog(-1)


def test_vertex_inputs_carry_ds2_rates_and_the_window_cache() -> None:
    testbed = DagTestbed()
    run = testbed.deploy((2, 4, 1), 128.0)
    run.set_rate(40_000)
    run.advance(60)
    vertices = vertex_inputs(testbed, run.measure(30), 128.0, PlannerConfig(1, 24, 300))
    assert [v.upstream for v in vertices] == [(), ("map-filter",), ("window-aggregate",)]
    window = vertices[1].metrics
    assert window is not None and window.stateful and window.cache_hit_rate is not None and window.cache_hit_rate < 1
    assert window.true_rate_per_subtask is not None and window.true_rate_per_subtask > 0


def test_qescalor_samples_grow_with_memory_on_the_testbed() -> None:
    samples = sample_profiles(DagTestbed(), levels=(0, 2))
    assert samples[0].memory_mb == 128.0 and samples[1].memory_mb == 512.0
    assert samples[1].performance > samples[0].performance


@pytest.fixture(scope="module")
def replays() -> dict[str, dict[str, object]]:
    settings = DagReplaySettings(
        hours=None,
        failures_per_hour=0.0,
        grace_period_s=60.0,
        recent_rescale_window_s=120.0,
        scale_down_stabilization_s=120.0,
    )
    return {r.policy: r.summary for r in replay_all(STEP, list(DAG_REPLAY_POLICIES), settings)}


def test_every_policy_replays_the_step_without_losing_records(replays: dict[str, dict[str, object]]) -> None:
    for policy, summary in replays.items():
        assert summary["records_lost"] == 0, policy
        assert summary["duration_s"] == 1800 and summary["failures"] == 0
        assert summary["rescales"] >= 1, policy  # the step needs more than the initial 4 per vertex


def test_per_operator_daedalus_needs_fewer_slots_than_whole_job_daedalus(replays: dict[str, dict[str, object]]) -> None:
    whole, per_vertex = replays["daedalus"], replays["daedalus-per-operator"]
    assert per_vertex["slot_hours"] < 0.7 * whole["slot_hours"]  # type: ignore[operator]
    # On this short step the per-vertex ladder may scale the window in one subtask too far once: DS2's rates,
    # measured where each window task holds less state, overestimate a task that spills more (one miss here).
    assert per_vertex["slo_misses"] <= whole["slo_misses"] + 1  # type: ignore[operator]
    final = per_vertex["final_parallelism"]
    assert final["window-aggregate"] > final["map-filter"] >= final["sink"]  # type: ignore[index]
    assert len(set(whole["final_parallelism"].values())) == 1  # type: ignore[attr-defined]


def test_justin_raises_memory_and_the_replay_is_deterministic(replays: dict[str, dict[str, object]]) -> None:
    assert replays["justin"]["final_slot_memory_mb"] > 128.0  # type: ignore[operator]
    again = DagReplay(STEP, "ds2", DagReplaySettings(hours=None, failures_per_hour=0.0)).run().summary
    first = DagReplay(STEP, "ds2", DagReplaySettings(hours=None, failures_per_hour=0.0)).run().summary
    assert again == first


def test_the_same_failures_hit_every_policy() -> None:
    settings = DagReplaySettings(hours=None, failures_per_hour=6.0)
    a = DagReplay(STEP, "ds2", settings).failure_times(1800)
    b = DagReplay(STEP, "justin", settings).failure_times(1800)
    assert a == b and a


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["daedalus", "ds2"], []),  # no per-operator policy named: no testbed replay
        (["justin"], ["daedalus", "justin"]),  # whole-job Daedalus always the baseline
        (["daedalus-per-operator", "ds2", "qescalor"], ["daedalus", "daedalus-per-operator", "ds2", "qescalor"]),
    ],
)
def test_which_policies_the_evaluation_replays_on_the_testbed(names: list[str], expected: list[str]) -> None:
    assert dag_replay_policies(names) == expected


def test_the_report_has_the_testbed_table(replays: dict[str, dict[str, object]], tmp_path: Path) -> None:
    summary = {"traces": {}, "policies": {}, "dag_replay": {"step": replays}}
    text = render_report(summary, hours=None, failures_per_hour=0.0, seed=7, target_recovery_time_s=300.0)
    assert "## Operator-DAG testbed: per-operator policies over the traces" in text
    assert "| step | daedalus-per-operator |" in text and "| step | daedalus | " in text
