"""The per-operator observation: what each job vertex's subtasks did since the last round, and the job graph.

Two parts, from two sources. :class:`VertexObservation` is the Prometheus side: per vertex (Flink's
``task_id``) and per subtask, the series of every per-vertex query on the round's 1-s grid, NaN where a
sample is missing, like the whole-job :class:`agent.observation.Observation`. :class:`JobGraph` is the
REST side: the vertices with their names, parallelism, max parallelism and upstream vertices (the edges
of ``/jobs/{id}/plan``), and the TaskManagers' slot profile. :meth:`OperatorObservation.plan_vertices`
joins them into the planner's input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from agent.observation import MAX_FRACTION, MAX_RATE, MAX_RECORDS

from planner.graph import MemoryProfile, VertexInput, VertexMetrics
from planner.per_operator import metrics_from_subtasks, topological

LIVE_TAIL_POINTS = 3
"""A subtask counts as running if its series has a value in the last few grid points (a scale-in ends the others)."""


@dataclass(frozen=True, eq=False)
class VertexSeries:
    """One vertex's per-subtask series over the window: query name -> subtask index -> values on the grid."""

    id: str
    series: Mapping[str, Mapping[str, np.ndarray]]

    def means(self, query: str, *, running: frozenset[str] | None = None) -> dict[str, float]:
        """Mean of each subtask's finite samples of ``query`` (subtasks without any, or not running, left out)."""
        out: dict[str, float] = {}
        for subtask, values in self.series.get(query, {}).items():
            if running is not None and subtask not in running:
                continue
            finite = values[np.isfinite(values)]
            if finite.size:
                out[subtask] = float(finite.mean())
        return out

    def running_subtasks(self, query: str = "records_in") -> frozenset[str]:
        """Subtasks with a sample of ``query`` in the window's last points (the ones that run now)."""
        return frozenset(
            subtask
            for subtask, values in self.series.get(query, {}).items()
            if values.size and np.isfinite(values[-LIVE_TAIL_POINTS:]).any()
        )

    def metrics(self) -> VertexMetrics:
        """The planner's view of the vertex: means over the window of its running subtasks, DS2's true rates."""
        running = self.running_subtasks()

        def means(query: str) -> dict[str, float]:
            return self.means(query, running=running)

        return metrics_from_subtasks(
            records_in=means("records_in"),
            records_out=means("records_out"),
            busy=means("busy"),
            backpressure=means("backpressure"),
            state_size_bytes=means("state_size"),
            managed_memory_used_bytes=means("managed_memory_used"),
            cache_hit_rate=means("cache_hit_rate"),
            state_latency_ms=means("state_latency"),
        )


@dataclass(frozen=True)
class GraphVertex:
    """One vertex of the job graph as the REST API describes it."""

    id: str
    name: str
    parallelism: int
    max_parallelism: int = 0
    upstream: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobGraph:
    """The job's vertices in topological order and the slot profile of its TaskManagers."""

    job_id: str
    name: str
    vertices: tuple[GraphVertex, ...]
    profile: MemoryProfile | None = None
    """Managed memory and CPU per slot of the TaskManagers (the first one's; they share a configuration)."""

    @property
    def parallelism(self) -> dict[str, int]:
        """Parallelism of every vertex by id."""
        return {v.id: v.parallelism for v in self.vertices}

    def name_of(self, vertex_id: str) -> str:
        """The vertex's name (its id if unknown)."""
        return next((v.name for v in self.vertices if v.id == vertex_id), vertex_id)


@dataclass(frozen=True, eq=False)
class OperatorObservation:
    """One round of the per-operator path: the job graph and every vertex's series."""

    now: float
    times: np.ndarray
    graph: JobGraph
    vertices: Mapping[str, VertexSeries]
    """Series by vertex id (Flink's task_id)."""
    gaps: Mapping[str, str] = field(default_factory=dict)
    """Query name -> why it is missing (required queries only; an empty state query means stateless)."""

    @property
    def usable(self) -> bool:
        """Records and busy time were read for every vertex of the graph."""
        return not self.gaps and all(
            v.id in self.vertices and self.vertices[v.id].means("busy") for v in self.graph.vertices
        )

    def plan_vertices(self) -> tuple[VertexInput, ...]:
        """The planner's vertices: the graph's, each with its metrics (None where the monitor saw nothing)."""
        vertices = []
        for v in self.graph.vertices:
            seen = self.vertices.get(v.id)
            vertices.append(
                VertexInput(
                    id=v.id,
                    name=v.name,
                    parallelism=v.parallelism,
                    upstream=v.upstream,
                    max_parallelism=v.max_parallelism,
                    metrics=seen.metrics() if seen is not None else None,
                )
            )
        return topological(vertices)


VERTEX_BOUNDS: Mapping[str, tuple[float, str]] = {
    "records_in": (MAX_RATE, "records/s"),
    "records_out": (MAX_RATE, "records/s"),
    "busy": (MAX_FRACTION, "of the time"),
    "backpressure": (MAX_FRACTION, "of the time"),
    "cache_hit_rate": (MAX_FRACTION, "of the lookups"),
    "state_size": (MAX_RECORDS, "bytes"),
    "managed_memory_used": (MAX_RECORDS, "bytes"),
    "state_latency": (3_600_000.0, "ms"),
}
"""The highest value each per-vertex query can take (every one is non-negative); the same bounds as the
whole-job readings (:class:`agent.observation.ReadingBounds`), and an hour for a state access."""


def screened_operators(observation: OperatorObservation) -> OperatorObservation:
    """``observation`` with every per-subtask sample a job cannot report (negative, non-finite, above its bound in
    :data:`VERTEX_BOUNDS`) turned into a gap (NaN), each query with such samples named in ``gaps``.

    The per-vertex twin of :func:`agent.observation.screened`: a rate of -1000/s or a busy time of 5000 ms/s
    must not size a vertex. A query that lost samples this way is a gap, so the round plans nothing on it.
    """
    gaps = dict(observation.gaps)
    vertices: dict[str, VertexSeries] = {}
    changed = False
    for vertex_id, vertex in observation.vertices.items():
        series: dict[str, Mapping[str, np.ndarray]] = {}
        for query, subtasks in vertex.series.items():
            high, unit = VERTEX_BOUNDS.get(query, (math.inf, ""))
            checked: dict[str, np.ndarray] = {}
            bad_samples = 0
            for subtask, values in subtasks.items():
                values = np.asarray(values, dtype=float)
                with np.errstate(invalid="ignore"):
                    bad = ~np.isnan(values) & ~((values >= 0) & (values <= high))
                bad_samples += int(bad.sum())
                checked[subtask] = np.where(bad, np.nan, values) if bad.any() else values
            if bad_samples:
                changed = True
                gaps[query] = f"absurd: {bad_samples} sample(s) negative, non-finite or above {high:g} {unit}"
            series[query] = checked
        vertices[vertex_id] = VertexSeries(id=vertex.id, series=series)
    if not changed:
        return observation
    return replace(observation, vertices=vertices, gaps=gaps)
