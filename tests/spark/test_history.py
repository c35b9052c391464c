"""History on Parquet: explicit schema, partitions by job and date, idempotent re-export; the exporters."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.settings import PromQLQueries
from spark.export import (
    ExportError,
    export_from_prometheus,
    parse_range,
    prometheus_client,
)
from spark.history import SAMPLE_SCHEMA, HistoryError, query_chunks, read_history, write_history


def frame(start: str, minutes: int, *, value: float = 1.0) -> pd.DataFrame:
    """``minutes`` 1-min samples from ``start``, workload rate = ``value`` + minute index."""
    times = pd.Timestamp(start, tz="UTC") + pd.to_timedelta(np.arange(minutes), unit="min")
    rate = value + np.arange(minutes, dtype=float)
    return pd.DataFrame({"time": times, "workload_rate": rate, "throughput": rate, "parallelism": 2, "lag": 0.0})


@given(
    start_s=st.integers(0, 10**9),
    length_s=st.integers(1, 40 * 86_400),
    step_s=st.sampled_from([1.0, 15.0, 60.0, 300.0]),
    max_points=st.integers(2, 11_000),
)
def test_query_chunks_cover_the_range_without_overlap_and_within_the_point_limit(
    start_s: int, length_s: int, step_s: float, max_points: int
) -> None:
    since = datetime.fromtimestamp(start_s, tz=UTC)
    until = since + timedelta(seconds=length_s)
    chunks = query_chunks(since, until, step_s, max_points=max_points)
    assert chunks[0][0] == since
    assert chunks[-1][1] < until
    for (start, end), following in zip(chunks, chunks[1:] + [None]):
        points = (end - start).total_seconds() // step_s + 1
        assert points <= max_points
        if following is not None:
            # The next window starts exactly one step after this one's last sample.
            assert following[0] - start == timedelta(seconds=step_s * (points - 1) + step_s)
    samples = sum((end - start).total_seconds() // step_s + 1 for start, end in chunks)
    assert samples == -(-length_s // step_s)  # every grid point of [since, until) exactly once


def test_files_carry_the_explicit_schema_and_partition_by_job_and_date(tmp_path: Path) -> None:
    written = write_history(frame("2026-11-01T23:00", 120), str(tmp_path), job="orders")
    assert [(p.date, p.rows) for p in written] == [("2026-11-01", 60), ("2026-11-02", 60)]
    file = tmp_path / "job=orders" / "date=2026-11-02" / "part-0.parquet"
    assert pq.read_schema(file).remove_metadata() == SAMPLE_SCHEMA.remove_metadata()
    history = read_history(str(tmp_path))
    assert list(history.columns) == ["time", "workload_rate", "throughput", "parallelism", "lag", "job", "date"]
    assert history["time"].is_monotonic_increasing and len(history) == 120


def test_re_exporting_a_day_replaces_its_rows_and_never_duplicates(tmp_path: Path) -> None:
    root = str(tmp_path)
    write_history(frame("2026-11-01T00:00", 1440, value=1.0), root, job="orders")
    write_history(frame("2026-11-01T00:00", 1440, value=1.0), root, job="orders")
    assert len(read_history(root)) == 1440
    # A re-export of 06:00-07:00 with new values replaces exactly that hour, keeps the rest.
    write_history(
        frame("2026-11-01T06:00", 60, value=5000.0),
        root,
        job="orders",
        since="2026-11-01T06:00",
        until="2026-11-01T07:00",
    )
    history = read_history(root).set_index("time")
    assert len(history) == 1440
    assert history.loc["2026-11-01T06:30:00+00:00", "workload_rate"] == 5030.0
    assert history.loc["2026-11-01T05:59:00+00:00", "workload_rate"] == 1.0 + 359
    # An export of a range that now has no data removes that range's rows (the source is the truth).
    write_history(frame("2026-11-01T00:00", 0), root, job="orders", since="2026-11-01T00:00", until="2026-11-02T00:00")
    assert not (tmp_path / "job=orders" / "date=2026-11-01").exists()


def test_other_jobs_are_untouched_and_bad_values_become_gaps(tmp_path: Path) -> None:
    root = str(tmp_path)
    write_history(frame("2026-11-01", 10), root, job="a")
    bad = frame("2026-11-01", 10)
    bad.loc[3, "workload_rate"] = -5.0
    bad.loc[4, "lag"] = float("inf")
    write_history(bad, root, job="b")
    history = read_history(root)
    assert sorted(history["job"].unique()) == ["a", "b"]
    b = history[history["job"] == "b"].reset_index(drop=True)
    assert np.isnan(b.loc[3, "workload_rate"]) and np.isnan(b.loc[4, "lag"])
    assert read_history(root, jobs=["a"])["job"].unique().tolist() == ["a"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"job": "../etc"}, "job name"),
        ({"job": "ok", "since": "2026-11-02", "until": "2026-11-01"}, "empty time range"),
        ({"job": "ok", "since": "2026-11-01T00:30"}, "outside the exported range"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(HistoryError, match=message):
        write_history(frame("2026-11-01", 60), str(tmp_path), **kwargs)


def test_missing_column_names_the_column(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="lag"):
        write_history(frame("2026-11-01", 5).drop(columns="lag"), str(tmp_path), job="x")


def test_a_uri_location_works_like_a_path() -> None:
    root = "memory://perdix-tests/history"
    write_history(frame("2026-11-01", 30), root, job="orders")
    write_history(frame("2026-11-01", 30), root, job="orders")
    assert len(read_history(root)) == 30


def test_parse_range_accepts_durations_and_iso_times() -> None:
    now = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
    assert parse_range("14d", None, now=now) == (now - timedelta(days=14), now)
    start, end = parse_range("2026-11-01", "2026-11-02T12:00", now=now)
    assert (start.day, end.hour) == (1, 12)
    with pytest.raises(ExportError, match="--until"):
        parse_range("2026-11-03", "2026-11-02", now=now)


@pytest.mark.parametrize("since", ["200000d", "99999d", "367d", "2020-01-01"])
def test_a_range_longer_than_a_year_is_one_error_not_an_overflow_or_an_endless_export(since: str) -> None:
    """``200000d`` overflowed pandas' Timedelta (a traceback); ``99999d`` queried for minutes."""
    now = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
    with pytest.raises(ExportError, match="longer than the 366 days an export reads at most"):
        parse_range(since, None, now=now)
    assert parse_range("366d", None, now=now) == (now - timedelta(days=366), now)


