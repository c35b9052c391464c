"""The history exporter: Prometheus range queries (or a frame the lab simulated) to the Parquet history.

Both give a frame of samples on a ``step_s`` grid (time, workload rate, throughput, parallelism,
lag) to :func:`spark.history.write_history`, which owns the Parquet layout and makes re-exports
idempotent. The PromQL queries arrive as plain strings by setting name, so ``spark/`` imports
neither the agent nor the simulator; the CLI hands them over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import numpy as np
import pandas as pd

from spark.history import HistoryError, WrittenPartition, as_utc, check_job_name, query_chunks, write_history

COLUMNS_BY_QUERY = {
    "workload": "workload_rate",
    "throughput": "throughput",
    "parallelism": "parallelism",
    "consumer_lag": "lag",
}
"""Which PromQL setting fills which history column."""


class ExportError(ValueError):
    """An export that cannot run; the message is the one line the CLI prints before exit 2."""


class RangeQueryClient(Protocol):
    """The one call of prometheus-api-client the exporter needs (a fake in tests serves the same JSON)."""

    def custom_query_range(
        self, query: str, start_time: datetime, end_time: datetime, step: str, params: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Prometheus ``/api/v1/query_range`` result: a list of series with ``values`` [[ts, "v"], ...]."""
        ...


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote."""

    job: str
    rows: int
    partitions: list[WrittenPartition]
    queries: int
    """Range queries sent (0 for a simulation)."""


def prometheus_client(url: str, *, timeout_s: float) -> RangeQueryClient:
    """A prometheus-api-client connection (no retries to hosts other than ``url``)."""
    from prometheus_api_client import PrometheusConnect

    client = PrometheusConnect(url=url, disable_ssl=False, timeout=timeout_s)
    return client


def _summed_series(result: list[dict[str, Any]]) -> pd.Series:
    """Sum of every returned series per timestamp (per-worker throughput becomes the job's)."""
    frames = []
    for series in result:
        values = series.get("values") or []
        if not values:
            continue
        stamps = np.array([float(v[0]) for v in values])
        numbers = pd.to_numeric(pd.Series([v[1] for v in values]), errors="coerce").to_numpy(float)
        frames.append(pd.Series(numbers, index=stamps))
    if not frames:
        return pd.Series(dtype=float)
    combined = pd.concat(frames, axis=1)
    # A timestamp where every series is NaN stays NaN (a gap), not 0.
    return combined.sum(axis=1, min_count=1)


def export_from_prometheus(
    *,
    client: RangeQueryClient,
    job: str,
    since: datetime | str,
    until: datetime | str,
    out: str,
    queries: Mapping[str, str],
    worker_label: str = "pod",
    step_s: float = 60.0,
    max_points: int = 10_000,
) -> ExportResult:
    """Export ``[since, until)`` of one job from Prometheus, in range-query chunks of ``max_points``."""
    check_job_name(job)
    start, end = as_utc(since).to_pydatetime(), as_utc(until).to_pydatetime()
    chunks = query_chunks(start, end, step_s, max_points=max_points)
    columns: dict[str, list[pd.Series]] = {column: [] for column in COLUMNS_BY_QUERY.values()}
    sent = 0
    for key, column in COLUMNS_BY_QUERY.items():
        query = queries[key].replace("{worker_label}", worker_label)
        for chunk_start, chunk_end in chunks:
            try:
                result = client.custom_query_range(
                    query, start_time=chunk_start, end_time=chunk_end, step=f"{step_s:g}s"
                )
            except Exception as exc:  # noqa: BLE001 - the client raises many kinds; the CLI needs one line
                reason = " ".join(str(exc).split())
                reason = reason if len(reason) <= 160 else reason[:157] + "..."
                raise ExportError(f"prometheus query {key!r} for {chunk_start.isoformat()}: {reason}") from None
            sent += 1
            columns[column].append(_summed_series(result))
    grid = pd.Index(np.arange(start.timestamp(), end.timestamp(), step_s))
    frame = pd.DataFrame({"time": pd.to_datetime(grid.to_numpy(), unit="s", utc=True)})
    for column, parts in columns.items():
        series = pd.concat(parts) if parts else pd.Series(dtype=float)
        series = series[~series.index.duplicated(keep="last")]
        frame[column] = series.reindex(grid).to_numpy(float)
    # Rows where Prometheus had nothing at all are not history, just absence.
    present = frame[list(columns)].notna().any(axis=1)
    partitions = write_history(frame[present], out, job=job, since=start, until=end)
    return ExportResult(job=job, rows=int(present.sum()), partitions=partitions, queries=sent)


def export_frame(frame: pd.DataFrame, *, job: str, out: str, start: datetime | str, step_s: int) -> ExportResult:
    """Write a frame of samples on a ``step_s`` grid starting at ``start`` as ``job``'s history
    (e.g. a simulated one)."""
    check_job_name(job)
    first = as_utc(start)
    end = first + pd.Timedelta(seconds=len(frame) * step_s)
    partitions = write_history(frame, out, job=job, since=first, until=end)
    return ExportResult(job=job, rows=len(frame), partitions=partitions, queries=0)


def describe(result: ExportResult) -> str:
    """One line per partition and a total, for the CLI."""
    lines = [f"{p.path}: {p.rows} rows" for p in result.partitions]
    lines.append(f"{result.job}: {result.rows} samples in {len(result.partitions)} partition(s)")
    return "\n".join(lines)


MAX_RANGE = timedelta(days=366)
"""The longest span an export reads: a year, as long as ``perdix simulate --hours`` replays. Longer is no history a
forecast is retrained on (Prometheus keeps 15 days by default), and ``--since 99999d`` queried for minutes."""


def parse_range(since: str, until: str | None, *, now: datetime) -> tuple[datetime, datetime]:
    """``--since``/``--until`` as UTC datetimes; accepts ISO times or a duration like ``14d``/``6h`` before
    ``until``."""
    end = as_utc(until).to_pydatetime() if until else now
    text = since.strip()
    units: Mapping[str, str] = {"d": "D", "h": "h", "m": "min", "s": "s"}
    if text and text[-1] in units and text[:-1].replace(".", "", 1).isdigit():
        try:
            span = pd.Timedelta(float(text[:-1]), unit=units[text[-1]]).to_pytimedelta()
        except (OverflowError, ValueError):  # pandas' OutOfBoundsTimedelta is a ValueError
            span = None
        if span is None or span > MAX_RANGE:
            raise ExportError(f"--since: {text} is longer than the {MAX_RANGE.days} days an export reads at most")
        start = end - span
    else:
        try:
            start = as_utc(text).to_pydatetime()
        except HistoryError as exc:
            raise ExportError(f"--since: {exc}") from None
    if end <= start:
        raise ExportError(f"--until ({end.isoformat()}) must be after --since ({start.isoformat()})")
    if end - start > MAX_RANGE:
        raise ExportError(
            f"--since/--until: {start.isoformat()} to {end.isoformat()} is longer than the {MAX_RANGE.days} days an "
            "export reads at most"
        )
    return start, end
