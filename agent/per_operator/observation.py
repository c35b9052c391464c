"""The per-operator observation: what each job vertex's subtasks did since the last round, and the job graph.

Two parts, from two sources. :class:`VertexObservation` is the Prometheus side: per vertex (Flink's
``task_id``) and per subtask, the series of every per-vertex query on the round's 1-s grid, NaN where a
sample is missing, like the whole-job :class:`agent.observation.Observation`. :class:`JobGraph` is the
REST side: the vertices with their names, parallelism, max parallelism and upstream vertices (the edges
of ``/jobs/{id}/plan``), and the TaskManagers' slot profile. :meth:`OperatorObservation.plan_vertices`
joins them into the planner's input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from planner.per_operator import MemoryProfile, VertexInput, VertexMetrics, metrics_from_subtasks, topological

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
            subtask for subtask, values in self.series.get(query, {}).items()
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
            vertices.append(VertexInput(
                id=v.id, name=v.name, parallelism=v.parallelism, upstream=v.upstream,
                max_parallelism=v.max_parallelism, metrics=seen.metrics() if seen is not None else None,
            ))
        return topological(vertices)
