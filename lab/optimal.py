"""The optimal offline schedule: the best any autoscaler could have done on one simulated replay.

Every policy is judged against this schedule. It is computed with everything a policy can only
estimate: the simulator's true per-second arrivals and worker capacities, the true downtime of every
possible stop and the instants of the injected failures (all policy-independent, see
:class:`simulator.JobEnvironment`). At every loop boundary (every ``loop_interval_s``, the seconds at
which the replayed policies decide) it may choose any scale-out in ``[min_parallelism,
max_parallelism]``; it minimises, in this order,

1. the SLO misses of :func:`lab.slo.judge`,
2. the seconds over the target summed over the missed episodes,
3. the worker-seconds (``Σ_t parallelism_t``, the replay summary's worker-hours × 3600).

An episode within the target is no miss, so the optimum may run short on purpose, for up to the
target, and catch up before the episode would count: it is the least any policy could spend under
this SLO, not the schedule a cautious operator would run. An episode still open when the replay
ends is not judged either; so that the optimum does not run short through its last minutes on
purpose, it is chosen as if such an episode were a miss (``settle_by_end``; ``chosen_by``), while
``predicted`` stays the judgement's score.

The model
---------
A batch of schedule prefixes ("rows") is stepped second by second exactly as
:class:`simulator.SimulatedFlinkJob` steps one job, every row on its own: per-partition read
positions and committed offsets, worker ``i`` draining the partitions ``p ≡ i (mod n)`` with
``take_p = ⌊backlog_p · min(c_i(t), B_i)/B_i⌋`` (``B_i`` the worker's backlog; the job's own rule,
:mod:`simulator.drain`), checkpoints at
every ``checkpoint_interval_s`` of uptime, a stop rolling every position back to the last checkpoint
and pausing for the true downtime, and the restart at the new scale-out. Rescale, failure and step
happen in the replay's order (the rescale decided at a boundary, then a failure due that second,
then the step). Positions are float64 holding whole numbers (< 2⁵³), so every operation is the
simulator's own to the last bit: **the model of a schedule is exact**, and a schedule replayed
through the real job has exactly the misses, seconds over target and worker-seconds the model
predicts (checked by the tests on the shipped traces with injected failures).

The SLO judgement runs incrementally beside it (the automaton form of :func:`lab.slo.judge`): an
open episode counts its miss the second its length first exceeds the target and then one second
over the target per second, so the objective accumulated by a row is final and the only episode
state that matters for the future is the age of an episode still within the target.

The dynamic program
-------------------
At each boundary ``b_k`` the DP holds a set of states, each the complete simulator state of one
schedule prefix (positions, committed offsets, scale-out, running or down until when, uptime start,
the open episode) with its accumulated objective and a back-pointer. Each state is expanded with
every choice of scale-out, the ``states × choices`` rows are stepped to ``b_{k+1}`` (a second's work
is done on the running rows only, so a downtime costs nothing) and merged back:

* **Buckets** (approximate). Rows are grouped by (target scale-out; the stop in progress if down:
  resume second and current scale-out; lag bucket; uncommitted bucket; episode-age bucket; bucket of
  the open episode's falling-behind seconds, ``falling_bucket_s`` wide). With
  ``r`` the mean input of the loop just stepped (records/s), the lag ``λ`` (records not yet read) is
  bucketed in seconds of input ``x = λ/r``: exactly 0 (caught up), ``0 < x ≤ x₀``, then
  ``lag_buckets_per_doubling`` buckets per doubling of ``x/x₀``; the uncommitted records (read, not
  yet checkpointed: what a stop replays) in steps of ``uncommitted_bucket_s`` seconds of input; an
  open episode's age in steps of ``episode_age_bucket_s`` up to the target, and one bucket for "a
  miss already". Each bucket keeps its lexicographically best row by (misses, seconds over,
  worker-seconds, lag), its best by (misses, lag, seconds over, worker-seconds) — the cheapest row of a
  bucket is often the one furthest behind, and an episode that already missed adds a second over per
  second until it ends — and its best by (misses, falling-behind seconds, lag, …), the row furthest
  from the allowance.
* **Dominance** (approximate). A kept row is dropped if another with the same target scale-out and
  run state is no worse in misses, seconds over, worker-seconds, lag, lag + uncommitted and episode
  (none, or open since no earlier and resuming no later).
* **Bound** (exact). A few simple schedules (the smallest scale-out whose true capacity carries the
  next loops' peak with 0–35 % headroom, and the largest) are stepped first; their best score
  bounds the optimum. A row is dropped once it cannot beat it: more misses, or a miss that is
  certain because even the largest scale-out, reading at full speed from now on with no downtime,
  could not end its open episode within the target. The same test, tightened by what the choice
  reads until the next boundary and by the downtime its stop costs, skips hopeless (state, choice)
  pairs before they are stepped. The returned schedule is never worse than the simple ones.

What is exact, what is approximate, and the bound
-------------------------------------------------
* **Prediction: exact.** Every kept row is a real simulated prefix and its back-pointers form a
  real schedule, so the predicted misses, seconds over target and worker-seconds of the returned
  schedule are what the simulated job does with it, to the record and the second (zero error,
  whatever the buckets; ``replay_schedule`` checks it).
* **Optimality: approximate only through the buckets and dominance.** A dropped row differs from
  the one kept for it by less than one bucket: total lag by a factor below
  ``2^(1/lag_buckets_per_doubling)`` (or both under ``x₀`` seconds of input), uncommitted records by
  under ``uncommitted_bucket_s`` seconds of input, episode age by under ``episode_age_bucket_s``
  seconds, plus what no key holds: how the backlog is spread over the partitions, and the checkpoint
  phase (at most ``checkpoint_interval_s`` seconds of input replayed more or less at a later stop).
  The drain is monotone (more backlog never lets a worker read less), so the dropped row can do
  better only by those amounts: its episodes end at most ``Δ/s`` seconds sooner, ``Δ`` the
  difference in records and ``s`` the spare capacity then. There is no worst-case bound on the
  lexicographic objective itself: an episode a second shorter at the margin is a miss fewer. The
  gap is therefore measured: the DP matches brute force over every schedule on the test cases
  (``exact=True``, which merges identical states only, matches too), and on six hours of the
  shipped traces (max 16 workers, failures 1/h) a finer grid (4 lag buckets per doubling, 1 s of
  uncommitted input, 15 s of age) lowers the worker-hours by 0.06 % (``bank_calls``) and 0.13 %
  (``taylor``), at the same zero misses.

Cost
----
The work is the second-by-second read of the running rows (a stop's downtime is free, and hopeless
choices are never stepped); it runs compiled (numba: :func:`_step_rows` steps each row through the
seconds between two events with the simulator's own drain rule, :func:`simulator.drain.drain_job`,
and the SLO automaton), and so does the dominance test. Six hours at 60 s loops and up to 16 workers:
about 1,000–1,500 states at the busiest boundary on most corpus traces, 15–20 s of CPU; the corpus's
29 traces take 488 s of CPU in all, chicago_ridership (up to 4,783 states) 98 s (224 s with numpy
alone). ``SolveStatistics`` has the counts.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np

from lab.slo import DEFAULT_FALLING_BEHIND_ALLOWANCE_S, SloJudgement, Stop, judge, stops_from
from simulator import (
    Accounting,
    JobEnvironment,
    Restart,
    SimulatedFlinkJob,
    SimulatorSettings,
    Trace,
    Window,
    failure_schedule,
)
from simulator import drain as drain_rule
from simulator.drain import drain_job

_RESCALE, _FAILURE, _OVERLOAD = 0, 1, 2
_ALLOWANCE_S = int(DEFAULT_FALLING_BEHIND_ALLOWANCE_S)
"""The judgement's falling-behind allowance, in whole seconds (the automaton counts whole seconds)."""
_KIND_NAMES = ("rescale", "failure", "overload")


