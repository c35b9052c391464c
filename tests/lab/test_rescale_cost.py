"""The lab's rescale-cost profiles: what a rescale of the simulated job costs, selectable by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from lab.settings import RESCALE_COSTS, load_lab_settings, rescale_cost_of, rescale_cost_overrides
from simulator import SimulatedFlinkJob, load_trace
from tests.conftest import TRACES


def test_the_in_place_profile_prices_a_rescale_as_flinks_in_place_path() -> None:
    settings = load_lab_settings(None, rescale_cost_overrides("in-place"))
    assert settings.simulator.rescale_downtime_base_s == 1.0
    assert settings.simulator.rescale_downtime_per_worker_s == 0.05
    assert settings.downtime_rescale_prior_s == 2.0
    job = SimulatedFlinkJob(load_trace(TRACES / "bank_calls.csv"), settings.simulator)
    assert job.environment.mean_downtime_s("rescale", 14, 10) == pytest.approx(1.7)
    assert (
        job.environment.mean_downtime_s("failure", 14, 14)
        == load_lab_settings().simulator.failure_downtime_base_s + 0.5 * 14
    )


def test_the_restart_profile_is_the_lab_default_and_none_changes_nothing() -> None:
    assert load_lab_settings(None, rescale_cost_overrides("restart")) == load_lab_settings()
    assert rescale_cost_overrides(None) == {}
    assert set(RESCALE_COSTS) == {"restart", "in-place", "in-place-aligned"}


def test_an_unknown_profile_is_refused_with_one_line_naming_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="known: restart, in-place, in-place-aligned"):
        rescale_cost_overrides("free")
    result = CliRunner().invoke(
        app, ["simulate", "--trace", str(TRACES / "bank_calls.csv"), "--rescale-cost", "free", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert (
        result.output.strip()
        == "perdix: error: --rescale-cost: unknown rescale cost 'free'; known: restart, in-place, in-place-aligned"
    )


def _stopped_mid_interval(profile: str, kind: str) -> SimulatedFlinkJob:
    """The bank_calls job under ``profile``, stopped by a ``kind`` five seconds after a checkpoint, then run on
    for 95 s (it resumes and catches up)."""
    settings = load_lab_settings(None, rescale_cost_overrides(profile))
    job = SimulatedFlinkJob(load_trace(TRACES / "bank_calls.csv"), settings.simulator)
    job.run_until(605)  # five seconds past the checkpoint at 600 s (one every 10 s of uptime)
    if kind == "rescale":
        assert job.rescale(job.parallelism + 2)
    else:
        assert job.fail()
    job.run_until(700)
    return job


def test_an_aligned_rescale_replays_nothing_and_loses_nothing() -> None:
    aligned = _stopped_mid_interval("in-place-aligned", "rescale")
    plain = _stopped_mid_interval("in-place", "rescale")
    (stop,) = [r for r in aligned.restarts if r.kind == "rescale"]
    (plain_stop,) = [r for r in plain.restarts if r.kind == "rescale"]
    assert stop.replayed_records == 0
    assert plain_stop.replayed_records > 0  # the same rescale unaligned replays since the last checkpoint
    for job in (aligned, plain):
        assert job.accounting.lost == 0
        assert job.accounting.committed <= job.accounting.effective_processed


def test_a_failure_replays_since_the_last_checkpoint_whatever_the_rescales() -> None:
    aligned = _stopped_mid_interval("in-place-aligned", "failure")
    (stop,) = [r for r in aligned.restarts if r.kind == "failure"]
    assert stop.replayed_records > 0


def test_the_agent_in_the_lab_knows_its_rescales_are_aligned() -> None:
    assert load_lab_settings(None, rescale_cost_overrides("in-place-aligned")).rescales_aligned
    assert not load_lab_settings(None, rescale_cost_overrides("in-place")).rescales_aligned
    assert not load_lab_settings().rescales_aligned


@pytest.mark.parametrize("profile", list(RESCALE_COSTS))
def test_the_settings_name_the_profile_they_describe(profile: str) -> None:
    cost = rescale_cost_of(load_lab_settings(None, rescale_cost_overrides(profile)))
    assert cost["profile"] == profile
    assert cost["downtime_base_s"] == RESCALE_COSTS[profile]["simulator.rescale_downtime_base_s"]
    assert cost["aligned"] is (profile == "in-place-aligned")


def test_settings_of_no_profile_are_custom_with_their_figures() -> None:
    cost = rescale_cost_of(load_lab_settings(None, {"simulator.rescale_downtime_base_s": 4.0}))
    assert cost == {
        "profile": "custom",
        "downtime_base_s": 4.0,
        "downtime_per_worker_s": 1.5,
        "aligned": False,
        "downtime_prior_s": load_lab_settings().downtime_rescale_prior_s,
    }


def test_an_evaluation_records_what_a_rescale_cost_in_its_summary_and_report(tmp_path: Path) -> None:
    """Two reports of one trace in two regimes are told apart by what they say, not by the command that ran."""
    trace = tmp_path / "flat.csv"
    trace.write_text("time_s,rate\n0,30000\n3600,30000\n")
    for profile in ("in-place-aligned", "restart"):
        out = tmp_path / profile
        result = CliRunner().invoke(
            app,
            ["evaluate", "--trace", str(trace), "--policies", "static", "--hours", "0.1", "--no-plots"]
            + ["--failures-per-hour", "0", "--rescale-cost", profile, "--out", str(out)],
        )
        assert result.exit_code == 0, result.output
        recorded = json.loads((out / "summary.json").read_text())["settings"]["rescale_cost"]
        assert recorded == rescale_cost_of(load_lab_settings(None, rescale_cost_overrides(profile)))
        assert f"(rescale cost `{profile}`" in (out / "report.md").read_text()
    assert "no replay (aligned with a checkpoint)" in (tmp_path / "in-place-aligned" / "report.md").read_text()
