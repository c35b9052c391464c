"""The Prometheus monitor: one range query per series over the window since the last loop, on one grid.

Every query lives in ``settings.prometheus.queries`` (defaults for the Flink Prometheus reporter and
Kafka). Answers are placed on a common grid of ``step_s`` points covering ``[since, now)`` (and handed
on at one per second, each held until the next: the analyzer counts seconds); a point
Prometheus has no value for is NaN, never zero, because a missing sample must not look like an idle
job. A series that is empty, stale, partial, rejected or of the wrong shape is named in
``Observation.gaps``; the loop does not act on a round without the data it needs. When Prometheus
itself cannot be reached (refused, timed out, every query failing) the round raises MonitorError.

Problems are logged once per state change and query name, not once per round, so an outage leaves
two lines (start and end) in the log instead of one per loop.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Protocol, TypedDict, TypeVar

import numpy as np
import requests
import urllib3
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from agent.logging import get_logger
from agent.observation import Observation
from agent.ports import MonitorError
from agent.settings import (
    COUNT_QUERIES,
    MAX_SOURCE_PARTITIONS,
    MEMORY_QUERIES,
    PARTITION_OFFSET_QUERIES,
    PARTITION_READ_QUERIES,
    REGEX_PLACEHOLDERS,
    ConfigError,
    PrometheusSettings,
)

SCALAR_QUERIES = ("workload", "consumer_lag", "parallelism", "uptime")
"""Queries that must answer with exactly one series."""
WORKER_QUERIES = ("throughput", "busy", "cpu", "worker_backlog")
"""Queries that must answer with one series per worker, told apart by ``worker_label``."""
PARTITION_LABEL = "partition"
"""The label kafka_exporter names a topic's partitions by."""
TASKMANAGER_LABEL = "tm_id"
"""The label Flink's reporter names a TaskManager by (the memory guard's series are per TaskManager)."""

K = TypeVar("K", str, int)
"""What a per-worker or per-partition series is keyed by."""
T = TypeVar("T")

PromPoint = list[float | str]
"""A sample as the HTTP API sends it: ``[unix time, "value"]``."""


class PromSeries(TypedDict, total=False):
    """One series of a query's ``data.result``: its labels and its samples (checked by :func:`_series_list`)."""

    metric: dict[str, str]
    values: list[PromPoint]
    """A range query's samples."""
    value: PromPoint
    """An instant query's sample."""


class EventLog(Protocol):
    """The structured log a monitor reports its series' states to."""

    def info(self, event: str, **fields: object) -> object:
        """Log an event at info level."""
        ...

    def warning(self, event: str, **fields: object) -> object:
        """Log an event at warning level."""
        ...


LIVE_TAIL_POINTS = 3
"""A worker counts as present if its series has a value in the last few grid points."""

_STATUS = re.compile(r"HTTP Status Code (\d+)")


class QueryFailed(Exception):
    """One query failed in a way that leaves the others usable (rejected, 5xx)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class PrometheusDown(Exception):
    """Prometheus itself did not answer (refused, timed out)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def connect(settings: PrometheusSettings) -> PrometheusConnect:
    """A prometheus-api-client connection with no hidden retries (the loop retries next round)."""
    return PrometheusConnect(
        url=settings.url.rstrip("/"),
        disable_ssl=not settings.url.startswith("https"),
        retry=Retry(total=0, raise_on_status=False),
        timeout=settings.timeout_s,
    )