@dataclass(frozen=True)
class OptimalSettings:
    """What the optimal schedule may choose, and the resolution of the dynamic program."""

    loop_interval_s: int = 60
    """Seconds between two decisions (the replayed policies' loop interval)."""
    min_parallelism: int = 1
    """Smallest scale-out it may choose."""
    max_parallelism: int = 16
    """Largest scale-out it may choose."""
    target_recovery_time_s: float = 300.0
    """The SLO: an episode longer than this is a miss."""
    scale_outs: tuple[int, ...] | None = None
    """Restrict the choices to these scale-outs (default: every one in [min, max])."""
    initial_parallelism: int | None = None
    """Scale-out during the first loop, before the first decision (default: the simulator's)."""
    lag_buckets_per_doubling: float = 2.0
    """Lag buckets per doubling of the lag (in seconds of input) above ``smallest_lag_s``."""
    smallest_lag_s: float = 1.0 / 16.0
    """Lags up to this many seconds of input (but not zero) share one bucket."""
    uncommitted_bucket_s: float = 2.5
    """Width of an uncommitted-records bucket, seconds of input."""
    episode_age_bucket_s: float = 30.0
    """Width of an open episode's age bucket, seconds."""
    falling_bucket_s: float = 10.0
    """Width of a bucket of an open episode's falling-behind seconds (``lab.slo``'s second rule)."""
    settle_by_end: bool = True
    """Choose as if an episode still open (and within the target) at the end were a miss.

    The judgement leaves such an episode unjudged; without this the optimum would run short for
    its last target's worth of seconds on purpose. The predicted score is still the judgement's."""
    least_lag_per_bucket: bool = True
    """Keep in each bucket the row least behind as well as the cheapest."""
    prune_dominated: bool = True
    """Drop rows another row dominates (see the module docstring)."""
    use_bound: bool = True
    """Drop rows that cannot beat the best of a few simple schedules (exact: it only drops losers)."""
    exact: bool = False
    """Merge only identical simulator states (no buckets, no dominance): slow, for tests."""

    def choices(self, partitions: int) -> tuple[int, ...]:
        """The scale-outs the schedule may choose at a boundary, ascending."""
        if self.scale_outs is not None:
            chosen = tuple(sorted(set(self.scale_outs)))
            if not chosen or chosen[0] < 1 or chosen[-1] > partitions:
                raise ValueError(f"scale-outs {chosen} outside [1, partitions={partitions}]")
            return chosen
        # A worker beyond the partition count would have nothing to read: the range stops there.
        chosen = tuple(range(max(1, self.min_parallelism), min(self.max_parallelism, partitions) + 1))
        if not chosen:
            raise ValueError(f"no scale-out in [{self.min_parallelism}, {self.max_parallelism}] ∩ [1, {partitions}]")
        return chosen


@dataclass(frozen=True)
class Objective:
    """What a schedule scores, compared lexicographically in this order."""

    misses: int
    """Episodes longer than the target (:func:`lab.slo.judge`)."""
    seconds_over_target: float
    """``Σ (length − target)`` over the missed episodes."""
    worker_seconds: int
    """``Σ_t parallelism_t`` over the replay."""

    @property
    def worker_hours(self) -> float:
        """Worker-seconds / 3600."""
        return self.worker_seconds / 3600.0

    def key(self) -> tuple[int, float, int]:
        """The lexicographic sort key."""
        return (self.misses, self.seconds_over_target, self.worker_seconds)


@dataclass(frozen=True)
class SolveStatistics:
    """How the dynamic program went: for the report and for tuning its resolution."""

    seconds: float
    """Wall time of the solve."""
    boundaries: int
    """Decisions made (loop boundaries)."""
    rows_stepped: int
    """Schedule prefixes stepped through one loop, summed over the boundaries."""
    states_max: int
    """Most states kept at one boundary."""
    states_mean: float
    """Mean states kept per boundary."""
    simple_schedule_score: Objective
    """The best simple schedule's score as it is chosen (the bound the DP prunes with; the DP's is never worse)."""


