"""The SLO judgement: one definition of "the job was behind for too long", the same for every policy.

An operator does not care why a job is behind, only for how long. The judgement reads three
per-second series of a replay (the lag after each second, the records that arrived in it, and the
stops: rescales and failures with the second they resumed) and counts the episodes in which the
job was behind for longer than the target recovery time:

* The job is **behind** at second ``t`` when its lag exceeds one second of input:
  ``lag_t > max(workload_t, 1)``.
* An **episode** starts at a stop (a rescale or a failure) or, while the job is not in an episode, at
  the first second it is behind. It ends at the first second ``e`` at which the job is no longer
  behind, no earlier than one second after it started and no earlier than the resume of every stop
  inside it; a stop that starts inside the episode (at or before ``e``) extends it. Its length is
  ``e − start`` seconds.
* An episode is one **SLO miss** if it lasts longer than the target recovery time (it is then
  ``length − target`` **seconds over the target**), or if the job **fell further behind** while
  running — behind, processing, and its lag grew over the second — for more than
  ``falling_behind_allowance_s`` seconds of it. The second rule is what an operator means by
  under-provisioned: after a stop the job must work its backlog off, not add to it; a job that
  runs short keeps growing its lag, however soon it drains it afterwards. Without it the cheapest
  schedule under the first rule alone runs behind most of the time (short of capacity for four
  minutes, then a burst of workers to catch up before the fifth), which no operator would call
  meeting a recovery target.
* An episode still open when the series ends is **cut short**: it is judged (a miss) only if it
  already lasted longer than the target, otherwise it is counted apart and not judged.
* Its **kind** is what started it: ``rescale``, ``failure`` or ``overload`` (behind while running,
  no stop); a stop inside an episode does not change its kind.

Unlike a judgement of stops alone, a policy that runs short of capacity without ever rescaling is
judged too: its overload episodes are misses once it has fallen further behind for longer than the
allowance, or once they outlast the target.

Examples
--------
>>> import numpy as np
>>> lag = np.array([0, 0, 500, 900, 400, 50, 0, 0], dtype=float)
>>> workload = np.full(8, 100.0)
>>> verdict = judge(lag, workload, [Stop("rescale", 2, resume_s=4)], target_recovery_time_s=2)
>>> [(e.kind, e.start_s, e.end_s, e.length_s) for e in verdict.episodes]
[('rescale', 2, 5, 3)]
>>> verdict.misses, verdict.seconds_over_target
(1, 1.0)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

import numpy as np

DEFAULT_FALLING_BEHIND_ALLOWANCE_S = 60.0
"""Seconds of an episode the running job may fall further behind: one loop of an agent that decides every
minute, enough for any autoscaler that notices in time; noise at the edge of capacity stays well below."""

EpisodeKind = Literal["rescale", "failure", "overload"]
"""What started an episode: a stop of that kind, or the job falling behind while running."""


class RestartLike(Protocol):
    """The fields of a simulator ``Restart`` (or any stop record) the judgement reads."""

    @property
    def kind(self) -> str: ...

    @property
    def start_s(self) -> int: ...

    @property
    def downtime_s(self) -> int: ...


@dataclass(frozen=True)
class Stop:
    """A rescale or failure: processing stopped at ``start_s`` and resumed at ``resume_s``."""

    kind: Literal["rescale", "failure"]
    start_s: int
    resume_s: int | None
    """First second the job processed again; None if it was still down when the series ended."""

    @classmethod
    def from_restart(cls, restart: RestartLike, *, resumed: bool = True) -> Stop:
        """The stop of a simulator ``Restart``; ``resumed=False`` for the one still in progress."""
        kind: Literal["rescale", "failure"] = "failure" if restart.kind == "failure" else "rescale"
        resume = restart.start_s + restart.downtime_s if resumed else None
        return cls(kind, int(restart.start_s), resume)


def stops_from(restarts: Iterable[RestartLike], in_progress: RestartLike | None = None) -> tuple[Stop, ...]:
    """The stops of a replay: every completed restart, and the one still in progress at the end (if any).

    With the simulated job: ``stops_from(job.restarts, job.restart_in_progress)``.
    """
    stops = [Stop.from_restart(r) for r in restarts]
    if in_progress is not None:
        stops.append(Stop.from_restart(in_progress, resumed=False))
    return tuple(stops)


@dataclass(frozen=True)
class Episode:
    """A stretch in which the job was stopped or behind."""

    kind: EpisodeKind
    start_s: int
    end_s: int | None
    """First second no longer behind (the episode covers ``[start_s, end_s)``); None if cut short."""
    length_s: int
    """``end_s − start_s``, or the seconds from ``start_s`` to the end of the series if cut short."""
    stops: int
    """Stops inside the episode, the one that started it included."""
    falling_behind_s: int = 0
    """Seconds of it in which the job, running, was behind and its lag grew."""

    @property
    def complete(self) -> bool:
        """The job caught up before the series ended."""
        return self.end_s is not None

    def to_dict(self) -> dict[str, Any]:
        """The episode as a summary lists it (its fields by name)."""
        return asdict(self)


@dataclass(frozen=True)
class KindCounts:
    """A count per episode kind."""

    rescale: int = 0
    failure: int = 0
    overload: int = 0

    @classmethod
    def of(cls, episodes: Iterable[Episode]) -> KindCounts:
        """How many of ``episodes`` are of each kind."""
        kinds = [e.kind for e in episodes]
        return cls(kinds.count("rescale"), kinds.count("failure"), kinds.count("overload"))

    def to_dict(self) -> dict[str, int]:
        """``{"rescale": …, "failure": …, "overload": …}``."""
        return {"rescale": self.rescale, "failure": self.failure, "overload": self.overload}


@dataclass(frozen=True)
class SloJudgement:
    """The episodes of one replay, judged against the target recovery time (see the module docstring)."""

    target_recovery_time_s: float
    episodes: tuple[Episode, ...]
    duration_s: int
    """Seconds of series judged."""
    falling_behind_allowance_s: float = DEFAULT_FALLING_BEHIND_ALLOWANCE_S

    def missed(self, episode: Episode) -> bool:
        """The episode lasted longer than the target, or the job fell further behind in it for longer than
        the allowance (complete, or cut short once either is already true)."""
        return (
            episode.length_s > self.target_recovery_time_s or episode.falling_behind_s > self.falling_behind_allowance_s
        )

    @property
    def judged(self) -> tuple[Episode, ...]:
        """Complete episodes and cut-short ones that already outlasted the target."""
        return tuple(e for e in self.episodes if e.complete or self.missed(e))

    @property
    def misses(self) -> int:
        """Episodes longer than the target: the SLO misses."""
        return sum(1 for e in self.episodes if self.missed(e))

    @property
    def seconds_over_target(self) -> float:
        """``Σ (length − target)⁺ + (falling behind − allowance)⁺`` over the episodes: how far past the SLO."""
        target, allowance = self.target_recovery_time_s, self.falling_behind_allowance_s
        return float(
            sum(max(0.0, e.length_s - target) + max(0.0, e.falling_behind_s - allowance) for e in self.episodes)
        )

    @property
    def longest_episode_s(self) -> int:
        """Length of the longest judged episode (0 if there is none)."""
        return max((e.length_s for e in self.judged), default=0)

    @property
    def cut_short(self) -> int:
        """Episodes still open at the end of the series and not yet longer than the target (not judged)."""
        return len(self.episodes) - len(self.judged)

    @property
    def seconds_behind(self) -> int:
        """Seconds spent in episodes (stopped or behind), cut-short ones included."""
        return sum(e.length_s for e in self.episodes)

    @property
    def episodes_by_kind(self) -> KindCounts:
        """Judged episodes per kind."""
        return KindCounts.of(self.judged)

    @property
    def misses_by_kind(self) -> KindCounts:
        """Misses per kind."""
        return KindCounts.of(e for e in self.episodes if self.missed(e))

    def to_summary(self) -> dict[str, Any]:
        """The judgement's keys of a replay's summary.json."""
        return {
            "slo_misses": self.misses,
            "slo_seconds_over_target": self.seconds_over_target,
            "slo_longest_episode_s": self.longest_episode_s,
            "slo_episodes": len(self.judged),
            "slo_episodes_cut_short": self.cut_short,
            "slo_episodes_by_kind": self.episodes_by_kind.to_dict(),
            "slo_falling_behind_s": sum(e.falling_behind_s for e in self.episodes),
            "slo_misses_by_kind": self.misses_by_kind.to_dict(),
            # Which episodes missed, to find them in the series and the decision log without replaying.
            "slo_missed_episodes": [e.to_dict() for e in self.episodes if self.missed(e)],
        }


def falling_behind(lag: np.ndarray, workload: np.ndarray, stops: Sequence[Stop]) -> np.ndarray:
    """Seconds at which the job, running (not inside a stop's downtime), is behind and its lag grew."""
    lag = np.asarray(lag, dtype=float)
    down = np.zeros(len(lag), dtype=bool)
    for stop in stops:
        down[stop.start_s : len(lag) if stop.resume_s is None else stop.resume_s] = True
    grew = np.zeros(len(lag), dtype=bool)
    grew[1:] = lag[1:] > lag[:-1]
    return behind(lag, workload) & grew & ~down


def behind(lag: np.ndarray, workload: np.ndarray) -> np.ndarray:
    """Seconds at which the lag exceeds one second of input: ``lag_t > max(workload_t, 1)``."""
    return np.asarray(lag, dtype=float) > np.maximum(np.asarray(workload, dtype=float), 1.0)


def judge(
    lag: Sequence[float] | np.ndarray,
    workload: Sequence[float] | np.ndarray,
    stops: Iterable[Stop],
    *,
    target_recovery_time_s: float,
    falling_behind_allowance_s: float = DEFAULT_FALLING_BEHIND_ALLOWANCE_S,
) -> SloJudgement:
    """Find the episodes of a replay and judge them against ``target_recovery_time_s``.

    Parameters
    ----------
    lag
        Records waiting after each second ``t = 0 … N−1``.
    workload
        Records that arrived in each second.
    stops
        Rescales and failures; stops at or after ``N`` are ignored.
    target_recovery_time_s
        Longest acceptable episode, seconds.
    falling_behind_allowance_s
        Most seconds of an episode in which the running job may fall further behind (``math.inf``:
        judge the length alone).
    """
    behind_at = behind(np.asarray(lag), np.asarray(workload))
    length = len(behind_at)
    behind_seconds = np.flatnonzero(behind_at)
    caught_up_seconds = np.flatnonzero(~behind_at)
    ordered = sorted((s for s in stops if s.start_s < length), key=lambda s: s.start_s)
    falling = np.concatenate(([0], np.cumsum(falling_behind(np.asarray(lag), np.asarray(workload), ordered))))

    def first(seconds: np.ndarray, t: int) -> int:
        """The first second of ``seconds`` at or after ``t``, or ``length``."""
        i = int(np.searchsorted(seconds, t))
        return int(seconds[i]) if i < len(seconds) else length

    episodes: list[Episode] = []
    next_stop = 0
    t = 0
    while t < length:
        stop_at = ordered[next_stop].start_s if next_stop < len(ordered) else length
        start = min(first(behind_seconds, t), stop_at)
        if start >= length:
            break
        kind: EpisodeKind = ordered[next_stop].kind if stop_at == start else "overload"
        earliest_end = start + 1
        end = first(caught_up_seconds, earliest_end)
        inside = 0
        # A stop that starts before the job caught up (or in that very second) extends the episode.
        while next_stop < len(ordered) and ordered[next_stop].start_s <= end < length:
            resume = ordered[next_stop].resume_s
            earliest_end = max(earliest_end, length if resume is None else resume)
            inside += 1
            next_stop += 1
            end = first(caught_up_seconds, earliest_end)
        if end >= length:
            # Cut short: stops after the end of the series cannot extend it further.
            inside += sum(1 for s in ordered[next_stop:])
            episodes.append(Episode(kind, start, None, length - start, inside, int(falling[length] - falling[start])))
            break
        episodes.append(Episode(kind, start, end, end - start, inside, int(falling[end] - falling[start])))
        t = end + 1
    return SloJudgement(float(target_recovery_time_s), tuple(episodes), length, float(falling_behind_allowance_s))
