"""Daedalus Algorithm 1: the smallest scale-out that carries the workload and recovers in time.

Paper 001, section 3.2. For each candidate scale-out ``i`` from min to max:

1. ``C_i > W_avg``: it carries the workload observed since the last loop (reactive check);
2. ``RT_i <= RT_target``: its predicted recovery after a rescale to it (or a failure at it) is in time;
3. ``C_i >= max TSF over [now, now + RT_i]``: it carries the forecast while recovering;
4. if ``i`` is the current scale-out, keep it;
5. if ``i`` is below the current one and the consumer lag exceeds ``C_i``, the job is still catching
   up: wait rather than scale in;
6. ``C_i > max TSF`` over the whole horizon: the decision is long-lived.

Before the search, a job rescaled in the last ten minutes keeps its scale-out while it carries the
average workload and the forecast until the next loop. Guards added for production: no decision in
the grace period after a rescale or while recovering, unknown data keeps the current scale-out, and
scale-in waits until the lower scale-out has been wanted for the whole stabilization window (HPA
style), so a workload hovering at a threshold does not flap. If nothing qualifies, the scale-out
with the shortest predicted recovery is chosen (the issue's rule; the paper returns the maximum).
"""

from __future__ import annotations

import math

import numpy as np

from planner.types import Decision, PlanInput, PlannerConfig, keep


def _fmt(rate: float) -> str:
    return f"{rate:,.0f}/s"


def _forecast_max(forecast: np.ndarray, seconds: float) -> float:
    """Peak of the forecast over its first ``seconds`` (at least one step)."""
    steps = max(1, min(len(forecast), int(math.ceil(seconds))))
    return float(np.max(forecast[:steps]))


def guard(plan_input: PlanInput, config: PlannerConfig) -> Decision | None:
    """The guards every adaptive policy shares: grace period and recovery hold the current scale-out."""
    current = plan_input.current_parallelism
    if plan_input.last_rescale_at is not None:
        since = plan_input.now - plan_input.last_rescale_at
        if since < config.grace_period_s:
            return keep(current, f"grace period: {since:.0f} s since the last rescale < {config.grace_period_s:.0f} s")
    if plan_input.recovering:
        return keep(current, "the job is still recovering from its last rescale or failure")
    return None


def stabilize(plan_input: PlanInput, config: PlannerConfig, desired: int, reasons: list[str]) -> int:
    """Scale out at once; scale in only to the highest scale-out wanted over the stabilization window."""
    current = plan_input.current_parallelism
    if desired >= current or config.scale_down_stabilization_s <= 0:
        return desired
    start = plan_input.now - config.scale_down_stabilization_s
    history = plan_input.recent_recommendations
    window = [n for t, n in history if t >= start]
    covered = bool(history) and history[0][0] <= start + config.loop_interval_s
    if not covered:
        reasons.append(
            f"scale-in to {desired} held: fewer than {config.scale_down_stabilization_s:.0f} s of recommendations"
        )
        return current
    target = min(current, config.max_parallelism, max([desired, *window]))
    if target != desired:
        reasons.append(
            f"scale-in to {desired} stabilized at {target}: wanted within the last "
            f"{config.scale_down_stabilization_s:.0f} s"
        )
    return target


