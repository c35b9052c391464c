"""Daedalus per operator: Algorithm 1 over per-vertex plans, so the job recovers in time on the fewest slots.

Whole-job Daedalus (paper 001, section 3.2, ``planner.daedalus``) searches scale-outs ``1..max`` for
the smallest that carries the workload, recovers within the target and carries the forecast. On a
job graph a candidate is a plan (a parallelism per vertex), and most plans waste subtasks: the
job's capacity is its bottleneck vertex's. The candidates here are the **capacity ladder**:

* DS2's rates give every vertex its capacity per subtask in source records,
  ``k_v = (true rate per subtask of v) / (records v takes in per source record)``;
* the lowest rung runs every vertex at its lower bound; each next rung adds one subtask to the
  vertex that bounds the job's capacity ``C(plan) = min_v p_v k_v`` (the bottleneck vertex set grows
  along the ladder as vertices take turns being the bottleneck); the ladder ends when the
  bottleneck cannot grow.

So each rung is the plan with the fewest subtasks that reaches its capacity, and the other vertices
are sized by DS2's rates to carry it. On this ladder Algorithm 1 runs unchanged: for each rung in
order, (1) it carries the average workload, (2) its recovery after a rescale to it, predicted by
``models.recovery.recovery_time`` from the replayed checkpoint interval, the backlog and the
downtime learned for its slot count, is within the target, (3) it carries the forecast while
recovering, (4) the current plan qualifies: keep it, (5) a smaller plan waits while the backlog
exceeds its capacity, (6) it carries the forecast peak. The current plan joins the candidates at
its own cost, with its capacity as observed (the busiest subtask of each vertex saturates first,
Daedalus's skew rule), where the rungs use DS2's linear estimate. Before the search the shared
guards hold (grace period, recovery), and a recent rescale keeps its plan while it carries the load;
after it, scale-in waits for the stabilization window (on the plan's subtask count), as whole-job
Daedalus does with ``planner.daedalus.stabilize``.

``uniform=True`` restricts the ladder to every vertex at one parallelism ``n``: whole-job Daedalus as
reactive mode would run it, with the same models, which is what the per-operator form is measured
against on the operator-DAG testbed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from models.recovery import recovery_time
from planner import guards
from planner.daedalus import forecast_max, stabilize
from planner.ds2_per_operator import Ds2Plan, ds2_plan
from planner.graph import VertexInput
from planner.per_operator import (
    bounds,
    describe_plan,
    from_whole_job,
    keep_all,
    operator_code,
    slots,
    subtasks,
)
from planner.types import Decision, PlanInput, PlannerConfig, ReasonCode

DEFAULT_DOWNTIME_S = 30.0
"""Downtime assumed for a slot count the recovery predictor has no estimate for (its rescale prior)."""


def _fmt(rate: float) -> str:
    return f"{rate:,.0f}/s"


@dataclass(frozen=True)
class Rates:
    """Per vertex: capacity of one subtask in source records/s, or None where unknown (kept as it is)."""

    per_subtask: Mapping[str, float | None]
    """``k_v``: source records/s one subtask of the vertex carries (DS2 linear)."""
    observed_now: Mapping[str, float | None]
    """Source records/s the vertex carries at its current parallelism, from its busiest subtask."""

    @classmethod
    def of(cls, vertices: Sequence[VertexInput], plan: Ds2Plan, workload: float) -> Rates:
        """Capacities from DS2's rates; ``plan`` is DS2 at ``workload`` (its input rates give the ratios)."""
        ratio = plan.input_ratio(workload)
        per_subtask: dict[str, float | None] = {}
        observed: dict[str, float | None] = {}
        for vertex in vertices:
            r = ratio.get(vertex.id, 0.0)
            rate = plan.per_subtask.get(vertex.id)
            if r <= 0 or rate is None:
                # Takes in nothing per source record (after a filter that drops all) or unknown: never the bottleneck.
                per_subtask[vertex.id] = None
                observed[vertex.id] = None
                continue
            per_subtask[vertex.id] = rate / r
            m = vertex.metrics
            if m is not None and m.busy_max is not None and m.busy_max >= 0.01 and m.records_in_rate > 0:
                # Daedalus's skew rule: the busiest subtask reaches full load first, the others in proportion.
                observed[vertex.id] = m.records_in_rate / min(m.busy_max, 1.0) / r
            else:
                observed[vertex.id] = None
        return cls(per_subtask, observed)

    def capacity(self, plan: Mapping[str, int]) -> float:
        """``C(plan) = min_v p_v k_v`` over the vertices with a known rate (inf if none)."""
        values = [plan[v] * k for v, k in self.per_subtask.items() if k is not None]
        return min(values) if values else math.inf

    def capacity_now(self, current: Mapping[str, int]) -> float:
        """The current plan's capacity: observed per vertex where it can be, linear otherwise."""
        values = []
        for v, k in self.per_subtask.items():
            if k is None:
                continue
            seen = self.observed_now.get(v)
            values.append(seen if seen is not None else current[v] * k)
        return min(values) if values else math.inf


