"""The job graph as the planner reads it: its vertices, their metrics, and the TaskManagers' memory.

A Flink job is a DAG of vertices (chains of operators). A per-vertex policy reads every vertex of the round's
:class:`planner.types.PlanInput`; a whole-job policy reads none (the job is then one vertex,
:data:`planner.types.JOB`). Frozen dataclasses, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MIN_BUSY_FRACTION = 0.01
"""Below this busy fraction a subtask's true rate is undefined (DS2 eq. 1 with W_u -> 0)."""


@dataclass(frozen=True)
class VertexMetrics:
    """One vertex over a policy interval, from Flink's own metrics (means over the interval)."""

    records_in_rate: float
    """Records/s the vertex's subtasks took in, summed (a source: records it read)."""
    records_out_rate: float
    """Records/s the vertex emitted, summed."""
    busy_mean: float | None
    """Mean busy fraction (0..1) over the subtasks."""
    busy_max: float | None
    """Busy fraction of the busiest subtask: the one that saturates first under skew."""
    backpressure_mean: float | None = None
    """Mean back-pressured fraction (0..1) over the subtasks."""
    true_processing_rate: float | None = None
    """``o_i[lambda_p]``: sum over subtasks of records in per second of busy time; None if undefined."""
    true_output_rate: float | None = None
    """``o_i[lambda_o]``: the same for records out."""
    state_size_bytes: float | None = None
    """Live keyed state of the vertex (RocksDB's estimate, summed over subtasks); None: stateless or unread."""
    managed_memory_used_bytes: float | None = None
    """Managed memory the state backend uses (block cache with memtables), summed over subtasks."""
    cache_hit_rate: float | None = None
    """Share of block-cache lookups that hit (Justin's theta); None when the vertex reports none."""
    state_latency_ms: float | None = None
    """Median latency of a keyed-state access (Justin's tau), ms; None when not tracked."""
    rated_subtasks: int = 0
    """Subtasks whose true rate is defined (busy above :data:`MIN_BUSY_FRACTION`); the true rates sum over them."""

    @property
    def true_rate_per_subtask(self) -> float | None:
        """DS2's average true processing rate per instance, over the subtasks where it is defined."""
        if self.true_processing_rate is None or self.rated_subtasks < 1 or self.true_processing_rate <= 0:
            return None
        return self.true_processing_rate / self.rated_subtasks

    @property
    def stateful(self) -> bool:
        """The vertex keeps keyed state in the state backend (it reports its metrics)."""
        return any(v is not None for v in (self.state_size_bytes, self.cache_hit_rate, self.state_latency_ms))

    @property
    def selectivity(self) -> float | None:
        """Records out per record in: true rates where defined, observed rates otherwise; None if nothing came in."""
        if self.true_processing_rate and self.true_output_rate is not None:
            return self.true_output_rate / self.true_processing_rate
        if self.records_in_rate > 0:
            return self.records_out_rate / self.records_in_rate
        return None


@dataclass(frozen=True)
class VertexInput:
    """One job vertex: where it sits in the graph, how it runs now, what it did over the interval."""

    id: str
    name: str
    parallelism: int
    upstream: tuple[str, ...] = ()
    """Ids of the vertices that feed it; empty for a source."""
    max_parallelism: int = 0
    """Flink's max parallelism of the vertex (key groups); 0: unknown, no bound."""
    metrics: VertexMetrics | None = None

    @property
    def is_source(self) -> bool:
        """The vertex reads from outside the job."""
        return not self.upstream


@dataclass(frozen=True)
class MemoryProfile:
    """What each task slot of the TaskManagers gets now."""

    managed_memory_per_slot_mb: float
    """Managed memory (the state backend's cache) per slot, MB; 0 for none."""
    cpu_per_slot: float = 1.0
    """CPU cores per slot."""


@dataclass(frozen=True)
class MemoryPressure:
    """The worst TaskManager's heap usage and GC time over the round (None: not read, or no value)."""

    heap_usage: float | None = None
    """Heap used over heap max (0..1) of the fullest TaskManager, its mean over the round."""
    heap_taskmanager: str | None = None
    gc_pressure: float | None = None
    """Fraction of time (0..1) the busiest TaskManager spent in GC over the round."""
    gc_taskmanager: str | None = None


def check_topological(vertices: Sequence[VertexInput]) -> None:
    """Raise ValueError unless ids are unique and every vertex comes after its upstream vertices."""
    seen: set[str] = set()
    for vertex in vertices:
        if vertex.id in seen:
            raise ValueError(f"vertex {vertex.id!r} appears twice")
        missing = [u for u in vertex.upstream if u not in seen]
        if missing:
            raise ValueError(f"vertex {vertex.name or vertex.id}: upstream {missing} not before it (topological order)")
        if vertex.parallelism < 1:
            raise ValueError(f"vertex {vertex.name or vertex.id}: parallelism must be >= 1, got {vertex.parallelism}")
        seen.add(vertex.id)