@dataclass(frozen=True)
class OptimalSchedule:
    """The optimal schedule of one replay and what the model predicts it scores."""

    schedule: tuple[tuple[int, int], ...]
    """(second, scale-out) at every loop boundary, starting with ``(0, initial scale-out)``."""
    predicted: Objective
    """What the replay of the schedule scores (misses, seconds over target and worker-seconds, exactly)."""
    chosen_by: Objective
    """The score it was chosen by: ``predicted``, with an episode left open at the end counted as a miss
    when ``settle_by_end`` is set."""
    duration_s: int
    failures: tuple[int, ...]
    """Seconds at which a TaskManager failure is injected."""
    loop_interval_s: int
    target_recovery_time_s: float
    statistics: SolveStatistics

    @property
    def rescales(self) -> tuple[tuple[int, int], ...]:
        """Only the boundaries at which the scale-out changes."""
        changes = [self.schedule[0]]
        for second, n in self.schedule[1:]:
            if n != changes[-1][1]:
                changes.append((second, n))
        return tuple(changes[1:])

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready summary (the schedule as ``[[second, scale-out], …]``)."""
        return {
            "schedule": [list(entry) for entry in self.schedule],
            "predicted_slo_misses": self.predicted.misses,
            "predicted_seconds_over_target": self.predicted.seconds_over_target,
            "predicted_worker_hours": round(self.predicted.worker_hours, 3),
            "duration_s": self.duration_s,
            "failures": list(self.failures),
            "loop_interval_s": self.loop_interval_s,
            "target_recovery_time_s": self.target_recovery_time_s,
            "ends_settled": self.chosen_by.misses == self.predicted.misses,
            "solve_s": round(self.statistics.seconds, 3),
            "states_max": self.statistics.states_max,
        }


# ---------------------------------------------------------------------------------------------- the model


class _Horizon:
    """The policy-independent truth of one replay, laid out for the batch model."""

    def __init__(self, environment: JobEnvironment, duration_s: int, failures: Iterable[int], workers: int) -> None:
        config = environment.config
        self.duration_s = duration_s
        self.partitions = config.partitions
        self.workers = workers
        self.checkpoint_interval_s = config.checkpoint_interval_s
        self.rescale_aligned = config.rescale_aligned
        self.environment = environment
        arrivals = environment.arrivals(0, duration_s).astype(float)
        self.end_after = np.cumsum(arrivals, axis=0)
        """End offsets of every partition after the arrivals of second t (whole numbers)."""
        self.total_end = self.end_after.sum(axis=1)
        self.workload = arrivals.sum(axis=1)
        self.behind_threshold = np.maximum(self.workload, 1.0)
        self.capacity = environment.capacities(0, duration_s)[:, :workers]
        self.drained_by_first = np.cumsum(self.capacity, axis=1)
        """``[t, n − 1]``: records the first ``n`` workers can read in second t at most."""
        self.most_drained = self.drained_by_first[:, -1]
        """Records the job could read in second t at most: every worker of the largest scale-out at full speed."""
        self.failures = frozenset(int(f) for f in failures if 0 <= f < duration_s)
        sizes = range(self.partitions + 1)
        self._mean_downtime = {
            kind: np.array(
                [[environment.mean_downtime_s(name, a, b) for b in sizes] for a in sizes]  # type: ignore[arg-type]
            )
            for kind, name in ((_RESCALE, "rescale"), (_FAILURE, "failure"))
        }

    def downtimes_s(self, kind: int, t: int, from_parallelism: np.ndarray, to_parallelism: np.ndarray) -> np.ndarray:
        """``JobEnvironment.downtime_s`` of many stops at one second: ``max(1, round(mean · factor))``.

        ``np.rint`` rounds half to even like ``round``, so the values are the environment's exactly.
        """
        factor = self.environment.downtime_factor("failure" if kind == _FAILURE else "rescale", t)
        mean = self._mean_downtime[kind][from_parallelism, to_parallelism]
        return np.maximum(1, np.rint(mean * factor)).astype(np.int64)


_ROW_FIELDS = (
    "position",
    "committed",
    "position_sum",
    "parallelism",
    "pending",
    "down",
    "down_until",
    "uptime_start",
    "episode_open",
    "episode_start",
    "episode_earliest_end",
    "episode_kind",
    "episode_falling",
    "episode_missed",
    "misses",
    "over",
    "cost",
    "lag",
)


class _Rows:
    """Schedule prefixes stepped together, each second exactly as ``SimulatedFlinkJob.step`` steps one job.

    After every stop the rows are sorted, running first, then the stopped ones by the second they
    resume (the order the merge breaks ties in); ``origin`` maps each row back to its index when the
    batch was made. A stopped row is not read, so the downtime of a stop costs nothing.
    """

    position: np.ndarray
    committed: np.ndarray
    position_sum: np.ndarray
    parallelism: np.ndarray
    pending: np.ndarray
    down: np.ndarray
    down_until: np.ndarray
    uptime_start: np.ndarray
    episode_open: np.ndarray
    episode_start: np.ndarray
    episode_earliest_end: np.ndarray
    episode_kind: np.ndarray
    episode_falling: np.ndarray
    """Seconds of the open episode in which the running job fell further behind (its lag grew)."""
    episode_missed: np.ndarray
    """The open episode already counted its miss (too long, or fell behind for too long)."""
    misses: np.ndarray
    over: np.ndarray
    cost: np.ndarray
    lag: np.ndarray

    def __init__(self, horizon: _Horizon, target_s: float, allowance_s: int, **arrays: np.ndarray) -> None:
        self.horizon = horizon
        self.target_s = target_s
        self.allowance_s = allowance_s
        """Seconds of an episode the running job may fall further behind (``lab.slo``)."""
        for name in _ROW_FIELDS:
            setattr(self, name, arrays[name])
        self.count = len(self.parallelism)
        self.origin = np.arange(self.count)
        self.stops: list[list[Stop]] | None = None
        self.lag_record: np.ndarray | None = None
        self._unordered = True

    @classmethod
    def initial(cls, horizon: _Horizon, target_s: float, allowance_s: int, parallelism: int, count: int = 1) -> _Rows:
        """``count`` copies of a fresh job at ``parallelism``, second 0."""
        p = horizon.partitions
        zeros = np.zeros(count, dtype=np.int64)
        return cls(
            horizon,
            target_s,
            allowance_s,
            position=np.zeros((count, p)),
            committed=np.zeros((count, p)),
            position_sum=np.zeros(count),
            parallelism=np.full(count, parallelism, dtype=np.int64),
            pending=np.full(count, parallelism, dtype=np.int64),
            down=np.zeros(count, dtype=bool),
            down_until=zeros.copy(),
            uptime_start=zeros.copy(),
            episode_open=np.zeros(count, dtype=bool),
            episode_start=zeros.copy(),
            episode_earliest_end=zeros.copy(),
            episode_kind=zeros.copy(),
            episode_falling=zeros.copy(),
            episode_missed=np.zeros(count, dtype=bool),
            misses=zeros.copy(),
            over=np.zeros(count),
            cost=zeros.copy(),
            lag=np.zeros(count),
        )

    def take(self, index: np.ndarray) -> _Rows:
        """The rows at ``index`` (repeats allowed), as a new batch."""
        return _Rows(
            self.horizon, self.target_s, self.allowance_s, **{name: getattr(self, name)[index] for name in _ROW_FIELDS}
        )

    def record(self, seconds: int) -> None:
        """Keep every row's lag for ``seconds`` and its stops (for the brute force and for predictions)."""
        self.lag_record = np.zeros((self.count, seconds))
        self.stops = [[] for _ in range(self.count)]

    def objective(self, row: int) -> Objective:
        """The accumulated objective of one row."""
        return Objective(int(self.misses[row]), float(self.over[row]), int(self.cost[row]))

    def _order(self) -> None:
        """Sort the rows: running ones first, stopped ones by the second they resume."""
        resume = np.where(self.down, self.down_until, -1)
        permutation = np.argsort(resume, kind="stable")
        if np.any(permutation != np.arange(self.count)):
            for name in _ROW_FIELDS:
                setattr(self, name, getattr(self, name)[permutation])
            self.origin = self.origin[permutation]
            if self.lag_record is not None:
                self.lag_record = self.lag_record[permutation]
            if self.stops is not None:
                self.stops = [self.stops[i] for i in permutation]
        self._unordered = False

    # ------------------------------------------------------------------ events

    def _stop(self, t: int, rows: np.ndarray, kind: int, targets: np.ndarray) -> None:
        horizon = self.horizon
        downtime = horizon.downtimes_s(kind, t, self.parallelism[rows], targets)
        if kind == _RESCALE and horizon.rescale_aligned:
            # A checkpoint triggered for the rescale completes as the job stops (SimulatedFlinkJob._stop).
            self.committed[rows] = self.position[rows]
        # Progress since the last completed checkpoint is rolled back and will be replayed.
        self.position[rows] = self.committed[rows]
        self.position_sum[rows] = self.committed[rows].sum(axis=1)
        self.down[rows] = True
        self.down_until[rows] = t + downtime
        self.pending[rows] = targets
        resume = t + downtime
        was_open = self.episode_open[rows]
        self.episode_earliest_end[rows] = np.where(
            was_open, np.maximum(self.episode_earliest_end[rows], resume), resume
        )
        self.episode_start[rows] = np.where(was_open, self.episode_start[rows], t)
        self.episode_kind[rows] = np.where(was_open, self.episode_kind[rows], kind)
        self.episode_falling[rows] = np.where(was_open, self.episode_falling[rows], 0)
        self.episode_missed[rows] = np.where(was_open, self.episode_missed[rows], False)
        self.episode_open[rows] = True
        if self.stops is not None:
            name = _KIND_NAMES[kind]
            for row, end in zip(rows, resume):
                self.stops[int(row)].append(Stop(name, t, int(end)))  # type: ignore[arg-type]
        self._unordered = True

    def rescale(self, t: int, targets: np.ndarray) -> None:
        """Every row asks for ``targets[row]`` workers at second ``t`` (``SimulatedFlinkJob.rescale``).

        A negative target asks for nothing (the row keeps the scale-out it is set to).
        """
        targets = np.asarray(targets, dtype=np.int64)
        targets = np.where(targets < 0, self.target_parallelism, targets)
        # Down: only the scale-out to restart at changes; running at another scale-out: stop.
        self.pending = np.where(self.down, targets, self.pending)
        stopping = np.flatnonzero(~self.down & (targets != self.parallelism))
        if stopping.size:
            self._stop(t, stopping, _RESCALE, targets[stopping])

    def fail(self, t: int) -> None:
        """A TaskManager fails at second ``t`` in every running row (``SimulatedFlinkJob.fail``)."""
        running = np.flatnonzero(~self.down)
        if running.size:
            self._stop(t, running, _FAILURE, self.parallelism[running])

    # ------------------------------------------------------------------ stepping

    def _run(self, start_s: int, end_s: int) -> None:
        """Step seconds ``[start_s, end_s)``, in which no rescale is asked for and no failure is due."""
        if end_s <= start_s:
            return
        if self._unordered:
            self._order()
        horizon = self.horizon
        record = self.lag_record if self.lag_record is not None else np.zeros((0, 0))
        _step_rows(
            start_s,
            end_s,
            horizon.end_after,
            horizon.total_end,
            horizon.capacity,
            horizon.behind_threshold,
            horizon.checkpoint_interval_s,
            self.target_s,
            self.allowance_s,
            self.position,
            self.committed,
            self.position_sum,
            self.parallelism,
            self.pending,
            self.down,
            self.down_until,
            self.uptime_start,
            self.episode_open,
            self.episode_start,
            self.episode_earliest_end,
            self.episode_kind,
            self.episode_falling,
            self.episode_missed,
            self.misses,
            self.over,
            self.cost,
            self.lag,
            record,
            self.lag_record is not None,
        )

    def advance(self, start_s: int, end_s: int, actions: dict[int, np.ndarray] | None = None) -> None:
        """Step seconds ``[start_s, end_s)``: at each, the rescale in ``actions``, a due failure, then the step.

        ``actions[t][i]`` is what the row made as row ``i`` of this batch asks for (rows are reordered
        as they stop, ``origin`` tells which is which). Between two such events every row is stepped
        on its own for all the seconds at once (:func:`_step_rows`).
        """
        events = sorted(
            {t for t in (actions or {}) if start_s <= t < end_s}
            | {t for t in self.horizon.failures if start_s <= t < end_s}
        )
        done = start_s
        for t in events:
            self._run(done, t)
            if actions is not None and t in actions:
                if self._unordered:
                    self._order()
                self.rescale(t, actions[t][self.origin])
            if t in self.horizon.failures:
                self.fail(t)
            done = t
        self._run(done, end_s)

    @property
    def uncommitted(self) -> np.ndarray:
        """Records read but not yet checkpointed, per row: what a stop now would replay."""
        return self.position_sum - self.committed.sum(axis=1)

    @property
    def target_parallelism(self) -> np.ndarray:
        """The scale-out each row is set to (the pending one while down)."""
        return np.where(self.down, self.pending, self.parallelism)


