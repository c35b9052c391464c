"""The rescale history: every rescale the agent applied or proposed, newest last, bounded.

One typed owner both trims and answers, like :class:`planner.history.Recommendations`: the loop adds each
rescale (the oldest dropped past :data:`MAX_HISTORY`), asks which were left pending at a stop and settles them,
and the knowledge document keeps :meth:`RescaleHistory.to_list`'s form (``agent.knowledge.schema.RescaleRecord``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from agent.json_types import JsonObject
from agent.knowledge.schema import RescaleRecord

MAX_HISTORY = 500
"""Rescale records kept (oldest dropped first)."""


@dataclass(frozen=True)
class Rescale:
    """One rescale the agent applied or proposed."""

    at: float
    from_parallelism: int | None
    """The scale-out before (the task slots of the plan, per vertex); None when unknown."""
    to_parallelism: int
    confirmed: int | None = None
    """What the scale target confirmed; None: not (yet) read back."""
    dry_run: bool = False
    predicted_recovery_s: float | None = None
    downtime_s: float | None = None
    reasons: tuple[str, ...] = ()
    pending: bool | None = None
    """True: requested, but the daemon stopped before the scale target confirmed it (the next start reads the
    outcome); False: such a rescale since settled, or a record read back from the knowledge document; None: a
    rescale confirmed (or refused) in its own round. The document carries the key when it is not None."""
    vertices: Mapping[str, tuple[int, int]] | None = field(default=None)
    """A per-vertex rescale: each changed vertex's parallelism before and after, by name; None: whole-job."""

    def to_dict(self) -> JsonObject:
        """The knowledge document's form (a whole-job record carries its predicted recovery, a per-vertex one the
        vertices; ``pending`` once a stop left it so, false when settled)."""
        record: JsonObject = {"at": self.at, "from": self.from_parallelism, "to": self.to_parallelism}
        if self.vertices is not None:
            record["vertices"] = {name: [before, after] for name, (before, after) in self.vertices.items()}
        record.update(confirmed=self.confirmed, dry_run=self.dry_run)
        if self.vertices is None:
            record["predicted_recovery_s"] = self.predicted_recovery_s
        record.update(downtime_s=self.downtime_s, reasons=list(self.reasons))
        if self.pending is not None:
            record["pending"] = self.pending
        return record

    def fields(self) -> JsonObject:
        """:meth:`to_dict` without the time (the fields of the log line)."""
        return {k: v for k, v in self.to_dict().items() if k != "at"}


class RescaleHistory:
    """The last :data:`MAX_HISTORY` rescales, oldest first."""

    def __init__(self, records: Iterable[Rescale] = ()) -> None:
        self._records: deque[Rescale] = deque(records, maxlen=MAX_HISTORY)

    def add(self, record: Rescale) -> None:
        """Keep ``record`` (the oldest goes once the history is full)."""
        self._records.append(record)

    def pending(self) -> list[Rescale]:
        """The rescales left pending at a stop, oldest first."""
        return [record for record in self._records if record.pending is True]

    def settle(self, reached: int) -> None:
        """Every pending rescale ended at ``reached`` (what the scale target reads now)."""
        self._records = deque(
            (replace(r, pending=False, confirmed=reached) if r.pending is True else r for r in self._records),
            maxlen=MAX_HISTORY,
        )

    def to_list(self) -> list[JsonObject]:
        """The knowledge document's form, oldest first."""
        return [record.to_dict() for record in self._records]

    @classmethod
    def from_stored(cls, stored: Iterable[RescaleRecord]) -> RescaleHistory:
        """The history from the knowledge document's validated records."""
        return cls(
            Rescale(
                at=r.at,
                from_parallelism=r.from_,
                to_parallelism=r.to,
                confirmed=r.confirmed,
                dry_run=r.dry_run,
                predicted_recovery_s=r.predicted_recovery_s,
                downtime_s=r.downtime_s,
                reasons=tuple(r.reasons),
                pending=r.pending if "pending" in r.model_fields_set else None,
                vertices=None if r.vertices is None else {k: (int(a), int(b)) for k, (a, b) in r.vertices.items()},
            )
            for r in stored
        )

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Rescale]:
        return iter(self._records)

    def __getitem__(self, index: int) -> Rescale:
        return self._records[index]
