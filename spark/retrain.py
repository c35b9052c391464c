"""Batch retraining: fit and back-test a forecaster per job on its history, publish to the model registry.

Run it on one machine (``local[*]``) or on a cluster, unchanged::

    python -m spark.retrain --history out/history --registry out/models
    spark-submit --master spark://host:7077 spark/retrain.py --history hdfs:///perdix/history \\
        --registry hdfs:///perdix/models

Spark reads the Parquet history with its explicit schema, groups it by job and runs
:func:`spark.training.train_job` for every job in parallel through ``applyInPandas``; each task
publishes its own artifact (the registry is reachable from every executor), and the driver only
collects one summary row per job. :func:`run_serial` runs the same function in one process.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from models.registry import RegistryError, check_version, version_at
from models.storage import StorageError, open_location
from spark.history import HISTORY_SCHEMA, HistoryError, read_history
from spark.registry import ModelRegistry
from spark.training import RESULT_COLUMNS, RetrainConfig, train_job

APP_NAME = "perdix-retrain"
FIT_COLUMNS = ("job", "time", "workload_rate")


@dataclass(frozen=True)
class RetrainSummary:
    """What one retraining run did: a row per job."""

    version: str
    rows: list[dict[str, Any]]
    master: str = "serial"
    """The Spark master the run used, or ``serial``."""

    def count(self, status: str) -> int:
        """Jobs with this status (published, unchanged, failed)."""
        return sum(1 for row in self.rows if row["status"] == status)

    def wapes(self) -> list[float]:
        """Back-test WAPE of every job that has a finite one."""
        return [
            float(r["backtest_wape"])
            for r in self.rows
            if r["backtest_wape"] is not None and math.isfinite(r["backtest_wape"])
        ]


def result_schema() -> str:
    """The DDL schema of the per-job summary rows."""
    return ", ".join(f"{name} {kind}" for name, kind in RESULT_COLUMNS)


def spark_history_schema() -> Any:
    """The history's explicit Spark schema (partition columns as strings, never inferred)."""
    from pyspark.sql import types as T

    mapping = {
        "time": T.TimestampType(),
        "workload_rate": T.DoubleType(),
        "throughput": T.DoubleType(),
        "parallelism": T.IntegerType(),
        "lag": T.DoubleType(),
        "job": T.StringType(),
        "date": T.StringType(),
    }
    return T.StructType([T.StructField(f.name, mapping[f.name], f.nullable) for f in HISTORY_SCHEMA])


