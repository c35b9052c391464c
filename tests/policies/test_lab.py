"""The policy lab end to end: the optimal schedule as lower bound, identical seeds, `perdix evaluate`
outputs and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from lab.evaluate import (
    EvaluateError,
    Run,
    TraceRef,
    below_front,
    pareto,
    parse_policies,
    plan_runs,
    run_all,
    run_one,
    trace_refs,
)
from lab.report import build_summary
from lab.settings import load_lab_settings
from tests.conftest import TRACES

runner = CliRunner()
WALL_CLOCK_KEYS = {"loop_latency_p95_ms", "cpu_s"}
"""Summary keys measured in wall time: the only ones two identical replays may disagree on."""
POLICIES = ["optimal", "static", "daedalus", "flink-autoscaler", "hpa", "keda-lag", "ds2"]


def write_trace(directory: Path, name: str, points: list[tuple[float, float]]) -> Path:
    path = directory / f"{name}.csv"
    path.write_text("time_s,rate\n" + "".join(f"{t:g},{r:g}\n" for t, r in points))
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A flat load, a step up and down, and the start of a real trace: 40 simulated minutes each."""
    directory = tmp_path_factory.mktemp("traces")
    return [
        write_trace(directory, "flat", [(0, 30_000), (3600, 30_000)]),
        write_trace(
            directory,
            "step",
            [(0, 40_000), (899, 40_000), (900, 100_000), (1799, 100_000), (1800, 50_000), (3600, 50_000)],
        ),
        TRACES / "taylor.csv",
    ]


@pytest.fixture(scope="module")
def lab(traces: list[Path]) -> dict:
    """Every single-vertex policy and the optimal schedule on the same replays, with failures."""
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "telemetry.log_format": "console"})
    runs = plan_runs(trace_refs(traces), POLICIES)
    results = run_all(runs, settings, hours=40 / 60, failures_per_hour=1.5, jobs=2)
    return build_summary(results, POLICIES)["traces"]


def test_the_optimal_schedule_is_never_beaten_on_misses_or_at_equal_misses_on_worker_hours(lab: dict) -> None:
    for trace, entry in lab.items():
        optimal = entry["runs"]["optimal"]
        assert optimal["records_lost"] == 0
        for policy, row in entry["runs"].items():
            assert optimal["slo_misses"] <= row["slo_misses"], (trace, policy, row["slo_misses"])
            if row["slo_misses"] == optimal["slo_misses"]:
                assert optimal["worker_hours"] <= row["worker_hours"] + 1e-9, (trace, policy, row["worker_hours"])
        assert optimal["worker_hours_vs_optimal"] == 1.0
        assert entry["runs"]["static"]["worker_hours_vs_optimal"] >= 1.0


def test_every_policy_sees_the_same_failures_and_loses_nothing(lab: dict) -> None:
    for trace, entry in lab.items():
        injected = {row["failures_injected"] for row in entry["runs"].values()}
        assert len(injected) == 1 and injected != {0}, (trace, injected)
        # A failure due while the job is already down (restarting) is absorbed by that stop.
        assert all(row["failures"] <= row["failures_injected"] for row in entry["runs"].values())
        assert all(row["records_lost"] == 0 for row in entry["runs"].values())


def test_identical_seeds_give_identical_summaries(traces: list[Path]) -> None:
    settings = load_lab_settings(None, {"telemetry.log_level": "error", "simulator.seed": 11})
    run = Run(TraceRef(traces[0], "flat"), "hpa")
    first = run_one(run, settings, hours=0.15, failures_per_hour=2.0).summary
    second = run_one(run, settings, hours=0.15, failures_per_hour=2.0).summary
    assert {k: v for k, v in first.items() if k not in WALL_CLOCK_KEYS} == {
        k: v for k, v in second.items() if k not in WALL_CLOCK_KEYS
    }
    other = run_one(run, load_lab_settings(None, {"simulator.seed": 12}), hours=0.15, failures_per_hour=2.0).summary
    assert other["records_produced"] != first["records_produced"]


def test_a_policy_runs_at_its_own_sync_period() -> None:
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    flat = TraceRef(TRACES / "bank_calls.csv", "bank_calls")
    assert run_one(Run(flat, "hpa"), settings, hours=0.1, failures_per_hour=0).summary["sync_interval_s"] == 15.0
    assert run_one(Run(flat, "static"), settings, hours=0.1, failures_per_hour=0).summary["sync_interval_s"] == 60.0


def test_policy_names_are_checked() -> None:
    assert parse_policies("daedalus, optimal") == ["daedalus", "optimal"]
    with pytest.raises(EvaluateError, match="unknown policy 'foo'"):
        parse_policies("daedalus,foo")
    with pytest.raises(EvaluateError, match="named twice"):
        parse_policies("hpa,hpa")