def ladder(
    vertices: Sequence[VertexInput], rates: Rates, config: PlannerConfig, *, uniform: bool = False
) -> list[dict[str, int]]:
    """The capacity ladder (see the module docstring): plans of growing capacity, one subtask (or ``n``) apart.

    >>> from planner.types import PlannerConfig
    >>> vs = [VertexInput("a", "src", 1), VertexInput("b", "map", 1, ("a",))]
    >>> r = Rates({"a": 10.0, "b": 4.0}, {})
    >>> [tuple(p.values()) for p in ladder(vs, r, PlannerConfig(1, 3, 300))]
    [(1, 1), (1, 2), (1, 3)]
    >>> [tuple(p.values()) for p in ladder(vs, r, PlannerConfig(1, 3, 300), uniform=True)]
    [(1, 1), (2, 2), (3, 3)]
    """
    limits = {v.id: bounds(v, config) for v in vertices}
    known = [v.id for v in vertices if rates.per_subtask.get(v.id) is not None]
    fixed = {v.id: min(max(v.parallelism, limits[v.id][0]), limits[v.id][1]) for v in vertices if v.id not in known}
    if uniform:
        top = max((limits[v][1] for v in known), default=config.min_parallelism)
        rungs: list[dict[str, int]] = []
        for n in range(config.min_parallelism, max(top, config.min_parallelism) + 1):
            plan = {v.id: min(max(n, limits[v.id][0]), limits[v.id][1]) for v in vertices}
            if not rungs or plan != rungs[-1]:
                rungs.append(plan)
        return rungs
    plan = {v.id: (limits[v.id][0] if v.id in known else fixed[v.id]) for v in vertices}
    rungs = [dict(plan)]
    while known:
        # The vertex that bounds the capacity grows; ties go to the cheaper subtask (the larger k).
        bottleneck = min(known, key=lambda v: (plan[v] * (rates.per_subtask[v] or 0.0), -(rates.per_subtask[v] or 0.0)))
        if plan[bottleneck] >= limits[bottleneck][1]:
            break
        plan[bottleneck] += 1
        rungs.append(dict(plan))
    return rungs


@dataclass(frozen=True)
class Candidate:
    """A plan the search may choose, with what Algorithm 1 checks."""

    plan: dict[str, int]
    capacity: float
    recovery_s: float
    current: bool
    """True for the plan the job runs now (capacity observed, recovery after a failure)."""

    @property
    def cost(self) -> int:
        """Subtasks of the plan: the dimension candidates, recommendations and stabilization use."""
        return subtasks(self.plan)