def run_query(fn: Callable[[], T], settings: PrometheusSettings) -> T:
    """Call the client, translating its errors into PrometheusDown / QueryFailed."""
    try:
        return fn()
    except requests.exceptions.Timeout:
        raise PrometheusDown(
            "timeout", f"Prometheus at {settings.url} timed out after {settings.timeout_s:g} s"
        ) from None
    except requests.exceptions.JSONDecodeError as exc:  # a RequestException too: the server answered
        raise QueryFailed(
            "bad_answer",
            f"{settings.url} answered something that is not a Prometheus API response "
            f"(not JSON: {exc.msg} at character {exc.pos})",
        ) from None
    except requests.exceptions.RequestException as exc:
        raise PrometheusDown(*_unreachable(exc, settings)) from None
    except PrometheusApiClientException as exc:
        text = str(exc)
        match = _STATUS.search(text)
        status = int(match.group(1)) if match else 0
        detail = _error_detail(text)
        if status in (400, 422):
            raise QueryFailed("rejected", f"Prometheus rejected the query: {detail}") from None
        raise QueryFailed("server_error", f"Prometheus answered {status or 'an error'}: {detail}") from None
    except (KeyError, TypeError, IndexError):  # JSON, but without the data.result every API answer carries
        raise QueryFailed(
            "bad_answer",
            f"{settings.url} answered something that is not a Prometheus API response (JSON without data.result)",
        ) from None
    except ValueError as exc:  # a body that is not the JSON Prometheus sends
        raise QueryFailed("bad_answer", f"unreadable answer from Prometheus: {exc}") from None


def _unreachable(exc: requests.exceptions.RequestException, settings: PrometheusSettings) -> tuple[str, str]:
    """(kind, message) of a request that got no answer: a timeout, a name that does not resolve, a refusal."""
    # With retries off, urllib3 wraps the cause in MaxRetryError, which requests reports as a
    # ConnectionError: look at the underlying reason.
    underlying = getattr(exc.args[0], "reason", None) if exc.args else None
    if isinstance(underlying, urllib3.exceptions.NameResolutionError):
        host = urllib3.util.parse_url(settings.url).host
        return "unreachable", f"Prometheus at {settings.url} is not reachable (host name {host!r} does not resolve)"
    connecting = isinstance(underlying, urllib3.exceptions.NewConnectionError)  # a subclass of the timeout error
    if isinstance(underlying, urllib3.exceptions.TimeoutError) and not connecting:
        return "timeout", f"Prometheus at {settings.url} timed out after {settings.timeout_s:g} s"
    text = str(underlying if underlying is not None else exc)
    if "refused" in text.lower():
        reason = "connection refused"
    elif connecting:
        reason = "cannot connect: " + text.rpartition("]")[2].strip() if "]" in text else "cannot connect"
    else:
        reason = type(exc).__name__
    return "unreachable", f"Prometheus at {settings.url} is not reachable ({reason})"


def _is_point(point: object) -> bool:
    """True for the API's ``[unix time, "number"]`` sample (the value a string Python reads as a float)."""
    if not (
        isinstance(point, list)
        and len(point) == 2
        and isinstance(point[0], (int, float))
        and not isinstance(point[0], bool)
        and isinstance(point[1], str)
    ):
        return False
    try:
        float(point[1])
    except ValueError:
        return False
    return math.isfinite(point[0])


def _series_list(answer: object, *, points: str, settings: PrometheusSettings) -> list[PromSeries]:
    """``answer`` if it is the API's list of series, each with its labels and ``points`` ("values" of a
    range query, "value" of an instant one); QueryFailed ("bad_answer") naming what is wrong otherwise."""
    problem = None
    if not isinstance(answer, list):
        problem = f"data.result is {type(answer).__name__}, not a list of series"
    else:
        for series in answer:
            if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
                problem = "a series without its labels (metric)"
            elif points == "values" and not (
                isinstance(series.get("values"), list) and all(_is_point(p) for p in series["values"])
            ):
                problem = 'a series whose values are not [time, "value"] pairs'
            elif points == "value" and not _is_point(series.get("value")):
                problem = 'a series whose value is not a [time, "value"] pair'
            if problem:
                break
    if problem or not isinstance(answer, list):
        raise QueryFailed(
            "bad_answer", f"{settings.url} answered something that is not a Prometheus API response ({problem})"
        )
    return answer


_CONTENT = re.compile(r"\((b'.*'|b\".*\")\)\s*$", re.DOTALL)
"""The answer's body as the client quotes it: ``HTTP Status Code 400 (b'{...}')``."""


