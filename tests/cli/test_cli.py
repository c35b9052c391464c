"""The perdix command line: help, exit 2 with one line on bad input, simulate writes its outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from tests.conftest import TRACES

runner = CliRunner()

SUMMARY_KEYS = {
    "trace",
    "policy",
    "duration_s",
    "worker_hours",
    "rescales",
    "slo_misses",
    "lag_over_target_s",
    "max_lag_records",
    "records_produced",
    "records_processed",
    "records_lost",
    "recovery_error_median",
    "forecast_wape_median",
    "loop_latency_p95_ms",
    "dry_run",
}


def test_help_explains_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "simulate" in result.output and "version" in result.output
    sim = runner.invoke(app, ["simulate", "--help"])
    assert sim.exit_code == 0 and "--trace" in sim.output and "--dry-run" in sim.output


def test_console_script_version_and_bad_trace_exit_2(tmp_path: Path) -> None:
    perdix = Path(sys.executable).parent / "perdix"
    version = subprocess.run([perdix, "version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("perdix 0.1.0 (revision ")
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,rate\n0,10\n60,-1\n")
    result = subprocess.run(
        [perdix, "simulate", "--trace", bad, "--out", tmp_path / "o"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.strip() == f"perdix: error: {bad}:3: negative rate -1"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("min_parallelism: 12\nmax_parallelism: 8\n", "min_parallelism (12) > max_parallelism (8)"),
        ("policy: magic\n", "policy: unknown policy 'magic'"),
    ],
)
def test_bad_config_exits_2_with_one_line(tmp_path: Path, config: str, message: str) -> None:
    path = tmp_path / "perdix.yaml"
    path.write_text(config)
    result = runner.invoke(
        app, ["simulate", "--trace", str(TRACES / "bank_calls.csv"), "--config", str(path), "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and str(path) in lines[0]


def test_simulate_static_writes_summary_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        ["simulate", "--trace", str(TRACES / "taylor.csv"), "--policy", "static", "--hours", "0.5", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert SUMMARY_KEYS <= set(summary)
    assert summary["policy"] == "static" and summary["records_lost"] == 0
    assert summary["duration_s"] == 1800
    # Static runs at max_parallelism (16) after its first rescale from the initial 8.
    assert summary["final_parallelism"] == 16 and summary["rescales"] == 1
    assert (out / "replay.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("policy", "kind", "message"),
    [
        ("oracle", "flink-rest", "policy: 'oracle' runs only in the lab"),
        ("justin", "deployment", "policy: 'justin' sets the parallelism of each job vertex"),
        ("qescalor", "statefulset", "policy: 'qescalor' sets the parallelism of each job vertex"),
    ],
)
def test_run_refuses_a_policy_it_cannot_run_with_one_line(tmp_path: Path, policy: str, kind: str, message: str) -> None:
    path = tmp_path / "perdix.yaml"
    path.write_text(f"policy: {policy}\nscale_target:\n  kind: {kind}\n")
    result = runner.invoke(app, ["run", "--config", str(path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert message in lines[0] and str(path) in lines[0]
    assert "Traceback" not in result.output


def test_the_summary_table_names_each_missed_episode(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cli.app import print_summary

    monkeypatch.setenv("COLUMNS", "160")  # one line per episode, as on a terminal wide enough

    missed = [
        {"kind": "rescale", "start_s": 16200, "end_s": 16588, "length_s": 388, "stops": 1, "falling_behind_s": 0},
        {"kind": "overload", "start_s": 10, "end_s": None, "length_s": 675, "stops": 3, "falling_behind_s": 50},
    ]
    print_summary({"trace": "t", "policy": "daedalus", "slo_misses": 2, "slo_missed_episodes": missed})
    out = capsys.readouterr().out
    assert "rescale at 16,200 s: 388 s, 1 stop" in out
    assert "overload at 10 s: 675 s, 3 stops, still open at the end, 50 s falling behind" in out
    print_summary({"trace": "t", "policy": "daedalus", "slo_misses": 0, "slo_missed_episodes": []})
    assert "none" in capsys.readouterr().out
