"""Workload history on disk: Parquet partitioned by ``job`` and ``date`` with one explicit schema.

Layout: ``<root>/job=<name>/date=<YYYY-MM-DD>/part-0.parquet``, one file per partition, so a
partition is replaced by one atomic file move. Writing is idempotent: the rows of an exported time
range replace whatever the partition held in that range (rows outside it are kept), and a time
appears at most once per job, so exporting the same day twice never duplicates rows.

This module knows nothing about Prometheus (``spark/export.py``) or the simulator (``lab/history.py``);
it turns a frame of samples into partitions and back.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from models.storage import Location, StorageError, open_location

SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("workload_rate", pa.float64()),
        pa.field("throughput", pa.float64()),
        pa.field("parallelism", pa.int32()),
        pa.field("lag", pa.float64()),
    ],
    metadata={
        "time": "sample time, UTC, start of the step",
        "workload_rate": "records/s arriving at the source",
        "throughput": "records/s leaving the source, all workers",
        "parallelism": "registered TaskManagers (scale-out)",
        "lag": "records waiting at the source (consumer lag)",
    },
)
"""The columns stored in every Parquet file; null is a gap."""

PARTITION_SCHEMA = pa.schema([pa.field("job", pa.string()), pa.field("date", pa.string())])
"""The hive partition columns (from the directory names)."""

HISTORY_SCHEMA = pa.schema(list(SAMPLE_SCHEMA) + list(PARTITION_SCHEMA))
"""What a reader of the whole history sees: samples plus their partition columns."""

SAMPLE_COLUMNS = tuple(SAMPLE_SCHEMA.names)
PART_FILE = "part-0.parquet"
JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
PROMETHEUS_MAX_POINTS = 11_000
"""Prometheus refuses range queries that would return more points than this per series."""


class HistoryError(ValueError):
    """History that cannot be written or read; the message names the place and the reason."""


def check_job_name(job: str) -> str:
    """Return ``job`` if it can be a partition directory name, else raise :class:`HistoryError`."""
    if not JOB_NAME.match(job or ""):
        raise HistoryError(
            f"job name {job!r} must be 1-253 characters of letters, digits, '.', '_' or '-', starting alphanumeric"
        )
    return job


EARLIEST = pd.Timestamp("1970-01-01", tz="UTC")
LATEST = pd.Timestamp("2200-01-01", tz="UTC")
"""The times a history may hold: the Unix epoch on, and well before pandas' nanosecond clock ends (2262), so a year
added to any of them still counts (``--since 9999-12-31`` overflowed it, a traceback)."""


def as_utc(moment: datetime | pd.Timestamp | str | float) -> pd.Timestamp:
    """A UTC timestamp (ms precision) from a datetime, an ISO string or epoch seconds."""
    if isinstance(moment, int | float) and not isinstance(moment, bool):
        stamp = pd.Timestamp(float(moment), unit="s", tz="UTC")
    else:
        try:
            stamp = pd.Timestamp(moment)
        except (ValueError, TypeError) as exc:
            raise HistoryError(f"not a time: {moment!r} ({exc})") from None
        if pd.isna(stamp):
            raise HistoryError(f"not a time: {moment!r}")
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    if not EARLIEST <= stamp < LATEST:
        raise HistoryError(f"not a time of a job's history: {moment!r} (from {EARLIEST.year} to before {LATEST.year})")
    return stamp.floor("ms")


def query_chunks(
    since: datetime, until: datetime, step_s: float, *, max_points: int = PROMETHEUS_MAX_POINTS - 1000
) -> list[tuple[datetime, datetime]]:
    """Split ``[since, until)`` into range-query windows of at most ``max_points`` samples each.

    Prometheus counts both ends of a range query, so a window holds ``(end - start) / step + 1``
    points; the windows are contiguous and the last one is shortened to end at ``until``.
    """
    if step_s <= 0 or not math.isfinite(step_s):
        raise HistoryError(f"step must be a positive number of seconds, got {step_s!r}")
    if until <= since:
        raise HistoryError(f"empty time range: until ({until.isoformat()}) is not after since ({since.isoformat()})")
    if max_points < 2:
        raise HistoryError(f"max_points must be at least 2, got {max_points}")
    span = timedelta(seconds=step_s * (max_points - 1))
    step = timedelta(seconds=step_s)
    chunks = []
    start = since
    while start < until:
        # Each window ends one step before the next starts, so no sample is fetched twice.
        end = min(start + span, until - timedelta(microseconds=1))
        chunks.append((start, end))
        start = start + span + step
    return chunks


def to_sample_table(frame: pd.DataFrame) -> pa.Table:
    """Validate and cast a frame with the sample columns into :data:`SAMPLE_SCHEMA`."""
    missing = [name for name in SAMPLE_COLUMNS if name not in frame.columns]
    if missing:
        raise HistoryError(f"history frame lacks column(s) {', '.join(missing)}")
    data = frame.loc[:, list(SAMPLE_COLUMNS)].copy()
    times = pd.to_datetime(data["time"], utc=True)
    if times.isna().any():
        raise HistoryError("history frame has rows without a time")
    data["time"] = times.dt.floor("ms")
    for name in ("workload_rate", "throughput", "lag"):
        values = pd.to_numeric(data[name], errors="coerce").astype(float)
        # Infinite or negative rates are broken scrapes: store them as gaps, never as data.
        values[~np.isfinite(values) | (values < 0)] = np.nan
        data[name] = values
    parallelism = pd.to_numeric(data["parallelism"], errors="coerce")
    parallelism[~np.isfinite(parallelism) | (parallelism < 0)] = np.nan
    data["parallelism"] = parallelism.round().astype("Int32")
    table = pa.Table.from_pandas(data, schema=SAMPLE_SCHEMA, preserve_index=False)
    return table


@dataclass(frozen=True)
class WrittenPartition:
    """One partition the writer replaced."""

    job: str
    date: str
    rows: int
    path: str


def _partition_dir(location: Location, job: str, date: str) -> str:
    return location.join(f"job={job}", f"date={date}")


def _read_partition(location: Location, directory: str) -> tuple[pa.Table | None, list[str]]:
    """The rows of every Parquet file in a partition directory, and those files' paths."""
    if not location.is_dir(directory):
        return None, []
    import pyarrow.fs as pafs

    infos = location.fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    files = sorted(i.path for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".parquet"))
    tables = []
    for path in files:
        try:
            table = pq.read_table(path, filesystem=location.fs, schema=SAMPLE_SCHEMA)
        except (pa.ArrowInvalid, OSError) as exc:
            raise HistoryError(f"{path}: unreadable history partition ({exc})") from None
        tables.append(table)
    if not tables:
        return None, files
    return pa.concat_tables(tables), files