def _error_detail(text: str) -> str:
    """Prometheus' own ``error`` from the client's message: the body's bytes literal read back and parsed as JSON,
    not matched as text (a quote escaped inside the bytes literal ended the match at ``invalid parameter \\``)."""
    match = _CONTENT.search(text)
    if match:
        try:
            body = ast.literal_eval(match.group(1))
            error = json.loads(body).get("error") if isinstance(body, bytes) else None
        except (ValueError, SyntaxError, AttributeError, RecursionError):
            error = None
        if isinstance(error, str) and error:
            return " ".join(error.split())[:300]
    return text[:200]


def check_prometheus(settings: PrometheusSettings, *, skip: frozenset[str] = frozenset()) -> None:
    """At start: raise MonitorError if Prometheus does not answer, ConfigError naming a query it rejects.

    Every configured query runs once as an instant query, so a malformed PromQL query fails the start
    with its settings key instead of leaving a gap in every round.
    """
    prom = connect(settings)
    try:
        one = run_query(lambda: prom.custom_query("1"), settings)
    except PrometheusDown as exc:
        raise MonitorError(f"prometheus.url: {exc}") from None
    except QueryFailed as exc:
        if exc.kind == "bad_answer":
            raise MonitorError(f"prometheus.url: {exc}") from None
        raise MonitorError(f"prometheus.url: {settings.url} does not answer like Prometheus: {exc}") from None
    if not _is_point(one):  # the scalar 1 is answered as [time, "1"]
        raise MonitorError(
            f"prometheus.url: {settings.url} answered something that is not a Prometheus API response "
            f"(the query '1' gave {str(one)[:80]!r}, not [time, \"1\"])"
        )
    for name, query in settings.queries.model_dump().items():
        if name in skip or not query:
            continue
        rendered = settings.render(query)
        try:
            _series_list(run_query(partial(prom.custom_query, rendered), settings), points="value", settings=settings)
        except QueryFailed as exc:
            if exc.kind == "rejected":
                raise ConfigError(
                    f"prometheus.queries.{name}: {exc}{regex_culprits(query, str(exc), settings)}"
                ) from None
            if exc.kind == "bad_answer":
                raise MonitorError(f"prometheus.queries.{name}: {exc}") from None
        except PrometheusDown as exc:
            raise MonitorError(f"prometheus.url: {exc}") from None


def regex_culprits(query: str, error: str, settings: PrometheusSettings) -> str:
    """Where Prometheus refused a regular expression and ``query`` holds a label setting's, the settings it holds
    (the query itself may be the default and right): `` (the regular expression may be prometheus.flink_job
    'orders(' ...)``; else nothing. RE2's syntax is Prometheus' to judge, so the settings are named, not tried."""
    if "regexp" not in error:
        return ""
    held = [
        f"prometheus.{setting} {getattr(settings, setting)!r}"
        for placeholder, setting in REGEX_PLACEHOLDERS.items()
        if placeholder in query
    ]
    return f" (the regular expression may be {' or '.join(held)})" if held else ""


@dataclass(frozen=True)
class Grid:
    """The sample times of one window: ``start + k·step`` for every point in ``[since, now)``."""

    start: float
    step: float
    size: int

    @classmethod
    def covering(cls, since: float, now: float, step: float) -> Grid:
        """The grid points in ``[since, now)`` (half-open, so consecutive windows never overlap)."""
        start = math.ceil(since / step - 1e-9) * step
        size = max(0, math.ceil((now - start) / step - 1e-9))
        return cls(start, step, size)

    @property
    def times(self) -> np.ndarray:
        """The grid as an array."""
        return self.start + self.step * np.arange(self.size, dtype=float)

    def place(self, values: list[PromPoint]) -> np.ndarray:
        """Prometheus ``[[ts, "value"], ...]`` on the grid; points without a value (or ±Inf) are NaN."""
        out = np.full(self.size, np.nan)
        for ts, raw in values:
            index = int(round((float(ts) - self.start) / self.step))
            if 0 <= index < self.size and abs(float(ts) - (self.start + index * self.step)) < self.step / 2:
                value = float(raw)
                out[index] = value if math.isfinite(value) else np.nan
        return out


