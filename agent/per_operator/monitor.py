"""The per-operator monitor: every job vertex's subtask series from Prometheus, and the job graph from REST.

Prometheus (:class:`VertexMonitor`): one range query per per-vertex query (``operators.queries``) over
the round's window, placed on the same 1-s grid as the whole-job monitor's (``agent.monitor.prometheus``,
whose connection and error handling it shares), split by Flink's ``task_id`` (the vertex) and
``subtask_index``. A required query (records in and out, busy time) that fails or answers nothing is a
named gap and the round does not plan; a state query that answers nothing means the job has no such
state, which is not a gap.

Flink's REST API (:class:`FlinkGraphReader`): ``/jobs/{id}`` for the vertices (name, parallelism, max
parallelism), ``/jobs/{id}/plan`` for the edges, ``/taskmanagers`` for the slot profile (managed memory
and CPU per slot). It reads through the flink-rest scaler's client, so it finds the job the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import numpy as np
from prometheus_api_client import PrometheusConnect

from agent.execute.flink_rest import FlinkRestScaler
from agent.json_types import as_object, member, objects
from agent.logging import get_logger
from agent.monitor.prometheus import (
    Grid,
    PrometheusDown,
    PromSeries,
    QueryFailed,
    SeriesStates,
    connect,
    run_query,
)
from agent.operator_settings import REQUIRED_QUERIES, SUBTASK_LABEL, VERTEX_LABEL, OperatorQueries
from agent.per_operator.observation import GraphVertex, JobGraph, OperatorObservation, VertexSeries
from agent.ports import MonitorError, ScalerError
from agent.settings import PrometheusSettings
from planner.graph import MemoryProfile
from planner.peer_types import integer_from_json, number_from_json


class VertexMonitor:
    """Reads every per-vertex query for the window ``[since, now)``; see the module docstring."""

    def __init__(
        self,
        prometheus: PrometheusSettings,
        queries: OperatorQueries,
        *,
        client: PrometheusConnect | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = prometheus
        self.client = client or connect(prometheus)
        self.queries = {name: prometheus.render(query) for name, query in queries.model_dump().items()}
        self.on_error = on_error
        self.log = get_logger("perdix.monitor.operators", url=prometheus.url)
        self._states = SeriesStates(self.log, self.queries, on_error, prefix="operators.")

    def _note(self, name: str, problem: str | None, detail: str = "") -> None:
        self._states.note(name, problem, detail)

    def _range(self, query: str, start: datetime, end: datetime) -> list[PromSeries]:
        # The HTTP API's matrix result, as the client returns it: a list of PromSeries.
        return run_query(
            lambda: self.client.custom_query_range(query, start, end, f"{self.settings.step_s:g}"), self.settings
        )

    def read(self, *, since: float, now: float) -> tuple[np.ndarray, dict[str, VertexSeries], dict[str, str]]:
        """The grid, the series by vertex id, and the gaps; MonitorError if Prometheus does not answer."""
        grid = Grid.covering(since, now, self.settings.step_s)
        if grid.size == 0:
            raise MonitorError(f"empty window: since={since} now={now} step={self.settings.step_s}")
        start = datetime.fromtimestamp(grid.start, tz=UTC)
        end = datetime.fromtimestamp(grid.start + grid.step * (grid.size - 1), tz=UTC)
        by_vertex: dict[str, dict[str, dict[str, np.ndarray]]] = {}
        gaps: dict[str, str] = {}
        for name, query in self.queries.items():
            try:
                answer = self._range(query, start, end)
            except PrometheusDown as exc:
                self._note("prometheus", exc.kind, str(exc))
                raise MonitorError(str(exc)) from None
            except QueryFailed as exc:
                self._note(name, exc.kind, str(exc))
                gaps[name] = f"{exc.kind}: {exc}"
                continue
            placed = 0
            for series in answer:
                labels: Mapping[str, str] = series.get("metric", {})
                vertex, subtask = labels.get(VERTEX_LABEL), labels.get(SUBTASK_LABEL)
                if not vertex or subtask is None:
                    continue
                by_vertex.setdefault(vertex, {}).setdefault(name, {})[subtask] = grid.place(series.get("values", []))
                placed += 1
            if placed == 0 and name in REQUIRED_QUERIES:
                gaps[name] = f"empty: no series with {VERTEX_LABEL} and {SUBTASK_LABEL} labels"
                self._note(name, "empty", gaps[name])
            elif name not in gaps:
                self._note(name, None)
        self._note("prometheus", None)
        series_by_vertex = {vid: VertexSeries(vid, queries) for vid, queries in by_vertex.items()}
        return grid.times, series_by_vertex, gaps


class FlinkGraphReader:
    """Reads the job graph and the TaskManagers' slot profile through the flink-rest scaler's client."""

    def __init__(self, scaler: FlinkRestScaler) -> None:
        self.scaler = scaler

    def read(self) -> JobGraph:
        """The job's vertices in topological order with their edges; ScalerError if the REST API cannot say."""
        job = self.scaler.job_state()
        plan = as_object(self.scaler.client.get(f"/jobs/{job.job_id}/plan"))
        nodes = {str(n.get("id")): n for n in objects(member(plan, "plan").get("nodes", []))}
        vertices: list[GraphVertex] = []
        for vertex in job.vertices:
            inputs = objects((nodes.get(vertex.id) or {}).get("inputs") or [])
            upstream = tuple(str(i["id"]) for i in inputs if "id" in i)
            vertices.append(GraphVertex(vertex.id, vertex.name, vertex.parallelism, vertex.max_parallelism, upstream))
        known = {v.id for v in vertices}
        for graph_vertex in vertices:
            missing = [u for u in graph_vertex.upstream if u not in known]
            if missing:
                raise ScalerError(
                    f"job {job.name}: the plan names inputs {missing} of {graph_vertex.name} that are no vertex",
                    kind="invalid_target",
                )
        return JobGraph(job.job_id, job.name, _topological(vertices), self._profile())

    def _profile(self) -> MemoryProfile | None:
        """Managed memory and CPU per slot of the first TaskManager (None when none reports it)."""
        try:
            answer = self.scaler.client.get("/taskmanagers")
        except ScalerError:
            return None
        for tm in objects(as_object(answer).get("taskmanagers", [])):
            slots = integer_from_json(tm.get("slotsNumber") or 0)
            total = member(tm, "totalResource")
            if slots > 0 and "managedMemory" in total:
                return MemoryProfile(
                    managed_memory_per_slot_mb=number_from_json(total["managedMemory"]) / slots,
                    cpu_per_slot=number_from_json(total.get("cpuCores") or slots) / slots,
                )
        return None