def _days(since: pd.Timestamp, until: pd.Timestamp) -> list[str]:
    """UTC dates touched by ``[since, until)``."""
    first = since.normalize()
    last = (until - pd.Timedelta(milliseconds=1)).normalize()
    return [day.strftime("%Y-%m-%d") for day in pd.date_range(first, last, freq="D")]


def write_history(
    frame: pd.DataFrame,
    out: str,
    *,
    job: str,
    since: datetime | pd.Timestamp | str | None = None,
    until: datetime | pd.Timestamp | str | None = None,
) -> list[WrittenPartition]:
    """Write ``frame``'s samples of ``[since, until)`` for ``job`` under ``out``, replacing that range.

    ``since``/``until`` default to the frame's first sample and just after its last. Every date the
    range touches is rewritten: rows of the range come from ``frame`` only, rows outside it are kept.
    Returns the partitions written (a date left with no rows is deleted and not returned).
    """
    check_job_name(job)
    table = to_sample_table(frame)
    times = table.column("time").to_pandas()
    if since is None:
        if not len(times):
            raise HistoryError("nothing to write: empty frame and no --since")
        since = times.min()
    if until is None:
        if not len(times):
            raise HistoryError("nothing to write: empty frame and no --until")
        until = times.max() + pd.Timedelta(milliseconds=1)
    start, end = as_utc(since), as_utc(until)
    if end <= start:
        raise HistoryError(f"empty time range: until ({end.isoformat()}) is not after since ({start.isoformat()})")
    inside = (times >= start) & (times < end)
    if not inside.all():
        raise HistoryError(
            f"{int((~inside).sum())} sample(s) lie outside the exported range [{start.isoformat()}, {end.isoformat()})"
        )
    new = table.to_pandas()
    new["time"] = pd.to_datetime(new["time"], utc=True)
    new_dates = new["time"].dt.strftime("%Y-%m-%d")
    try:
        location = open_location(out)
    except StorageError as exc:
        raise HistoryError(str(exc)) from None
    written: list[WrittenPartition] = []
    for date in _days(start, end):
        directory = _partition_dir(location, job, date)
        existing, old_files = _read_partition(location, directory)
        parts = [new[new_dates == date]]
        if existing is not None and existing.num_rows:
            old = existing.to_pandas()
            old["time"] = pd.to_datetime(old["time"], utc=True)
            parts.insert(0, old[(old["time"] < start) | (old["time"] >= end)])
        merged = pd.concat([p for p in parts if len(p)], ignore_index=True) if any(len(p) for p in parts) else None
        target = location.join(f"job={job}", f"date={date}", PART_FILE)
        if merged is None or not len(merged):
            location.delete_dir(directory)
            continue
        # A time appears once per job: the newest export wins.
        merged = merged.drop_duplicates(subset="time", keep="last").sort_values("time", kind="stable")
        out_table = pa.Table.from_pandas(merged, schema=SAMPLE_SCHEMA, preserve_index=False)
        buffer = io.BytesIO()
        pq.write_table(out_table, buffer, compression="zstd")
        location.write_bytes_atomic(target, buffer.getvalue())
        for stale in old_files:
            if stale != target:
                location.fs.delete_file(stale)
        written.append(WrittenPartition(job=job, date=date, rows=out_table.num_rows, path=target))
    return written