class SeriesStates:
    """Which queries (or Prometheus itself, as ``prometheus``) currently fail, and why: a change of state
    is logged once (``monitor.gap`` / ``monitor.unavailable``, then ``monitor.recovered``); every problem
    is counted through ``on_error``."""

    def __init__(
        self, log: EventLog, queries: Mapping[str, str], on_error: Callable[[str], None] | None, *, prefix: str = ""
    ) -> None:
        """``prefix``: put before a query's name in the logged ``series`` (e.g. ``operators.``)."""
        self.log, self.queries, self.on_error, self.prefix = log, queries, on_error, prefix
        self._state: dict[str, str] = {}

    def note(self, name: str, problem: str | None, detail: str = "") -> None:
        """Record ``name``'s state this round: ``problem`` (a kind) or None when it answered."""
        if problem is not None and self.on_error is not None:
            self.on_error(problem)
        before = self._state.get(name)
        if before == problem:
            return
        series = self.prefix + name
        if problem is None:
            self._state.pop(name, None)
            self.log.info("monitor.recovered", series=series, was=before)
        else:
            self._state[name] = problem
            event = "monitor.unavailable" if name == "prometheus" else "monitor.gap"
            self.log.warning(event, series=series, problem=problem, detail=detail, query=self.queries.get(name))


@dataclass
class _Readings:
    """One window's series by query, on the grid: one series per scalar query, one per worker, TaskManager or
    partition for the others."""

    scalars: dict[str, np.ndarray] = field(default_factory=dict)
    workers: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    partitions: dict[str, dict[int, np.ndarray]] = field(default_factory=dict)
    memory: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)


