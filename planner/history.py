"""The recommendation history: the scale-outs a policy wanted in earlier rounds, for scale-down stabilization.

One typed, immutable value owns both sides of the history: the loop adds each round's desired
scale-out (which also drops what is older than the longest window anyone reads), and a policy asks
it the highest scale-out wanted since a moment, and whether the history reaches back that far. It
is kept in the knowledge store as a list of ``[time, scale-out]`` pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Recommendations:
    """``(time, desired scale-out)`` of earlier rounds, oldest first."""

    entries: tuple[tuple[float, int], ...] = ()

    def add(self, at: float, scale_out: int, *, keep_s: float) -> Recommendations:
        """This history with ``scale_out`` wanted at ``at``, forgetting what is older than ``at - keep_s``."""
        horizon = at - keep_s
        kept = tuple((t, n) for t, n in (*self.entries, (float(at), int(scale_out))) if t >= horizon)
        return Recommendations(kept)

    def highest_since(self, start: float) -> int | None:
        """The highest scale-out wanted at or after ``start``, or None if none was."""
        wanted = [n for t, n in self.entries if t >= start]
        return max(wanted) if wanted else None

    def reaches_back_to(self, start: float, *, slack_s: float) -> bool:
        """True if the oldest entry is no later than ``start + slack_s`` (the window is covered)."""
        return bool(self.entries) and self.entries[0][0] <= start + slack_s

    def to_list(self) -> list[list[float]]:
        """The knowledge document's form: ``[[time, scale-out], ...]``."""
        return [[t, n] for t, n in self.entries]

    @classmethod
    def from_list(cls, rows: Iterable[Sequence[float]]) -> Recommendations:
        """Read :meth:`to_list`'s form."""
        return cls(tuple((float(t), int(n)) for t, n in rows))

    def __len__(self) -> int:
        return len(self.entries)