def read_history(root: str, *, jobs: Sequence[str] | None = None, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """Read the history under ``root`` (optionally only ``jobs``) into one frame sorted by job and time."""
    try:
        location = open_location(root)
    except StorageError as exc:
        raise HistoryError(str(exc)) from None
    if not location.is_dir(location.root):
        raise HistoryError(f"{root}: no history directory")
    dataset = pads.dataset(
        location.root,
        filesystem=location.fs,
        format="parquet",
        schema=HISTORY_SCHEMA,
        partitioning=pads.partitioning(PARTITION_SCHEMA, flavor="hive"),
        exclude_invalid_files=False,
    )
    names = list(columns) if columns is not None else list(HISTORY_SCHEMA.names)
    filter_ = pads.field("job").isin(list(jobs)) if jobs is not None else None
    try:
        table = dataset.to_table(columns=names, filter=filter_)
    except (ValueError, TypeError, OSError) as exc:  # pyarrow's ArrowInvalid and ArrowTypeError among them
        raise HistoryError(f"{root}: not a history export-history wrote ({' '.join(str(exc).split())[:300]})") from None
    frame = table.to_pandas()
    if frame.empty:
        raise HistoryError(f"{root}: no history rows" + (f" for job(s) {', '.join(jobs)}" if jobs else ""))
    if jobs is not None:
        missing = sorted(set(jobs) - set(frame["job"].astype(str))) if "job" in frame else sorted(jobs)
        if missing:
            raise HistoryError(f"{root}: no history for job(s) {', '.join(missing)}")
    if "time" in frame:
        frame["time"] = pd.to_datetime(frame["time"], utc=True)
    order = [c for c in ("job", "time") if c in frame]
    return frame.sort_values(order, kind="stable").reset_index(drop=True) if order else frame
