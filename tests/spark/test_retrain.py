"""The retraining job on a real local[2] SparkSession: artifacts per job, correct back-test, idempotent re-runs."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from agent.model_reload import ModelReloader
from models.forecast.scoring import RecentWorkload
from models.forecast.seasonal import SeasonalForecaster
from spark.history import read_history
from spark.registry import ModelRegistry
from spark.retrain import main, run_serial, run_spark
from spark.training import RetrainConfig
from tests.conftest import ROOT
from tests.fixtures.spark_cluster import SparkSetupError, venv_script
from tests.spark.conftest import JOBS

CONFIG = RetrainConfig(residual="naive")
NOW = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)


def pandas_reference_wape(history: pd.DataFrame, config: RetrainConfig) -> float:
    """The back-test recomputed with pandas only: daily profile per 15-min slot + last residual."""
    rates = history.set_index("time")["workload_rate"].resample(f"{config.step_s}s").mean()
    horizon = config.horizon_s // config.step_s
    first = len(rates) - config.backtest_s // config.step_s
    slot = (rates.index.hour * 3600 + rates.index.minute * 60 + rates.index.second) // config.profile_bin_s
    frame = pd.DataFrame({"y": rates.to_numpy(), "slot": slot})
    profile = frame.iloc[:first].groupby("slot")["y"].mean()
    frame["seasonal"] = frame["slot"].map(profile)
    errors = actuals = 0.0
    for origin in range(first, len(frame) - horizon + 1, config.origin_every_s // config.step_s):
        last_residual = frame["y"].iloc[origin - 1] - frame["seasonal"].iloc[origin - 1]
        ahead = frame.iloc[origin : origin + horizon]
        forecast = (ahead["seasonal"] + last_residual).clip(lower=0)
        errors += (ahead["y"] - forecast).abs().sum()
        actuals += ahead["y"].abs().sum()
    return errors / actuals


@pytest.fixture(scope="module")
def spark_run(spark: Any, history: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    registry = tmp_path_factory.mktemp("registry")
    summary = run_spark(spark, history=str(history), registry_uri=str(registry), config=CONFIG, now=NOW, partitions=2)
    return summary, registry


def test_every_job_with_enough_history_gets_an_artifact(spark_run: tuple[Any, Path]) -> None:
    summary, registry_path = spark_run
    by_job = {row["job"]: row for row in summary.rows}
    assert sorted(by_job) == sorted([*JOBS, "newcomer"])
    registry = ModelRegistry(str(registry_path))
    for job in JOBS:
        assert by_job[job]["status"] == "published", by_job[job]["message"]
        artifact = registry.load(job)
        assert artifact.version == summary.version == "v20261123T020000000Z"
        meta = artifact.metadata
        assert meta["data"]["start"] == "2026-11-01T00:00:00+00:00"
        assert meta["data"]["end"] == "2026-11-05T00:00:00+00:00"
        assert meta["backtest"]["origins"] == 48 and meta["backtest"]["horizon_s"] == 900
        assert meta["backtest"]["wape"] == pytest.approx(by_job[job]["backtest_wape"])
        assert {"pyspark", "numpy", "pandas", "python"} <= set(meta["libraries"])
        model = SeasonalForecaster.from_dict(artifact.model)
        assert model.next_s == pd.Timestamp("2026-11-05", tz="UTC").timestamp()
    # Half a day of history is too short to back-test: the job fails alone, with the reason.
    assert by_job["newcomer"]["status"] == "failed"
    assert "too short" in by_job["newcomer"]["message"]
    assert registry.versions("newcomer") == []


def test_backtest_wape_matches_a_pandas_reference(spark_run: tuple[Any, Path], history: Path) -> None:
    summary, _ = spark_run
    job = JOBS[1]
    frame = read_history(str(history), jobs=[job])
    expected = pandas_reference_wape(frame, CONFIG)
    row = next(r for r in summary.rows if r["job"] == job)
    assert row["backtest_wape"] == pytest.approx(expected, rel=1e-9)
    # 5 % noise on a daily sine: a persistence residual over 15 min is right to within a few percent.
    assert 0.02 < expected < 0.1


def test_spark_and_serial_runs_agree(spark_run: tuple[Any, Path], history: Path) -> None:
    summary, _ = spark_run
    serial = run_serial(history=str(history), registry_uri=None, config=CONFIG, now=NOW)
    spark_scores = {r["job"]: (r["status"], r["backtest_wape"]) for r in summary.rows}
    serial_scores = {r["job"]: (r["status"], r["backtest_wape"]) for r in serial.rows}
    assert spark_scores == serial_scores


def test_rerunning_on_the_same_history_is_idempotent(spark: Any, history: Path, tmp_path: Path) -> None:
    registry_path = tmp_path / "registry"
    first = run_spark(
        spark, history=str(history), registry_uri=str(registry_path), config=CONFIG, now=NOW, partitions=2
    )
    files = {p: p.read_bytes() for p in registry_path.rglob("*") if p.is_file()}
    later = datetime(2026, 11, 24, 2, 0, tzinfo=UTC)
    second = run_spark(
        spark, history=str(history), registry_uri=str(registry_path), config=CONFIG, now=later, partitions=2
    )
    assert {r["job"]: r["status"] for r in second.rows if r["job"] in JOBS} == dict.fromkeys(JOBS, "unchanged")
    assert {r["job"]: r["version"] for r in second.rows if r["job"] in JOBS} == dict.fromkeys(JOBS, first.version)
    assert {p: p.read_bytes() for p in registry_path.rglob("*") if p.is_file()} == files
    # A different configuration is a different model: a new version next to the old one.
    other = RetrainConfig(residual="naive", profile_bin_s=1800)
    third = run_spark(
        spark, history=str(history), registry_uri=str(registry_path), config=other, now=later, partitions=2
    )
    assert third.count("published") == len(JOBS)
    assert ModelRegistry(str(registry_path)).versions(JOBS[0]) == [first.version, third.version]


def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--history", str(tmp_path / "missing"), "--registry", str(tmp_path / "r"), "--serial"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing" in err[0] and "no history" in err[0]


def test_spark_submit_runs_the_file_unchanged(history: Path, tmp_path: Path) -> None:
    try:
        submit = venv_script("spark-submit")
    except SparkSetupError as exc:
        pytest.fail(str(exc))
    registry = tmp_path / "registry"
    # PYTHONPATH: the driver and its Python workers import this checkout's packages, not whatever
    # copy the venv's editable install points at.
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
    }
    command = [
        str(submit),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        str(ROOT / "spark" / "retrain.py"),
        "--history",
        str(history),
        "--registry",
        str(registry),
        "--job",
        JOBS[0],
        "--residual",
        "naive",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{JOBS[0]}: published" in done.stdout
    assert "(local[1])" in done.stdout  # spark-submit's --master, not the local[*] fallback
    assert ModelRegistry(str(registry)).versions(JOBS[0])
    assert np.isfinite(ModelRegistry(str(registry)).load(JOBS[0]).metadata["backtest"]["wape"])


def test_the_agent_picks_up_what_the_spark_job_published(spark_run: tuple[Any, Path]) -> None:
    summary, registry_path = spark_run
    assert any(r["job"] == JOBS[0] for r in summary.rows)
    reloader = ModelReloader(str(registry_path), JOBS[0], agent_step_s=10.0)
    forecaster = reloader.check(RecentWorkload(), online=None)  # an agent without a model of its own yet
    assert forecaster is not None and forecaster.version == summary.version
    assert reloader.check(RecentWorkload(), online=None) is None  # nothing newer now
    forecaster.update(np.full(6 * 30, 1000.0))  # 30 minutes of the agent's 10 s samples
    forecast = forecaster.predict(90)  # 15 minutes ahead
    assert forecast.shape == (90,) and np.all(np.isfinite(forecast))
