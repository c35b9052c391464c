"""The oracle: the lower bound every other policy is measured against.

It is handed the truth instead of estimates (by an analyzer substitute the replay uses for the
oracle): the future workload of the trace as its "forecast", the simulator's true capacity per
scale-out, and recovery times computed from the true future workload and the simulator's downtime
model. With that it picks, every round, the smallest scale-out that

* carries the true workload until the next round it can act in and through the recovery of a
  rescale it might then need (``lookahead``: the grace period or loop interval, whichever is longer,
  plus the target recovery time), and
* recovers within the target after a rescale to it (or a failure at it).

It has no scale-in stabilization: with perfect knowledge it never needs to hedge. The grace period
after a rescale still applies (a job that is restarting cannot be rescaled usefully); the recovery
hold does not, because the true recovery times already count the backlog of a recovery in progress.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from planner import guards
from planner.types import Decision, PlanInput, PlannerConfig, decided


def oracle_lookahead_s(config: PlannerConfig) -> float:
    """Seconds of true future workload a chosen scale-out must carry."""
    return max(config.grace_period_s, config.loop_interval_s) + config.target_recovery_time_s


def smallest_sufficient(
    capacities: Mapping[int, float | None],
    recovery_times: Mapping[int, float],
    future: np.ndarray,
    *,
    lower: int,
    upper: int,
    target_recovery_time_s: float,
) -> tuple[int | None, list[str]]:
    """The smallest scale-out in [lower, upper] whose capacity exceeds the peak of ``future`` and recovers in time."""
    peak = float(np.max(future)) if len(future) else 0.0
    reasons: list[str] = []
    for n in range(lower, upper + 1):
        capacity = capacities.get(n)
        if capacity is None:
            reasons.append(f"{n}: capacity unknown")
            continue
        if capacity <= peak:
            reasons.append(f"{n}: true capacity {capacity:,.0f}/s <= true peak {peak:,.0f}/s")
            continue
        recovery = recovery_times.get(n, math.inf)
        if recovery > target_recovery_time_s:
            reasons.append(f"{n}: true recovery {recovery:.0f} s > target {target_recovery_time_s:.0f} s")
            continue
        reasons.append(f"{n}: carries the true peak {peak:,.0f}/s and recovers in {recovery:.0f} s")
        return n, reasons
    return None, reasons


class OraclePolicy:
    """Knows the future workload and the true capacity: the smallest scale-out that carries it and recovers in time."""

    name = "oracle"
    uses_forecast = True
    sync_interval_s: float | None = None

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """Choose the smallest sufficient scale-out from the true future (see the module docstring)."""
        current = plan_input.current_parallelism
        held = guards.grace_period(plan_input, config)
        if held is not None:
            return held
        future = plan_input.forecast
        if future is None or len(future) == 0:
            return guards.unknown(
                plan_input, "oracle: no true future workload given (the oracle needs the oracle analyzer)"
            )
        steps = max(1, min(len(future), int(math.ceil(oracle_lookahead_s(config)))))
        desired, reasons = smallest_sufficient(
            plan_input.capacities,
            plan_input.recovery_times,
            future[:steps],
            lower=config.min_parallelism,
            upper=config.max_parallelism,
            target_recovery_time_s=config.target_recovery_time_s,
        )
        if desired is None:
            known = {n: plan_input.recovery_times.get(n, math.inf) for n in plan_input.capacities}
            desired = min(known, key=lambda n: (known[n], -n)) if known else config.max_parallelism
            reasons.append(f"nothing qualifies: {desired} has the shortest true recovery")
        return decided(current, desired, desired, reasons)