class PrometheusMonitor:
    """MetricSource reading the job's series from Prometheus with range queries (see the module doc)."""

    def __init__(
        self,
        settings: PrometheusSettings,
        *,
        client: PrometheusConnect | None = None,
        on_error: Callable[[str], None] | None = None,
        skip: frozenset[str] = frozenset(),
    ) -> None:
        """``skip``: queries not to run (the utilization signal the agent does not read)."""
        self.settings = settings
        self.client = client or connect(settings)
        self.queries = {
            name: settings.render(query)
            for name, query in settings.queries.model_dump().items()
            if name not in skip and query  # an optional query left empty is not read
        }
        self.on_error = on_error
        self.log = get_logger("perdix.monitor", url=settings.url)
        self._states = SeriesStates(self.log, self.queries, on_error)

    def _note(self, name: str, problem: str | None, detail: str = "") -> None:
        self._states.note(name, problem, detail)

    # ------------------------------------------------------------------ reading

    def _range(self, name: str, grid: Grid) -> list[PromSeries]:
        start = datetime.fromtimestamp(grid.start, tz=UTC)
        end = datetime.fromtimestamp(grid.start + grid.step * (grid.size - 1), tz=UTC)
        answer = run_query(
            lambda: self.client.custom_query_range(self.queries[name], start, end, f"{self.settings.step_s:g}"),
            self.settings,
        )
        return _series_list(answer, points="values", settings=self.settings)

    def observe(self, *, since: float, now: float) -> Observation:
        """The window ``[since, now)`` on the step grid; gaps are NaN and named; MonitorError if Prometheus is
        down."""
        step = self.settings.step_s
        # A step coarser than a second also reads the point at or before ``since``: held, it covers the
        # window's first seconds, which the previous window's grid left to this one.
        grid = Grid.covering(since if step == 1.0 else math.floor(since / step) * step, now, step)
        if grid.size == 0:
            raise MonitorError(f"empty window: since={since} now={now} step={step}")
        gaps: dict[str, str] = {}
        answers = self._answers(grid, gaps)
        readings = self._readings(answers, grid, now, gaps)
        return self._observation(readings, grid, gaps, since=since, now=now)

    def _answers(self, grid: Grid, gaps: dict[str, str]) -> dict[str, list[PromSeries]]:
        """Every query's answer over ``grid``; a failed query is a gap, and MonitorError when Prometheus is down
        or every query failed."""
        answers: dict[str, list[PromSeries]] = {}
        failed: dict[str, QueryFailed] = {}
        for name in self.queries:
            try:
                answers[name] = self._range(name, grid)
            except PrometheusDown as exc:
                self._note("prometheus", exc.kind, str(exc))
                raise MonitorError(str(exc)) from None
            except QueryFailed as exc:
                failed[name] = exc
                gaps[name] = f"{exc.kind}: {exc}"
        if len(failed) == len(self.queries):
            # One outage, one line: every query failing is Prometheus' state, not each query's.
            if self.on_error is not None:
                for failure in failed.values():
                    self.on_error(failure.kind)
            self._note("prometheus", "every_query_failed", "; ".join(gaps.values()))
            raise MonitorError("every Prometheus query failed: " + "; ".join(f"{k}: {v}" for k, v in gaps.items()))
        for name, failure in failed.items():
            self._note(name, failure.kind, str(failure))
        self._note("prometheus", None)
        return answers

    def _readings(
        self, answers: Mapping[str, list[PromSeries]], grid: Grid, now: float, gaps: dict[str, str]
    ) -> _Readings:
        """The answers checked and on the grid, by the shape each query must have."""
        readings = _Readings()
        for name in SCALAR_QUERIES:
            if name in answers:
                readings.scalars[name] = self._scalar(name, answers[name], grid, now, gaps)
        for name in WORKER_QUERIES:
            if name in answers:
                readings.workers[name] = self._per_worker(name, answers[name], grid, now, gaps)
        for name in PARTITION_OFFSET_QUERIES:
            if name in answers:
                readings.partitions[name] = self._per_partition(name, answers[name], grid, now, gaps)
        for name in PARTITION_READ_QUERIES:
            if name in answers and answers[name]:  # a job whose readers report no offsets: not known, no gap
                readings.partitions[name] = self._per_partition(name, answers[name], grid, now, gaps)
            elif name in answers:
                self._note(name, None)
        for name in MEMORY_QUERIES:
            if name in answers:
                readings.memory[name] = self._per_taskmanager(name, answers[name], grid, now, gaps)
        for name in COUNT_QUERIES:
            if name in answers:
                count = self._count(name, answers[name], grid, gaps)
                if count is not None:
                    readings.counts[name] = count
        return readings

    def _observation(
        self, readings: _Readings, grid: Grid, gaps: dict[str, str], *, since: float, now: float
    ) -> Observation:
        """The observation of the window, held at one point per second; a worker's other series count only for
        the workers that report a throughput."""
        scalars, workers, memory = readings.scalars, readings.workers, readings.memory
        offsets, ends_since, ends_span = _partition_offsets(
            readings.partitions.get("partition_end_offsets", {}),
            readings.partitions.get("partition_committed_offsets", {}),
            grid.step,
        )
        reads, reads_span = _partition_reads(readings.partitions.get("partition_read_offsets", {}), grid.step)
        nan = np.full(grid.size, np.nan)
        throughput = workers.get("throughput", {})
        cpu = workers.get("cpu", {})
        busy = workers.get("busy", {})
        backlog = workers.get("worker_backlog", {})
        return Observation(
            now=now,
            times=grid.times,
            workload=scalars.get("workload", nan.copy()),
            worker_throughput=throughput,
            worker_cpu={w: s for w, s in cpu.items() if w in throughput} if throughput else cpu,
            consumer_lag=scalars.get("consumer_lag", nan.copy()),
            parallelism=_last_int(scalars.get("parallelism")),
            uptime_s=_last_seconds(scalars.get("uptime")),
            uptime=None if scalars.get("uptime") is None else scalars["uptime"] / 1000.0,
            gaps=gaps,
            worker_busy={w: s for w, s in busy.items() if w in throughput} if throughput else busy,
            worker_backlog={w: s for w, s in backlog.items() if w in throughput},
            partition_offsets=offsets,
            partition_ends_since=ends_since,
            partition_ends_span_s=ends_span,
            partition_reads=reads,
            partition_reads_span_s=reads_span,
            source_partitions=readings.counts.get("source_partitions"),
            taskmanager_heap_usage=memory.get("heap_usage", {}),
            taskmanager_gc_pressure=memory.get("gc_time", {}),
            rate_window_s=float(self.settings.rate_window_s),
            rates_settled=self._settled(scalars.get("uptime"), grid.times),
        ).per_second(self.settings.step_s, since=since, until=now)

    def _settled(self, uptime: np.ndarray | None, times: np.ndarray) -> np.ndarray | None:
        """Per sample: False where a rate window reaches back before the job's last restart, else True.

        A restart replays the records read since the last checkpoint (the source counts them twice
        while the backlog grows by as many) and starts new series part-way through the window, so a
        rate over such a window is not the job's steady rate: the models skip those samples.
        """
        if uptime is None:
            return None
        window = self.settings.rate_window_s
        with np.errstate(invalid="ignore"):
            young = uptime / 1000.0 < window  # NaN compares False: unknown counts as settled
        # Each young sample dates the restart: its time less the uptime. The samples between that instant and
        # the scrape that showed it still hold the old attempt's uptime (a scrape interval of them, 15 s at
        # the usual scrape), while their rates already read the stop: they are unsettled too.
        restarts = np.unique(np.round(times[young] - uptime[young] / 1000.0, 3))
        for restart in restarts:
            young |= (times >= restart) & (times < restart + window)
        return ~young

    def _gap(self, gaps: dict[str, str], name: str, problem: str, detail: str) -> None:
        """``name`` has a gap this round: ``gaps[name]`` says what (``problem: detail``), and it is noted (logged
        when the series' state changes)."""
        gaps[name] = f"{problem.replace('_', ' ')}: {detail}"
        self._note(name, problem, gaps[name])

    def _stale(self, series: np.ndarray, grid: Grid, now: float) -> float | None:
        """Age of the newest sample if it is older than stale_after_s, else None."""
        finite = np.flatnonzero(np.isfinite(series))
        newest = grid.start + grid.step * finite[-1] if finite.size else None
        if newest is None:
            return None
        age = now - newest
        return age if age > self.settings.stale_after_s else None

    def _scalar(self, name: str, answer: list[PromSeries], grid: Grid, now: float, gaps: dict[str, str]) -> np.ndarray:
        empty = np.full(grid.size, np.nan)
        if not answer:
            self._gap(gaps, name, "empty", "the query returned no series")
            return empty
        if len(answer) > 1:
            labels = [series.get("metric", {}) for series in answer[:3]]
            self._gap(gaps, name, "wrong_shape", f"expected one series, got {len(answer)} (e.g. {labels})")
            return empty
        series = grid.place(answer[0].get("values", []))
        return self._checked(name, series, grid, now, gaps)

    def _checked(self, name: str, series: np.ndarray, grid: Grid, now: float, gaps: dict[str, str]) -> np.ndarray:
        missing = int(np.isnan(series).sum())
        if missing == grid.size:
            self._gap(gaps, name, "empty", "no value in the window (NaN or no samples)")
            return series
        age = self._stale(series, grid, now)
        if age is not None:
            self._gap(
                gaps, name, "stale", f"newest sample is {age:.0f} s old (stale_after_s={self.settings.stale_after_s:g})"
            )
            return np.full(grid.size, np.nan)
        if missing:
            self._gap(gaps, name, "partial", f"{missing} of {grid.size} samples missing")
            return series
        self._note(name, None)
        return series

    def _count(self, name: str, answer: list[PromSeries], grid: Grid, gaps: dict[str, str]) -> int | None:
        """The most the count reached over the window, or None: no series is a job that reports none (no gap);
        more than one series, or a value that is no count from 1 to :data:`MAX_SOURCE_PARTITIONS`, is a gap."""
        if not answer:
            self._note(name, None)
            return None
        if len(answer) > 1:
            self._gap(gaps, name, "wrong_shape", f"expected one series, got {len(answer)}")
            return None
        series = grid.place(answer[0].get("values", []))
        finite = series[np.isfinite(series)]
        if not finite.size:
            self._note(name, None)
            return None
        most = float(finite.max())
        if not (1 <= most <= MAX_SOURCE_PARTITIONS and most == round(most)):
            self._gap(gaps, name, "absurd", f"{most:g} is no count from 1 to {MAX_SOURCE_PARTITIONS:,}")
            return None
        self._note(name, None)
        return int(most)

    def _per_worker(
        self, name: str, answer: list[PromSeries], grid: Grid, now: float, gaps: dict[str, str]
    ) -> dict[str, np.ndarray]:
        out = self._series_by(name, answer, grid, gaps, self.settings.worker_label, lambda value: value or None)
        if out is None:
            return {}
        # Workers with a value at the end of the window are the ones running now; a worker removed by a
        # scale-in keeps a series that ends early and must not count as a current worker.
        tail = min(LIVE_TAIL_POINTS, grid.size)
        live = {w: s for w, s in out.items() if np.isfinite(s[-tail:]).any()}
        fresh = {w: s for w, s in live.items() if self._stale(s, grid, now) is None}
        if not fresh:
            self._gap(
                gaps, name, *(("stale", "no worker has a recent sample") if out else ("empty", "no worker series"))
            )
            return {}
        self._note(name, None)
        return fresh

    def _per_taskmanager(
        self, name: str, answer: list[PromSeries], grid: Grid, now: float, gaps: dict[str, str]
    ) -> dict[str, np.ndarray]:
        """One series per TaskManager (its ``tm_id``) with a recent value; {} and a gap otherwise. A value outside
        0..1 (a heap share or a fraction of time) is no reading: NaN."""
        out = self._series_by(name, answer, grid, gaps, TASKMANAGER_LABEL, lambda value: value or None)
        if out is None:
            return {}
        with np.errstate(invalid="ignore"):
            out = {tm: np.where((s >= 0) & (s <= 1.05), np.minimum(s, 1.0), np.nan) for tm, s in out.items()}
        fresh = {tm: s for tm, s in out.items() if np.isfinite(s).any() and self._stale(s, grid, now) is None}
        if not fresh:
            self._gap(gaps, name, "stale", "no TaskManager has a recent value in 0..1")
            return {}
        self._note(name, None)
        return fresh

    def _per_partition(
        self, name: str, answer: list[PromSeries], grid: Grid, now: float, gaps: dict[str, str]
    ) -> dict[int, np.ndarray]:
        """One series per source partition (its ``partition`` label, a number); {} and a gap otherwise."""
        out = self._series_by(
            name,
            answer,
            grid,
            gaps,
            PARTITION_LABEL,
            lambda value: int(value) if value.isascii() and value.isdigit() else None,
        )
        if out is None:
            return {}
        stale = [p for p, s in out.items() if self._stale(s, grid, now) is not None or not np.isfinite(s).any()]
        if stale:
            self._gap(gaps, name, "stale", f"partition(s) {', '.join(map(str, sorted(stale)))} without a recent offset")
            return {}
        self._note(name, None)
        return out

    def _series_by(
        self,
        name: str,
        answer: list[PromSeries],
        grid: Grid,
        gaps: dict[str, str],
        label: str,
        key: Callable[[str], K | None],
    ) -> dict[K, np.ndarray] | None:
        """The answer's series on the grid, one per value of ``label`` (``key`` of it; None: not a valid value);
        None and a gap when the query returned no series, or a series has no valid value or repeats one."""
        if not answer:
            self._gap(gaps, name, "empty", "the query returned no series")
            return None
        out: dict[K, np.ndarray] = {}
        for series in answer:
            metric: Mapping[str, str] = series.get("metric", {})
            value = metric.get(label, "")
            parsed = key(value)
            if parsed is None or parsed in out:
                problem = (
                    f"two series for {label}={value!r}"
                    if parsed is not None
                    else (f"a series is missing a valid {label!r} label")
                )
                self._gap(gaps, name, "wrong_shape", f"{problem} (labels {dict(metric)})")
                return None
            out[parsed] = grid.place(series.get("values", []))
        return out


