"""The evaluation of candidate scale-outs: capacity, downtime and three recovery predictions each.

Reads the models and changes none of them (the predictor notes what each prediction was made of, to
explain a recovery measured later). Per candidate ``n``, from the job's current scale-out:

* the stop that would start at ``n`` next (a rescale to it, or a failure at the current one): what the
  recovery watch compares a measured stop with. The records it must work off are those expected to
  arrive (the point forecast). The rise envelope is no bound on them: it is the steepest rise of the
  last hours, wherever in its cycle the workload is, held as if it lasted; integrated as arrivals it
  made recoveries of a minute look endless on cyclic workloads. The planner still checks the capacity
  against the envelope's peak over the recovery;
* for a rescale, a failure once at ``n`` too: a scale-out is chosen to run at, so a failure there must
  recover in time as well, or the next round finds the current scale-out failing its own check and
  rescales back (a flap). The failure comes once the rescale has caught up, so without the records
  waiting now. The planner checks the slower of the two;
* for a scale-in, its bad case: a scale-in saves workers, it is never needed, so it must recover in
  time even when the stop replays a whole checkpoint interval and the workload rises as it has before.
  Planned on the expected case, scale-ins near the capacity edge (a few percent of spare capacity)
  recovered in several times their prediction and missed (docs/research/experiments.md, experiment 3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np

from agent.analyze.forecasting import WorkloadOutlook
from models.capacity import CapacityModel
from models.recovery import RecoveryPredictor, WorkerProfile


SCALE_IN_READY_AFTER_RESCALE = "never"
"""Where a scale-in's failure-ready workload (:attr:`ScaleOuts.failure_ready`) is that of a failure striking as the
scale-in's own stop ends, one recovery working off both stops (their downtimes and replays together): ``never``, a
failure on a caught-up job as for every other scale-out; ``cheap``, where a rescale is cheap (in place); or
``always``. A failure is as likely in the seconds after a rescale as at any other moment, and in place two scale-ins
taken a percent above a caught-up job's readiness met one there and missed. Checked through the hold where cheap
too (``planner.daedalus.READY_WHERE = "always"``), ``cheap`` took both for one new miss and 1.6 % more of the dev
half's worker-hours, and held-out cost 1.1 % with the same miss, a failure's third within five minutes
(docs/research/experiments.md, experiment 47)."""


BAD_CASE_JOINS: Literal["both", "either", "none"] = "both"
"""What a scale-in's bad case is where a rescale is dear: ``both``, a whole checkpoint interval replayed while the
workload rises as the upper bound says; ``either``, the slower of a whole interval replayed under the point forecast
and a stop's expected replay under the upper bound (each bad moment at its own rate, not both at once); ``none``, no
bad case (the expected recovery of the rescale and of a failure there alone). Where a rescale is cheap it is
``both``. The bad case is the check that refuses a dear scale-in first, but the next check refuses the same
scale-ins: on the dev half at a restart's cost ``either`` saved 0.32 % of the worker-hours and ``none`` 0.46 %, each
for 7 -> 10 avoidable misses (docs/research/experiments.md, experiment 53)."""


@dataclass(frozen=True)
class CandidateRecovery:
    """The recovery predictions for one candidate scale-out."""

    stop_s: float
    """The expected recovery of the stop that would start at it next: what the recovery watch compares with."""
    planned_s: float
    """What the planner checks: the slower of a rescale to it and a failure once there, and for a scale-in also
    its bad case."""


@dataclass(frozen=True, eq=False)
class ScaleOuts:
    """Every candidate scale-out's capacity, downtime and recovery, as one round evaluated them."""

    capacities: Mapping[int, float | None]
    sources: Mapping[int, str]
    """Where each capacity came from (``observed``, ``regression``, ``prior``...)."""
    recoveries: Mapping[int, CandidateRecovery]
    """Only the candidates with a capacity and a forecast to predict from."""
    downtimes: Mapping[int, float]
    """Expected downtime of a rescale from the current scale-out (none without a current one)."""
    failure_ready: Mapping[int, float]
    """The highest steady workload at which a failure at each candidate recovers within the target
    (:meth:`RecoveryPredictor.failure_ready_rate`), for a scale-in a failure as its own stop ends
    (:data:`SCALE_IN_READY_AFTER_RESCALE`): what a scale-in must stay below while it holds."""

    @property
    def recovery_times(self) -> dict[int, float]:
        """What the planner checks, per candidate."""
        return {n: r.planned_s for n, r in self.recoveries.items()}

    @cached_property
    def stop_predictions(self) -> dict[int, float]:
        """What the recovery watch compares with, per candidate, and where a cheap scale-in's hold starts (built
        once: the watch and the planner read the same predictions)."""
        return {n: r.stop_s for n, r in self.recoveries.items()}


