"""The guards every adaptive policy shares, each a small function that holds or moves the scale-out.

A guard returns a :class:`Decision` when it decides the round on its own (and the policy returns
it), or None to let the policy go on. Which guards a policy applies is its own choice: Daedalus
applies them all; a reactive peer (an HPA) knows nothing of recoveries and skips that one.
"""

from __future__ import annotations

from planner.types import Decision, PlanInput, PlannerConfig, ReasonCode, keep


def grace_period(plan_input: PlanInput, config: PlannerConfig) -> Decision | None:
    """Hold the scale-out while the last rescale is younger than the grace period."""
    if plan_input.last_rescale_at is None:
        return None
    since = plan_input.now - plan_input.last_rescale_at
    if since < config.grace_period_s:
        return keep(
            plan_input.current_parallelism,
            ReasonCode.GRACE,
            f"grace period: {since:.0f} s since the last rescale < {config.grace_period_s:.0f} s",
        )
    return None


def recovering(plan_input: PlanInput, config: PlannerConfig) -> Decision | None:
    """Hold the scale-out while the job has not caught up after its last rescale or failure."""
    if plan_input.recovering:
        return keep(
            plan_input.current_parallelism,
            ReasonCode.RECOVERING,
            "the job is still recovering from its last rescale or failure",
        )
    return None


def operator_bounds(plan_input: PlanInput, config: PlannerConfig) -> Decision | None:
    """Move a job outside [min, max] to the nearest bound: the operator's bounds need no data."""
    current = plan_input.current_parallelism
    bounded = min(max(current, config.min_parallelism), config.max_parallelism)
    if bounded == current:
        return None
    return Decision.whole_job(
        bounded,
        bounded,
        (
            f"current scale-out {current} outside [{config.min_parallelism}, {config.max_parallelism}]: "
            f"moving to {bounded}",
        ),
        ReasonCode.BOUNDS,
    )


def unknown(plan_input: PlanInput, reason: str) -> Decision:
    """Keep the scale-out because a signal the policy needs is unknown this round."""
    return keep(plan_input.current_parallelism, ReasonCode.UNKNOWN_DATA, reason)


def first_holding(*held: Decision | None) -> Decision | None:
    """The first guard's decision that holds the round, or None."""
    return next((decision for decision in held if decision is not None), None)


def stabilize(
    plan_input: PlanInput, desired: int, reasons: list[str], *, window_s: float, loop_interval_s: float, upper: int
) -> int:
    """Scale out at once; scale in only to the highest scale-out wanted over the last ``window_s``.

    Until the history reaches back over the whole window (within a loop), a scale-in waits.
    """
    current = plan_input.current_parallelism
    if desired >= current or window_s <= 0:
        return desired
    start = plan_input.now - window_s
    history = plan_input.recent_recommendations
    if not history.reaches_back_to(start, slack_s=loop_interval_s):
        reasons.append(f"scale-in to {desired} held: fewer than {window_s:.0f} s of recommendations")
        return current
    highest = history.highest_since(start)
    target = min(current, upper, max(desired, highest if highest is not None else desired))
    if target != desired:
        reasons.append(f"scale-in to {desired} stabilized at {target}: wanted within the last {window_s:.0f} s")
    return target