def build_session(master: str | None = None, *, app_name: str = APP_NAME, conf: Mapping[str, str] | None = None) -> Any:
    """A SparkSession; ``master`` None keeps what spark-submit set, falling back to ``local[*]``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).config("spark.sql.session.timeZone", "UTC")
    if master and master.startswith("local"):
        # The history has a directory per job and day (2,800 for 200 jobs x 14 days); past 32 paths
        # Spark lists them with a distributed job, which on one machine only adds a job on the same
        # cores (2 s of each run here, against 0.3 s listed by the driver).
        builder = builder.config("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    else:
        from pyspark import SparkConf, SparkContext

        # Under spark-submit the JVM already holds spark.master; a SparkConf made before the
        # gateway is up would be empty and we would override the cluster with local[*].
        SparkContext._ensure_initialized()
        if not SparkConf().contains("spark.master"):
            builder = builder.master("local[*]")
    return builder.getOrCreate()


def check_history(history: str) -> None:
    """Raise :class:`HistoryError` unless ``history`` is an existing directory."""
    try:
        location = open_location(history)
    except StorageError as exc:
        raise HistoryError(str(exc)) from None
    if not location.is_dir(location.root):
        raise HistoryError(f"{history}: no history directory")


def _row_for_pandas(row: dict[str, Any]) -> dict[str, Any]:
    return {name: row.get(name) for name, _ in RESULT_COLUMNS}


def run_spark(
    spark: Any,
    *,
    history: str,
    registry_uri: str,
    config: RetrainConfig,
    keep: int = 5,
    version: str | None = None,
    jobs: Sequence[str] | None = None,
    now: datetime | None = None,
    partitions: int | None = None,
) -> RetrainSummary:
    """Retrain every job of ``history`` (or ``jobs``) on ``spark``; each task publishes its job's model.

    ``partitions`` (default: 8 per core) sets how many tasks share the jobs: an explicit
    repartition by job, because adaptive execution would otherwise coalesce the small shuffle into
    a task or two and leave cores idle while one task fits a hundred jobs.
    """
    now = now or datetime.now(UTC)
    version = check_version(version or version_at(now))
    created_at = now.isoformat()
    ModelRegistry(registry_uri, keep=keep)  # fail on the driver, once, if the registry is unusable
    check_history(history)
    frame = spark.read.schema(spark_history_schema()).option("basePath", history).parquet(history)
    if jobs:
        frame = frame.where(frame.job.isin(list(jobs)))
    tasks = partitions or 8 * spark.sparkContext.defaultParallelism
    # Epoch seconds, not a timestamp: Arrow would hand pandas wall-clock times in the session's
    # time zone, and the daily profile must be UTC whatever the cluster's zone is.
    frame = frame.select("job", frame.time.cast("double").alias("time"), "workload_rate").repartition(tasks, "job")

    def fit_group(pdf: pd.DataFrame) -> pd.DataFrame:
        job = str(pdf["job"].iloc[0])
        registry = ModelRegistry(registry_uri, keep=keep)
        row = train_job(pdf, job=job, config=config, registry=registry, version=version, created_at=created_at)
        return pd.DataFrame([_row_for_pandas(row)], columns=[name for name, _ in RESULT_COLUMNS])

    result = frame.groupBy("job").applyInPandas(fit_group, schema=result_schema())
    rows = [row.asDict() for row in result.collect()]
    return RetrainSummary(version=version, rows=sorted(rows, key=lambda r: r["job"]), master=spark.sparkContext.master)


def run_serial(
    *,
    history: str,
    registry_uri: str | None,
    config: RetrainConfig,
    keep: int = 5,
    version: str | None = None,
    jobs: Sequence[str] | None = None,
    now: datetime | None = None,
) -> RetrainSummary:
    """The same retraining in this process, job after job (the benchmark's baseline)."""
    now = now or datetime.now(UTC)
    version = check_version(version or version_at(now))
    registry = ModelRegistry(registry_uri, keep=keep) if registry_uri else None
    frame = read_history(history, jobs=jobs, columns=FIT_COLUMNS)
    rows = []
    for job, group in frame.groupby("job", sort=True):
        row = train_job(
            group, job=str(job), config=config, registry=registry, version=version, created_at=now.isoformat()
        )
        rows.append(_row_for_pandas(row))
    return RetrainSummary(version=version, rows=rows)


def format_summary(summary: RetrainSummary) -> str:
    """Human-readable lines: one per job, then the totals."""
    lines = []
    for row in summary.rows:
        wape = row["backtest_wape"]
        score = f"wape={wape:.4f}" if wape is not None and math.isfinite(wape) else "wape=-"
        extra = f" {row['message']}" if row["status"] == "failed" and row["message"] else ""
        lines.append(f"{row['job']}: {row['status']} {row['version'] or '-'} {score}{extra}")
    lines.append(
        f"version {summary.version} ({summary.master}): {summary.count('published')} published, "
        f"{summary.count('unchanged')} unchanged, {summary.count('failed')} failed"
    )
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    """The command line of the retraining job (the same under spark-submit and python -m)."""
    defaults = RetrainConfig()
    p = argparse.ArgumentParser(prog="perdix-retrain", description=__doc__.splitlines()[0])
    p.add_argument("--history", required=True, help="History root (local path or URI), Parquet by job and date.")
    p.add_argument("--registry", required=True, help="Model registry root (local path or URI).")
    p.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*]).")
    p.add_argument("--keep", type=int, default=5, help="Versions kept per job (default 5).")
    p.add_argument("--job", action="append", dest="jobs", help="Only this job (repeatable).")
    p.add_argument("--version", default=None, help="Version to publish (default: derived from the current time).")
    p.add_argument("--serial", action="store_true", help="Run in this process without Spark.")
    for f in fields(RetrainConfig):
        p.add_argument(
            f"--{f.name.replace('_', '-')}", type=type(getattr(defaults, f.name)), default=getattr(defaults, f.name)
        )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: 0 if every job was published or unchanged, 1 if any failed, 2 on bad input."""
    args = parser().parse_args(argv)
    try:
        config = RetrainConfig(**{f.name: getattr(args, f.name) for f in fields(RetrainConfig)})
        if args.serial:
            summary = run_serial(
                history=args.history,
                registry_uri=args.registry,
                config=config,
                keep=args.keep,
                version=args.version,
                jobs=args.jobs,
            )
        else:
            spark = build_session(args.master)
            try:
                summary = run_spark(
                    spark,
                    history=args.history,
                    registry_uri=args.registry,
                    config=config,
                    keep=args.keep,
                    version=args.version,
                    jobs=args.jobs,
                )
            finally:
                spark.stop()
    except (HistoryError, RegistryError, ValueError) as exc:
        print(f"perdix-retrain: error: {exc}", file=sys.stderr)
        return 2
    print(format_summary(summary))
    return 1 if summary.count("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
