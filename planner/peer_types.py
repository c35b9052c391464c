"""What the peer policies share: the decision they return and the JSON helpers for their state.

The peers (``planner.flink_autoscaler``, ``planner.hpa``, ``planner.keda``, ``planner.ds2_paper``) are
faithful re-implementations of autoscalers that operators run, each a pure core
``decide(inputs, state) -> PeerDecision`` over a frozen input of its own and an explicit immutable
state value. The state is what the real controller keeps in memory or in its state store between
rounds; it round-trips through ``to_dict``/``from_dict`` so the knowledge store can keep it across
restarts of the agent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Generic, TypeVar

StateT = TypeVar("StateT")

JsonFloat = float | str | None
"""A float as JSON can hold it: infinities are spelled ``"inf"``/``"-inf"``; NaN and unknown are None."""


@dataclass(frozen=True)
class PeerDecision(Generic[StateT]):
    """One round of a peer policy: what it would run at, what it wanted, why, and what it remembers."""

    target_parallelism: int
    """The scale-out to run at after this round (equal to the current one: no rescale)."""
    desired_parallelism: int
    """What the policy's formula asked for this round, before delays, stabilization and rate limits."""
    code: str
    """The outcome as data (one of the module's ``...Code`` values), for telemetry to count."""
    reasons: tuple[str, ...]
    """The outcome in words: the numbers behind each step."""
    state: StateT
    """The state to hand to the next round."""

    def rescales_from(self, current: int) -> bool:
        """True if this decision changes the scale-out."""
        return self.target_parallelism != current


def float_to_json(value: float | None) -> JsonFloat:
    """A float for JSON: infinities as strings, NaN as None.

    >>> float_to_json(math.inf), float_to_json(1.5), float_to_json(math.nan)
    ('inf', 1.5, None)
    """
    if value is None or math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return float(value)


def float_from_json(value: JsonFloat) -> float | None:
    """The inverse of :func:`float_to_json`.

    >>> float_from_json("inf"), float_from_json(2), float_from_json(None)
    (inf, 2.0, None)
    """
    if value is None:
        return None
    if isinstance(value, str):
        return float(value)
    return float(value)
