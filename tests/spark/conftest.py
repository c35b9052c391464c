"""One real ``local[2]`` SparkSession per test run, and a small multi-job history on disk."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from spark.history import write_history

HISTORY_DAYS = 4
JOBS = ("checkout", "payments", "search")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession bound to loopback, without UI, shared by every Spark test."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("perdix-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    yield session
    session.stop()


def daily_workload(days: float, *, seed: int, level: float, step_s: int = 60) -> np.ndarray:
    """A daily sine plus noise, one value per ``step_s``."""
    rng = np.random.default_rng(seed)
    seconds = np.arange(int(days * 86_400 // step_s)) * step_s
    season = 1.0 + 0.5 * np.sin(2 * np.pi * seconds / 86_400)
    return level * season * (1.0 + 0.05 * rng.standard_normal(seconds.size))


def write_job(root: Path, job: str, rate: np.ndarray, *, start: str = "2026-11-01", step_s: int = 60) -> pd.DataFrame:
    """Write one job's history (1-min samples) and return the frame written."""
    times = pd.Timestamp(start, tz="UTC") + pd.to_timedelta(np.arange(rate.size) * step_s, unit="s")
    frame = pd.DataFrame(
        {"time": times, "workload_rate": rate, "throughput": rate * 0.99, "parallelism": 4, "lag": 10.0}
    )
    write_history(frame, str(root), job=job)
    return frame


@pytest.fixture(scope="session")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three jobs with four days of 1-min history each, plus one job with too little history."""
    root = tmp_path_factory.mktemp("history")
    for index, job in enumerate(JOBS):
        write_job(root, job, daily_workload(HISTORY_DAYS, seed=index, level=1000.0 * (index + 1)))
    write_job(root, "newcomer", daily_workload(0.5, seed=9, level=500.0))
    return root
