"""Restart detection: a restart of the job that Perdix did not cause, seen in its uptime or its parallelism.

A failure shows as the job's uptime falling short of the time that passed; an operator's rescale as a
parallelism nobody here asked for. Either starts a recovery watch (``agent.analyze.recovery``) from the
moment processing stopped, which the lag tells better than the round that noticed it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from agent.json_types import JsonObject, JsonValue, as_list, optional_int
from agent.logging import get_logger
from agent.observation import Observation
from planner.peer_types import number_from_json

UPTIME_SLACK_S = 5.0
"""Uptime may lag the wall clock by a scrape or two; a bigger shortfall is a restart."""
STOPPED_GROWTH = 0.9
"""A second in which the lag grew by at least this fraction of its input is a second nothing was processed."""


@dataclass(frozen=True)
class Restart:
    """A restart nobody here announced, as the round that noticed it saw it."""

    reason: str
    """Why the job is believed to have restarted (for the log and the analysis)."""
    rescaled_outside: bool
    """True when the restart changed the parallelism (an operator's rescale)."""
    parallelism: int
    """The scale-out the job restarted at (0 when unknown)."""
    stopped_at: float
    """When processing stopped, as well as the round can tell."""
    restarted_at: float | None
    """When the job ran again (its uptime), if it already does."""


def stopped_at(observation: Observation, restarted_at: float | None) -> float | None:
    """When processing stopped before a restart nobody here announced (a failure), from the lag; None if unseen.

    The job's uptime says when it restarted, not when it stopped: a failure is noticed at the next
    round, up to a loop interval later, and by then the job may run again. Taking the round or the
    restart as the stop made every measured failure downtime (and recovery) short by that delay, and
    the downtime learned from them drifted towards zero. While the job is down nothing is processed,
    so the lag grows by all the input of each second (and by the replayed records at the stop itself):
    the stop is the first second of the last such stretch before the restart (or before the last
    sample, while the job is still down). Only seconds with input say anything.
    """
    times, lag, workload = observation.times, observation.consumer_lag, observation.workload
    if times.size < 2 or lag.shape != times.shape or workload.shape != times.shape:
        return None
    end = int(np.searchsorted(times, restarted_at, side="left")) - 1 if restarted_at is not None else times.size - 1
    first = None
    for i in range(min(end, times.size - 1), 0, -1):
        growth, arrived = lag[i] - lag[i - 1], workload[i]
        if not (np.isfinite(growth) and np.isfinite(arrived) and arrived > 0 and growth >= STOPPED_GROWTH * arrived):
            break
        first = i
    return None if first is None else float(times[first])


class RestartDetector:
    """Remembers the job's uptime and the parallelism expected of it, and tells a restart nobody announced."""

    def __init__(self) -> None:
        self.log = get_logger("perdix.analyze")
        self._last_uptime: tuple[float, float] | None = None
        """(when, uptime_s) at the last round that read an uptime."""
        self._expected_parallelism: int | None = None

    def expect(self, parallelism: int) -> None:
        """A rescale to ``parallelism`` was applied here: the job coming back at it is no surprise."""
        self._expected_parallelism = parallelism

    def detect(self, observation: Observation, now: float, *, watching: bool) -> Restart | None:
        """A restart we did not cause this round: uptime reset, or a parallelism nobody here asked for.

        While a recovery is being ``watching``, the job is expected to restart and nothing is reported.
        """
        reason = self._uptime_reset(observation, now, watching=watching)
        changed = self._parallelism_changed(observation, watching=watching)
        if changed is not None:
            reason = changed
        if reason is None:
            return None
        self.log.warning("job.restart_detected", reason=reason)
        uptime = observation.uptime_s
        restarted_at = float(observation.times[-1]) - uptime if uptime and observation.times.size else None
        stopped = stopped_at(observation, restarted_at)
        if stopped is None:
            stopped = now - (uptime or 0.0) if uptime is not None else now
        return Restart(reason, changed is not None, observation.parallelism or 0, stopped, restarted_at)

    def _uptime_reset(self, observation: Observation, now: float, *, watching: bool) -> str | None:
        """Why the uptime says the job restarted since the last round, or None; remembers this round's."""
        reason = None
        uptime = observation.uptime_s
        if uptime is not None and self._last_uptime is not None:
            last_at, last_uptime = self._last_uptime
            if uptime + UPTIME_SLACK_S < last_uptime + (now - last_at) - UPTIME_SLACK_S and not watching:
                reason = f"job uptime reset ({last_uptime:.0f} s -> {uptime:.0f} s)"
        if uptime is not None:
            self._last_uptime = (now, uptime)
        return reason

    def _parallelism_changed(self, observation: Observation, *, watching: bool) -> str | None:
        """Why the parallelism says someone else rescaled the job, or None; the one read is expected next."""
        parallelism = observation.parallelism
        if parallelism is None:
            return None
        expected = self._expected_parallelism
        self._expected_parallelism = parallelism
        if expected is not None and parallelism != expected and not watching:
            return f"parallelism changed outside Perdix ({expected} -> {parallelism})"
        return None

    def to_dict(self) -> JsonObject:
        """This part's fields of the analyzer's knowledge document."""
        return {
            "last_uptime": list[JsonValue](self._last_uptime) if self._last_uptime else None,
            "expected_parallelism": self._expected_parallelism,
        }

    def restore(self, state: Mapping[str, JsonValue]) -> None:
        """Read :meth:`to_dict`'s fields from the analyzer's document."""
        last = as_list(state.get("last_uptime") or [])
        self._last_uptime = (number_from_json(last[0]), number_from_json(last[1])) if last else None
        self._expected_parallelism = optional_int(state.get("expected_parallelism"))
