"""What the agent needs of its analyze stage, as a protocol: the online models (:class:`Analyzer`) are one, the
lab's oracle (``lab.oracle.OracleAnalyzer``, the simulated job's truth) another."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from agent.analyze.analysis import Analysis
from agent.json_types import JsonObject, JsonValue
from agent.observation import Observation


class AnalyzeStage(Protocol):
    """The analyze step of the loop, the events it learns from, and its part of the knowledge document."""

    def analyze(self, observation: Observation, *, now: float) -> Analysis:
        """Update the models with the round's observation and return what they now say."""
        ...

    def on_rescale(
        self,
        *,
        now: float,
        from_parallelism: int,
        to_parallelism: int,
        downtime_s: float | None = None,
        resumed_at: float | None = None,
    ) -> None:
        """A rescale was applied: expect the new parallelism and watch the recovery."""
        ...

    def set_forecasting(self, enabled: bool) -> None:
        """False when the policy reads no forecast: the stage may skip forecasting."""
        ...

    def downtime(self, kind: str, parallelism: int) -> float:
        """Expected downtime of a stop (``rescale`` to ``parallelism``, or ``failure`` at it), s."""
        ...

    def observed_scale_outs(self) -> list[int]:
        """Scale-outs whose capacity was observed (for the restore log line)."""
        ...

    def to_dict(self) -> JsonObject:
        """The stage's part of the knowledge document."""
        ...

    def restore(self, state: Mapping[str, JsonValue]) -> None:
        """Load what :meth:`to_dict` wrote."""
        ...

    def reset(self) -> None:
        """Forget everything learned (a document that could not be restored), keeping what was injected."""
        ...
