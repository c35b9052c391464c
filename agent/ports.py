"""The side-effecting roles of the loop, each a small protocol with one production and one test fake.

monitor (MetricSource) -> analyze (models/) -> plan (planner/) -> execute (Scaler) -> knowledge
(KnowledgeStore), with an EventSink for the Kubernetes Events a rescale leaves behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeAlias, runtime_checkable

from agent.json_types import JsonObject
from agent.observation import Observation
from planner.safeguards import SlotResources


KnowledgeDocument: TypeAlias = JsonObject
"""The knowledge document: a JSON object (validated against its schema by the agent when loaded)."""


class MonitorError(Exception):
    """The monitor could not produce an observation this round (the loop skips acting)."""


class ScalerError(Exception):
    """A rescale could not be applied or confirmed; ``kind`` says why (forbidden, not_found, conflict, ...)."""

    def __init__(self, message: str, *, kind: str = "error", retryable: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable


@runtime_checkable
class MetricSource(Protocol):
    """Reads the job's metrics since ``since`` up to ``now`` (the monitor)."""

    def observe(self, *, since: float, now: float) -> Observation:
        """Return the observation of the window; gaps are NaN. Raises MonitorError if nothing could be read."""
        ...


@dataclass(frozen=True)
class RescaleResult:
    """What the scaler confirmed after a rescale request."""

    requested: int
    confirmed: int | None
    """Parallelism read back from the target after the write; None if it could not be confirmed."""
    dry_run: bool
    downtime_s: float | None = None
    """Measured time the job did not process (stop to all tasks running), seconds; None if not measured."""
    resumed_at: float | None = None
    """Unix seconds at which every task ran again, when the scaler saw it (the stop is over by then)."""
    pending: bool = False
    """True when the request was sent but the wait for its confirmation was cut short (the daemon is stopping):
    the job's side finishes it, and the next start reads how it ended."""


@runtime_checkable
class Scaler(Protocol):
    """Applies a rescale to the job (the execute step)."""

    def current_parallelism(self) -> int | None:
        """The scale-out the target is set to now, or None if unknown."""
        ...

    def rescale(self, target: int, *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        """Set the job to ``target`` workers (or only record the recommendation in dry-run)."""
        ...


@runtime_checkable
class ProbedScaler(Scaler, Protocol):
    """A scale target whose parallelism a round can read once, quickly, without the retries a write is allowed."""

    def parallelism_now(self) -> int | None:
        """The scale-out the target reports now, read once within a short timeout; None if it did not answer
        (the round's cross-check of Prometheus' count must not hold the round through an outage)."""
        ...


@runtime_checkable
class InterruptibleScaler(Scaler, Protocol):
    """A scale target whose rescale may wait long for its confirmation (Flink's REST API: up to two minutes)."""

    def interrupt(self) -> None:
        """Cut short any wait for a confirmation, now and from now on (the daemon is stopping); a request
        already sent stands, and its rescale returns ``pending``."""
        ...


@runtime_checkable
class BoundedScaler(Scaler, Protocol):
    """A scale target that knows how far it can scale the job now (a session cluster's free slots)."""

    def reachable_parallelism(self, upper: int) -> int | None:
        """The largest scale-out up to ``upper`` the target can run the job at now (never below the job's own);
        None when the target has no bound; ScalerError when it cannot be read now."""
        ...


@runtime_checkable
class ResourceReporter(Protocol):
    """A scale target that knows what one task slot takes (CPU cores, TaskManager memory), for the quotas."""

    def slot_resources(self) -> SlotResources | None:
        """CPU and memory per slot (None where not known); ScalerError when it cannot be read now."""
        ...


@runtime_checkable
class KnowledgeStore(Protocol):
    """Keeps the knowledge document across restarts; one atomic write per loop."""

    def load(self) -> KnowledgeDocument | None:
        """The stored document, or None for a fresh start (a corrupt one is moved aside, never deleted). Its
        values are read from storage and not yet checked: the agent validates the document before using it."""
        ...

    def save(self, document: KnowledgeDocument) -> None:
        """Replace the stored document atomically."""
        ...

    def set_aside(self, reason: str) -> str | None:
        """Move a document that loaded but could not be used aside (never delete it); where it went, or None."""
        ...


@runtime_checkable
class EventSink(Protocol):
    """Records a human-facing event on the scaled object (a Kubernetes Event in production)."""

    def emit(self, *, reason: str, message: str, type_: str = "Normal") -> None:
        """Emit one event; failures are logged by the sink, never raised into the loop."""
        ...