def test_a_sweep_runs_each_knob_and_the_default(traces: list[Path]) -> None:
    runs = plan_runs(trace_refs(traces[:1]), ["justin", "hpa", "static"], sweep=True)
    assert [r.label for r in runs] == ["hpa", "hpa@0.5", "hpa@0.6", "hpa@0.7", "hpa@0.8", "hpa@0.9", "static"]


def test_a_sweep_can_be_limited_to_some_policies(traces: list[Path]) -> None:
    runs = plan_runs(trace_refs(traces[:1]), ["daedalus", "hpa"], sweep=True, swept=["hpa"])
    assert [r.label for r in runs] == ["daedalus", "hpa", "hpa@0.5", "hpa@0.6", "hpa@0.7", "hpa@0.8", "hpa@0.9"]


def test_below_a_front_means_no_setting_is_as_good_on_both_counts() -> None:
    front = [(40.0, 6), (55.0, 1), (70.0, 0)]
    assert below_front((60.0, 0), front)  # cheaper than the only setting with no misses
    assert not below_front((56.0, 1), front)  # (55 h, 1 miss) is as good on both
    assert below_front((30.0, 6), front)
    assert pareto([(40.0, 6), (55.0, 1), (70.0, 0), (60.0, 1)]) == [(40.0, 6), (55.0, 1), (70.0, 0)]


def test_evaluate_writes_summary_plots_and_report(traces: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "lab"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--trace",
            str(traces[0]),
            "--policies",
            "optimal,static,justin",
            "--hours",
            "0.1",
            "--out",
            str(out),
            "--jobs",
            "1",
            "--seed",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    runs = summary["traces"]["flat"]["runs"]
    assert runs["optimal"]["worker_hours_vs_optimal"] == 1.0
    assert runs["static"]["worker_hours_vs_optimal"] > 1.0
    assert runs["justin"]["status"] == "n/a" and "DAG" in runs["justin"]["reason"]
    # Justin ran where it applies: on the operator-DAG testbed at the trace's rate (30,000/s).
    dag = summary["dag_testbed"]["flat"]["median"]
    assert dag["rate"] == pytest.approx(30_000, rel=0.01)
    assert dag["justin"]["sustains"] and dag["ds2"]["sustains"]
    assert {"worker_hours", "slo_misses", "records_lost", "rescales"} <= set(runs["static"])
    report = (out / "report.md").read_text()
    assert "| optimal |" in report and "| justin | n/a" in report and "Operator-DAG testbed" in report
    assert (out / "flat.png").stat().st_size > 0


def test_evaluate_sweep_plots_the_fronts_and_says_where_daedalus_is(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    flat = write_trace(tmp_path, "flat", [(0, 30_000), (3600, 30_000)])
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--trace",
            str(flat),
            "--policies",
            "daedalus,hpa",
            "--sweep",
            "--hours",
            "0.1",
            "--out",
            str(out),
            "--jobs",
            "2",
            "--failures-per-hour",
            "0",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["fronts"]["flat"]["hpa"]) == 6 and len(summary["fronts"]["flat"]["daedalus"]) == 6
    assert set(summary["verdicts"]["flat"]) == {"hpa"}
    assert (out / "flat.fronts.png").stat().st_size > 0
    assert "Daedalus against each peer's front" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "daedalus,nope"], "unknown policy 'nope'"),
        (["--hours", "0.001"], "shorter than one loop"),
        (["--corpus", "half"], "--corpus: 'half' is not one of dev, held-out, all"),
    ],
)
def test_evaluate_bad_input_exits_2_with_one_line(traces: list[Path], tmp_path: Path, args: list, message: str) -> None:
    result = runner.invoke(app, ["evaluate", "--trace", str(traces[0]), "--out", str(tmp_path), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_evaluate_needs_a_trace_or_the_corpus(tmp_path: Path) -> None:
    result = runner.invoke(app, ["evaluate", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--trace" in result.output and "--corpus" in result.output


def test_evaluate_rejects_a_missing_trace_and_duplicate_names(traces: list[Path], tmp_path: Path) -> None:
    missing = runner.invoke(app, ["evaluate", "--trace", str(tmp_path / "none.csv"), "--out", str(tmp_path)])
    assert missing.exit_code == 2 and "cannot read trace" in missing.output
    twin = tmp_path / "flat.csv"
    twin.write_text(traces[0].read_text())
    duplicate = runner.invoke(
        app, ["evaluate", "--trace", str(traces[0]), "--trace", str(twin), "--out", str(tmp_path / "o")]
    )
    assert duplicate.exit_code == 2 and "same name 'flat'" in duplicate.output