# ---------------------------------------------------------------------- Prometheus (a real HTTP fake)


class FakePrometheus(BaseHTTPRequestHandler):
    """Serves /api/v1/query_range from formulas of time; refuses ranges over 11,000 points like Prometheus."""

    requests: list[dict[str, float | str]] = []

    def log_message(self, *args: object) -> None:  # keep pytest output quiet
        return None

    def do_GET(self) -> None:  # noqa: N802 - the http.server hook name
        url = urlparse(self.path)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        start, end, step = float(params["start"]), float(params["end"]), float(params["step"].rstrip("s"))
        points = int((end - start) // step) + 1
        self.requests.append({"query": params["query"], "points": points})
        if url.path != "/api/v1/query_range":
            self.send_error(404)
            return
        if points > 11_000:
            self._reply(400, {"status": "error", "error": "exceeded maximum resolution of 11,000 points"})
            return
        stamps = start + step * np.arange(points)
        query = params["query"]
        if "numRecordsOut" in query and "pendingRecords" in query:  # the workload: reads plus backlog growth
            series = [({}, 100.0 + stamps % 3600)]
        elif query.startswith("max(count by"):  # the running source subtasks
            series = [({}, 2.0 + 0 * stamps)]
        elif "numRecordsOut" in query:
            # Two workers; the exporter must sum them. Worker 2 is absent for the first hour.
            series = [
                ({"pod": "tm-1"}, 60.0 + 0 * stamps),
                ({"pod": "tm-2"}, np.where(stamps < T0 + 3600, np.nan, 40.0)),
            ]
        else:  # the backlog
            series = [({}, 7.0 + 0 * stamps)]
        result = [
            {"metric": labels, "values": [[float(t), str(v)] for t, v in zip(stamps, values) if np.isfinite(v)]}
            for labels, values in series
        ]
        self._reply(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


T0 = datetime(2026, 11, 1, tzinfo=UTC).timestamp()


@pytest.fixture()
def prometheus() -> Iterator[str]:
    FakePrometheus.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_prometheus_export_chunks_sums_workers_and_is_idempotent(prometheus: str, tmp_path: Path) -> None:
    root = str(tmp_path)
    client = prometheus_client(prometheus, timeout_s=5)
    kwargs = dict(
        client=client,
        job="orders",
        since="2026-11-01T00:00",
        until="2026-11-02T12:00",
        out=root,
        queries=PromQLQueries().model_dump(),
        step_s=15.0,
        max_points=2000,
    )
    result = export_from_prometheus(**kwargs)
    span_points = 36 * 3600 // 15
    assert result.rows == span_points
    assert result.queries == 4 * 5  # 8640 points in chunks of <= 2000, for each of 4 queries
    assert max(r["points"] for r in FakePrometheus.requests) <= 2000
    export_from_prometheus(**kwargs)
    history = read_history(root).set_index("time")
    assert len(history) == span_points and history.index.is_unique
    assert history.loc["2026-11-01T00:10:00+00:00", "workload_rate"] == 100.0 + 600
    assert history.loc["2026-11-01T00:10:00+00:00", "throughput"] == 60.0  # one worker yet
    assert history.loc["2026-11-01T05:00:00+00:00", "throughput"] == 100.0  # both workers summed
    assert (history["parallelism"] == 2).all() and (history["lag"] == 7.0).all()


def test_prometheus_errors_become_one_line(prometheus: str, tmp_path: Path) -> None:
    client = prometheus_client(prometheus, timeout_s=5)
    with pytest.raises(ExportError, match="prometheus query 'workload'.*11,000"):
        export_from_prometheus(
            client=client,
            job="orders",
            since="2026-11-01",
            until="2026-11-03",
            out=str(tmp_path),
            queries=PromQLQueries().model_dump(),
            step_s=1.0,
            max_points=20_000,
        )


@pytest.mark.parametrize("moment", ["9999-12-31", "0001-01-01", "1677-09-21T00:13:00", "2262-04-11T23:30:00", -1.0])
def test_a_time_no_history_holds_is_one_error_not_an_overflow_later(moment: str | float) -> None:
    """``--since 9999-12-31`` with ``--from-simulation`` overflowed pandas' clock once hours were added to it."""
    from spark.history import HistoryError, as_utc

    with pytest.raises(HistoryError, match="not a time of a job's history"):
        as_utc(moment)
    assert as_utc("2199-12-31T23:59:59").year == 2199 and as_utc(0.0).year == 1970


@pytest.mark.parametrize(
    ("times", "message"),
    [
        ([0.0, 366 * 86400.0 * 3], "history spans 1,098 days, more than the 366 a retraining reads"),
        ([0.0, 60.0, 120.0, 100 * 86400.0], "history has a gap of"),
    ],
)
def test_a_history_no_grid_should_be_built_for_is_refused_before_it_is(times: list[float], message: str) -> None:
    """Two samples a thousand years apart asked the resampling for a grid of gigabytes (a MemoryError, or minutes)."""
    import pandas as pd

    from spark.history import HistoryError
    from spark.training import resample

    frame = pd.DataFrame({"time": times, "workload_rate": [1000.0] * len(times)})
    with pytest.raises(HistoryError, match=message):
        resample(frame, step_s=60, max_gap_s=600)


@pytest.mark.parametrize(
    ("rates", "message"),
    [
        ([None] * 5, "no workload_rate values"),
        ([1e308] * 5, "no workload rate between 0 and 1e\\+12"),
        ([-1.0] * 5, "no workload rate between 0 and 1e\\+12"),
    ],
)
def test_a_history_of_rates_no_job_has_is_one_error_not_an_overflow_in_the_fit(
    rates: list[float | None], message: str
) -> None:
    """Rates of 1e308 overflowed every sum of the fit (numpy warnings, then an unrelated ValueError)."""
    from spark.training import resample

    frame = pd.DataFrame({"time": [0.0, 60.0, 120.0, 180.0, 240.0], "workload_rate": rates})
    with pytest.raises(HistoryError, match=message):
        resample(frame, step_s=60, max_gap_s=600)


def test_absurd_rates_among_good_ones_are_gaps() -> None:
    from spark.training import resample

    frame = pd.DataFrame({"time": [0.0, 60.0, 120.0, 180.0], "workload_rate": [100.0, 1e308, -5.0, 130.0]})
    series = resample(frame, step_s=60, max_gap_s=600)
    assert series.values.tolist() == [100.0, 110.0, 120.0, 130.0]


def test_a_history_with_nothing_for_the_jobs_asked_is_one_error_not_zero_published(tmp_path: Path) -> None:
    """``retrain --job`` of a job the history does not hold, or an empty history, reported 0 published and exit 0."""
    from models.registry import RegistryError
    from spark.registry import ModelRegistry

    root = str(tmp_path / "history")
    write_history(frame("2026-11-01T00:00", 60), root, job="orders")
    assert set(read_history(root, jobs=["orders"])["job"]) == {"orders"}
    with pytest.raises(HistoryError, match="no history rows for job.s. payments"):
        read_history(root, jobs=["payments"])
    with pytest.raises(HistoryError, match="no history for job.s. payments"):
        read_history(root, jobs=["orders", "payments"])
    (tmp_path / "registry").write_text("a file")
    with pytest.raises(RegistryError, match="not a directory, cannot publish"):
        ModelRegistry(str(tmp_path / "registry"))