def _partition_offsets(
    ends: Mapping[int, np.ndarray], committed: Mapping[int, np.ndarray], step: float
) -> tuple[tuple[tuple[int, int | None], ...] | None, tuple[int, ...] | None, float | None]:
    """``(partition_offsets, partition_ends_since, partition_ends_span_s)`` of the observation from the
    per-partition series on a grid of ``step`` seconds.

    Partitions in order of their number; each one's log-end offset and committed offset (None where the group
    has committed none: no series, or kafka_exporter's -1). The ends are those of the last grid point at which
    every partition has a value, and the committed offsets those of the same point where they have one (a lag
    read across two scrapes could come out negative); the ends at the window's start are those of the first
    such point, and the span the seconds between the two (None without two): what each partition received in
    between, over the same stretch for all, weighs it."""
    if not ends:
        return None, None, None
    order, matrix, common = _common_points(ends)
    at = int(common[-1]) if common.size else None
    offsets = tuple((int(_value_at(ends[p], at) or 0), _committed_at(committed.get(p), at)) for p in order)
    if common.size < 2:
        return offsets, None, None
    return offsets, tuple(int(v) for v in matrix[:, common[0]]), float(common[-1] - common[0]) * step


def _partition_reads(
    reads: Mapping[int, np.ndarray], step: float
) -> tuple[tuple[tuple[int, int], ...] | None, float | None]:
    """Per partition in order of its number, the offset its reader had read up to at the first and at the last
    grid point at which every partition has a value, and the seconds between the two: what each one was read over
    the same stretch. (None, None) without two such points."""
    if not reads:
        return None, None
    _, matrix, common = _common_points(reads)
    if common.size < 2:
        return None, None
    pairs = tuple((int(start), int(end)) for start, end in matrix[:, [common[0], common[-1]]])
    return pairs, float(common[-1] - common[0]) * step