def evaluate_scale_outs(
    candidates: Iterable[int],
    *,
    current: int | None,
    backlog: float,
    capacity: CapacityModel,
    predictor: RecoveryPredictor,
    outlook: WorkloadOutlook,
    target_s: float,
    cheap_rescale: bool,
) -> ScaleOuts:
    """Capacity, downtime and recovery of each candidate, from ``current`` with ``backlog`` records waiting;
    ``target_s``: the target recovery time the failure-ready workloads are computed for; ``cheap_rescale``: whether
    a rescale is cheap (:data:`SCALE_IN_READY_AFTER_RESCALE`)."""
    after_rescale = SCALE_IN_READY_AFTER_RESCALE == "always" or (
        SCALE_IN_READY_AFTER_RESCALE == "cheap" and cheap_rescale
    )
    capacities: dict[int, float | None] = {}
    sources: dict[int, str] = {}
    recoveries: dict[int, CandidateRecovery] = {}
    downtimes: dict[int, float] = {}
    failure_ready: dict[int, float] = {}
    with capacity.held():  # the round's reads: each worker's line once, not once per candidate
        for n in candidates:
            value, source = capacity.capacity_at(n, current=current)
            capacities[n], sources[n] = value, source
            if current is not None:
                downtimes[n] = predictor.downtime("rescale", n, current)
            if value is None:
                continue
            profile = capacity.worker_profile(n)
            after = current if after_rescale and current is not None and n < current else None
            ready = predictor.failure_ready_rate(value, n, target_s, profile, after_rescale_from=after)
            if ready is not None:
                failure_ready[n] = ready
            if outlook.arrivals is None or outlook.recent_rate is None:
                continue
            recoveries[n] = evaluate_candidate(
                n,
                capacity=value,
                profile=profile,
                current=current,
                backlog=backlog,
                outlook=outlook,
                predictor=predictor,
                bad_case=BAD_CASE_JOINS if not cheap_rescale else "both",
            )
    return ScaleOuts(capacities, sources, recoveries, downtimes, failure_ready)


def evaluate_candidate(
    n: int,
    *,
    capacity: float,
    profile: WorkerProfile | None,
    current: int | None,
    backlog: float,
    outlook: WorkloadOutlook,
    predictor: RecoveryPredictor,
    bad_case: Literal["both", "either", "none"] = "both",
) -> CandidateRecovery:
    """The three recovery predictions of scale-out ``n`` (see the module docstring); ``backlog``: records
    waiting now, which a job rescaled while behind starts with; ``bad_case``: a scale-in's (:data:`BAD_CASE_JOINS`)."""
    arrivals, rate, lag = outlook.arrivals, outlook.recent_rate, backlog
    kind = "failure" if n == current else "rescale"
    stop = predictor.predict(
        capacity=capacity,
        forecast=arrivals,
        recent_workload_rate=rate,
        kind=kind,
        parallelism=n,
        profile=profile,
        current=current,
        current_lag=lag,
    )
    planned = stop
    if kind == "rescale":  # and a failure once there, without the records waiting now
        failure_there = predictor.predict(
            capacity=capacity,
            forecast=arrivals,
            recent_workload_rate=rate,
            kind="failure",
            parallelism=n,
            profile=profile,
            current=n,
        )
        planned = max(stop, failure_there)
    upper = outlook.scale_in_upper
    if current is not None and n < current and upper is not None and bad_case != "none":  # a scale-in's bad case

        def bad(workload: np.ndarray | None, whole_interval: bool = True) -> float:
            return predictor.predict_bad_case(
                capacity,
                workload,
                rate,
                parallelism=n,
                current=current,
                current_lag=lag,
                profile=profile,
                whole_interval=whole_interval,
            )

        worst = bad(upper) if bad_case == "both" else max(bad(arrivals), bad(upper, whole_interval=False))
        planned = max(planned, worst)
    return CandidateRecovery(stop_s=stop, planned_s=planned)