def _topological(vertices: list[GraphVertex]) -> tuple[GraphVertex, ...]:
    """Graph vertices in topological order (stable)."""
    placed: set[str] = set()
    ordered: list[GraphVertex] = []
    remaining = list(vertices)
    while remaining:
        ready = [v for v in remaining if all(u in placed for u in v.upstream)]
        if not ready:
            raise ScalerError(f"the job graph has a cycle through {[v.name for v in remaining]}", kind="invalid_target")
        ordered += ready
        placed |= {v.id for v in ready}
        remaining = [v for v in remaining if v.id not in placed]
    return tuple(ordered)


class OperatorMonitor:
    """The per-operator observation of one round: the graph (REST) and every vertex's series (Prometheus)."""

    def __init__(self, vertices: VertexMonitor, graph: FlinkGraphReader) -> None:
        self.vertices = vertices
        self.graph = graph

    def observe(self, *, since: float, now: float) -> OperatorObservation:
        """Read both; MonitorError when either source does not answer."""
        try:
            graph = self.graph.read()
        except ScalerError as exc:
            raise MonitorError(f"job graph: {exc}") from None
        times, series, gaps = self.vertices.read(since=since, now=now)
        missing = [v.name for v in graph.vertices if v.id not in series]
        if missing and not gaps:
            gaps = {"vertices": f"no series for {', '.join(missing)}"}
        return OperatorObservation(now=now, times=times, graph=graph, vertices=series, gaps=gaps)
