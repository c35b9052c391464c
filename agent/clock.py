"""Time as an input: the loop reads the clock once per round and passes ``now`` down.

Nothing under agent/, models/ or planner/ calls ``time.time()`` directly; the wall clock is the one
place that does, and the simulated clock lets a six-hour trace replay in seconds.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """A source of the current time in seconds and a way to wait for a point in time."""

    def now(self) -> float:
        """Seconds since an arbitrary epoch, monotonic within one run."""
        ...

    def sleep_until(self, deadline: float) -> None:
        """Block (or, simulated, jump) until ``now() >= deadline``."""
        ...


class WallClock:
    """Real time: Unix seconds, sleeping for real."""

    def now(self) -> float:
        """Unix time in seconds."""
        return time.time()

    def sleep_until(self, deadline: float) -> None:
        """Sleep until the deadline (returns at once if it has passed)."""
        remaining = deadline - time.time()
        if remaining > 0:
            time.sleep(remaining)


class SimulatedClock:
    """Simulated time that moves only when told to; thread-safe so a watcher thread can read it."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """The current simulated time in seconds."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (never backwards) and return the new time."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {seconds})")
        with self._lock:
            self._now += seconds
            return self._now

    def sleep_until(self, deadline: float) -> None:
        """Jump to the deadline at once."""
        with self._lock:
            self._now = max(self._now, deadline)


class ScaledClock:
    """Wall time running ``speed`` times faster, starting at ``start`` (the simulator exporter's clock)."""

    def __init__(self, speed: float = 1.0, start: float = 0.0) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be positive (got {speed})")
        self.speed = speed
        self._start = start
        self._wall_start = time.monotonic()

    def now(self) -> float:
        """Scaled seconds since start."""
        return self._start + (time.monotonic() - self._wall_start) * self.speed

    def sleep_until(self, deadline: float) -> None:
        """Sleep the wall time that corresponds to reaching the deadline."""
        remaining = (deadline - self.now()) / self.speed
        if remaining > 0:
            time.sleep(remaining)
