"""``perdix export-history`` and ``perdix retrain``: the happy path once, and one-line exits on bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from spark.history import read_history
from tests.conftest import TRACES

runner = CliRunner()


def test_export_history_from_simulation_writes_partitions(tmp_path: Path) -> None:
    out = tmp_path / "history"
    args = [
        "export-history",
        "--out",
        str(out),
        "--job",
        "bank",
        "--from-simulation",
        str(TRACES / "bank_calls.csv"),
        "--hours",
        "1",
        "--since",
        "2026-11-01T23:30",
        "--parallelism",
        "12",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "bank: 60 samples in 2 partition(s)" in result.stdout
    assert runner.invoke(app, args).exit_code == 0
    assert len(read_history(str(out))) == 60


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["export-history", "--out", "x", "--job", "a"], "exactly one of --prometheus"),
        (["export-history", "--out", "x", "--job", "a", "--prometheus", "http://127.0.0.1:9"], "--since is required"),
        (["export-history", "--out", "x", "--job", "a/b", "--from-simulation", str(TRACES / "taylor.csv")], "job name"),
        (["export-history", "--out", "x", "--job", "a", "--from-simulation", "missing.csv"], "missing.csv"),
        (["retrain", "--history", "missing", "--registry", "r", "--serial"], "missing: no history directory"),
        (["retrain", "--history", "h", "--registry", "r", "--residual", "prophet"], "unknown residual model"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args, message) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