# ---------------------------------------------------------------------------------------------- merging


def _final_choice(rows: _Rows, settle_by_end: bool) -> tuple[int, Objective]:
    """The best row at the end of the replay and the score it is chosen by.

    With ``settle_by_end`` an episode still open and within the target counts as a miss here (only
    for choosing: the judgement does not judge it).
    """
    unsettled = (
        rows.episode_open & ~rows.episode_missed & (rows.horizon.duration_s - rows.episode_start <= rows.target_s)
    )
    misses = rows.misses + (unsettled if settle_by_end else 0)
    best = int(np.lexsort((rows.cost, rows.over, misses))[0])
    return best, Objective(int(misses[best]), float(rows.over[best]), int(rows.cost[best]))


def _bucket_keys(rows: _Rows, now_s: int, input_rate: float, settings: OptimalSettings) -> np.ndarray:
    """The merge key of every row (one int64 column per component)."""
    rate = max(input_rate, 1.0)
    lag_s = rows.lag / rate
    with np.errstate(divide="ignore"):
        scaled = np.log2(np.maximum(lag_s, 1e-300) / settings.smallest_lag_s) * settings.lag_buckets_per_doubling
    lag_bucket = np.where(rows.lag <= 0, 0, np.where(lag_s <= settings.smallest_lag_s, 1, 2 + np.floor(scaled)))
    uncommitted_bucket = np.floor(rows.uncommitted / rate / settings.uncommitted_bucket_s)
    age = now_s - rows.episode_start
    missed = rows.episode_missed | (age > settings.target_recovery_time_s)
    age_bucket = np.where(~rows.episode_open, 0, np.where(missed, 1, 2 + np.floor(age / settings.episode_age_bucket_s)))
    falling_bucket = np.where(
        rows.episode_open & ~missed, np.floor(rows.episode_falling / settings.falling_bucket_s), 0
    )
    return np.column_stack(
        [
            rows.target_parallelism,
            np.where(rows.down, rows.down_until, -1),
            np.where(rows.down, rows.parallelism, 0),
            lag_bucket.astype(np.int64),
            uncommitted_bucket.astype(np.int64),
            age_bucket.astype(np.int64),
            falling_bucket.astype(np.int64),
        ]
    )


def _exact_keys(rows: _Rows) -> np.ndarray:
    """The whole simulator state of every row, as a key: rows merge only when identical."""
    scalars = np.column_stack(
        [
            rows.parallelism,
            rows.pending,
            rows.down,
            np.where(rows.down, rows.down_until, -1),
            rows.uptime_start % rows.horizon.checkpoint_interval_s,
            rows.episode_open,
            np.where(rows.episode_open, rows.episode_start, -1),
            np.where(rows.episode_open, rows.episode_earliest_end, -1),
            np.where(rows.episode_open, rows.episode_falling, -1),
            rows.episode_open & rows.episode_missed,
        ]
    ).astype(np.float64)
    return np.concatenate([scalars, rows.position, rows.committed], axis=1)


def _group_of(keys: np.ndarray) -> np.ndarray:
    """A group number per row: rows with equal keys (all columns) share one."""
    if keys.dtype.kind in "iub" and len(keys):
        low = keys.min(axis=0)
        sizes = keys.max(axis=0) - low + 1
        if float(np.prod(sizes.astype(float))) < 2.0**62:
            packed = np.ravel_multi_index(tuple((keys - low).T), tuple(int(n) for n in sizes))
            return np.unique(packed, return_inverse=True)[1].ravel()
    return np.unique(keys, axis=0, return_inverse=True)[1].ravel()


def _best_per_key(rows: _Rows, keys: np.ndarray, *, least_lag_too: bool = False) -> np.ndarray:
    """Per distinct key, the row with the lexicographically best (misses, over, worker-seconds, lag, …).

    With ``least_lag_too`` also the row with the best (misses, over, lag, worker-seconds): in a bucket
    the cheapest row is often the one furthest behind, and which of the two ends better depends
    on the future.
    """
    group = _group_of(keys)
    orders = [np.lexsort((-rows.episode_start, rows.uncommitted, rows.lag, rows.cost, rows.over, rows.misses, group))]
    if least_lag_too:
        # The least behind before the seconds over: an open episode that already missed keeps adding a
        # second over per second, so the row that ends it soonest may end with the fewest.
        orders.append(
            np.lexsort((-rows.episode_start, rows.uncommitted, rows.cost, rows.over, rows.lag, rows.misses, group))
        )
        # And the one that fell behind least in its open episode: a bucket spans several seconds of the
        # allowance, and only the row furthest from it may still end without a miss.
        orders.append(np.lexsort((rows.cost, rows.over, rows.lag, rows.episode_falling, rows.misses, group)))
    kept = []
    for order in orders:
        first = np.ones(len(order), dtype=bool)
        first[1:] = group[order[1:]] != group[order[:-1]]
        kept.append(order[first])
    return np.unique(np.concatenate(kept))