class DaedalusPolicy:
    """Daedalus Algorithm 1 with production guards."""

    name = "daedalus"

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """Choose the scale-out for the next round (see the module docstring)."""
        current = plan_input.current_parallelism
        held = guard(plan_input, config)
        if held is not None:
            return held
        bounded = min(max(current, config.min_parallelism), config.max_parallelism)
        if bounded != current:
            # The operator's bounds need no data: a job outside them is moved to the nearest bound.
            return Decision(
                bounded,
                bounded,
                (f"current scale-out {current} outside [{config.min_parallelism}, {config.max_parallelism}]: "
                 f"moving to {bounded}",),
            )
        workload = plan_input.workload_avg
        forecast = plan_input.forecast
        capacity_now = plan_input.capacities.get(current)
        if workload is None:
            return keep(current, "workload unknown this round: keeping the current scale-out")
        if forecast is None or len(forecast) == 0:
            return keep(current, "no workload forecast yet: keeping the current scale-out")
        if capacity_now is None:
            return keep(current, f"capacity at the current scale-out {current} unknown: keeping it")

        reasons: list[str] = []
        if (
            plan_input.last_rescale_at is not None
            and plan_input.now - plan_input.last_rescale_at < config.recent_rescale_window_s
        ):
            next_loop_peak = _forecast_max(forecast, config.loop_interval_s)
            if capacity_now > workload and capacity_now > next_loop_peak:
                return keep(
                    current,
                    f"rescaled recently and {current} still carries the average {_fmt(workload)} "
                    f"and the next loop's peak {_fmt(next_loop_peak)} (capacity {_fmt(capacity_now)})",
                    acted=True,
                )

        horizon_peak = float(np.max(forecast))
        lag = plan_input.consumer_lag
        desired: int | None = None
        for n in range(config.min_parallelism, config.max_parallelism + 1):
            capacity = plan_input.capacities.get(n)
            if capacity is None:
                reasons.append(f"{n}: capacity unknown")
                continue
            if capacity <= workload:
                reasons.append(f"{n}: capacity {_fmt(capacity)} <= average workload {_fmt(workload)}")
                continue
            recovery = plan_input.recovery_times.get(n, math.inf)
            if recovery > config.target_recovery_time_s:
                shown = "never" if math.isinf(recovery) else f"{recovery:.0f} s"
                reasons.append(f"{n}: recovery {shown} > target {config.target_recovery_time_s:.0f} s")
                continue
            during_recovery = _forecast_max(forecast, recovery)
            if capacity < during_recovery:
                reasons.append(f"{n}: capacity {_fmt(capacity)} < forecast {_fmt(during_recovery)} while recovering")
                continue
            if n == current:
                desired = n
                reasons.append(f"{n}: current scale-out qualifies (recovery {recovery:.0f} s)")
                break
            if n < current and lag is not None and capacity < lag:
                reasons.append(f"{n}: consumer lag {lag:,.0f} > capacity {_fmt(capacity)}: still catching up")
                continue
            if capacity > horizon_peak:
                desired = n
                reasons.append(
                    f"{n}: carries the forecast peak {_fmt(horizon_peak)} (capacity {_fmt(capacity)}) "
                    f"and recovers in {recovery:.0f} s"
                )
                break
            reasons.append(f"{n}: capacity {_fmt(capacity)} < forecast peak {_fmt(horizon_peak)}")

        if desired is None:
            known = {
                n: plan_input.recovery_times.get(n, math.inf)
                for n in range(config.min_parallelism, config.max_parallelism + 1)
                if plan_input.capacities.get(n) is not None
            }
            # Shortest recovery; among equals the larger scale-out (more headroom).
            desired = min(known, key=lambda n: (known[n], -n)) if known else config.max_parallelism
            best = known.get(desired, math.inf)
            reasons.append(
                f"no scale-out in [{config.min_parallelism}, {config.max_parallelism}] meets the target recovery "
                f"time {config.target_recovery_time_s:.0f} s: choosing {desired} with the shortest recovery "
                f"({'never' if math.isinf(best) else f'{best:.0f} s'})"
            )

        target = stabilize(plan_input, config, desired, reasons)
        return Decision(target, desired, tuple(reasons), acted=True)


class StaticPolicy:
    """A fixed scale-out (default: the maximum): the baseline every saving is measured against."""

    name = "static"

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """Always the configured static scale-out."""
        target = config.static_parallelism or config.max_parallelism
        return Decision(target, target, (f"static policy: fixed scale-out {target}",), acted=True)
