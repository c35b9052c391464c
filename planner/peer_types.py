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
from collections.abc import Mapping, Sequence
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


def float_from_json(value: object) -> float | None:
    """The inverse of :func:`float_to_json` (TypeError or ValueError for what it cannot have written).

    >>> float_from_json("inf"), float_from_json(2), float_from_json(None)
    (inf, 2.0, None)
    """
    if value is None:
        return None
    return number_from_json(value)


def number_from_json(value: object) -> float:
    """A stored number (or numeral) as a float; TypeError for any other JSON value, as ``float()`` raises.

    >>> number_from_json(3), number_from_json("1.5")
    (3.0, 1.5)
    """
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def integer_from_json(value: object) -> int:
    """A stored whole number (or numeral) as an int; TypeError for any other JSON value, as ``int()`` raises."""
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"not a whole number: {value!r}")


def items_from_json(value: object) -> Sequence[object]:
    """A stored array's items; TypeError for any other JSON value."""
    if isinstance(value, list | tuple):
        return value
    raise TypeError(f"not an array: {value!r}")


def object_from_json(value: object) -> Mapping[str, object]:
    """A stored object; TypeError for any other JSON value."""
    if isinstance(value, dict):
        return value
    raise TypeError(f"not an object: {value!r}")