def _undominated(rows: _Rows, index: np.ndarray) -> np.ndarray:
    """The rows of ``index`` that no other row of ``index`` dominates (see the module docstring)."""
    if len(index) < 2:
        return index
    run_state = np.where(rows.down[index], rows.down_until[index] * 64 + rows.parallelism[index], -1)
    group = _group_of(np.column_stack([rows.target_parallelism[index], run_state]))
    is_open = rows.episode_open[index]
    columns = np.column_stack(
        [
            rows.misses[index],
            rows.over[index],
            rows.cost[index],
            rows.lag[index],
            rows.lag[index] + rows.uncommitted[index],
            # An episode that started later, or none (infinitely late), is better: compare its negation.
            -np.where(is_open, rows.episode_start[index], np.iinfo(np.int64).max).astype(float),
            np.where(is_open, rows.episode_earliest_end[index], np.iinfo(np.int64).min).astype(float),
            np.where(is_open, rows.episode_falling[index], 0).astype(float),
            (is_open & rows.episode_missed[index]).astype(float),
        ]
    )
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    keep = _undominated_in_groups(columns[order], np.concatenate(([0], bounds, [len(order)])))
    return index[np.sort(order[keep])]


@numba.njit(cache=True, nogil=True)
def _undominated_in_groups(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``keep[j]``: no row ``i`` of ``j``'s group (rows ``bounds[g]:bounds[g + 1]``) is no worse than ``j`` in
    every column and better in one; of equal rows the first stands for all."""
    count, width = values.shape
    keep = np.ones(count, dtype=np.bool_)
    for g in range(len(bounds) - 1):
        for j in range(bounds[g], bounds[g + 1]):
            for i in range(bounds[g], bounds[g + 1]):
                if i == j:
                    continue
                no_worse, better = True, False
                for c in range(width):
                    if values[i, c] > values[j, c]:
                        no_worse = False
                        break
                    if values[i, c] < values[j, c]:
                        better = True
                if no_worse and (better or i < j):
                    keep[j] = False
                    break
    return keep


@numba.njit(cache=True, nogil=True)
def _step_rows(
    start_s: int,
    end_s: int,
    end_after: np.ndarray,
    total_end: np.ndarray,
    capacity: np.ndarray,
    behind_threshold: np.ndarray,
    checkpoint_interval_s: int,
    target_s: float,
    allowance_s: int,
    position: np.ndarray,
    committed: np.ndarray,
    position_sum: np.ndarray,
    parallelism: np.ndarray,
    pending: np.ndarray,
    down: np.ndarray,
    down_until: np.ndarray,
    uptime_start: np.ndarray,
    episode_open: np.ndarray,
    episode_start: np.ndarray,
    episode_earliest_end: np.ndarray,
    episode_kind: np.ndarray,
    episode_falling: np.ndarray,
    episode_missed: np.ndarray,
    misses: np.ndarray,
    over: np.ndarray,
    cost: np.ndarray,
    lag: np.ndarray,
    lag_record: np.ndarray,
    recording: bool,
) -> None:  # pragma: no cover - compiled; covered through every solve, checked against the job by optimal_run
    """Every row through seconds ``[start_s, end_s)`` as ``SimulatedFlinkJob.step`` steps one job, in place:
    a stopped row due back restarts at its pending scale-out; a running one reads (:func:`simulator.drain.drain_job`)
    and checkpoints; then the lag, the cost and the SLO automaton (the incremental form of :func:`lab.slo.judge`).

    Row by row, all the seconds at once: a row's positions stay in cache while it is stepped.
    """
    per_worker = np.empty(capacity.shape[1])
    first_missed_age = math.floor(target_s) + 1
    for r in range(position.shape[0]):
        row = position[r]
        for t in range(start_s, end_s):
            if down[r] and down_until[r] <= t:
                parallelism[r] = pending[r]
                uptime_start[r] = t
                down[r] = False
            if not down[r]:
                position_sum[r] += drain_job(end_after[t], row, parallelism[r], capacity[t], per_worker)
                uptime = t - uptime_start[r]
                if uptime > 0 and uptime % checkpoint_interval_s == 0:
                    committed[r, :] = row
            previous = lag[r]
            lag[r] = total_end[t] - position_sum[r]
            cost[r] += parallelism[r]
            if recording:
                lag_record[r, t] = lag[r]
            behind = lag[r] > behind_threshold[t]
            is_open = episode_open[r]
            if is_open and t >= episode_earliest_end[r] and not behind:
                is_open = False
            elif not is_open and behind:
                is_open = True
                episode_start[r] = t
                episode_earliest_end[r] = t + 1
                episode_kind[r] = _OVERLOAD
                episode_falling[r] = 0
                episode_missed[r] = False
            episode_open[r] = is_open
            if is_open:
                # An episode open after second t lasts at least t + 1 − start: its miss counts the second its
                # age exceeds the target or its falling-behind seconds exceed the allowance, whichever is
                # first; then one second over per second past the target and per falling second past the allowance.
                age = t + 1 - episode_start[r]
                falling_now = behind and lag[r] > previous and not down[r]
                if falling_now:
                    episode_falling[r] += 1
                too_long = age == first_missed_age
                fell = falling_now and episode_falling[r] == allowance_s + 1
                if (too_long or fell) and not episode_missed[r]:
                    misses[r] += 1
                    episode_missed[r] = True
                if too_long:
                    over[r] += first_missed_age - target_s
                if age > first_missed_age:
                    over[r] += 1.0
                if falling_now and episode_falling[r] > allowance_s:
                    over[r] += 1.0


def _certain_misses(rows: _Rows, now_s: int) -> np.ndarray:
    """Rows whose open episode cannot end within the target whatever the schedule does next.

    A lower bound on the lag at ``e ≥ now``: ``λ_now + Σ_{τ=now}^{e} (w_τ − D_τ)``, with ``D_τ`` the
    most any scale-out can read in a second (every worker of the largest one at full speed, no
    downtime). The episode can end by its deadline ``start + target`` only if that bound is at most
    ``max(w_e, 1)`` at some ``e`` before it; if not, the miss is certain. An episode the end of the
    replay may cut short within the target is never certain.
    """
    horizon = rows.horizon
    target = rows.target_s
    span = math.floor(target) + 1
    end = min(now_s + span, horizon.duration_s)
    if end <= now_s:
        return np.zeros(rows.count, dtype=bool)
    bound = np.cumsum(horizon.workload[now_s:end] - horizon.most_drained[now_s:end])
    room = np.maximum.accumulate(horizon.behind_threshold[now_s:end] - bound)
    deadline = rows.episode_start + math.floor(target)  # the last second at which it may end
    # An episode that already counted its miss (it fell behind too long) cannot count another.
    open_within_target = rows.episode_open & ~rows.episode_missed & (now_s - rows.episode_start <= target)
    cut_short_in_time = rows.episode_start + target >= horizon.duration_s
    last = np.clip(deadline - now_s, -1, end - now_s - 1)
    reachable = np.where(last >= 0, room[np.maximum(last, 0)], -np.inf)
    return open_within_target & ~cut_short_in_time & (rows.lag > reachable)


def _range_minimum(values: np.ndarray, row: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``min(values[row, low:high + 1])`` for every query (``low <= high``), by a sparse table."""
    levels = [values]
    width = 1
    while 2 * width <= values.shape[1]:
        previous = levels[-1]
        levels.append(np.minimum(previous[:, :-width], previous[:, width:]))
        width *= 2
    span = high - low + 1
    level = np.floor(np.log2(np.maximum(span, 1))).astype(np.int64)
    out = np.empty(len(row))
    for k in np.unique(level):
        chosen = level == k
        table = levels[int(k)]
        left = table[row[chosen], low[chosen]]
        right = table[row[chosen], high[chosen] - (1 << int(k)) + 1]
        out[chosen] = np.minimum(left, right)
    return out


def _hopeless(rows: _Rows, choices: np.ndarray, boundary: int, interval: int, bound: Objective | None) -> np.ndarray:
    """``[state, choice]``: choosing it now makes a miss certain, and one more miss cannot beat ``bound``.

    The same lower bound on the lag as :func:`_certain_misses`, tightened by the choice: after the
    stop it causes (the uncommitted records replayed unless the rescale is aligned with a checkpoint,
    no reading for the true downtime), the job reads at most what the chosen scale-out's workers can,
    until the next boundary.
    """
    count = rows.count
    hopeless = np.zeros((count, len(choices)), dtype=bool)
    if bound is None:
        return hopeless
    horizon = rows.horizon
    target = rows.target_s
    at_bound = rows.misses >= bound.misses
    span = min(math.floor(target) + 1, horizon.duration_s - boundary)
    if span <= 0 or not at_bound.any():
        return hopeless
    seconds = np.arange(boundary, boundary + span)
    arrived = np.cumsum(horizon.workload[seconds])
    in_loop = np.arange(span) < interval
    # drained[c, j]: the most choice c can read in second boundary + j (any scale-out after the loop).
    drained = np.where(
        in_loop[None, :], horizon.drained_by_first[seconds][:, choices - 1].T, horizon.most_drained[seconds][None, :]
    )
    read = np.cumsum(drained, axis=1)
    margin = arrived[None, :] - read - horizon.behind_threshold[seconds][None, :]

    state = np.repeat(np.arange(count), len(choices))
    choice = np.tile(np.arange(len(choices)), count)
    chosen = choices[choice]
    running = ~rows.down[state]
    stops = running & (chosen != rows.parallelism[state])
    downtime = np.zeros(len(state), dtype=np.int64)
    if stops.any():
        downtime[stops] = horizon.downtimes_s(_RESCALE, boundary, rows.parallelism[state][stops], chosen[stops])
    downtime[~running] = np.maximum(rows.down_until[state][~running] - boundary, 0)
    is_open = rows.episode_open[state]
    start = np.where(is_open, rows.episode_start[state], boundary)
    earliest = np.maximum(np.where(is_open, rows.episode_earliest_end[state], boundary + 1), boundary + downtime)
    deadline = start + math.floor(target)
    open_unmissed = is_open & ~rows.episode_missed[state]
    judged = (open_unmissed | (~is_open & stops)) & at_bound[state] & (start + target < horizon.duration_s)
    low = earliest - boundary
    high = np.minimum(deadline - boundary, span - 1)
    # Lag at boundary + j is at least base + margin[c, j] once the job reads again (j >= downtime).
    read_before = np.where(downtime > 0, read[choice, np.clip(downtime - 1, 0, span - 1)], 0.0)
    replayed = stops & (not horizon.rescale_aligned)
    base = rows.lag[state] + np.where(replayed, rows.uncommitted[state], 0.0) + read_before
    closable = np.zeros(len(state), dtype=bool)
    query = judged & (low <= high)
    if query.any():
        lowest = _range_minimum(margin, choice[query], low[query], high[query])
        closable[query] = base[query] + lowest <= 0
    hopeless[state, choice] = judged & ~closable
    return hopeless


def _within_bound(rows: _Rows, now_s: int, bound: Objective | None) -> np.ndarray:
    """Rows that may still end no worse than ``bound`` (the score of a schedule already known)."""
    if bound is None:
        return np.ones(rows.count, dtype=bool)
    misses = rows.misses + _certain_misses(rows, now_s)
    fewer = misses < bound.misses
    same = misses == bound.misses
    return (
        fewer
        | (same & (rows.over < bound.seconds_over_target))
        | (same & (rows.over == bound.seconds_over_target) & (rows.cost <= bound.worker_seconds))
    )


def _merge(
    rows: _Rows, now_s: int, input_rate: float, settings: OptimalSettings, bound: Objective | None
) -> np.ndarray:
    """Indices of the rows to keep as the states of the next boundary."""
    candidates = np.flatnonzero(_within_bound(rows, now_s, bound))
    if candidates.size == 0:
        # Nothing can beat the bound: keep the best row so the schedule stays complete.
        candidates = np.array([int(np.lexsort((rows.cost, rows.over, rows.misses))[0])])
    subset = rows.take(candidates)
    if settings.exact:
        return candidates[_best_per_key(subset, _exact_keys(subset))]
    kept = _best_per_key(
        subset, _bucket_keys(subset, now_s, input_rate, settings), least_lag_too=settings.least_lag_per_bucket
    )
    if settings.prune_dominated:
        kept = _undominated(subset, kept)
    return candidates[kept]


# ---------------------------------------------------------------------------------------------- solving


def replay_duration_s(trace: Trace, *, duration_s: int | None = None, hours: float | None = None) -> int:
    """Seconds a replay of ``trace`` runs: the whole trace, or its first ``hours``/``duration_s``."""
    full = int(trace.duration_s)
    if duration_s is not None:
        return min(int(duration_s), full)
    if hours is not None:
        return int(min(hours * 3600.0, trace.duration_s))
    return full


def _failures(
    duration_s: int, simulator: SimulatorSettings, failures_per_hour: float, failures: Sequence[int] | None
) -> tuple[int, ...]:
    if failures is not None:
        return tuple(sorted(int(f) for f in failures))
    return tuple(failure_schedule(duration_s, failures_per_hour, simulator.failure_schedule_seed))


_HEURISTIC_MARGINS = (0.0, 0.05, 0.1, 0.2, 0.35)
"""Headroom over the next loops' peak input of the simple schedules whose best score bounds the DP."""


def _loop_minima(
    minimum: np.ndarray | None, choices: np.ndarray, duration: int, interval: int
) -> dict[int, int] | None:
    """Per loop boundary, the smallest choice allowed through that loop: the first with at least the highest of
    ``minimum`` in it (the largest choice if none has)."""
    if minimum is None:
        return None
    fewest = {
        b: int(np.max(minimum[b : b + interval])) for b in range(interval, duration, interval) if b < minimum.size
    }
    top = int(choices[-1])
    return {b: next((int(n) for n in choices if n >= low), top) for b, low in fewest.items()}


def _smallest_carrying(choices: np.ndarray, capacity: np.ndarray, rate: float) -> int:
    """The smallest scale-out whose true capacity is at least ``rate`` (the largest if none is)."""
    carrying = np.flatnonzero(capacity >= rate)
    return int(choices[carrying[0]] if carrying.size else choices[np.argmax(capacity)])


def _simple_schedules(
    horizon: _Horizon,
    environment: JobEnvironment,
    choices: np.ndarray,
    initial: int,
    interval: int,
    target: float,
    settle_by_end: bool,
    floors: dict[int, int] | None = None,
) -> tuple[Objective, Objective, tuple[tuple[int, int], ...]]:
    """The best of a few simple schedules: the score it is chosen by (which bounds the DP's), its
    judged score, and the schedule.

    Each picks, at every boundary, the smallest scale-out whose true capacity carries the peak
    input of the next loop and the target after it with some headroom; one more stays at the largest.
    """
    capacity = np.array([environment.true_capacity(int(n)) for n in choices])
    boundaries = list(range(interval, horizon.duration_s, interval))
    lookahead = interval + int(target)
    rows = _Rows.initial(horizon, target, _ALLOWANCE_S, initial, count=len(_HEURISTIC_MARGINS) + 1)
    actions: dict[int, np.ndarray] = {}
    for b in boundaries:
        peak = float(horizon.workload[b : b + lookahead].max())
        picks = [_smallest_carrying(choices, capacity, peak * (1 + m)) for m in _HEURISTIC_MARGINS]
        low = (floors or {}).get(b, 0)
        actions[b] = np.array([max(pick, low) for pick in (*picks, int(choices[-1]))], dtype=np.int64)
    rows.advance(0, horizon.duration_s, actions)
    best, chosen_by = _final_choice(rows, settle_by_end)
    made_as = int(rows.origin[best])
    schedule = ((0, initial), *((b, int(actions[b][made_as])) for b in boundaries))
    return chosen_by, rows.objective(best), schedule


def optimal_schedule(
    trace: Trace,
    simulator: SimulatorSettings,
    *,
    settings: OptimalSettings | None = None,
    duration_s: int | None = None,
    hours: float | None = None,
    failures_per_hour: float = 0.0,
    failures: Sequence[int] | None = None,
    minimum: np.ndarray | None = None,
) -> OptimalSchedule:
    """The schedule of scale-outs that minimises (misses, seconds over target, worker-seconds).

    Parameters
    ----------
    trace, simulator
        The replay: its trace and the simulated job's settings (seed included).
    settings
        Choices and resolution (default :class:`OptimalSettings`).
    duration_s, hours
        Replay only the first seconds or hours of the trace (default: all of it).
    failures_per_hour
        Poisson rate of injected failures; the instants are :func:`simulator.failure_schedule`'s,
        the ones the replay injects.
    failures
        Explicit failure instants instead.
    minimum
        The fewest workers allowed at each second: a schedule held to a floor, e.g. ready for a failure at every
        moment. Each loop after the first (which runs at the initial scale-out, as every replay does) runs at no
        fewer than its highest, rounded up to a choice.
    """
    settings = settings or OptimalSettings()
    started = time.perf_counter()
    environment = JobEnvironment(trace, simulator)
    duration = replay_duration_s(trace, duration_s=duration_s, hours=hours)
    interval = int(settings.loop_interval_s)
    if duration < interval:
        raise ValueError(f"{trace.name}: {duration} s is shorter than one loop ({interval} s)")
    failure_seconds = _failures(duration, simulator, failures_per_hour, failures)
    choices = np.array(settings.choices(simulator.partitions), dtype=np.int64)
    initial = settings.initial_parallelism or simulator.initial_parallelism
    horizon = _Horizon(environment, duration, failure_seconds, workers=max(int(choices.max()), initial))
    target = settings.target_recovery_time_s

    floors = _loop_minima(minimum, choices, duration, interval)
    simple_choice, simple_score, simple_schedule = _simple_schedules(
        horizon, environment, choices, initial, interval, target, settings.settle_by_end, floors
    )
    bound = simple_choice if settings.use_bound else None
    rows = _Rows.initial(horizon, target, _ALLOWANCE_S, initial)
    rows.advance(0, interval)
    pointers: list[tuple[np.ndarray, np.ndarray]] = []
    kept_counts: list[int] = []
    stepped = 0
    for boundary in range(interval, duration, interval):
        end = min(boundary + interval, duration)
        allowed = choices >= floors.get(boundary, 0) if floors is not None else True
        worth = ~_hopeless(rows, choices, boundary, interval, bound) & allowed
        if not worth.any():
            worth[:] = allowed  # nothing can beat the bound: go on with every choice allowed
        parent, which = np.nonzero(worth)
        action = choices[which]
        expanded = rows.take(parent)
        expanded.advance(boundary, end, {boundary: action})
        stepped += expanded.count
        rate = float(horizon.workload[boundary:end].mean())
        keep = _merge(expanded, end, rate, settings, bound)
        made_as = expanded.origin[keep]
        rows = expanded.take(keep)
        pointers.append((parent[made_as], action[made_as]))
        kept_counts.append(len(keep))

    best, chosen_by = _final_choice(rows, settings.settle_by_end)
    decisions: list[tuple[int, int]] = []
    index = best
    for k in range(len(pointers) - 1, -1, -1):
        parents, actions = pointers[k]
        decisions.append(((k + 1) * interval, int(actions[index])))
        index = int(parents[index])
    decisions.reverse()
    schedule: tuple[tuple[int, int], ...] = ((0, initial), *decisions)
    predicted = rows.objective(best)
    if simple_choice.key() < chosen_by.key():
        # A merge lost the simple schedule's path and nothing better was found: never return worse.
        schedule, predicted, chosen_by = simple_schedule, simple_score, simple_choice
    statistics = SolveStatistics(
        seconds=time.perf_counter() - started,
        boundaries=len(pointers),
        rows_stepped=stepped,
        states_max=max(kept_counts, default=1),
        states_mean=float(np.mean(kept_counts)) if kept_counts else 1.0,
        simple_schedule_score=simple_choice,
    )
    return OptimalSchedule(
        schedule=schedule,
        predicted=predicted,
        chosen_by=chosen_by,
        duration_s=duration,
        failures=failure_seconds,
        loop_interval_s=interval,
        target_recovery_time_s=target,
        statistics=statistics,
    )


# ---------------------------------------------------------------------------------------------- schedules


@dataclass(frozen=True, eq=False)
class ModelRun:
    """What the model predicts one schedule does, second by second."""

    objective: Objective
    lag: np.ndarray
    workload: np.ndarray
    stops: tuple[Stop, ...]

    def judge(self, target_recovery_time_s: float) -> SloJudgement:
        """The SLO judgement of the predicted series."""
        return judge(self.lag, self.workload, self.stops, target_recovery_time_s=target_recovery_time_s)


def _actions(schedule: Sequence[tuple[int, int]], initial: int) -> tuple[int, dict[int, int]]:
    """The starting scale-out and the rescales a schedule asks for (a second-0 entry sets the start)."""
    start = initial
    asks: dict[int, int] = {}
    for second, n in schedule:
        if second == 0:
            start = int(n)
        else:
            asks[int(second)] = int(n)
    return start, asks


def predict_schedules(
    trace: Trace,
    simulator: SimulatorSettings,
    schedules: Sequence[Sequence[tuple[int, int]]],
    *,
    target_recovery_time_s: float = 300.0,
    duration_s: int | None = None,
    hours: float | None = None,
    failures_per_hour: float = 0.0,
    failures: Sequence[int] | None = None,
) -> list[ModelRun]:
    """Step every schedule through the model at once (no merging): the brute force and the predictions.

    All schedules must start at the same scale-out (a second-0 entry, or the simulator's initial one).
    """
    environment = JobEnvironment(trace, simulator)
    duration = replay_duration_s(trace, duration_s=duration_s, hours=hours)
    failure_seconds = _failures(duration, simulator, failures_per_hour, failures)
    parsed = [_actions(s, simulator.initial_parallelism) for s in schedules]
    starts = {start for start, _ in parsed}
    if len(starts) != 1:
        raise ValueError(f"schedules start at different scale-outs {sorted(starts)}")
    initial = starts.pop()
    workers = max([initial, *(n for _, asks in parsed for n in asks.values())])
    horizon = _Horizon(environment, duration, failure_seconds, workers=workers)
    rows = _Rows.initial(horizon, target_recovery_time_s, _ALLOWANCE_S, initial, count=len(schedules))
    rows.record(duration)
    seconds = sorted({t for _, asks in parsed for t in asks if t < duration})
    # A schedule silent at a second another one rescales at asks for nothing then (-1).
    actions = {t: np.array([asks.get(t, -1) for _, asks in parsed], dtype=np.int64) for t in seconds}
    rows.advance(0, duration, actions)
    assert rows.lag_record is not None and rows.stops is not None
    row_of = np.argsort(rows.origin)

    def as_replayed(stop: Stop) -> Stop:
        # A stop that has not resumed when the replay ends is still in progress.
        return stop if stop.resume_s is not None and stop.resume_s < duration else Stop(stop.kind, stop.start_s, None)

    return [
        ModelRun(rows.objective(i), rows.lag_record[i], horizon.workload, tuple(map(as_replayed, rows.stops[i])))
        for i in (int(r) for r in row_of)
    ]


@dataclass(frozen=True, eq=False)
class ScheduleReplay:
    """A schedule stepped through the real simulated job: the series the judgement and the summary read."""

    window: Window
    """Every recorded second: workload, lag, committed lag, parallelism, per-worker metrics."""
    stops: tuple[Stop, ...]
    """Every rescale and failure, the one still in progress at the end included."""
    restarts: tuple[Restart, ...]
    accounting: Accounting
    duration_s: int
    job: SimulatedFlinkJob
    """The job after the replay (for a summary that reads the job itself)."""

    @property
    def worker_seconds(self) -> int:
        """``Σ_t parallelism_t``."""
        return int(self.window.parallelism.sum())

    @property
    def worker_hours(self) -> float:
        """Worker-seconds / 3600 (the replay summary's ``worker_hours`` before rounding)."""
        return self.worker_seconds / 3600.0

    def judge(self, target_recovery_time_s: float) -> SloJudgement:
        """The SLO judgement of the replayed series."""
        return judge(self.window.lag, self.window.workload, self.stops, target_recovery_time_s=target_recovery_time_s)

    def objective(self, target_recovery_time_s: float) -> Objective:
        """Misses, seconds over target and worker-seconds, as the optimal schedule scores them."""
        verdict = self.judge(target_recovery_time_s)
        return Objective(verdict.misses, verdict.seconds_over_target, self.worker_seconds)


def replay_schedule(
    trace: Trace,
    simulator: SimulatorSettings,
    schedule: Sequence[tuple[int, int]],
    *,
    duration_s: int | None = None,
    hours: float | None = None,
    failures_per_hour: float = 0.0,
    failures: Sequence[int] | None = None,
) -> ScheduleReplay:
    """Step the real :class:`simulator.SimulatedFlinkJob` through ``schedule`` with the replay's failures.

    At each second: the rescale the schedule asks for then (the job ignores one to its current
    scale-out), a failure if one is due, then the step — the order of the policy replay, where the
    round after second ``b − 1`` rescales before the failure check of second ``b``. A ``(0, n)``
    entry starts the job at ``n`` workers.
    """
    duration = replay_duration_s(trace, duration_s=duration_s, hours=hours)
    failure_seconds = set(_failures(duration, simulator, failures_per_hour, failures))
    initial, asks = _actions(schedule, simulator.initial_parallelism)
    job = SimulatedFlinkJob(trace, simulator, parallelism=initial)
    events = sorted({t for t in (*asks, *failure_seconds) if 0 <= t < duration})
    for t in events:
        job.run_until(t)
        if t in asks:
            job.rescale(asks[t])
        if t in failure_seconds:
            job.fail()
    job.run_until(duration)
    return ScheduleReplay(
        window=job.window(0, duration),
        stops=stops_from(job.restarts, job.restart_in_progress),
        restarts=tuple(job.restarts),
        accounting=job.accounting,
        duration_s=duration,
        job=job,
    )


def optimal_run(
    trace: Trace, settings: Any, *, hours: float | None, failures_per_hour: float
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The ``optimal`` row of the lab: solve, replay the schedule through the real job, summarize it like a policy.

    ``settings`` is the lab's settings tree (loop interval, bounds, target, simulator). Raises
    AssertionError if the replay does not score what the planner predicted (the model is exact).
    """
    from lab.replay import job_summary, series_of

    options = OptimalSettings(
        loop_interval_s=int(settings.loop_interval_s),
        min_parallelism=settings.min_parallelism,
        max_parallelism=min(settings.max_parallelism, settings.simulator.partitions),
        target_recovery_time_s=settings.target_recovery_time_s,
    )
    found = optimal_schedule(
        trace, settings.simulator, settings=options, hours=hours, failures_per_hour=failures_per_hour
    )
    replayed = replay_schedule(
        trace, settings.simulator, found.schedule, hours=hours, failures_per_hour=failures_per_hour
    )
    scored = replayed.objective(options.target_recovery_time_s)
    if scored != found.predicted:
        raise AssertionError(f"{trace.name}: the optimal schedule replayed as {scored}, predicted {found.predicted}")
    summary = job_summary(
        replayed.job,
        trace_name=trace.name,
        policy="optimal",
        target_recovery_time_s=options.target_recovery_time_s,
        rescales=len(found.rescales),
        rescales_proposed=len(found.rescales),
    )
    summary["failures_injected"] = len(found.failures)
    summary["optimal"] = {"solve_s": round(found.statistics.seconds, 2), "states_max": found.statistics.states_max}
    return summary, series_of(replayed.job)


def _drop_kernels_compiled_against_another_drain_rule() -> None:
    """numba keys a cached kernel on the file that defines it; :func:`_step_rows` inlines
    :func:`simulator.drain.drain_job`, so after a change to that file its cache would still hold the old rule.
    The cache directory keeps a stamp of the drain rule's source: when the stamp does not match, this
    module's compiled kernels are removed before any is loaded, and numba compiles them anew."""
    cache = getattr(_step_rows, "_cache", None)
    directory = Path(getattr(cache, "_cache_path", Path(__file__).parent / "__pycache__"))
    digest = hashlib.sha256(Path(drain_rule.__file__).read_bytes()).hexdigest()[:16]
    stamp = directory / f"{Path(__file__).stem}.drain-{digest}.stamp"
    if stamp.exists():
        return
    try:
        for stale in [
            *directory.glob(f"{Path(__file__).stem}.*.nb[ic]"),
            *directory.glob(f"{Path(__file__).stem}.drain-*.stamp"),
        ]:
            stale.unlink(missing_ok=True)
        directory.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    except OSError:
        pass  # a read-only install: numba cannot write its cache there either, and compiles in memory


_drop_kernels_compiled_against_another_drain_rule()


__all__ = [
    "ModelRun",
    "Objective",
    "OptimalSchedule",
    "OptimalSettings",
    "ScheduleReplay",
    "SolveStatistics",
    "optimal_run",
    "optimal_schedule",
    "predict_schedules",
    "replay_duration_s",
    "replay_schedule",
]