def _common_points(series: Mapping[int, np.ndarray]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The partitions in order, their series stacked, and the grid points at which every one has a value."""
    order = sorted(series)
    matrix = np.vstack([series[p] for p in order])
    return order, matrix, np.flatnonzero(np.all(np.isfinite(matrix), axis=0))


def _value_at(series: np.ndarray, index: int | None) -> float | None:
    """``series`` at ``index`` where it has a value there, else its last value (None without any)."""
    if index is not None and np.isfinite(series[index]):
        return float(series[index])
    return _last_finite(series)


def _committed_at(series: np.ndarray | None, index: int | None) -> int | None:
    """A committed offset at ``index`` (see :func:`_value_at`); None for none or a negative one (kafka_exporter
    reports -1 for a partition the group never committed on)."""
    value = _value_at(series, index) if series is not None else None
    return int(value) if value is not None and value >= 0 else None


def _last_finite(series: np.ndarray | None) -> float | None:
    if series is None:
        return None
    finite = series[np.isfinite(series)]
    return float(finite[-1]) if finite.size else None


def _last_int(series: np.ndarray | None) -> int | None:
    value = _last_finite(series)
    return int(round(value)) if value is not None else None


def _last_seconds(series: np.ndarray | None) -> float | None:
    """Flink reports uptime in milliseconds."""
    value = _last_finite(series)
    return value / 1000.0 if value is not None else None
