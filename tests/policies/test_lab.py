"""The policy lab end to end: oracle as lower bound, identical seeds, `perdix evaluate` outputs and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from lab.evaluate import EvaluateError, Pair, parse_policies, plan_pairs, run_pair, run_pairs
from lab.report import build_summary, savings_captured
from lab.settings import load_lab_settings

runner = CliRunner()
WALL_CLOCK_KEYS = {"loop_latency_p95_ms"}
"""Summary keys measured in wall time: the only ones two identical replays may disagree on."""


@pytest.fixture(scope="module")
def flat_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30,000 records/s for an hour: every policy can meet the target on it."""
    path = tmp_path_factory.mktemp("traces") / "flat.csv"
    path.write_text("time_s,rate\n0,30000\n3600,30000\n")
    return path


@pytest.fixture(scope="module")
def lab(flat_trace: Path) -> dict:
    """Every single-vertex policy on the same 24 simulated minutes."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "telemetry.log_format": "console"})
    policies = ["oracle", "static", "hpa", "ds2", "keda-lag", "daedalus"]
    results = run_pairs(plan_pairs([flat_trace], policies), settings, hours=0.4, failures_per_hour=0.0, jobs=1)
    return build_summary(results, ["flat"], policies)["traces"]["flat"]


def test_oracle_needs_no_more_worker_hours_than_any_policy_that_meets_the_slo(lab: dict) -> None:
    oracle = lab["oracle"]
    assert oracle["slo_misses"] == 0 and oracle["records_lost"] == 0
    meeting = [name for name, row in lab.items() if name != "oracle" and row["slo_misses"] == 0]
    assert "static" in meeting and len(meeting) >= 2, lab
    for name in meeting:
        assert oracle["worker_hours"] <= lab[name]["worker_hours"] + 1e-9, (name, lab[name]["worker_hours"])
    assert oracle["worker_hours_vs_oracle"] == 1.0
    assert lab["static"]["savings_captured"] == 0.0


def test_identical_seeds_give_identical_summaries(flat_trace: Path) -> None:
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "simulator.seed": 11})
    pair = Pair(flat_trace, "flat", "hpa")
    first = run_pair(pair, settings, hours=0.15, failures_per_hour=2.0).summary
    second = run_pair(pair, settings, hours=0.15, failures_per_hour=2.0).summary
    assert {k: v for k, v in first.items() if k not in WALL_CLOCK_KEYS} == {
        k: v for k, v in second.items() if k not in WALL_CLOCK_KEYS
    }
    other = run_pair(pair, load_lab_settings(None, {"simulator.seed": 12}), hours=0.15, failures_per_hour=2.0).summary
    assert other["records_produced"] != first["records_produced"]


def test_savings_captured_formula() -> None:
    assert savings_captured(static=16.0, policy=10.0, oracle=8.0) == 0.75
    assert savings_captured(static=8.0, policy=8.0, oracle=8.0) is None  # nothing to save


def test_policy_names_are_checked() -> None:
    assert parse_policies("daedalus, oracle") == ["daedalus", "oracle"]
    with pytest.raises(EvaluateError, match="unknown policy 'foo'"):
        parse_policies("daedalus,foo")
    with pytest.raises(EvaluateError, match="named twice"):
        parse_policies("hpa,hpa")


def test_dag_only_policies_are_not_replayed_on_the_single_vertex_job(flat_trace: Path) -> None:
    pairs = plan_pairs([flat_trace], ["justin", "qescalor", "hpa"])
    assert [p.policy for p in pairs] == ["hpa"]


def test_evaluate_writes_summary_plots_and_report(flat_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "lab"
    result = runner.invoke(
        app,
        ["evaluate", "--trace", str(flat_trace), "--policies", "oracle,static,justin", "--hours", "0.1",
         "--out", str(out), "--jobs", "1", "--seed", "3"],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["traces"]["flat"]
    assert rows["oracle"]["worker_hours_vs_oracle"] == 1.0
    assert rows["static"]["worker_hours_vs_oracle"] > 1.0
    assert rows["justin"]["status"] == "n/a" and "DAG" in rows["justin"]["reason"]
    # Justin ran where it applies: on the operator-DAG testbed at the trace's rate (30,000/s).
    dag = summary["dag_testbed"]["flat"]["median"]
    assert dag["rate"] == pytest.approx(30_000, rel=0.01)
    assert dag["justin"]["sustains"] and dag["ds2"]["sustains"]
    assert {"worker_hours", "slo_misses", "records_lost", "rescales"} <= set(rows["static"])
    report = (out / "report.md").read_text()
    assert "| oracle |" in report and "| justin | n/a" in report and "Operator-DAG testbed" in report
    assert (out / "flat.png").stat().st_size > 0 and (out / "worker_hours_slo.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "daedalus,nope"], "unknown policy 'nope'"),
        (["--hours", "0.001"], "shorter than one loop"),
    ],
)
def test_evaluate_bad_input_exits_2_with_one_line(flat_trace: Path, tmp_path: Path, args: list, message: str) -> None:
    result = runner.invoke(app, ["evaluate", "--trace", str(flat_trace), "--out", str(tmp_path), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_evaluate_rejects_a_missing_trace_and_duplicate_names(flat_trace: Path, tmp_path: Path) -> None:
    missing = runner.invoke(app, ["evaluate", "--trace", str(tmp_path / "none.csv"), "--out", str(tmp_path)])
    assert missing.exit_code == 2 and "cannot read trace" in missing.output
    twin = tmp_path / "flat.csv"
    twin.write_text(flat_trace.read_text())
    duplicate = runner.invoke(
        app, ["evaluate", "--trace", str(flat_trace), "--trace", str(twin), "--out", str(tmp_path / "o")]
    )
    assert duplicate.exit_code == 2 and "same name 'flat'" in duplicate.output