class DaedalusPerOperator:
    """Daedalus Algorithm 1 over the capacity ladder (per vertex), or over uniform plans (``uniform``)."""

    uses_forecast = True
    sync_interval_s: float | None = None

    def __init__(self, *, uniform: bool = False) -> None:
        self.uniform = uniform
        self.name = "daedalus" if uniform else "daedalus-per-operator"

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """Guards → rates → recent-rescale hold → search over the ladder → fallback → stabilization."""
        held = guards.first_holding(guards.grace_period(plan_input, config), guards.recovering(plan_input, config))
        if held is not None:
            return from_whole_job(plan_input, held)
        workload, forecast = plan_input.workload_avg, plan_input.forecast
        if workload is None or workload <= 0:
            return keep_all(plan_input, ReasonCode.UNKNOWN_DATA, "workload unknown this round: keeping every vertex")
        if forecast is None or len(forecast) == 0:
            return keep_all(plan_input, ReasonCode.UNKNOWN_DATA, "no workload forecast yet: keeping every vertex")
        if not plan_input.job_running:
            return keep_all(plan_input, ReasonCode.UNKNOWN_DATA, "the job is not running")
        dplan = ds2_plan(plan_input.vertices, workload, config)
        rates = Rates.of(plan_input.vertices, dplan, workload)
        if all(k is None for k in rates.per_subtask.values()):
            return keep_all(
                plan_input, ReasonCode.UNKNOWN_DATA, "no vertex has a true rate this interval", *dplan.reasons
            )
        current = plan_input.current
        capacity_now = rates.capacity_now(current)
        hold = self._recent_rescale_hold(plan_input, config, workload, forecast, capacity_now)
        if hold is not None:
            return hold
        candidates = self._candidates(plan_input, config, rates, capacity_now)
        reasons: list[str] = [
            f"{'uniform' if self.uniform else 'per-vertex'} ladder of {len(candidates)} plans; "
            f"job capacity now {_fmt(capacity_now)}"
        ]
        chosen = self._search(plan_input, config, candidates, workload, forecast, reasons)
        fallback = chosen is None
        if chosen is None:
            chosen = self._fallback(candidates, config, reasons)
        target = self._stabilize(plan_input, config, candidates, chosen, reasons)
        state = {"desired_cost": chosen.cost}
        reasons.append(f"plan: {describe_plan(target.plan, plan_input.vertices)}")
        code = ReasonCode.NO_CANDIDATE if fallback else operator_code(current, target.plan, chosen.plan)
        return Decision(target.plan, chosen.plan, tuple(reasons), code, acted=True, policy_state=state)

    # ------------------------------------------------------------------ stages

    def _recent_rescale_hold(
        self,
        plan_input: PlanInput,
        planner: PlannerConfig,
        workload: float,
        forecast: np.ndarray,
        capacity_now: float,
    ) -> Decision | None:
        """Algorithm 1's first check: a plan applied recently stays while it carries the load."""
        last = plan_input.last_rescale_at
        if last is None or plan_input.now - last >= planner.recent_rescale_window_s:
            return None
        next_loop_peak = forecast_max(forecast, planner.loop_interval_s)
        if capacity_now > workload and capacity_now > next_loop_peak:
            return keep_all(
                plan_input,
                ReasonCode.KEEP,
                f"rescaled recently and the plan still carries the average {_fmt(workload)} and the next loop's "
                f"peak {_fmt(next_loop_peak)} (capacity {_fmt(capacity_now)})",
                acted=True,
            )
        return None

    def _candidates(
        self, plan_input: PlanInput, config: PlannerConfig, rates: Rates, capacity_now: float
    ) -> list[Candidate]:
        """The ladder's rungs and the current plan, by cost (the current plan first among equals)."""
        current = plan_input.current
        replay = max(plan_input.recent_workload or plan_input.workload_avg or 0.0, 0.0) * config.checkpoint_interval_s
        replay += max(plan_input.consumer_lag or 0.0, 0.0)
        forecast = np.maximum(np.asarray(plan_input.forecast, dtype=float), 0.0)

        def downtime(plan: Mapping[str, int]) -> float:
            needed = slots(plan, shared=config.slot_sharing)
            known = plan_input.downtimes_s
            if needed in known:
                return float(known[needed])
            return float(max(known.values())) if known else DEFAULT_DOWNTIME_S

        def recovery(plan: Mapping[str, int], capacity: float, down: float) -> float:
            return recovery_time(capacity=capacity, forecast=forecast, replay_records=replay, downtime_s=down)

        # The current plan's recovery is the one after a failure at it, as whole-job Daedalus predicts it.
        failure_down = plan_input.failure_downtime_s
        out = [
            Candidate(
                current,
                capacity_now,
                recovery(current, capacity_now, failure_down if failure_down is not None else downtime(current)),
                True,
            )
        ]
        for rung in ladder(plan_input.vertices, rates, config, uniform=self.uniform):
            if rung == current:
                continue
            capacity = rates.capacity(rung)
            out.append(Candidate(rung, capacity, recovery(rung, capacity, downtime(rung)), False))
        return sorted(out, key=lambda c: (c.cost, not c.current, c.capacity))

    def _search(
        self,
        plan_input: PlanInput,
        planner: PlannerConfig,
        candidates: Sequence[Candidate],
        workload: float,
        forecast: np.ndarray,
        reasons: list[str],
    ) -> Candidate | None:
        """Algorithm 1's checks on each candidate in order of cost; the first that passes them all."""
        current_cost = subtasks(plan_input.current)
        horizon_peak = float(np.max(forecast))
        lag = plan_input.consumer_lag
        for c in candidates:
            label = "current plan" if c.current else f"{c.cost} subtasks"
            if c.capacity <= workload:
                reasons.append(f"{label}: capacity {_fmt(c.capacity)} <= average workload {_fmt(workload)}")
                continue
            if c.recovery_s > planner.target_recovery_time_s:
                shown = "never" if math.isinf(c.recovery_s) else f"{c.recovery_s:.0f} s"
                reasons.append(f"{label}: recovery {shown} > target {planner.target_recovery_time_s:.0f} s")
                continue
            during = forecast_max(forecast, c.recovery_s)
            if c.capacity < during:
                reasons.append(f"{label}: capacity {_fmt(c.capacity)} < forecast {_fmt(during)} while recovering")
                continue
            if c.current:
                reasons.append(f"{label} qualifies (capacity {_fmt(c.capacity)}, recovery {c.recovery_s:.0f} s)")
                return c
            if c.cost < current_cost and lag is not None and c.capacity < lag:
                reasons.append(f"{label}: consumer lag {lag:,.0f} > capacity {_fmt(c.capacity)}: still catching up")
                continue
            if c.capacity > horizon_peak:
                reasons.append(
                    f"{label}: carries the forecast peak {_fmt(horizon_peak)} (capacity {_fmt(c.capacity)}) "
                    f"and recovers in {c.recovery_s:.0f} s"
                )
                return c
            reasons.append(f"{label}: capacity {_fmt(c.capacity)} < forecast peak {_fmt(horizon_peak)}")
        return None

    @staticmethod
    def _fallback(candidates: Sequence[Candidate], planner: PlannerConfig, reasons: list[str]) -> Candidate:
        """No candidate qualifies: the one with the shortest predicted recovery (among equals the larger)."""
        best = min(candidates, key=lambda c: (c.recovery_s, -c.capacity))
        shown = "never" if math.isinf(best.recovery_s) else f"{best.recovery_s:.0f} s"
        reasons.append(
            f"no plan meets the target recovery time {planner.target_recovery_time_s:.0f} s: choosing the one with "
            f"the shortest recovery ({shown}, {best.cost} subtasks)"
        )
        return best

    @staticmethod
    def _stabilize(
        plan_input: PlanInput,
        planner: PlannerConfig,
        candidates: Sequence[Candidate],
        chosen: Candidate,
        reasons: list[str],
    ) -> Candidate:
        """Scale out at once; scale in (fewer subtasks) only as far as wanted over the whole window."""
        if chosen.current:
            return chosen
        current = next(c for c in candidates if c.current)
        view = replace(plan_input, current_parallelism=current.cost)
        allowed = stabilize(
            view, replace(planner, max_parallelism=max(current.cost, chosen.cost)), chosen.cost, reasons
        )
        if allowed == chosen.cost:
            return chosen
        if allowed >= current.cost:
            return current
        # Held part-way: the cheapest plan of the ladder at least as large as what the window allows.
        partial = [c for c in candidates if not c.current and allowed <= c.cost < current.cost]
        return min(partial, key=lambda c: c.cost) if partial else current
