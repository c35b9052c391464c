"""The lab's rescale-cost profiles: what a rescale of the simulated job costs, selectable by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from lab.settings import RESCALE_COSTS, load_lab_settings, rescale_cost_overrides
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
    assert set(RESCALE_COSTS) == {"restart", "in-place"}


def test_an_unknown_profile_is_refused_with_one_line_naming_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="known: restart, in-place"):
        rescale_cost_overrides("free")
    result = CliRunner().invoke(
        app, ["simulate", "--trace", str(TRACES / "bank_calls.csv"), "--rescale-cost", "free", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert (
        result.output.strip() == "perdix: error: --rescale-cost: unknown rescale cost 'free'; known: restart, in-place"
    )
